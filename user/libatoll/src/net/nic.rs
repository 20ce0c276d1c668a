//! The machine's network device as smoltcp's `phy::Device` ([`Nic`]), in one of Corey
//! §8.3's device configurations ([`DeviceConfig`]):
//! - `Trap`: the program's own core drives the device, by `device_send` and
//!   `device_receive` (traps, under the driver's MCS lock).
//! - `Dedicated`: a kernel core does all the device work; the program's stack passes the
//!   frames it sends and receives to it through a syscall device (`SyscallRing`).
//! - `Polling`: a kernel core only polls the device, for received frames (which it hands
//!   to the stack through the syscall device) and for transmit completions; the stack
//!   posts its sends itself, by trap, under the driver's lock.
//!
//! With a kernel core, several stacks (each on a core of its own) can share the device:
//! [`open_stacks`] gives each a syscall device, and the kernel core steers each received
//! frame to one of them (`crates/steer`: by address, and by a hash of the flow among
//! stacks of one address).

use crate::kcore::{KernelCore, SyscallRing};
use crate::obj::{device_alloc, device_list, device_stat, home_share, share_delobj, ObjRef};
use crate::sys::{buf_addr, syscall5};
use abi::sysdev::{call, conf};
use abi::{device_kind, nr, DeviceInfo, Error};
use alloc::collections::VecDeque;
use alloc::sync::Arc;
use alloc::vec::Vec;
use smoltcp::phy::{self, DeviceCapabilities, Medium};
use smoltcp::time::Instant;

/// Largest Ethernet frame (header and 1500 bytes of payload).
pub const MAX_FRAME: usize = 1514;
/// Frames smoltcp may hand over while the device's send buffers are all in flight: they
/// wait in the stack's own queue, sent first at its next poll. With the queue full the
/// stack is told it cannot send now (`transmit` gives no token), so TCP's data waits in
/// its socket instead of being dropped and sent again a retransmission timeout later,
/// which stalled a loaded server for a second at a time.
const SEND_BACKLOG: usize = 32;
/// A syscall device's packet area: [`RX_BUFFERS`] receive buffers handed to the kernel
/// core, then [`TX_BUFFERS`] send buffers, [`BUFFER_BYTES`] each.
const RX_BUFFERS: usize = 8;
const TX_BUFFERS: usize = 8;
const BUFFER_BYTES: usize = 2048;
const TX_BASE: usize = RX_BUFFERS * BUFFER_BYTES;
const AREA_BYTES: u64 = ((RX_BUFFERS + TX_BUFFERS) * BUFFER_BYTES) as u64;

/// Who drives the network device for a program's stacks (Corey §8.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceConfig {
    /// The stack's own core, by trap.
    Trap,
    /// A kernel core on this core does all the device work.
    Dedicated(usize),
    /// A kernel core on this core polls for received frames and transmit completions; the
    /// stacks post their sends themselves.
    Polling(usize),
}

impl DeviceConfig {
    /// The kernel core's core, if there is one.
    pub fn kernel_core(self) -> Option<usize> {
        match self {
            DeviceConfig::Trap => None,
            DeviceConfig::Dedicated(c) | DeviceConfig::Polling(c) => Some(c),
        }
    }
}

/// A stack's side of its syscall device (Corey §3.2: "the application cores exchange
/// packet buffers with the kernel core"): receive buffers stay posted at the kernel core,
/// which fills and answers them as frames come, so a stack with nothing to receive makes
/// no call; sends are posted and their buffers taken back when answered.
struct RingIo {
    ring: SyscallRing,
    /// The cookie of each receive buffer's posted call, while the kernel core holds it.
    rx_posted: [Option<u64>; RX_BUFFERS],
    /// Receive buffers filled, oldest first: (buffer, frame length).
    rx_ready: VecDeque<(usize, usize)>,
    /// The cookie of each send buffer's call, while the kernel core has not answered it.
    tx_posted: [Option<u64>; TX_BUFFERS],
}

impl RingIo {
    fn new(ring: SyscallRing) -> RingIo {
        RingIo {
            ring,
            rx_posted: [None; RX_BUFFERS],
            rx_ready: VecDeque::new(),
            tx_posted: [None; TX_BUFFERS],
        }
    }

    /// Takes every answer that has come: filled receive buffers queue up, answered sends
    /// free their buffers (a send the device refused is a frame lost, as on a wire).
    fn pump(&mut self) {
        while let Some((cookie, result)) = self.ring.reply() {
            if let Some(i) = self.rx_posted.iter().position(|&c| c == Some(cookie)) {
                self.rx_posted[i] = None;
                if let Ok(len) = result {
                    self.rx_ready.push_back((i, len as usize));
                }
            } else if let Some(j) = self.tx_posted.iter().position(|&c| c == Some(cookie)) {
                self.tx_posted[j] = None;
            }
        }
    }

