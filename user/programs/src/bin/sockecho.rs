//! `sockecho [--port P] [--count N] [--seconds S] [--backlog B] [--datagrams D]`: an echo server written
//! the way a BSD program is, on `libatoll::net::socket` (issue M12's sockets): it listens
//! for TCP on port P (default 7) with a backlog of B (default 8) and binds UDP to the same
//! port; one loop waits on every socket at once (`Sockets::wait`), accepts, echoes what
//! each connection sends until the peer closes, then closes it, and echoes each datagram
//! to its sender. Every call is non-blocking. Stops once N connections have closed
//! (default 3, at most 1,000,000,000) and D datagrams were echoed (default 0, at most
//! 1,000,000), or after S seconds (default 60, at most 600): `sockecho: N connections, B
//! bytes echoed, D datagrams`. Exit 0 when N were served, 1 when the time ran out first
//! or there is no network device, 2 for bad arguments.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec::Vec;
use libatoll::net::socket::{Error, Interest, SocketId, Sockets};
use libatoll::net::{ServerOptions, Stack, QEMU_GUEST_ADDRESS};
use libatoll::println;

const USAGE: &str = "usage: sockecho [--port P] [--count N] [--seconds S] [--backlog B] [--datagrams D]   \
     (P 1-65535, default 7; N 1-1000000000 connections, default 3; S 1-600, default 60; B 1-64, default 8; D 0-1000000)";

/// Takes `--datagrams D` out of `args`: (D, the rest), or `None` for a bad value.
fn datagrams_option(args: &str) -> Option<(u64, alloc::string::String)> {
    let (mut wanted, mut rest) = (0, alloc::string::String::new());
    let mut words = args.split_whitespace();
    while let Some(w) = words.next() {
        if w == "--datagrams" {
            wanted = words.next()?.parse().ok().filter(|d| *d <= 1_000_000)?;
        } else {
            rest.push_str(w);
            rest.push(' ');
        }
    }
    Some((wanted, rest))
}

fn main() -> i32 {
    let mut buf = [0u8; 128];
    let defaults = ServerOptions::new(7, 3, 60, 8);
    let Some((wanted, rest)) = datagrams_option(libatoll::args(&mut buf)) else {
        println!("{USAGE}");
        return 2;
    };
    let Some(opts) = ServerOptions::parse(&rest, defaults, 600, true)
        .filter(|o| o.stacks == 1 && o.device.kernel_core().is_none())
    else {
        println!("{USAGE}");
        return 2;
    };
    let stack = match Stack::open(Some(QEMU_GUEST_ADDRESS)) {
        Ok(stack) => stack,
        Err(e) => {
            println!("sockecho: {e}");
            return 1;
        }
    };
    let mut sockets = Sockets::new(stack);
    let (listener, udp) =
        match (sockets.listen(opts.port, opts.backlog), sockets.bind_udp(opts.port)) {
            (Ok(l), Ok(u)) => (l, u),
            _ => {
                println!("sockecho: cannot listen on port {}", opts.port);
                return 2;
            }
        };
    println!(
        "sockecho: echoing TCP and UDP on 10.0.2.15:{} (backlog {}) for {} connections, {} s",
        opts.port, opts.backlog, opts.count, opts.seconds
    );
    let (mut closed, mut bytes, mut datagrams) = (0u64, 0u64, 0u64);
    // Open connections, each with what it has read and not yet echoed.
    let mut connections: Vec<(SocketId, Vec<u8>)> = Vec::new();
    let mut interests = Vec::new();
    let mut ready = Vec::new();
    let mut chunk = [0u8; 1500];
    let end = opts.seconds * 1_000_000;
    while (closed < opts.count || datagrams < wanted) && sockets.stack.clock.micros() < end {
        interests.clear();
        interests.push((listener, Interest::Read));
        interests.push((udp, Interest::Read));
        for (id, pending) in &connections {
            let what = if pending.is_empty() { Interest::Read } else { Interest::Write };
            interests.push((*id, what));
        }
        sockets.wait(&interests, &mut ready, 100_000);
        for &(id, _) in ready.iter() {
            if id == listener {
                while let Ok((conn, _peer)) = sockets.accept(listener) {
                    connections.push((conn, Vec::new()));
                }
            } else if id == udp {
                while let Ok((n, from)) = sockets.recv_from(udp, &mut chunk) {
                    if sockets.send_to(udp, &chunk[..n], from).is_ok() {
                        datagrams += 1;
                    }
                }
            }
        }
        // Each connection: echo what is pending, read more, close at the peer's end.
        connections.retain_mut(|(id, pending)| {
            if !pending.is_empty() {
                match sockets.write(*id, pending) {
                    Ok(n) => {
                        bytes += n as u64;
                        pending.drain(..n);
                    }
                    Err(Error::WouldBlock) => return true,
                    Err(_) => {
                        let _ = sockets.close(*id);
                        closed += 1;
                        return false;
                    }
                }
            }
            match sockets.read(*id, &mut chunk) {
                Ok(0) if pending.is_empty() => {
                    let _ = sockets.close(*id);
                    closed += 1;
                    false
                }
                Ok(n) => {
                    pending.extend_from_slice(&chunk[..n]);
                    true
                }
                Err(Error::WouldBlock) => true,
                Err(_) => {
                    let _ = sockets.close(*id);
                    closed += 1;
                    false
                }
            }
        });
    }
    // The last echoes and closes leave with a few more turns (at most a second).
    let drain_until = sockets.stack.clock.micros() + 1_000_000;
    while sockets.stack.clock.micros() < drain_until {
        sockets.poll();
        libatoll::thread::yield_now();
    }
    println!("sockecho: {closed} connections, {bytes} bytes echoed, {datagrams} datagrams");
    if closed >= opts.count && datagrams >= wanted {
        0
    } else {
        1
    }
}

libatoll::main!(main);
