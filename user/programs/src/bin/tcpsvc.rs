//! `tcpsvc [--port P] [--count N] [--seconds S] [--backlog B]`: Corey's TCP service
//! (§8.3): accepts a connection, writes 128 bytes, closes; on a TCP/IP stack of this
//! program's own (smoltcp over the network device, `libatoll::net`), at QEMU's
//! user-network address 10.0.2.15/24. B sockets listen on port P at once (smoltcp has no
//! backlog: each listening socket takes one connection; default 8), so a burst of B
//! connections is answered, not reset. A socket the server closed goes through TIME_WAIT
//! at once (it is aborted there and listens again), so closing many connections never
//! runs out of sockets. Stops after N connections (default 10, at most 1,000,000) or S
//! seconds (default 30, at most 600): `tcpsvc: served N connections`. From the host
//! through a forward QEMU binds to 127.0.0.1 (`hostfwd=tcp:127.0.0.1:PORT-:80`). Exit 0
//! when N were served, 1 when the time ran out first or there is no network device, 2 for
//! bad arguments.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec;
use alloc::vec::Vec;
use libatoll::net::smoltcp::iface::SocketSet;
use libatoll::net::smoltcp::socket::tcp;
use libatoll::net::{Listener, ServerOptions, Stack, QEMU_GUEST_ADDRESS};
use libatoll::println;

const USAGE: &str = "usage: tcpsvc [--port P] [--count N] [--seconds S] [--backlog B] [--kernel-core C]   \
     (P 1-65535, default 80; N 1-1000000, default 10; S 1-600, default 30; B 1-64, default 8; C: a core for a kernel core driving the NIC)";

/// What each connection gets (Corey §8.3: 128 bytes): a line, padded with dots.
const REPLY: [u8; 128] = reply();

const fn reply() -> [u8; 128] {
    let text = b"Atoll tcpsvc: the 128 bytes Corey's TCP service writes to each connection ";
    let mut out = [b'.'; 128];
    let mut i = 0;
    while i < text.len() {
        out[i] = text[i];
        i += 1;
    }
    out[127] = b'\n';
    out
}

fn main() -> i32 {
    let mut buf = [0u8; 128];
    let defaults =
        ServerOptions { port: 80, count: 10, seconds: 30, backlog: 8, kernel_core: None };
    let Some(opts) = ServerOptions::parse(libatoll::args(&mut buf), defaults, 600, true) else {
        println!("{USAGE}");
        return 2;
    };
    let mut stack = match Stack::open_with(Some(QEMU_GUEST_ADDRESS), opts.kernel_core) {
        Ok(stack) => stack,
        Err(e) => {
            println!("tcpsvc: {e}");
            return 1;
        }
    };
    let mut sockets = SocketSet::new(Vec::new());
    let listener = match Listener::new(&mut sockets, opts.port, opts.backlog, 1024, 1024) {
        Ok(l) => l,
        Err(e) => {
            println!("tcpsvc: {e}");
            return 2;
        }
    };
    // Whether each socket has written its reply on its connection.
    let mut replied = vec![false; opts.backlog];
    println!(
        "tcpsvc: listening on 10.0.2.15:{} ({} sockets) for {} connections, {} s",
        opts.port, opts.backlog, opts.count, opts.seconds
    );
    let mut served = 0u64;
    while served < opts.count && stack.clock.micros() < opts.seconds * 1_000_000 {
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
    println!("tcpsvc: served {served} connections");
    if served == opts.count {
        0
    } else {
        1
    }
}

libatoll::main!(main);
