//! The virtio network device (`virtio-net-pci`), through `virtio-drivers`' `VirtIONetRaw`:
//! the driver keeps its own packet buffers, [`QUEUE_SIZE`] to receive and as many to send,
//! in DMA memory ([`super::dma`]), and is polled: [`send`] and [`receive`] never wait.
//! One device, started at boot on the boot core ([`probe`]); callers on any core take its
//! MCS lock: programs by trap (`device_send`, `device_receive`), or a kernel core
//! (`kcore`) that drives it for them.

use super::dma::{alloc_pages, direct_map_phys, AtollHal};
use crate::arch::paging::phys_to_virt;
use alloc::format;
use alloc::string::String;
use locks::McsLock;
use virtio_drivers::device::net::VirtIONetRaw;
use virtio_drivers::transport::pci::PciTransport;

/// The network device's virtio ids: transitional (QEMU's default `virtio-net-pci`) and
/// modern (virtio 1.0 §4.1.2: 0x1040 + device type 1).
const NET_DEVICE_IDS: [u16; 2] = [0x1000, 0x1041];

/// Descriptors in each of the two queues, and so receive (and send) buffers.
pub const QUEUE_SIZE: usize = 16;
/// Bytes of one packet buffer: a header (12 bytes) and a full Ethernet frame (1514).
const BUFFER_BYTES: usize = 2048;
/// Largest frame [`send`] takes (Ethernet header and 1500 bytes of payload).
pub const MAX_FRAME: usize = 1514;

/// The started device.
struct Nic {
    raw: VirtIONetRaw<AtollHal, PciTransport, QUEUE_SIZE>,
    /// Direct-map addresses of the receive buffers, and of the send buffers.
    rx_buffers: [u64; QUEUE_SIZE],
    tx_buffers: [u64; QUEUE_SIZE],
    /// Which receive buffer each receive token (a descriptor index) holds.
    rx_posted: [Option<usize>; QUEUE_SIZE],
    /// Which send buffer each send token holds, until the device is done with it.
    tx_posted: [Option<usize>; QUEUE_SIZE],
    /// Send buffers free to fill.
    tx_free: [bool; QUEUE_SIZE],
    stats: NicStats,
}

/// Frames through the device since boot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NicStats {
    /// Frames sent (handed to the device).
    pub sent: u64,
    /// Frames received.
    pub received: u64,
    /// Sends refused because every send buffer was in flight.
    pub send_full: u64,
}

/// What a started device is.
#[derive(Clone, Debug)]
pub struct NicInfo {
    /// Its PCI location (`00:02.0`).
    pub location: String,
    /// Its MAC address.
    pub mac: [u8; 6],
    /// Its hardware id (`device_list`).
    pub hwid: u64,
}

/// Why a send was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetError {
    /// No virtio network device was started.
    NoDevice,
    /// The frame is empty or longer than [`MAX_FRAME`].
    BadLength,
    /// Every send buffer is still in flight: try again after the device catches up.
    Full,
    /// The device refused the buffer.
    Device,
}

impl NetError {
    /// The system-call error a program gets for it (`device_send`, a syscall device's
    /// `NET_SEND`).
    pub fn to_abi(self) -> abi::Error {
        match self {
            NetError::Full => abi::Error::Busy,
            NetError::BadLength => abi::Error::InvalidArgument,
            NetError::NoDevice | NetError::Device => abi::Error::NotPermitted,
        }
    }
}

/// The device, under an MCS lock (Corey §8.3's Polling: service cores post to the rings
/// themselves, with locking, and queue fairly behind one another).
static NIC: McsLock<Option<Nic>> = McsLock::new(None);
static INFO: spin::Once<NicInfo> = spin::Once::new();

/// `aa:bb:cc:dd:ee:ff`.
pub fn format_mac(mac: [u8; 6]) -> String {
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]
    )
}

/// Starts the first virtio network device of the PCI scan, if there is one, and posts
/// every receive buffer. Once (the boot core).
pub fn probe() -> Result<Option<&'static NicInfo>, String> {
    let Some((f, transport)) = super::virtio_function(&NET_DEVICE_IDS)? else {
        return Ok(None);
    };
    let raw = VirtIONetRaw::new(transport).map_err(|e| format!("device: {e}"))?;
    let pages = (2 * QUEUE_SIZE * BUFFER_BYTES).div_ceil(4096);
    let base = alloc_pages(pages).ok_or("no free block of frames for the packet buffers")?;
    let va = phys_to_virt(base);
    let buffer = |i: usize| va + (i * BUFFER_BYTES) as u64;
    let mut nic = Nic {
        raw,
        rx_buffers: core::array::from_fn(buffer),
        tx_buffers: core::array::from_fn(|i| buffer(QUEUE_SIZE + i)),
        rx_posted: [None; QUEUE_SIZE],
        tx_posted: [None; QUEUE_SIZE],
        tx_free: [true; QUEUE_SIZE],
        stats: NicStats::default(),
    };
    for i in 0..QUEUE_SIZE {
        nic.post_receive(i).map_err(|e| format!("receive buffer {i}: {e:?}"))?;
    }
    let info = NicInfo {
        location: format!("{:02x}:{:02x}.{}", f.bus, f.device, f.function),
        mac: nic.raw.mac_address(),
        hwid: abi::device_kind::PCI_HWID_BASE + f.location() as u64,
    };
    NIC.with(|n| *n = Some(nic));
    Ok(Some(INFO.call_once(|| info)))
}

