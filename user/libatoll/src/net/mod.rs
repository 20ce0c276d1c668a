//! The network (issue M12): a TCP/IP stack in the program, smoltcp, as Corey's library OS
//! (§5.2) and Barrelfish (lwIP in each application) link a stack into every application.
//! - [`nic`]: the network device as smoltcp's device, driven by trap or through a kernel
//!   core (Corey §8.3's device configurations), for one stack or several;
//! - [`clock`]: smoltcp's time;
//! - [`socket`]: BSD-like sockets over a stack, non-blocking, with a wait on several;
//! - here: [`Stack`] (device, clock and interface), [`Listener`] (a backlog of listening
//!   TCP sockets) and [`ServerOptions`] (what every server program takes).

pub mod clock;
pub mod nic;
pub mod socket;

pub use clock::Clock;
pub use nic::{open_stacks, DeviceConfig, Nic, RxToken, TxToken, MAX_FRAME};

use crate::sys::rdtsc;
use abi::Error;
use alloc::vec::Vec;

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
        Stack::open_with(address, DeviceConfig::Trap)
    }

    /// As [`open`](Self::open), the device driven in configuration `config`.
    pub fn open_with(
        address: Option<([u8; 4], u8)>,
        config: DeviceConfig,
    ) -> Result<Stack, alloc::string::String> {
        let mut stacks = Stack::open_many(address, config, 1, Addressing::Shared)?;
        stacks.pop().ok_or_else(|| alloc::string::String::from("no stack"))
    }

    /// `n` stacks, each to run on a core of its own, through the kernel core of `config`
    /// (`Trap` has one stack only). With `Addressing::Shared` they all have `address` and
    /// the kernel core steers each flow to one of them (software RSS); with `Own`, stack i
    /// has `address` plus i in its last byte (Corey §5.2: an address per stack). The
    /// reason as a line to print if they cannot be made.
    pub fn open_many(
        address: Option<([u8; 4], u8)>,
        config: DeviceConfig,
        n: usize,
        addressing: Addressing,
    ) -> Result<Vec<Stack>, alloc::string::String> {
        use smoltcp::iface::{Config, Interface};
        use smoltcp::wire::{EthernetAddress, HardwareAddress, IpCidr, Ipv4Address};
        let mut addresses = Vec::new();
        for i in 0..n {
            let a = match (address, addressing) {
                (None, _) => None,
                (Some((ip, prefix)), Addressing::Shared) => Some((ip, prefix)),
                (Some(([a, b, c, d], prefix)), Addressing::Own) => {
                    let last = u8::try_from(usize::from(d) + i).ok().filter(|&x| x < 255);
                    let last = last.ok_or_else(|| {
                        alloc::format!(
                            "no address {a}.{b}.{c}.{} for stack {i}",
                            usize::from(d) + i
                        )
                    })?;
                    Some(([a, b, c, last], prefix))
                }
            };
            addresses.push(a);
        }
        let numbers: Vec<u32> =
            addresses.iter().map(|a| a.map_or(0, |(ip, _)| u32::from_be_bytes(ip))).collect();
        let nics = open_stacks(config, &numbers).map_err(|e| {
            match (config.kernel_core(), e) {
                (_, Error::NoSuchObject) | (None, _) => alloc::format!(
                    "no network device ({e:?}; `make run` has one unless NET=0)"
                ),
                (Some(core), e) => alloc::format!(
                    "no kernel core on core {core} ({e:?}: another core, not this one; at most 7 stacks)"
                ),
            }
        })?;
        let clock = Clock::new().map_err(|e| alloc::format!("no clock ({e:?})"))?;
        let mut stacks = Vec::new();
        for (mut nic, address) in nics.into_iter().zip(addresses) {
            let mut config = Config::new(HardwareAddress::Ethernet(EthernetAddress(nic.mac())));
            config.random_seed = rdtsc();
            let mut iface = Interface::new(config, &mut nic, clock.now());
            if let Some((ip, prefix)) = address {
                iface.update_ip_addrs(|addrs| {
                    let _ = addrs.push(IpCidr::new(Ipv4Address::from(ip).into(), prefix));
                });
            }
            stacks.push(Stack { nic, clock, iface });
        }
        Ok(stacks)
    }

    /// One turn of the stack: frames in and out for `sockets`.
    pub fn poll(&mut self, sockets: &mut smoltcp::iface::SocketSet) {
        self.iface.poll(self.clock.now(), &mut self.nic, sockets);
    }
}

/// How several stacks of one program are addressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Addressing {
    /// One address for all: the kernel core steers each flow to one (software RSS).
    Shared,
    /// An address each (Corey §5.2).
    Own,
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
/// connections), `--seconds S`, `--kernel-core C` or `--polling-core C`, `--stacks N`
/// and `--addresses shared|own`, and `--backlog B` where it listens for TCP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerOptions {
    /// The port (1 to 65535).
    pub port: u16,
    /// How many to serve before it stops (1 to 1,000,000,000).
    pub count: u64,
    /// How long it runs at most (1 to `max_seconds`).
    pub seconds: u64,
    /// Listening sockets (1 to 64).
    pub backlog: usize,
    /// Who drives the network device (Corey §8.3): the server's own traps (the
    /// default), a kernel core on core C that does all the device work
    /// (`--kernel-core C`, Dedicated), or one that only polls it (`--polling-core C`).
    pub device: DeviceConfig,
    /// Stacks, each a thread on a core of its own (`--stacks N`, 1 to 7; more than 1
    /// needs a kernel core).
    pub stacks: usize,
    /// Whether they share the address by software RSS (`--addresses shared`, the default)
    /// or each have their own (`--addresses own`: 10.0.2.15, .16, ...).
    pub addressing: Addressing,
}

impl ServerOptions {
    /// A server's defaults: `port`, `count`, `seconds` and `backlog`, one stack driven by
    /// the server's own traps.
    pub const fn new(port: u16, count: u64, seconds: u64, backlog: usize) -> ServerOptions {
        ServerOptions {
            port,
            count,
            seconds,
            backlog,
            device: DeviceConfig::Trap,
            stacks: 1,
            addressing: Addressing::Shared,
        }
    }

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
            let word = words.next()?;
            if w == "--addresses" {
                opts.addressing = match word {
                    "shared" => Addressing::Shared,
                    "own" => Addressing::Own,
                    _ => return None,
                };
                continue;
            }
            let value: u64 = word.parse().ok()?;
            match w {
                "--port" if (1..=65535).contains(&value) => opts.port = value as u16,
                "--count" if (1..=1_000_000_000).contains(&value) => opts.count = value,
                "--seconds" if (1..=max_seconds).contains(&value) => opts.seconds = value,
                "--backlog" if takes_backlog && (1..=64).contains(&value) => {
                    opts.backlog = value as usize
                }
                "--kernel-core" if value < 64 => {
                    opts.device = DeviceConfig::Dedicated(value as usize)
                }
                "--polling-core" if value < 64 => {
                    opts.device = DeviceConfig::Polling(value as usize)
                }
                "--stacks" if (1..=7).contains(&value) => opts.stacks = value as usize,
                _ => return None,
            }
        }
        // Several stacks share the device only through a kernel core.
        if opts.stacks > 1 && opts.device == DeviceConfig::Trap {
            return None;
        }
        Some(opts)
    }
}

/// smoltcp itself, for programs that build on [`Nic`] (`Interface`, sockets).
pub use smoltcp;
