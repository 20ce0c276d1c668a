//! Layer tests of the device drivers (issue M12): the virtio network device sends and
//! receives, on QEMU's user network (`restrict=on`: the VM reaches no one but QEMU's own
//! gateway, 10.0.2.2).

use super::balance::balanced;
use super::skip;
use crate::drivers::virtio_net::{self, NetError, MAX_FRAME};
use crate::kernel_test;
use crate::thread::ExitStatus;
use alloc::format;
use alloc::string::String;

kernel_test!(ARP, "net.virtio_arp_is_answered", 1, Shared, arp_is_answered);
kernel_test!(DHCP, "user.netconf_gets_a_lease", 1, Shared, netconf_gets_a_lease);
kernel_test!(TCPSVC, "user.tcpsvc_serves_the_host", 1, Shared, tcpsvc_serves_the_host);
kernel_test!(
    TCPSVC_KCORE,
    "user.tcpsvc_serves_through_a_kernel_core",
    2,
    Shared,
    tcpsvc_serves_through_a_kernel_core
);
kernel_test!(
    TCPSVC_POLLING,
    "user.tcpsvc_serves_with_a_polling_core",
    2,
    Shared,
    tcpsvc_serves_with_a_polling_core
);
kernel_test!(
    TCPSVC_OWN,
    "user.tcpsvc_serves_an_address_per_stack",
    2,
    Shared,
    tcpsvc_serves_an_address_per_stack
);
kernel_test!(
    TCPSVC_STACKS,
    "user.tcpsvc_serves_on_two_stacks",
    2,
    Shared,
    tcpsvc_serves_on_two_stacks
);
kernel_test!(UDPECHO, "user.udpecho_counts_the_hosts_datagrams", 1, Shared, udpecho_counts);
kernel_test!(WEBD, "user.webd_serves_the_host", 1, Shared, webd_serves_the_host);
kernel_test!(WEBD_WRK, "user.webd_serves_wrk", 1, Shared, webd_serves_wrk);
kernel_test!(SOCKECHO, "user.sockecho_serves_tcp_and_udp", 1, Shared, sockecho_serves);
kernel_test!(
    WEBD_HOSTILE,
    "user.webd_survives_hostile_clients",
    1,
    Shared,
    webd_survives_hostile_clients
);
kernel_test!(
    WEBD_FRONT_ENDS,
    "user.webd_front_ends_on_two_cores",
    4,
    Shared,
    webd_front_ends_on_two_cores
);
kernel_test!(
    WEBD_FILESUM,
    "user.webd_filesum_on_application_cores",
    2,
    Shared,
    webd_filesum_on_application_cores
);
kernel_test!(
    BAD_ARGS,
    "user.servers_refuse_bad_arguments",
    1,
    Shared,
    servers_refuse_bad_arguments
);

/// QEMU user networking's addresses: the guest's (its DHCP would give it) and the gateway.
const GUEST_IP: [u8; 4] = [10, 0, 2, 15];
const GATEWAY_IP: [u8; 4] = [10, 0, 2, 2];
/// How long the gateway has to answer (it answers at once; TCG on a busy host is slow).
const ANSWER_US: u64 = 5_000_000;

