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
use libatoll::net::smoltcp::iface::{SocketHandle, SocketSet};
use libatoll::net::smoltcp::socket::tcp;
use libatoll::net::{Stack, QEMU_GUEST_ADDRESS};
use libatoll::println;

const USAGE: &str = "usage: tcpsvc [--port P] [--count N] [--seconds S] [--backlog B]   \
     (P 1-65535, default 80; N 1-1000000, default 10; S 1-600, default 30; B 1-64, default 8)";

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

struct Options {
    port: u16,
    count: u64,
    seconds: u64,
    backlog: usize,
}

/// A listening socket and whether it has written its reply on its connection.
struct Slot {
    handle: SocketHandle,
    replied: bool,
}

fn main() -> i32 {
    let mut buf = [0u8; 128];
    let Some(opts) = parse(libatoll::args(&mut buf)) else {
        println!("{USAGE}");
        return 2;
    };
    let mut stack = match Stack::open(Some(QEMU_GUEST_ADDRESS)) {
        Ok(stack) => stack,
        Err(e) => {
            println!("tcpsvc: {e}");
            return 1;
        }
    };
    let mut sockets = SocketSet::new(Vec::new());
    let mut slots = Vec::new();
    for _ in 0..opts.backlog {
        let mut socket = tcp::Socket::new(
            tcp::SocketBuffer::new(vec![0; 1024]),
            tcp::SocketBuffer::new(vec![0; 1024]),
        );
        // Request and response: no Nagle, no delayed ACK (issue M12).
        socket.set_nagle_enabled(false);
        socket.set_ack_delay(None);
        if let Err(e) = socket.listen(opts.port) {
            println!("tcpsvc: cannot listen on port {}: {e}", opts.port);
            return 2;
        }
        slots.push(Slot { handle: sockets.add(socket), replied: false });
    }
    println!(
        "tcpsvc: listening on 10.0.2.15:{} ({} sockets) for {} connections, {} s",
        opts.port, opts.backlog, opts.count, opts.seconds
    );
    let mut served = 0u64;
    while served < opts.count && stack.clock.micros() < opts.seconds * 1_000_000 {
        stack.poll(&mut sockets);
        let mut busy = false;
        for slot in &mut slots {
            let socket = sockets.get_mut::<tcp::Socket>(slot.handle);
            match socket.state() {
                tcp::State::Established if !slot.replied => {
                    if socket.send_slice(&REPLY) == Ok(REPLY.len()) {
                        socket.close();
                        slot.replied = true;
                        served += 1;
                    }
                    busy = true;
                }
                // Closed by both sides, or never used again: listen afresh.
                tcp::State::TimeWait | tcp::State::Closed => {
                    socket.abort();
                    let _ = socket.listen(opts.port);
                    slot.replied = false;
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
        let pending = slots.iter().any(|s| {
            let state = sockets.get::<tcp::Socket>(s.handle).state();
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

/// The options, or `None` for bad ones.
fn parse(args: &str) -> Option<Options> {
    let mut opts = Options { port: 80, count: 10, seconds: 30, backlog: 8 };
    let mut words = args.split_whitespace();
    while let Some(w) = words.next() {
        let value: u64 = words.next()?.parse().ok()?;
        match w {
            "--port" if (1..=65535).contains(&value) => opts.port = value as u16,
            "--count" if (1..=1_000_000).contains(&value) => opts.count = value,
            "--seconds" if (1..=600).contains(&value) => opts.seconds = value,
            "--backlog" if (1..=64).contains(&value) => opts.backlog = value as usize,
            _ => return None,
        }
    }
    Some(opts)
}

libatoll::main!(main);
