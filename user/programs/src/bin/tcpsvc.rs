//! `tcpsvc [--port P] [--count N] [--seconds S] [--backlog B] [--kernel-core C |
//! --polling-core C] [--stacks K]`: Corey's TCP service (§8.3): accepts a connection,
//! writes 128 bytes, closes; on a TCP/IP stack of this program's own (smoltcp over the
//! network device, `libatoll::net`), at QEMU's user-network address 10.0.2.15/24. B
//! sockets listen on port P at once (smoltcp has no backlog: each listening socket takes
//! one connection; default 8), so a burst of B connections is answered, not reset. A
//! socket the server closed goes through TIME_WAIT at once (it is aborted there and
//! listens again), so closing many connections never runs out of sockets.
//!
//! The device (Corey §8.3): by the server's own traps (default); through a kernel core on
//! core C that does all the device work (`--kernel-core C`, Dedicated); or with one that
//! only polls it while the server posts its sends by trap (`--polling-core C`, Polling).
//! With a kernel core, `--stacks K` runs K stacks, each a thread on a core of its own
//! (round robin over the other cores). They share the address, the kernel core steering
//! each connection to one by a hash of its flow (software RSS), or with `--addresses own`
//! each has its own (10.0.2.15, .16, ...: Corey §5.2), the kernel core steering by address.
//!
//! Stops after N connections in all (default 10, at most 1,000,000,000) or S seconds (default
//! 30, at most 600): `tcpsvc: served N connections`. From the host through a forward QEMU
//! binds to 127.0.0.1 (`hostfwd=tcp:127.0.0.1:PORT-:80`). Exit 0 when N were served, 1
//! when the time ran out first or there is no network device, 2 for bad arguments. With
//! two connections or more it prints the rate between the first and the last as a
//! `tcp_conn` result line (Corey Figure 8; `make bench ONLY=tcp_conn`).
#![no_std]
#![no_main]

extern crate alloc;

use alloc::boxed::Box;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};
use libatoll::cores_online;
use libatoll::net::smoltcp::iface::SocketSet;
use libatoll::net::smoltcp::socket::tcp;
use libatoll::net::{Addressing, DeviceConfig, Listener, ServerOptions, Stack, QEMU_GUEST_ADDRESS};
use libatoll::println;
use libatoll::thread::Builder;
use locks::TtsLock;
use workloads::tcpsvc::{connections_per_s, result_line, REPLY};

const USAGE: &str = "usage: tcpsvc [--port P] [--count N] [--seconds S] [--backlog B] [--kernel-core C | --polling-core C] [--stacks K] [--addresses shared|own]   \
     (P 1-65535, default 80; N 1-1000000000, default 10; S 1-600, default 30; B 1-64, default 8; C: another core, a kernel core for the NIC; K 1-7 stacks, more than 1 with a kernel core, sharing 10.0.2.15 or with 10.0.2.15, .16, ... of their own)";

fn main() -> i32 {
    let mut buf = [0u8; 128];
    let defaults = ServerOptions::new(80, 10, 30, 8);
    let Some(opts) = ServerOptions::parse(libatoll::args(&mut buf), defaults, 600, true) else {
        println!("{USAGE}");
        return 2;
    };
    let served = if opts.stacks == 1 {
        match Stack::open_with(Some(QEMU_GUEST_ADDRESS), opts.device) {
            Ok(stack) => serve(stack, &opts, 0),
            Err(e) => {
                println!("tcpsvc: {e}");
                return 1;
            }
        }
    } else {
        match serve_on_threads(&opts) {
            Ok(served) => served,
            Err(e) => {
                println!("tcpsvc: {e}");
                return 1;
            }
        }
    };
    println!("tcpsvc: served {served} connections");
    let (first, last) = (FIRST_US.load(Ordering::Relaxed), LAST_US.load(Ordering::Relaxed));
    if let Some(rate) = connections_per_s(served, first, last) {
        let config = match opts.device {
            DeviceConfig::Trap => "trap",
            DeviceConfig::Dedicated(_) => "dedicated",
            DeviceConfig::Polling(_) => "polling",
        };
        println!("{}", result_line("atoll", config, opts.stacks, rate, served));
    }
    if served >= opts.count {
        0
    } else {
        1
    }
}

/// Connections served so far by every stack of this program.
static SERVED: AtomicU64 = AtomicU64::new(0);
/// When the first and the last of them were served (µs of the stacks' common clock), for
/// the rate `tcp_conn` reports (Corey Figure 8).
static FIRST_US: AtomicU64 = AtomicU64::new(u64::MAX);
static LAST_US: AtomicU64 = AtomicU64::new(0);

