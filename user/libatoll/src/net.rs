//! The network (issue M12): the kernel's network device through `device_send` and
//! `device_receive` (a trap on the caller's own core), and a TCP/IP stack in the program:
//! smoltcp, as Corey's library OS (§5.2) and Barrelfish (lwIP in each application) link a
//! stack into every application. [`Nic`] is smoltcp's `phy::Device` over the device;
//! [`Clock`] gives smoltcp its time.

use crate::kcore::{KernelCore, SyscallRing};
use crate::obj::{device_alloc, device_list, device_stat, root_share, share_delobj, ObjRef};
use crate::sys::{buf_addr, rdtsc, syscall5};
use abi::sysdev::call;
use abi::{device_kind, nr, DeviceInfo, Error};
use smoltcp::phy::{self, DeviceCapabilities, Medium};
use smoltcp::time::Instant;

/// Largest Ethernet frame (header and 1500 bytes of payload).
pub const MAX_FRAME: usize = 1514;
/// Tries of a send the device refuses as `Busy` (its send buffers all in flight) before
/// the frame is dropped, as a full NIC queue drops (TCP sends it again).
const BUSY_TRIES: u32 = 1000;

/// The machine's network device, as a device object of this program, reached by a trap
/// on the caller's core or through a kernel core (Corey §8.3's "Dedicated").
pub struct Nic {
    dev: ObjRef,
    mac: [u8; 6],
    /// Through a kernel core: the syscall device and the kernel core polling it and the
    /// network device.
    dedicated: Option<(SyscallRing, KernelCore)>,
}

/// Where a frame to send sits in a syscall device's packet area, and where a received
/// one is put.
const TX_OFFSET: u64 = 0;
const RX_OFFSET: u64 = 2048;

impl Nic {
    /// A device object of the network device (`NoSuchObject` if the machine has none: `make
    /// run NET=0`, or a test run without a NIC).
    pub fn open() -> Result<Nic, Error> {
        let mut list = [DeviceInfo::default(); 64];
        let n = device_list(&mut list)?.min(list.len());
        let info =
            list[..n].iter().find(|d| d.kind == device_kind::NET).ok_or(Error::NoSuchObject)?;
        let root = root_share();
        let dev = ObjRef::new(root, device_alloc(root, info.hwid)?);
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
        Ok(Nic { dev, mac, dedicated: None })
    }

    /// The network device through a kernel core on `core` (Corey §8.3, "Dedicated"): that
    /// core does all the device work; this program's frames go to it and come from it
    /// through a syscall device.
    pub fn through_kernel_core(core: usize) -> Result<Nic, Error> {
        let mut nic = Nic::open()?;
        let mut ring = SyscallRing::new(4096)?;
        let kernel_core = KernelCore::start(core, &[nic.dev, ring.device()])?;
        ring.served_by(&kernel_core);
        nic.dedicated = Some((ring, kernel_core));
        Ok(nic)
    }

    /// The kernel core it goes through, if any.
    pub fn kernel_core(&self) -> Option<&KernelCore> {
        self.dedicated.as_ref().map(|(_, k)| k)
    }

    /// Its MAC address.
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// The device object (share, object), for calls of one's own.
    pub fn object(&self) -> (u64, u64) {
        (self.dev.share, self.dev.object)
    }

    /// Sends one Ethernet frame (`device_send`): `Busy` while the device's send buffers are
    /// all in flight.
    pub fn send_frame(&mut self, frame: &[u8]) -> Result<(), Error> {
        if let Some((ring, _)) = self.dedicated.as_mut() {
            let len = frame.len();
            if !(14..=MAX_FRAME).contains(&len) {
                return Err(Error::InvalidArgument);
            }
            ring.packets()[..len].copy_from_slice(frame);
            return ring.call(call::NET_SEND, &[TX_OFFSET, len as u64]).map(|_| ());
        }
        let (a, b) = (self.dev.share, self.dev.object);
        syscall5(nr::DEVICE_SEND, a, b, buf_addr(frame), frame.len() as u64, 0).map(|_| ())
    }

    /// The next frame the device received, copied into `buf`: its whole length (more than
    /// `buf` holds: it was cut), or 0 if none has come (`device_receive`; never waits).
    pub fn receive_frame(&mut self, buf: &mut [u8]) -> Result<usize, Error> {
        if let Some((ring, _)) = self.dedicated.as_mut() {
            let room = buf.len().min(MAX_FRAME);
            let n = ring.call(call::NET_RECEIVE, &[RX_OFFSET, room as u64])? as usize;
            let at = RX_OFFSET as usize;
            buf[..n.min(room)].copy_from_slice(&ring.packets()[at..at + n.min(room)]);
            return Ok(n);
        }
        let (a, b) = (self.dev.share, self.dev.object);
        let n = syscall5(nr::DEVICE_RECEIVE, a, b, buf_addr(buf), buf.len() as u64, 0)?;
        Ok(n as usize)
    }
}

