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
use alloc::sync::Arc;
use alloc::vec::Vec;
use smoltcp::phy::{self, DeviceCapabilities, Medium};
use smoltcp::time::Instant;

/// Largest Ethernet frame (header and 1500 bytes of payload).
pub const MAX_FRAME: usize = 1514;
/// Tries of a send the device refuses as `Busy` (its send buffers all in flight) before
/// the frame is dropped, as a full NIC queue drops (TCP sends it again).
const BUSY_TRIES: u32 = 1000;
/// Where a frame to send sits in a syscall device's packet area, and where a received
/// one is put.
const TX_OFFSET: u64 = 0;
const RX_OFFSET: u64 = 2048;

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

/// The network device as one stack of this program reaches it.
pub struct Nic {
    dev: ObjRef,
    mac: [u8; 6],
    /// With a kernel core: this stack's syscall device.
    ring: Option<SyscallRing>,
    /// Whether sends go by trap (`Trap`, `Polling`) rather than through the ring.
    send_by_trap: bool,
    /// The kernel core, shared by the program's stacks; it stops when the last goes.
    kernel_core: Option<Arc<KernelCore>>,
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
        Ok(Nic { dev, mac, ring: None, send_by_trap: true, kernel_core: None })
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
                let len = frame.len();
                if !(14..=MAX_FRAME).contains(&len) {
                    return Err(Error::InvalidArgument);
                }
                ring.packets()[..len].copy_from_slice(frame);
                ring.call(call::NET_SEND, &[TX_OFFSET, len as u64]).map(|_| ())
            }
            _ => {
                let (a, b) = (self.dev.share, self.dev.object);
                let len = frame.len() as u64;
                syscall5(nr::DEVICE_SEND, a, b, buf_addr(frame), len, 0).map(|_| ())
            }
        }
    }

    /// The next frame for this stack, copied into `buf`: its whole length (more than `buf`
    /// holds: it was cut), or 0 if none has come (never waits).
    pub fn receive_frame(&mut self, buf: &mut [u8]) -> Result<usize, Error> {
        match self.ring.as_mut() {
            Some(ring) => {
                let room = buf.len().min(MAX_FRAME);
                let n = ring.call(call::NET_RECEIVE, &[RX_OFFSET, room as u64])? as usize;
                let (at, n) = (RX_OFFSET as usize, n.min(room));
                buf[..n].copy_from_slice(&ring.packets()[at..at + n]);
                Ok(n)
            }
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
        let ring = SyscallRing::new(4096)?;
        ring.configure(conf::NET_ADDRESS, u64::from(address))?;
        nic.ring = Some(ring);
        nic.send_by_trap = matches!(config, DeviceConfig::Polling(_));
        nics.push(nic);
    }
    let mut devices = alloc::vec![nics[0].dev];
    devices.extend(nics.iter().filter_map(|n| n.ring.as_ref().map(|r| r.device())));
    let kernel_core = Arc::new(KernelCore::start(core, &devices)?);
    for nic in nics.iter_mut() {
        if let Some(ring) = nic.ring.as_mut() {
            ring.served_by(&kernel_core);
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
        for _ in 0..BUSY_TRIES {
            match self.nic.send_frame(&frame[..len]) {
                Err(Error::Busy) => core::hint::spin_loop(),
                _ => break, // sent, or refused for good: dropped, as a wire would
            }
        }
        r
    }
}

impl phy::Device for Nic {
    type RxToken<'a> = RxToken;
    type TxToken<'a> = TxToken<'a>;

    fn receive(&mut self, _timestamp: Instant) -> Option<(RxToken, TxToken<'_>)> {
        let mut frame = [0u8; MAX_FRAME];
        match self.receive_frame(&mut frame) {
            Ok(len) if len > 0 && len <= MAX_FRAME => {
                Some((RxToken { frame, len }, TxToken { nic: self }))
            }
            _ => None,
        }
    }

    fn transmit(&mut self, _timestamp: Instant) -> Option<TxToken<'_>> {
        Some(TxToken { nic: self })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ethernet;
        caps.max_transmission_unit = MAX_FRAME;
        caps
    }
}