/// Each stack on a thread of its own, on the cores other than the kernel core's (round
/// robin), sharing the address by the kernel core's software RSS. The threads start
/// first, so the stacks' objects go to the share they all hold (`obj::home_share`).
fn serve_on_threads(opts: &ServerOptions) -> Result<u64, String> {
    let kernel_core = opts.device.kernel_core();
    let cores: Vec<usize> = (0..cores_online()).filter(|&c| Some(c) != kernel_core).collect();
    let mut slots = Vec::new();
    let mut threads = Vec::new();
    for i in 0..opts.stacks {
        let slot = Arc::new(TtsLock::new(Handover::Waiting));
        let (mine, o) = (slot.clone(), *opts);
        let thread = Builder::new()
            .core(cores[i % cores.len()])
            .spawn(move || {
                let stack = loop {
                    match mine.with(|h| core::mem::replace(h, Handover::Waiting)) {
                        Handover::Stack(s) => break s,
                        Handover::Failed => return 1,
                        Handover::Waiting => libatoll::thread::yield_now(),
                    }
                };
                let n = serve(*stack, &o, i);
                println!("tcpsvc: stack {i} on core {} served {n}", libatoll::pcore_current());
                0
            })
            .map_err(|e| alloc::format!("no thread for stack {i}: {e:?}"));
        match thread {
            Ok(t) => threads.push(t),
            Err(e) => {
                hand_over(&slots, None);
                return Err(e);
            }
        }
        slots.push(slot);
    }
    let stacks =
        Stack::open_many(Some(QEMU_GUEST_ADDRESS), opts.device, opts.stacks, opts.addressing);
    let opened = stacks.is_ok();
    let why = stacks.as_ref().err().cloned();
    hand_over(&slots, stacks.ok());
    for t in threads {
        t.join();
    }
    match why {
        Some(e) if !opened => Err(e),
        _ => Ok(SERVED.load(Ordering::Relaxed)),
    }
}

/// What a stack's thread finds in its slot.
enum Handover {
    /// Nothing yet (and after the thread took its stack).
    Waiting,
    /// Its stack.
    Stack(Box<Stack>),
    /// The stacks could not be made: the thread ends.
    Failed,
}

/// Gives each thread its stack, or tells them all there is none.
fn hand_over(slots: &[Arc<TtsLock<Handover>>], stacks: Option<Vec<Stack>>) {
    let mut stacks = stacks.map(|s| s.into_iter());
    for slot in slots {
        let next = stacks.as_mut().and_then(|s| s.next());
        slot.with(|h| *h = next.map_or(Handover::Failed, |s| Handover::Stack(Box::new(s))));
    }
}

/// Serves connections on `stack` until the program has served `opts.count` (on all its
/// stacks) or `opts.seconds` have passed; how many this stack served.
fn serve(mut stack: Stack, opts: &ServerOptions, index: usize) -> u64 {
    let mut sockets = SocketSet::new(Vec::new());
    let listener = match Listener::new(&mut sockets, opts.port, opts.backlog, 1024, 1024) {
        Ok(l) => l,
        Err(e) => {
            println!("tcpsvc: {e}");
            return 0;
        }
    };
    // Whether each socket has written its reply on its connection.
    let mut replied = vec![false; opts.backlog];
    let own = opts.addressing == Addressing::Own;
    if index == 0 || own {
        let [a, b, c, d] = QEMU_GUEST_ADDRESS.0;
        let d = if own { d as usize + index } else { d as usize };
        println!(
            "tcpsvc: listening on {a}.{b}.{c}.{d}:{} ({} sockets{}) for {} connections, {} s, {:?}",
            opts.port,
            opts.backlog,
            if opts.stacks > 1 { " a stack" } else { "" },
            opts.count,
            opts.seconds,
            opts.device
        );
    }
    let mut served = 0u64;
    while SERVED.load(Ordering::Relaxed) < opts.count
        && stack.clock.micros() < opts.seconds * 1_000_000
    {
        stack.poll(&mut sockets);
        let mut busy = false;
        for (i, &handle) in listener.handles().iter().enumerate() {
            let socket = sockets.get_mut::<tcp::Socket>(handle);
            if listener.recycle(socket) {
                replied[i] = false;
                continue;
            }
            match socket.state() {
                tcp::State::Established if !replied[i] => {
                    if socket.send_slice(&REPLY) == Ok(REPLY.len()) {
                        socket.close();
                        replied[i] = true;
                        served += 1;
                        SERVED.fetch_add(1, Ordering::Relaxed);
                        let now = stack.clock.micros();
                        FIRST_US.fetch_min(now, Ordering::Relaxed);
                        LAST_US.fetch_max(now, Ordering::Relaxed);
                    }
                    busy = true;
                }
                tcp::State::Listen => {}
                _ => busy = true,
            }
        }
        if !busy {
            libatoll::thread::yield_now();
        }
    }
    // The last replies and FINs leave with a few more polls (at most a second).
    let drain_until = stack.clock.micros() + 1_000_000;
    while stack.clock.micros() < drain_until {
        stack.poll(&mut sockets);
        let pending = listener.handles().iter().any(|&h| {
            let state = sockets.get::<tcp::Socket>(h).state();
            !matches!(state, tcp::State::Listen | tcp::State::TimeWait | tcp::State::Closed)
        });
        if !pending {
            break;
        }
        libatoll::thread::yield_now();
    }
    served
}

libatoll::main!(main);