/// The started device, if any.
pub fn info() -> Option<&'static NicInfo> {
    INFO.get()
}

/// Its counters (zero without a device).
pub fn stats() -> NicStats {
    NIC.with(|n| n.as_ref().map(|n| n.stats).unwrap_or_default())
}

/// Hands Ethernet frame `frame` (destination MAC first, no checksum) to the device.
pub fn send(frame: &[u8]) -> Result<(), NetError> {
    NIC.with(|nic| send_locked(nic.as_mut().ok_or(NetError::NoDevice)?, frame))
}

/// [`send`], the lock held.
fn send_locked(nic: &mut Nic, frame: &[u8]) -> Result<(), NetError> {
    if frame.is_empty() || frame.len() > MAX_FRAME {
        return Err(NetError::BadLength);
    }
    nic.reclaim_sent();
    let Some(i) = nic.tx_free.iter().position(|&free| free) else {
        nic.stats.send_full += 1;
        return Err(NetError::Full);
    };
    // SAFETY: send buffer `i` is free (not posted), ours, in DMA memory of BUFFER_BYTES.
    let buf = unsafe { buffer_mut(nic.tx_buffers[i]) };
    let header = nic.raw.fill_buffer_header(buf).map_err(|_| NetError::Device)?;
    buf[header..header + frame.len()].copy_from_slice(frame);
    // SAFETY: the buffer stays untouched until `reclaim_sent` takes it back.
    let token = unsafe { nic.raw.transmit_begin(&buf[..header + frame.len()]) }
        .map_err(|_| NetError::Device)?;
    nic.tx_free[i] = false;
    nic.tx_posted[token as usize % QUEUE_SIZE] = Some(i);
    nic.stats.sent += 1;
    Ok(())
}

/// Copies the next received frame into `out` (cut to `out`'s length) and gives its buffer
/// back to the device; the frame's whole length, or `None` if nothing came.
pub fn receive(out: &mut [u8]) -> Option<usize> {
    NIC.with(|nic| receive_locked(nic.as_mut()?, out))
}

/// Takes back the send buffers the device has finished with (a kernel core polls for
/// transmit completions, Corey §8.3); a send does it too.
pub fn reclaim() {
    NIC.with(|nic| {
        if let Some(nic) = nic.as_mut() {
            nic.reclaim_sent();
        }
    })
}

/// [`receive`], the lock held.
fn receive_locked(nic: &mut Nic, out: &mut [u8]) -> Option<usize> {
    let token = nic.raw.poll_receive()?;
    let i = nic.rx_posted[token as usize % QUEUE_SIZE].take()?;
    // SAFETY: receive buffer `i` was posted under `token` and the device is done with it.
    let buf = unsafe { buffer_mut(nic.rx_buffers[i]) };
    // SAFETY: as above: `token` and its buffer.
    let got = unsafe { nic.raw.receive_complete(token, buf) };
    let copied = got.ok().map(|(header, len)| {
        let n = len.min(out.len());
        out[..n].copy_from_slice(&buf[header..header + n]);
        len
    });
    nic.stats.received += copied.is_some() as u64;
    // The buffer goes back to the device whatever came (a bad length is dropped).
    let _ = nic.post_receive(i);
    copied
}

impl Nic {
    /// Posts receive buffer `i`.
    fn post_receive(&mut self, i: usize) -> Result<(), virtio_drivers::Error> {
        // SAFETY: buffer `i` is ours and not posted; it stays untouched until `receive`.
        let buf = unsafe { buffer_mut(self.rx_buffers[i]) };
        // SAFETY: as above.
        let token = unsafe { self.raw.receive_begin(buf)? };
        self.rx_posted[token as usize % QUEUE_SIZE] = Some(i);
        Ok(())
    }

    /// Takes back every send buffer the device has finished with.
    fn reclaim_sent(&mut self) {
        while let Some(token) = self.raw.poll_transmit() {
            let Some(i) = self.tx_posted[token as usize % QUEUE_SIZE].take() else { break };
            // SAFETY: buffer `i` was posted under `token`; its length is not checked.
            let buf = unsafe { buffer_mut(self.tx_buffers[i]) };
            // SAFETY: `token` and its buffer, as posted.
            let _ = unsafe { self.raw.transmit_complete(token, buf) };
            self.tx_free[i] = true;
        }
    }
}

/// The packet buffer at direct-map address `va`.
///
/// # Safety
/// `va` is one of the driver's buffers of [`BUFFER_BYTES`], and no other reference to it
/// lives meanwhile.
unsafe fn buffer_mut(va: u64) -> &'static mut [u8] {
    debug_assert!(direct_map_phys(va) < va);
    // SAFETY: the caller's promise; the buffer lies in DMA memory that is never freed.
    unsafe { core::slice::from_raw_parts_mut(va as *mut u8, BUFFER_BYTES) }
}