/// An ARP request for the gateway's address, broadcast, sent through the device, is
/// answered with an ARP reply from the gateway to our MAC: frames go out and come in.
/// Bad frames are refused with an error (empty, longer than an Ethernet frame), and the
/// driver's counters moved.
fn arp_is_answered() -> Result<(), String> {
    let Some(info) = virtio_net::info() else {
        return skip(String::from("no virtio network device (QEMU -nic ...,model=virtio-net-pci)"));
    };
    let mac = info.mac;
    if virtio_net::send(&[]) != Err(NetError::BadLength)
        || virtio_net::send(&[0u8; MAX_FRAME + 1]) != Err(NetError::BadLength)
    {
        return Err(String::from("a frame of 0 or 1515 bytes was not refused"));
    }
    let before = virtio_net::stats();
    let mut request = [0u8; 42];
    request[0..6].copy_from_slice(&[0xff; 6]);
    request[6..12].copy_from_slice(&mac);
    request[12..14].copy_from_slice(&[0x08, 0x06]); // ARP
    request[14..22].copy_from_slice(&[0, 1, 0x08, 0x00, 6, 4, 0, 1]); // Ethernet/IPv4, request
    request[22..28].copy_from_slice(&mac);
    request[28..32].copy_from_slice(&GUEST_IP);
    request[38..42].copy_from_slice(&GATEWAY_IP);
    let start = crate::arch::cpu::rdtsc();
    let mut sent = false;
    let mut frame = [0u8; MAX_FRAME];
    while crate::arch::timer::us_since(start) < ANSWER_US {
        if !sent {
            sent = virtio_net::send(&request).map(|_| true).or_else(|e| match e {
                NetError::Full => Ok(false),
                e => Err(format!("send: {e:?}")),
            })?;
        }
        let Some(n) = virtio_net::receive(&mut frame) else {
            crate::arch::cpu::pause();
            continue;
        };
        let f = &frame[..n];
        let is_reply = n >= 42
            && f[0..6] == mac
            && f[12..14] == [0x08, 0x06]
            && f[20..22] == [0, 2]
            && f[28..32] == GATEWAY_IP
            && f[38..42] == GUEST_IP;
        if is_reply {
            let after = virtio_net::stats();
            if after.sent <= before.sent || after.received <= before.received {
                return Err(format!("counters did not move: {before:?} then {after:?}"));
            }
            return Ok(());
        }
    }
    Err(format!("no ARP reply from 10.0.2.2 in {} s (sent: {sent})", ANSWER_US / 1_000_000))
}

/// `netconf --check` (a user program with smoltcp over `device_send`/`device_receive`)
/// gets its error for each bad argument, then a DHCP lease from QEMU's user network:
/// 10.0.2.15/24; every core's frames, heap and objects balance after.
fn netconf_gets_a_lease() -> Result<(), String> {
    if virtio_net::info().is_none() {
        return skip(String::from("no virtio network device (QEMU -nic ...,model=virtio-net-pci)"));
    }
    balanced(|| {
        let (status, text) =
            crate::user::run_capturing("netconf", "--check --seconds 20", 60_000_000)
                .map_err(|e| format!("netconf: could not run: {e:?}"))?;
        if status != ExitStatus::Exited(0)
            || !text.contains("bad arguments refused")
            || !text.contains("address 10.0.2.15/24")
        {
            return Err(format!("netconf ended {status:?}: {text}"));
        }
        Ok(())
    })
}

/// `tcpsvc --count 3` answers three connections from the host (`xtask`'s client, through a
/// forward from 127.0.0.1:P to port 80; its own verdict is `<run>/host-tcpsvc`): 128 bytes
/// each, then the close. Skipped without a NIC.
fn tcpsvc_serves_the_host() -> Result<(), String> {
    served_by("tcpsvc", "--count 3 --seconds 90", "tcpsvc: served 3 connections")
}

/// `tcpsvc --kernel-core 1` (Corey §8.3, Dedicated): a kernel core on another core drives
/// the network device; the server's stack sends and receives its frames through a
/// syscall device. It serves three connections from the host (`host-tcpsvc-kernel-core`,
/// through a forward to port 81), and the kernel core stops with it.
fn tcpsvc_serves_through_a_kernel_core() -> Result<(), String> {
    tcpsvc_with_a_kernel_core("--port 81 --kernel-core")
}

/// `tcpsvc --polling-core 1` (Corey §8.3, Polling): the kernel core only polls the device
/// for received frames (handed over through a syscall device) and transmit completions;
/// the server posts its sends by trap. Three connections from the host, port 82.
fn tcpsvc_serves_with_a_polling_core() -> Result<(), String> {
    tcpsvc_with_a_kernel_core("--port 82 --polling-core")
}

/// `tcpsvc --stacks 2 --kernel-core 1`: two stacks of one address (both threads on this
/// run's other core), the kernel core steering each connection to one by a hash of its
/// flow (software RSS); three connections from the host, port 83, served between them.
fn tcpsvc_serves_on_two_stacks() -> Result<(), String> {
    tcpsvc_with_a_kernel_core("--port 83 --stacks 2 --kernel-core")
}