    /// Hands the kernel core every receive buffer that is neither posted nor holding a
    /// frame, while the request channel has room.
    fn post_receives(&mut self) {
        for i in 0..RX_BUFFERS {
            if self.rx_posted[i].is_some() || self.rx_ready.iter().any(|&(b, _)| b == i) {
                continue;
            }
            let args = [(i * BUFFER_BYTES) as u64, BUFFER_BYTES as u64];
            match self.ring.post(call::NET_RECEIVE_BUFFER, &args) {
                Ok(cookie) => self.rx_posted[i] = Some(cookie),
                Err(_) => return,
            }
        }
    }

    /// The next received frame copied into `buf` (cut to it): its whole length, or 0.
    fn receive(&mut self, buf: &mut [u8]) -> usize {
        self.pump();
        let got = self.rx_ready.pop_front();
        if let Some((i, len)) = got {
            let n = len.min(buf.len()).min(BUFFER_BYTES);
            let at = i * BUFFER_BYTES;
            buf[..n].copy_from_slice(&self.ring.packets()[at..at + n]);
        }
        self.post_receives();
        got.map_or(0, |(_, len)| len)
    }

    /// Posts `frame` to be sent from a free send buffer: `Busy` while none is free or the
    /// request channel is full.
    fn send(&mut self, frame: &[u8]) -> Result<(), Error> {
        self.pump();
        let j = self.tx_posted.iter().position(Option::is_none).ok_or(Error::Busy)?;
        let at = TX_BASE + j * BUFFER_BYTES;
        self.ring.packets()[at..at + frame.len()].copy_from_slice(frame);
        let cookie = self.ring.post(call::NET_SEND, &[at as u64, frame.len() as u64])?;
        self.tx_posted[j] = Some(cookie);
        Ok(())
    }
}

/// The network device as one stack of this program reaches it.
pub struct Nic {
    dev: ObjRef,
    mac: [u8; 6],
    /// With a kernel core: this stack's syscall device.
    ring: Option<RingIo>,
    /// Whether sends go by trap (`Trap`, `Polling`) rather than through the ring.
    send_by_trap: bool,
    /// The kernel core, shared by the program's stacks; it stops when the last goes.
    kernel_core: Option<Arc<KernelCore>>,
    /// Frames waiting for a free send buffer, oldest first ([`SEND_BACKLOG`]).
    backlog: VecDeque<Vec<u8>>,
    /// Frames dropped: refused by the device for good, or past a full backlog.
    dropped: u64,
}

impl Nic {
    /// A device object of the network device, driven by trap (`NoSuchObject` if the
    /// machine has none: `make run NET=0`, or a test run without a NIC).
    pub fn open() -> Result<Nic, Error> {
        let mut list = [DeviceInfo::default(); 64];
        let n = device_list(&mut list)?.min(list.len());
        let info =
            list[..n].iter().find(|d| d.kind == device_kind::NET).ok_or(Error::NoSuchObject)?;
        // In the home share: a program's threads can all name it (`obj::home_share`).
        let home = home_share();
        let dev = ObjRef::new(home, device_alloc(home, info.hwid)?);
        let stat = match device_stat(dev) {
            Ok(stat) => stat,
            Err(e) => {
                let _ = share_delobj(dev);
                return Err(e);
            }
        };
        let bytes = stat.detail.to_le_bytes();
        let mut mac = [0u8; 6];
        mac.copy_from_slice(&bytes[..6]);
        Ok(Nic {
            dev,
            mac,
            ring: None,
            send_by_trap: true,
            kernel_core: None,
            backlog: VecDeque::new(),
            dropped: 0,
        })
    }

    /// The network device through a kernel core on `core` (Corey §8.3, Dedicated): one
    /// stack, every frame through a syscall device.
    pub fn through_kernel_core(core: usize) -> Result<Nic, Error> {
        let mut nics = open_stacks(DeviceConfig::Dedicated(core), &[0])?;
        nics.pop().ok_or(Error::InvalidArgument)
    }

    /// The kernel core it goes through, if any.
    pub fn kernel_core(&self) -> Option<&KernelCore> {
        self.kernel_core.as_deref()
    }

    /// Its MAC address.
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// The device object (share, object), for calls of one's own.
    pub fn object(&self) -> (u64, u64) {
        (self.dev.share, self.dev.object)
    }

    /// Sends one Ethernet frame: `Busy` while the device's send buffers are all in flight.
    pub fn send_frame(&mut self, frame: &[u8]) -> Result<(), Error> {
        match self.ring.as_mut() {
            Some(ring) if !self.send_by_trap => {
                if !(14..=MAX_FRAME).contains(&frame.len()) {
                    return Err(Error::InvalidArgument);
                }
                ring.send(frame)
            }
            _ => {
                let (a, b) = (self.dev.share, self.dev.object);
                let len = frame.len() as u64;
                syscall5(nr::DEVICE_SEND, a, b, buf_addr(frame), len, 0).map(|_| ())
            }
        }
    }

