//! `netconf [--seconds N] [--check]`: configures the network by DHCP with a TCP/IP stack
//! of this program's own (smoltcp over the network device, `libatoll::net`), and prints
//! the lease: on QEMU's user network, `address 10.0.2.15/24`. Gives up after N seconds
//! (default 10, at most 600): exit 1; no network device: exit 1; bad arguments: exit 2.
//! `--check` first gives `device_send` and `device_receive` bad arguments (wild pointers,
//! bad lengths, a device that is not the NIC) and exits 3 unless each gets its error.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec::Vec;
use libatoll::net::smoltcp::iface::SocketSet;
use libatoll::net::smoltcp::socket::dhcpv4;
use libatoll::net::{Nic, Stack};
use libatoll::println;

const USAGE: &str = "usage: netconf [--seconds N] [--check]   (N from 1 to 600; default 10)";

fn main() -> i32 {
    let mut buf = [0u8; 128];
    let args = libatoll::args(&mut buf);
    let (seconds, check) = match parse(args) {
        Some(s) => s,
        None => {
            println!("{USAGE}");
            return 2;
        }
    };
    let mut stack = match Stack::open(None) {
        Ok(stack) => stack,
        Err(e) => {
            println!("netconf: {e}");
            return 1;
        }
    };
    if check {
        if let Err(what) = hostile_calls(&stack.nic) {
            println!("netconf: {what}");
            return 3;
        }
        println!("netconf: bad arguments refused");
    }
    let mac = stack.nic.mac();
    let mut sockets = SocketSet::new(Vec::new());
    let dhcp = sockets.add(dhcpv4::Socket::new());
    let deadline_us = seconds * 1_000_000;
    while stack.clock.micros() < deadline_us {
        stack.poll(&mut sockets);
        if let Some(dhcpv4::Event::Configured(lease)) =
            sockets.get_mut::<dhcpv4::Socket>(dhcp).poll()
        {
            let gateway = lease.router.map(|r| alloc::format!("{r}"));
            println!(
                "netconf: mac {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}; address {}, gateway {} \
                 (dhcp, {} ms)",
                mac[0],
                mac[1],
                mac[2],
                mac[3],
                mac[4],
                mac[5],
                lease.address,
                gateway.as_deref().unwrap_or("none"),
                stack.clock.micros() / 1000
            );
            return 0;
        }
        libatoll::thread::yield_now();
    }
    println!("netconf: no DHCP lease in {seconds} s");
    1
}

/// `--seconds N` and `--check`, or nothing.
fn parse(args: &str) -> Option<(u64, bool)> {
    let mut words = args.split_whitespace();
    let (mut seconds, mut check) = (10, false);
    while let Some(w) = words.next() {
        match w {
            "--seconds" => {
                seconds = words.next()?.parse().ok().filter(|s| (1..=600).contains(s))?
            }
            "--check" => check = true,
            _ => return None,
        }
    }
    Some((seconds, check))
}

/// Bad arguments to the frame calls, each with the error it must get.
fn hostile_calls(nic: &Nic) -> Result<(), alloc::string::String> {
    use libatoll::abi::{
        self,
        Error::{BadAddress, InvalidArgument, NoSuchObject, NotPermitted},
    };
    use libatoll::sys::syscall5;
    let (s, o) = nic.object();
    let frame = [0u8; 64];
    let good = frame.as_ptr() as u64;
    let kernel = 0xffff_8000_0000_0000u64;
    let cases: [(&str, u64, u64, u64, u64, u64, abi::Error); 8] = [
        ("send of 0 bytes", abi::nr::DEVICE_SEND, s, o, good, 0, InvalidArgument),
        ("send of 13 bytes", abi::nr::DEVICE_SEND, s, o, good, 13, InvalidArgument),
        ("send of 1515 bytes", abi::nr::DEVICE_SEND, s, o, good, 1515, InvalidArgument),
        ("send from address 16", abi::nr::DEVICE_SEND, s, o, 16, 64, BadAddress),
        ("send from the kernel", abi::nr::DEVICE_SEND, s, o, kernel, 64, BadAddress),
        (
            "send through a share that is not",
            abi::nr::DEVICE_SEND,
            0xdead,
            o,
            good,
            64,
            NoSuchObject,
        ),
        ("receive through no object", abi::nr::DEVICE_RECEIVE, s, 0xbeef, good, 64, NoSuchObject),
        ("send of u64::MAX bytes", abi::nr::DEVICE_SEND, s, o, good, u64::MAX, InvalidArgument),
    ];
    for (what, call, a, b, ptr, len, want) in cases {
        match syscall5(call, a, b, ptr, len, 0) {
            Err(e) if e == want => {}
            other => return Err(alloc::format!("{what}: {other:?}, expected Err({want:?})")),
        }
    }
    // A device object that is not the network device (the serial console, hwid 1).
    let root = libatoll::obj::root_share();
    let serial = libatoll::obj::device_alloc(root, 1).map_err(|e| alloc::format!("{e:?}"))?;
    let got = syscall5(abi::nr::DEVICE_SEND, root, serial, good, 64, 0);
    let _ = libatoll::obj::share_delobj(libatoll::obj::ObjRef::new(root, serial));
    if got != Err(NotPermitted) {
        return Err(alloc::format!("send through the serial device: {got:?}"));
    }
    Ok(())
}

libatoll::main!(main);