/// `tcpsvc --stacks 2 --addresses own --kernel-core 1` (Corey §5.2, an address per
/// stack): stacks of 10.0.2.15 and 10.0.2.16, the kernel core steering by address; the
/// host reaches each through a forward of its own (`host-tcpsvc-10.0.2.15` and `.16`, port
/// 84), three connections each.
fn tcpsvc_serves_an_address_per_stack() -> Result<(), String> {
    tcpsvc_serving(6, "--port 84 --stacks 2 --addresses own --kernel-core")
}

/// `tcpsvc --count 3 <args> C`, C a core other than this one.
fn tcpsvc_with_a_kernel_core(args: &str) -> Result<(), String> {
    tcpsvc_serving(3, args)
}

/// `tcpsvc --count N <args> C`, C a core other than this one: N connections served.
fn tcpsvc_serving(n: u32, args: &str) -> Result<(), String> {
    let me = crate::percpu::this_core().index;
    let Some(other) = crate::smp::online_cores().into_iter().find(|&c| c != me) else {
        return skip(String::from("one core"));
    };
    let args = format!("--count {n} --seconds 90 {args} {other}");
    served_by("tcpsvc", &args, &format!("tcpsvc: served {n} connections"))
}

/// `udpecho --count 3` receives three of the host's datagrams (sent every 50 ms through a
/// forward to port 7) and sends each back (QEMU drops the echoes under `restrict=on`).
fn udpecho_counts() -> Result<(), String> {
    served_by("udpecho", "--count 3 --seconds 90", "udpecho: echoed 3 datagrams")
}

/// `webd --port 8080 --count 6` answers the host's six requests (`xtask`'s client through
/// a forward to port 8080: `GET /` kept alive, `HEAD /hello`, a 404, an HTTP/1.0 GET, a
/// 405 and a 400; its own verdict is `<run>/host-webd`).
fn webd_serves_the_host() -> Result<(), String> {
    served_by("webd", "--port 8080 --count 6 --seconds 90", "webd: 6 responses")
}

/// `webd --port 8085 --idle 3` serves the host's short `wrk` (16 connections for 2 s; its
/// own verdict is `<run>/host-webd-wrk`: every response 2xx, no socket error) and stops
/// 3 s after the load ended, exit 0, having dropped no frame on its way out (a loaded
/// stack once dropped frames while the device's send buffers were all in flight).
fn webd_serves_wrk() -> Result<(), String> {
    served_by(
        "webd",
        "--port 8085 --count 1000000 --seconds 100 --idle 3",
        "webd: the stack on core 0 dropped 0 frames",
    )
}

/// `sockecho --port 8087 --count 3 --datagrams 3` (libatoll's sockets: listen, accept,
/// read, write, close, UDP's recv_from and send_to, and a wait on all of them) echoes the
/// host's three TCP connections (`<run>/host-sockecho-tcp` checks each echo and close) and
/// three of its datagrams, then exits 0.
fn sockecho_serves() -> Result<(), String> {
    served_by(
        "sockecho",
        "--port 8087 --count 3 --datagrams 3 --seconds 90",
        "sockecho: 3 connections",
    )
}

/// `webd --port 8086 --idle 5` meets the host's hostile clients (`netclient::hostile`:
/// slowloris gets 408, a 64 KB header 431, garbage 400, 40 connections at once and
/// 2,000 random requests their statuses or a close, and `GET /` is served between
/// each; its own verdict is `<run>/host-webd-hostile`), then stops once they are done,
/// exit 0, having dropped no frame.
fn webd_survives_hostile_clients() -> Result<(), String> {
    served_by(
        "webd",
        "--port 8086 --count 1000000 --seconds 110 --idle 5",
        "webd: the stack on core 0 dropped 0 frames",
    )
}