impl Drop for Nic {
    fn drop(&mut self) {
        if let Some((ring, kernel_core)) = self.dedicated.take() {
            kernel_core.stop(); // before its devices go
            drop(ring);
        }
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

/// smoltcp's clock: the time-stamp counter, its rate measured once against this core's
/// timer ticks (a few ticks; a tick is 10 ms at the default 100 Hz).
pub struct Clock {
    start: u64,
    cycles_per_us: u64,
}

impl Clock {
    /// Measures the counter's rate (about 30 ms).
    pub fn new() -> Result<Clock, Error> {
        let core = crate::pcore_current();
        let root = root_share();
        let timer = ObjRef::new(root, device_alloc(root, TIMER_HWID_BASE + core as u64)?);
        let measured = measure_rate(timer);
        let _ = share_delobj(timer);
        let cycles_per_us = measured?;
        Ok(Clock { start: rdtsc(), cycles_per_us })
    }

    /// Now, from the clock's start.
    pub fn now(&self) -> Instant {
        Instant::from_micros(((rdtsc() - self.start) / self.cycles_per_us) as i64)
    }

    /// Microseconds since the clock's start.
    pub fn micros(&self) -> u64 {
        (rdtsc() - self.start) / self.cycles_per_us
    }
}

/// Hardware id of core 0's timer device (core k's is this plus k; `device_list`).
const TIMER_HWID_BASE: u64 = 16;

/// Cycles of the time-stamp counter per microsecond, over three of `timer`'s ticks.
fn measure_rate(timer: ObjRef) -> Result<u64, Error> {
    let first = device_stat(timer)?;
    let hz = first.detail.max(1);
    // Start on a tick's edge, then count three.
    let mut edge = first.count;
    while edge == first.count {
        edge = device_stat(timer)?.count;
    }
    let start = rdtsc();
    let mut now = edge;
    while now < edge + 3 {
        now = device_stat(timer)?.count;
    }
    let cycles = rdtsc() - start;
    let us = (now - edge) * 1_000_000 / hz;
    Ok((cycles / us.max(1)).max(1))
}

/// QEMU user networking's address for the guest (what its DHCP gives), with its /24.
pub const QEMU_GUEST_ADDRESS: ([u8; 4], u8) = ([10, 0, 2, 15], 24);

/// A program's network: the device, the clock, and a smoltcp interface on them.
pub struct Stack {
    /// The device.
    pub nic: Nic,
    /// smoltcp's time.
    pub clock: Clock,
    /// The interface (its address set by [`Stack::open`], or by DHCP).
    pub iface: smoltcp::iface::Interface,
}

impl Stack {
    /// Opens the network device, measures the clock and makes an interface with
    /// `address` (an IPv4 address and prefix length; `None`: none yet, for DHCP). The
    /// reason as a line to print if there is no device or no clock.
    pub fn open(address: Option<([u8; 4], u8)>) -> Result<Stack, alloc::string::String> {
        Stack::open_with(address, None)
    }

    /// As [`open`](Self::open), the device reached through a kernel core on core
    /// `kernel_core` if one is given ([`Nic::through_kernel_core`]).
    pub fn open_with(
        address: Option<([u8; 4], u8)>,
        kernel_core: Option<usize>,
    ) -> Result<Stack, alloc::string::String> {
        use smoltcp::iface::{Config, Interface};
        use smoltcp::wire::{EthernetAddress, HardwareAddress, IpCidr, Ipv4Address};
        let nic = match kernel_core {
            None => Nic::open(),
            Some(core) => Nic::through_kernel_core(core),
        };
        let mut nic = nic.map_err(|e| match kernel_core {
            Some(core) if e != Error::NoSuchObject => {
                alloc::format!("no kernel core on core {core} ({e:?}: another core, not this one)")
            }
            _ => alloc::format!("no network device ({e:?}; `make run` has one unless NET=0)"),
        })?;
        let clock = Clock::new().map_err(|e| alloc::format!("no clock ({e:?})"))?;
        let mut config = Config::new(HardwareAddress::Ethernet(EthernetAddress(nic.mac())));
        config.random_seed = rdtsc();
        let mut iface = Interface::new(config, &mut nic, clock.now());
        if let Some((ip, prefix)) = address {
            iface.update_ip_addrs(|addrs| {
                let _ = addrs.push(IpCidr::new(Ipv4Address::from(ip).into(), prefix));
            });
        }
        Ok(Stack { nic, clock, iface })
    }

    /// One turn of the stack: frames in and out for `sockets`.
    pub fn poll(&mut self, sockets: &mut smoltcp::iface::SocketSet) {
        self.iface.poll(self.clock.now(), &mut self.nic, sockets);
    }
}

/// TCP sockets listening on one port, a backlog of them (issue M12): smoltcp has no
/// `listen` backlog, so each listening socket takes one connection, and a burst of
/// `backlog` connections is answered, not reset. Request and response traffic: no Nagle,
/// no delayed ACK.
pub struct Listener {
    port: u16,
    handles: alloc::vec::Vec<smoltcp::iface::SocketHandle>,
}

impl Listener {
    /// `backlog` sockets with buffers of `rx` and `tx` bytes, listening on `port`, added
    /// to `sockets`. The reason as a line to print if they cannot listen.
    pub fn new(
        sockets: &mut smoltcp::iface::SocketSet<'static>,
        port: u16,
        backlog: usize,
        rx: usize,
        tx: usize,
    ) -> Result<Listener, alloc::string::String> {
        use smoltcp::socket::tcp;
        let mut handles = alloc::vec::Vec::with_capacity(backlog);
        for _ in 0..backlog {
            let mut socket = tcp::Socket::new(
                tcp::SocketBuffer::new(alloc::vec![0; rx]),
                tcp::SocketBuffer::new(alloc::vec![0; tx]),
            );
            socket.set_nagle_enabled(false);
            socket.set_ack_delay(None);
            // A peer that stops answering (acknowledging nothing for 10 s) is reset.
            socket.set_timeout(Some(smoltcp::time::Duration::from_secs(10)));
            socket.listen(port).map_err(|e| alloc::format!("cannot listen on port {port}: {e}"))?;
            handles.push(sockets.add(socket));
        }
        Ok(Listener { port, handles })
    }

    /// The sockets, in order (a caller keeps its per-connection state by index).
    pub fn handles(&self) -> &[smoltcp::iface::SocketHandle] {
        &self.handles
    }

    /// Makes `socket` listen again if its connection is over (closed, or in TIME_WAIT,
    /// which it leaves at once: a server that closes many connections never runs out of
    /// sockets). Whether it did, so the caller forgets that connection's state.
    pub fn recycle(&self, socket: &mut smoltcp::socket::tcp::Socket) -> bool {
        use smoltcp::socket::tcp::State;
        if !matches!(socket.state(), State::TimeWait | State::Closed) {
            return false;
        }
        socket.abort();
        let _ = socket.listen(self.port);
        true
    }
}

/// The options every server program takes: `--port P`, `--count N` (requests or
/// connections), `--seconds S`, `--kernel-core C`, and `--backlog B` where it listens for
/// TCP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerOptions {
    /// The port (1 to 65535).
    pub port: u16,
    /// How many to serve before it stops (1 to 1,000,000).
    pub count: u64,
    /// How long it runs at most (1 to `max_seconds`).
    pub seconds: u64,
    /// Listening sockets (1 to 64).
    pub backlog: usize,
    /// The core of a kernel core that drives the network device for the server
    /// (`--kernel-core C`, Corey §8.3 "Dedicated"); `None`: the server's own traps.
    pub kernel_core: Option<usize>,
}

impl ServerOptions {
    /// Parses `args` over `defaults`; `None` for anything else, a value out of range, or
    /// `--backlog` when `takes_backlog` is false.
    pub fn parse(
        args: &str,
        defaults: ServerOptions,
        max_seconds: u64,
        takes_backlog: bool,
    ) -> Option<ServerOptions> {
        let mut opts = defaults;
        let mut words = args.split_whitespace();
        while let Some(w) = words.next() {
            let value: u64 = words.next()?.parse().ok()?;
            match w {
                "--port" if (1..=65535).contains(&value) => opts.port = value as u16,
                "--count" if (1..=1_000_000).contains(&value) => opts.count = value,
                "--seconds" if (1..=max_seconds).contains(&value) => opts.seconds = value,
                "--backlog" if takes_backlog && (1..=64).contains(&value) => {
                    opts.backlog = value as usize
                }
                "--kernel-core" if value < 64 => opts.kernel_core = Some(value as usize),
                _ => return None,
            }
        }
        Some(opts)
    }
}

/// smoltcp itself, for programs that build on [`Nic`] (`Interface`, sockets).
pub use smoltcp;