    /// Frames this stack dropped on their way out (none, unless the device refused one
    /// for good or a reply had to go past a full backlog).
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Sends the waiting frames, oldest first, while the device takes them.
    fn send_backlog(&mut self) {
        while let Some(frame) = self.backlog.pop_front() {
            match self.send_frame(&frame) {
                Ok(()) => {}
                Err(Error::Busy) => {
                    self.backlog.push_front(frame);
                    return;
                }
                Err(_) => self.dropped += 1,
            }
        }
    }

    /// Sends `frame` after the waiting ones, or queues it while the device is busy.
    fn send_or_queue(&mut self, frame: &[u8]) {
        self.send_backlog();
        if self.backlog.is_empty() {
            match self.send_frame(frame) {
                Ok(()) => return,
                Err(Error::Busy) => {}
                Err(_) => {
                    self.dropped += 1;
                    return;
                }
            }
        }
        // A reply smoltcp makes while receiving may come with the backlog full: twice
        // the backlog is the hard limit.
        if self.backlog.len() < 2 * SEND_BACKLOG {
            self.backlog.push_back(frame.to_vec());
        } else {
            self.dropped += 1;
        }
    }

    /// The next frame for this stack, copied into `buf`: its whole length (more than `buf`
    /// holds: it was cut), or 0 if none has come (never waits).
    pub fn receive_frame(&mut self, buf: &mut [u8]) -> Result<usize, Error> {
        match self.ring.as_mut() {
            Some(ring) => Ok(ring.receive(buf)),
            None => {
                let (a, b) = (self.dev.share, self.dev.object);
                let n = syscall5(nr::DEVICE_RECEIVE, a, b, buf_addr(buf), buf.len() as u64, 0)?;
                Ok(n as usize)
            }
        }
    }
}

/// The network device for `addresses.len()` stacks in configuration `config`, a [`Nic`]
/// each: stack i takes the frames for IPv4 address `addresses[i]` (as a number; 0: what
/// no other stack takes), several stacks of one address the flows a hash gives each. In
/// `Trap` there is one stack, which takes every frame.
pub fn open_stacks(config: DeviceConfig, addresses: &[u32]) -> Result<Vec<Nic>, Error> {
    let Some(core) = config.kernel_core() else {
        return match addresses.len() {
            1 => Ok(alloc::vec![Nic::open()?]),
            _ => Err(Error::InvalidArgument),
        };
    };
    if addresses.is_empty() || addresses.len() >= abi::sysdev::PCORE_DEVICES_MAX {
        return Err(Error::InvalidArgument);
    }
    let mut nics = Vec::new();
    for &address in addresses {
        let mut nic = Nic::open()?;
        let ring = SyscallRing::new(AREA_BYTES)?;
        ring.configure(conf::NET_ADDRESS, u64::from(address))?;
        nic.ring = Some(RingIo::new(ring));
        nic.send_by_trap = matches!(config, DeviceConfig::Polling(_));
        nics.push(nic);
    }
    let mut devices = alloc::vec![nics[0].dev];
    devices.extend(nics.iter().filter_map(|n| n.ring.as_ref().map(|r| r.ring.device())));
    let kernel_core = Arc::new(KernelCore::start(core, &devices)?);
    for nic in nics.iter_mut() {
        if let Some(io) = nic.ring.as_mut() {
            io.ring.served_by(&kernel_core);
            io.post_receives();
        }
        nic.kernel_core = Some(kernel_core.clone());
    }
    Ok(nics)
}

impl Drop for Nic {
    fn drop(&mut self) {
        // The last stack's kernel core stops before the devices go (`KernelCore`'s drop).
        drop(self.kernel_core.take());
        drop(self.ring.take());
        let _ = share_delobj(self.dev);
    }
}

/// A received frame, for smoltcp.
pub struct RxToken {
    frame: [u8; MAX_FRAME],
    len: usize,
}

/// Room to send one frame, for smoltcp.
pub struct TxToken<'a> {
    nic: &'a mut Nic,
}

impl phy::RxToken for RxToken {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(&self.frame[..self.len])
    }
}

impl phy::TxToken for TxToken<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut frame = [0u8; MAX_FRAME];
        let len = len.min(MAX_FRAME);
        let r = f(&mut frame[..len]);
        self.nic.send_or_queue(&frame[..len]);
        r
    }
}

impl phy::Device for Nic {
    type RxToken<'a> = RxToken;
    type TxToken<'a> = TxToken<'a>;

    fn receive(&mut self, _timestamp: Instant) -> Option<(RxToken, TxToken<'_>)> {
        self.send_backlog();
        let mut frame = [0u8; MAX_FRAME];
        match self.receive_frame(&mut frame) {
            Ok(len) if len > 0 && len <= MAX_FRAME => {
                Some((RxToken { frame, len }, TxToken { nic: self }))
            }
            _ => None,
        }
    }

    fn transmit(&mut self, _timestamp: Instant) -> Option<TxToken<'_>> {
        self.send_backlog();
        (self.backlog.len() < SEND_BACKLOG).then_some(TxToken { nic: self })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ethernet;
        caps.max_transmission_unit = MAX_FRAME;
        caps
    }
}