/// `webd --apps 1` in both modes (Corey §6.2): filesum requests from the host's client
/// (`<run>/host-filesum-*`: four sums of the disk's `/www/index.html`, a 404 and a 414)
/// answered by an application core on core 1, which maps the file; each webd exits 0
/// after six responses, its application core ended well. Not `balanced`: the disk's
/// buffer cache keeps what it read.
fn webd_filesum_on_application_cores() -> Result<(), String> {
    if virtio_net::info().is_none() || crate::drivers::virtio_blk::info().is_none() {
        return skip(String::from("no network device and disk (run `web-disk` has both)"));
    }
    for (port, mode) in [(8081, "locality"), (8082, "random")] {
        let args = format!("--port {port} --count 6 --seconds 90 --apps 1 --mode {mode}");
        let (status, text) = crate::user::run_capturing("webd", &args, 120_000_000)
            .map_err(|e| format!("webd: could not run: {e:?}"))?;
        if status != ExitStatus::Exited(0) || !text.contains("webd: 6 responses") {
            return Err(format!("webd {args} ended {status:?}: {text}"));
        }
    }
    Ok(())
}

/// Corey §6.2's whole webd (run `web-disk4`): a kernel core on core 3 drives the NIC, two
/// front ends on cores 0 and 1 each run a stack of their own at 10.0.2.15 (the kernel
/// core steering each flow to one), and an application core on core 2 sums the files.
/// The host's two filesum clients (`host-front-ends-a`, `-b`) get their six answers each;
/// webd exits 0 after twelve responses in all.
fn webd_front_ends_on_two_cores() -> Result<(), String> {
    if virtio_net::info().is_none() || crate::drivers::virtio_blk::info().is_none() {
        return skip(String::from("no network device and disk (run `web-disk4` has both)"));
    }
    let args = "--port 8083 --count 12 --seconds 90 --kernel-core 3 --stacks 2 --apps 2";
    let (status, text) = crate::user::run_capturing("webd", args, 120_000_000)
        .map_err(|e| format!("webd: could not run: {e:?}"))?;
    if status != ExitStatus::Exited(0) || !text.contains("webd: 12 responses") {
        return Err(format!("webd {args} ended {status:?}: {text}"));
    }
    Ok(())
}

/// Runs server `name` with `args` (a host client talks to it meanwhile): it must exit 0
/// and print `done`; everything balances after.
fn served_by(name: &str, args: &str, done: &str) -> Result<(), String> {
    if virtio_net::info().is_none() {
        return skip(String::from("no virtio network device (a run with host clients has one)"));
    }
    balanced(|| {
        let (status, text) = crate::user::run_capturing(name, args, 120_000_000)
            .map_err(|e| format!("{name}: could not run: {e:?}"))?;
        if status != ExitStatus::Exited(0) || !text.contains(done) {
            return Err(format!("{name} ended {status:?}: {text}"));
        }
        Ok(())
    })
}

/// The network programs refuse bad arguments with their usage (exit 2) before they touch
/// the network (so in every run, NIC or not): values out of range, unknown options, a
/// `--backlog` for `udpecho` (UDP has none), a missing value.
fn servers_refuse_bad_arguments() -> Result<(), String> {
    let cases: [(&str, &str); 23] = [
        ("sockecho", "--datagrams -1"),
        ("sockecho", "--stacks 2"),
        ("sockecho", "--backlog 0"),
        ("webd", "--port 0"),
        ("webd", "--idle 0"),
        ("webd", "--idle 601"),
        ("webd", "--idle"),
        ("webd", "--seconds 3601"),
        ("webd", "--backlog 65"),
        ("webd", "--count"),
        // Application cores and front ends: the caller's own core, a core past any, a
        // mode without cores, an unknown mode, cores past any, no list, several front
        // ends without a kernel core.
        ("webd", "--apps 0"),
        ("webd", "--apps 99"),
        ("webd", "--mode random"),
        ("webd", "--apps 1 --mode sideways"),
        ("webd", "--apps 1-9"),
        ("webd", "--apps"),
        ("webd", "--stacks 2"),
        ("tcpsvc", "--count 0"),
        ("tcpsvc", "--seconds 601"),
        ("tcpsvc", "--bogus 1"),
        ("udpecho", "--backlog 2"),
        ("udpecho", "--port 65536"),
        ("netconf", "--seconds 0"),
    ];
    balanced(|| {
        for (name, args) in cases {
            super::user::expect(name, args, ExitStatus::Exited(2))
                .map_err(|e| format!("`{name} {args}`: {e}"))?;
        }
        Ok(())
    })
}
