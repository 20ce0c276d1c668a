//! `udpecho [--port P] [--count N] [--seconds S]`: the UDP echo server of the
//! Multikernel's §5.4, on a TCP/IP stack of this program's own (smoltcp over the network
//! device, `libatoll::net`). It takes QEMU's user-network address (10.0.2.15/24, what its
//! DHCP gives), echoes every datagram to port P (default 7) back to its sender, and stops
//! after N datagrams (default 10, at most 1,000,000,000) or S seconds (default 30, at most
//! 600), whichever comes first: `udpecho: echoed N datagrams (B bytes)`. From the host,
//! through a forward QEMU binds to 127.0.0.1 only (`hostfwd=udp:127.0.0.1:PORT-:7`).
//! Exit 0 when N were echoed, 1 when the time ran out first or there is no network
//! device, 2 for bad arguments.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec;
use alloc::vec::Vec;
use libatoll::net::smoltcp::iface::SocketSet;
use libatoll::net::smoltcp::socket::udp;
use libatoll::net::{ServerOptions, Stack, QEMU_GUEST_ADDRESS};
use libatoll::println;

const USAGE: &str =
    "usage: udpecho [--port P] [--count N] [--seconds S] [--kernel-core C | --polling-core C]   \
     (P 1-65535, default 7; N 1-1000000000, default 10; S 1-600, default 30)";

/// Datagrams each socket buffer holds, and their bytes.
const SLOTS: usize = 16;
const SLOT_BYTES: usize = 1500;

fn main() -> i32 {
    let mut buf = [0u8; 128];
    let defaults = ServerOptions::new(7, 10, 30, 1);
    // One stack: `--stacks` is tcpsvc's.
    let Some(opts) = ServerOptions::parse(libatoll::args(&mut buf), defaults, 600, false)
        .filter(|o| o.stacks == 1)
    else {
        println!("{USAGE}");
        return 2;
    };
    let mut stack = match Stack::open_with(Some(QEMU_GUEST_ADDRESS), opts.device) {
        Ok(stack) => stack,
        Err(e) => {
            println!("udpecho: {e}");
            return 1;
        }
    };
    let buffer = || {
        udp::PacketBuffer::new(
            vec![udp::PacketMetadata::EMPTY; SLOTS],
            vec![0u8; SLOTS * SLOT_BYTES],
        )
    };
    let mut socket = udp::Socket::new(buffer(), buffer());
    if let Err(e) = socket.bind(opts.port) {
        println!("udpecho: cannot bind port {}: {e}", opts.port);
        return 2;
    }
    let mut sockets = SocketSet::new(Vec::new());
    let handle = sockets.add(socket);
    println!(
        "udpecho: listening on 10.0.2.15:{} for {} datagrams, {} s",
        opts.port, opts.count, opts.seconds
    );
    let (mut echoed, mut bytes) = (0u64, 0u64);
    let mut datagram = [0u8; SLOT_BYTES];
    while echoed < opts.count && stack.clock.micros() < opts.seconds * 1_000_000 {
        stack.poll(&mut sockets);
        let socket = sockets.get_mut::<udp::Socket>(handle);
        while echoed < opts.count && socket.can_recv() && socket.can_send() {
            let Ok((n, meta)) = socket.recv_slice(&mut datagram) else { break };
            if socket.send_slice(&datagram[..n], meta.endpoint).is_ok() {
                echoed += 1;
                bytes += n as u64;
            }
        }
        if !socket.can_recv() {
            libatoll::thread::yield_now();
        }
    }
    // The last echoes may wait for the sender's address to be resolved: poll until they
    // have left (at most a second more).
    let drain_until = stack.clock.micros() + 1_000_000;
    loop {
        stack.poll(&mut sockets);
        if sockets.get::<udp::Socket>(handle).send_queue() == 0
            || stack.clock.micros() > drain_until
        {
            break;
        }
        libatoll::thread::yield_now();
    }
    println!("udpecho: echoed {echoed} datagrams ({bytes} bytes)");
    if echoed == opts.count {
        0
    } else {
        1
    }
}

libatoll::main!(main);
