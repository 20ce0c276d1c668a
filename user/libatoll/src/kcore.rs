//! Kernel cores and syscall devices, the program's side (Corey §3.2, §4.4).
//!
//! A [`KernelCore`] is a core this program dedicates to kernel work: a pcore given its
//! devices (`pcore_add_device`) and started with `PcoreRun::KERNEL_CORE`. It polls them
//! until [`KernelCore::stop`] (or until the program ends).
//!
//! A [`SyscallRing`] is a syscall device as the program uses it: one page holding two URPC
//! channels (requests out, replies in) and a packet area beside it, in one segment mapped
//! here and fed to the device with `device_buf`. [`SyscallRing::call`] posts a call and
//! waits for its reply; [`SyscallRing::post`] and [`SyscallRing::reply`] keep several in
//! flight. Packet buffers are named by their offset in the packet area.

use crate::obj::{
    device_alloc, device_buf, device_conf, home_share, pcore_add_device, pcore_alloc, pcore_halt,
    pcore_run, pcore_status, pcore_status_word, share_delobj, ObjRef, Status,
};
use crate::private::{map_new, Mapping};
use abi::sysdev::{buf_type, REPLY_OFFSET, REQUEST_OFFSET, RING_BYTES, RING_SLOTS, SYSCALL_HWID};
use abi::{pcore_status, Error, PcoreRun, SysResult};
use urpc::{ChannelMemory, Receiver, Sender, PAYLOAD_WORDS};

/// How long a call waits for its reply before it checks that the kernel core still runs
/// (cycles of the time-stamp counter; about 10 ms at 3 GHz).
const CHECK_EVERY_CYCLES: u64 = 30_000_000;
/// How many such checks a call waits through at most while its kernel core runs but
/// does not answer (a device not on its list): about 2 s.
const CHECKS_MAX: u32 = 200;

/// A core polling devices for this program (Corey §4.4).
pub struct KernelCore {
    pcore: ObjRef,
    core: usize,
}

impl KernelCore {
    /// Makes core `core` a kernel core polling `devices` (at most
    /// `abi::sysdev::PCORE_DEVICES_MAX`; the caller's own core is `NotPermitted`), and
    /// waits until it runs. Nothing is left behind on failure.
    pub fn start(core: usize, devices: &[ObjRef]) -> Result<KernelCore, Error> {
        let home = home_share();
        let pcore = ObjRef::new(home, pcore_alloc(home, core)?);
        let started = (|| {
            for &dev in devices {
                pcore_add_device(pcore, dev)?;
            }
            let run = PcoreRun {
                pcore: [pcore.share, pcore.object],
                flags: PcoreRun::KERNEL_CORE,
                ..PcoreRun::default()
            };
            pcore_run(&run)?;
            // The kernel core takes its devices on its own core: a device it refused
            // shows as a failed start.
            loop {
                match pcore_status_word(pcore)? {
                    word if word == pcore_status::RUNNING | pcore_status::POLLING => return Ok(()),
                    pcore_status::RUNNING | pcore_status::IDLE => core::hint::spin_loop(),
                    _ => return Err(Error::InvalidArgument),
                }
            }
        })();
        match started {
            Ok(()) => Ok(KernelCore { pcore, core }),
            Err(e) => {
                let _ = share_delobj(pcore);
                Err(e)
            }
        }
    }

    /// The core it polls on.
    pub fn core(&self) -> usize {
        self.core
    }

    /// Whether it still polls.
    pub fn running(&self) -> bool {
        pcore_status(self.pcore) == Ok(Status::Running)
    }

    /// Its pcore object.
    pub fn pcore(&self) -> ObjRef {
        self.pcore
    }

    /// Stops it (`pcore_halt`) and waits until it has let go of its devices; the core
    /// takes threads again.
    pub fn stop(self) {
        drop(self);
    }
}

impl Drop for KernelCore {
    fn drop(&mut self) {
        let _ = pcore_halt(self.pcore);
        while pcore_status(self.pcore) == Ok(Status::Running) {
            core::hint::spin_loop();
        }
        let _ = share_delobj(self.pcore);
    }
}

/// A syscall device as this program uses it.
pub struct SyscallRing {
    device: ObjRef,
    mapping: Mapping,
    requests: Sender<'static, RING_SLOTS>,
    replies: Receiver<'static, RING_SLOTS>,
    /// The cookie of the next call posted, and of the next reply expected.
    posted: u64,
    answered: u64,
    /// The kernel core serving it, if known: a call whose kernel core stopped fails.
    server: Option<ObjRef>,
}

impl SyscallRing {
    /// A new syscall device with a packet area of `packet_bytes` (whole pages, at most
    /// `abi::sysdev::PACKET_AREA_MAX`; 0 for none), its ring and area mapped here.
    pub fn new(packet_bytes: u64) -> Result<SyscallRing, Error> {
        let home = home_share();
        let device = ObjRef::new(home, device_alloc(home, SYSCALL_HWID)?);
        let packet_bytes = packet_bytes.next_multiple_of(4096);
        let mapping = match map_new(RING_BYTES + packet_bytes) {
            Ok(m) => m,
            Err(e) => {
                let _ = share_delobj(device);
                return Err(e);
            }
        };
        let seg = ObjRef::new(home, mapping.segment);
        let fed = device_buf(device, seg, 0, buf_type::RING).and_then(|_| match packet_bytes {
            0 => Ok(0),
            _ => device_buf(device, seg, RING_BYTES, buf_type::PACKETS),
        });
        if let Err(e) = fed {
            let _ = share_delobj(device);
            return Err(e);
        }
        // SAFETY: the ring page is mapped read-write at `mapping.va` for as long as the
        // program lives (private mappings are never reused), page-aligned, and holds both
        // channels (`abi::sysdev`); `ChannelMemory` is atomics only, which the kernel core
        // shares with us. `device_buf` just cleared it: two empty channels.
        let (req, rep) = unsafe {
            (
                &*((mapping.va as usize + REQUEST_OFFSET) as *const ChannelMemory<RING_SLOTS>),
                &*((mapping.va as usize + REPLY_OFFSET) as *const ChannelMemory<RING_SLOTS>),
            )
        };
        Ok(SyscallRing {
            device,
            mapping,
            requests: Sender::new(req),
            replies: Receiver::new(rep),
            posted: 0,
            answered: 0,
            server: None,
        })
    }

    /// The device object (for `pcore_add_device`).
    pub fn device(&self) -> ObjRef {
        self.device
    }

    /// Names the kernel core that serves it: from then on a call fails with `TimedOut`
    /// rather than wait for a kernel core that stopped.
    pub fn served_by(&mut self, kernel_core: &KernelCore) {
        self.server = Some(kernel_core.pcore());
    }

    /// `device_conf` on the device (`abi::sysdev::conf`).
    pub fn configure(&self, conf: u64, value: u64) -> SysResult {
        device_conf(self.device, conf, value)
    }

    /// The packet area, for the packets calls name by offset.
    pub fn packets(&mut self) -> &mut [u8] {
        let len = (self.mapping.bytes - RING_BYTES) as usize;
        let va = (self.mapping.va + RING_BYTES) as *mut u8;
        // SAFETY: the packet area is mapped read-write after the ring page for as long as
        // the program lives, and `&mut self` makes this the only borrow of it here; the
        // kernel core touches it only during a call this program made.
        unsafe { core::slice::from_raw_parts_mut(va, len) }
    }

    /// Posts call `call` (`abi::sysdev::call`) with up to six arguments, if the request
    /// channel has room; its cookie (replies come back in order).
    pub fn post(&mut self, call: u32, args: &[u64]) -> Result<u64, Error> {
        if args.len() >= PAYLOAD_WORDS {
            return Err(Error::InvalidArgument);
        }
        let mut payload = [0u64; PAYLOAD_WORDS];
        payload[0] = self.posted;
        payload[1..=args.len()].copy_from_slice(args);
        self.requests.try_send(call, &payload).map_err(|_| Error::Busy)?;
        self.posted += 1;
        Ok(payload[0])
    }

    /// The next reply, if it has come: its cookie and result.
    pub fn reply(&mut self) -> Option<(u64, SysResult)> {
        let m = self.replies.try_recv()?;
        self.answered += 1;
        Some((m.payload[0], abi::decode(m.payload[1])))
    }

    /// Calls in flight (posted, not answered).
    pub fn in_flight(&self) -> u64 {
        self.posted - self.answered
    }

    /// One call, waited for: posts it (waiting for room) and returns its result.
    /// `TimedOut` if its kernel core stopped, or ran for about 2 s without answering.
    pub fn call(&mut self, call: u32, args: &[u64]) -> SysResult {
        let cookie = loop {
            match self.post(call, args) {
                Ok(c) => break c,
                Err(Error::Busy) => self.wait_a_little()?,
                Err(e) => return Err(e),
            }
        };
        let mut checks = 0;
        let mut since = crate::sys::rdtsc();
        loop {
            if let Some((c, result)) = self.reply() {
                if c == cookie {
                    return result;
                }
                continue; // a reply to a call posted earlier with `post`
            }
            if crate::sys::rdtsc() - since > CHECK_EVERY_CYCLES {
                checks += 1;
                if checks > CHECKS_MAX || !self.server_runs() {
                    return Err(Error::TimedOut);
                }
                since = crate::sys::rdtsc();
            }
            core::hint::spin_loop();
        }
    }

    /// Waits for room in the request channel (replies taken meanwhile are dropped: only
    /// [`call`](Self::call) waits, and it has none of its own in flight yet).
    fn wait_a_little(&mut self) -> Result<(), Error> {
        if !self.server_runs() {
            return Err(Error::TimedOut);
        }
        let _ = self.reply();
        core::hint::spin_loop();
        Ok(())
    }

    /// Whether the kernel core serving it (if named) still runs.
    fn server_runs(&self) -> bool {
        self.server.is_none_or(|p| pcore_status(p) == Ok(Status::Running))
    }
}

impl Drop for SyscallRing {
    fn drop(&mut self) {
        let _ = share_delobj(self.device);
        // The mapping stays (private addresses are never reused); its segment goes.
        let _ = share_delobj(ObjRef::new(home_share(), self.mapping.segment));
    }
}
