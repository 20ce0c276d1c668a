//! `kcoretest [leave | claim]`: checks kernel cores and syscall devices (Corey §3.2, §4.4).
//!
//! With no argument: every bad argument of `device_buf`, `device_conf`,
//! `pcore_add_device` and a kernel-core `pcore_run` gets its error; a kernel core on
//! another core serves 1000 null calls through a syscall device, in order, pipelined too;
//! an unknown call gets `NoSuchCall`, a network call without the network device on the
//! kernel core's list `NotPermitted`; a polled device's buffers and a running kernel
//! core's list cannot change (`Busy`); once the kernel core is stopped a call fails with
//! `TimedOut` instead of waiting, the core can be named again, and the device needs a new
//! ring before another kernel core takes it. Prints `kcoretest: ok` or `FAIL <why>`.
//!
//! `leave`: starts a kernel core on another core and exits without stopping it.
//! `claim`: allocates that core's pcore (exit 0), which works only once the kernel core
//! left behind has stopped by itself (its pcore object went with its program).
#![no_std]
#![no_main]

use libatoll::abi::sysdev::{buf_type, call, conf, PCORE_DEVICES_MAX, SYSCALL_HWID};
use libatoll::abi::{Error, PcoreRun};
use libatoll::cfork::patiently;
use libatoll::kcore::{KernelCore, SyscallRing};
use libatoll::obj::{
    self, device_alloc, device_buf, device_conf, device_stat, pcore_add_device, pcore_alloc,
    pcore_run, pcore_status, segment_alloc, share_delobj,
};
use libatoll::{args, cores_online, pcore_current, println, ObjRef, Status};

const HELP: &str = "usage: kcoretest [leave | claim]";
/// Hardware id of core 0's timer (a device no kernel core can poll).
const TIMER_HWID: u64 = 16;

fn main() -> i32 {
    let line = args::arg_string();
    let mode = line.trim();
    if !matches!(mode, "" | "leave" | "claim") {
        println!("{HELP}");
        return if mode == "--help" { 0 } else { 2 };
    }
    let result = match mode {
        "leave" => leave(),
        "claim" => claim(),
        _ => {
            return libatoll::cores::two_core_test("kcoretest", None, || {
                bad_arguments()?;
                serves_calls()
            })
        }
    };
    match result {
        Ok(()) => 0,
        Err(why) => {
            println!("kcoretest {mode}: FAIL {why}");
            1
        }
    }
}

/// A core other than the caller's.
fn other_core() -> Result<usize, &'static str> {
    let me = pcore_current();
    (0..cores_online()).find(|&c| c != me).ok_or("no other core")
}

/// Checks `got` is `want`.
fn want(got: Result<u64, Error>, want: Error, what: &'static str) -> Result<(), &'static str> {
    if got == Err(want) {
        Ok(())
    } else {
        println!("kcoretest: {what}: {got:?}, expected {want:?}");
        Err(what)
    }
}

/// Every bad argument gets its error; nothing is left behind.
fn bad_arguments() -> Result<(), &'static str> {
    let root = obj::root_share();
    let dev = ObjRef::new(root, device_alloc(root, SYSCALL_HWID).map_err(|_| "device_alloc")?);
    let seg = ObjRef::new(root, segment_alloc(root, 2 * 4096).map_err(|_| "segment_alloc")?);
    let timer = ObjRef::new(root, device_alloc(root, TIMER_HWID).map_err(|_| "timer")?);
    let nothing = ObjRef::new(root, 0xdead);
    want(device_buf(dev, seg, 1, buf_type::RING), Error::InvalidArgument, "unaligned ring")?;
    want(device_buf(dev, seg, 0, 9), Error::InvalidArgument, "unknown buffer type")?;
    want(device_buf(dev, seg, 2 * 4096, buf_type::RING), Error::InvalidArgument, "ring past end")?;
    want(device_buf(dev, seg, 1 << 40, buf_type::PACKETS), Error::InvalidArgument, "far offset")?;
    want(device_buf(timer, seg, 0, buf_type::RING), Error::InvalidArgument, "a timer's ring")?;
    want(device_buf(dev, nothing, 0, buf_type::RING), Error::NoSuchObject, "no segment")?;
    want(device_buf(nothing, seg, 0, buf_type::RING), Error::NoSuchObject, "no device")?;
    want(device_buf(seg, dev, 0, buf_type::RING), Error::InvalidArgument, "swapped objects")?;
    want(device_conf(dev, 99, 0), Error::InvalidArgument, "unknown conf")?;
    want(device_conf(dev, conf::NET_ADDRESS, 1 << 40), Error::InvalidArgument, "wide address")?;
    want(device_conf(timer, conf::NET_ADDRESS, 1), Error::InvalidArgument, "a timer's conf")?;
    device_conf(dev, conf::NET_ADDRESS, 0x0a00_020f).map_err(|_| "device_conf refused")?;
    device_buf(dev, seg, 0, buf_type::RING).map_err(|_| "device_buf(RING) refused")?;
    device_buf(dev, seg, 4096, buf_type::PACKETS).map_err(|_| "device_buf(PACKETS) refused")?;

    let other = other_core()?;
    let pcore = ObjRef::new(
        root,
        patiently(|| pcore_alloc(root, other)).map_err(|_| "pcore_alloc failed")?,
    );
    want(pcore_add_device(pcore, timer), Error::InvalidArgument, "a timer on a kernel core")?;
    want(pcore_add_device(pcore, nothing), Error::NoSuchObject, "no device on a kernel core")?;
    want(pcore_add_device(dev, dev), Error::InvalidArgument, "a device as the pcore")?;
    pcore_add_device(pcore, dev).map_err(|_| "pcore_add_device refused")?;
    want(pcore_add_device(pcore, dev), Error::InvalidArgument, "the same device twice")?;
    let mut more = [dev; PCORE_DEVICES_MAX];
    for m in more.iter_mut().skip(1) {
        *m = ObjRef::new(root, device_alloc(root, SYSCALL_HWID).map_err(|_| "device_alloc")?);
        pcore_add_device(pcore, *m).map_err(|_| "pcore_add_device refused below the limit")?;
    }
    let extra = ObjRef::new(root, device_alloc(root, SYSCALL_HWID).map_err(|_| "device_alloc")?);
    want(pcore_add_device(pcore, extra), Error::NoResources, "a device past the limit")?;
    let mut run =
        PcoreRun { pcore: [pcore.share, pcore.object], flags: 1 << 5, ..PcoreRun::default() };
    want(pcore_run(&run), Error::InvalidArgument, "unknown flags")?;
    run.flags = PcoreRun::KERNEL_CORE;
    run.entry = 0x40_0000;
    want(pcore_run(&run), Error::InvalidArgument, "a kernel core with an entry")?;
    // Seven of its devices have no ring: the kernel core refuses to start, on its core.
    run.entry = 0;
    pcore_run(&run).map_err(|_| "pcore_run(KERNEL_CORE) refused")?;
    let status = loop {
        match pcore_status(pcore) {
            Ok(Status::Running | Status::Idle) => core::hint::spin_loop(),
            other => break other,
        }
    };
    if status != Ok(Status::Failed) {
        println!("kcoretest: a kernel core with ringless devices: {status:?}");
        return Err("a kernel core with devices without a ring did not fail");
    }
    for o in more.iter().skip(1).chain([&extra, &timer, &seg, &dev, &pcore]) {
        share_delobj(*o).map_err(|_| "share_delobj failed")?;
    }
    Ok(())
}

/// A kernel core serves calls through a syscall device, then stops.
fn serves_calls() -> Result<(), &'static str> {
    let other = other_core()?;
    let mut ring = SyscallRing::new(4096).map_err(|_| "SyscallRing::new failed")?;
    let kc = start_patiently(other, &[ring.device()])?;
    ring.served_by(&kc);
    for i in 0..1000 {
        if ring.call(call::NULL, &[i]) != Ok(0) {
            return Err("a null call through the ring did not return 0");
        }
    }
    // Sixteen in flight, answered in order.
    let mut cookies = [0u64; 16];
    for c in cookies.iter_mut() {
        *c = ring.post(call::NULL, &[]).map_err(|_| "post refused with room")?;
    }
    for &c in cookies.iter() {
        let reply = loop {
            if let Some(r) = ring.reply() {
                break r;
            }
            core::hint::spin_loop();
        };
        if reply != (c, Ok(0)) {
            return Err("pipelined replies out of order");
        }
    }
    want(ring.call(77, &[]), Error::NoSuchCall, "an unknown call")?;
    want(ring.call(call::NET_SEND, &[0, 60]), Error::NotPermitted, "a send with no NIC")?;
    let root = obj::root_share();
    let seg = ObjRef::new(root, segment_alloc(root, 4096).map_err(|_| "segment_alloc")?);
    want(device_buf(ring.device(), seg, 0, buf_type::RING), Error::Busy, "a polled ring")?;
    let extra = ObjRef::new(root, device_alloc(root, SYSCALL_HWID).map_err(|_| "device_alloc")?);
    want(pcore_add_device(kc.pcore(), extra), Error::Busy, "a running kernel core's list")?;
    let served = device_stat(ring.device()).map_err(|_| "device_stat")?.count;
    if served < 1017 {
        return Err("device_stat counted fewer calls than were served");
    }
    kc.stop();
    want(ring.call(call::NULL, &[]), Error::TimedOut, "a call after the kernel core stopped")?;
    // The device lost its ring with its kernel core: a new one is refused until fed.
    let again = KernelCore::start(other, &[ring.device()]);
    if again.as_ref().err() != Some(&Error::InvalidArgument) {
        println!("kcoretest: a new kernel core on a used ring: {:?}", again.as_ref().err());
        return Err("a kernel core took a device whose ring was mid-stream");
    }
    drop(again);
    for o in [extra, seg] {
        share_delobj(o).map_err(|_| "share_delobj failed")?;
    }
    Ok(())
}

/// [`KernelCore::start`], waiting while an earlier user of the core lets go of its pcore.
fn start_patiently(core: usize, devices: &[ObjRef]) -> Result<KernelCore, &'static str> {
    for _ in 0..1000 {
        match KernelCore::start(core, devices) {
            Ok(k) => return Ok(k),
            Err(Error::NotPermitted | Error::Busy) => {
                let _ = libatoll::thread::sleep_us(1000);
            }
            Err(e) => {
                println!("kcoretest: KernelCore::start: {e:?}");
                return Err("the kernel core did not start");
            }
        }
    }
    Err("the core's pcore stayed taken")
}

/// Starts a kernel core on another core and leaves it running.
fn leave() -> Result<(), &'static str> {
    let ring = SyscallRing::new(0).map_err(|_| "SyscallRing::new failed")?;
    let kc = start_patiently(other_core()?, &[ring.device()])?;
    core::mem::forget(kc);
    core::mem::forget(ring);
    Ok(())
}

/// Names the other core's pcore once the kernel core left there has stopped.
fn claim() -> Result<(), &'static str> {
    let root = obj::root_share();
    let other = other_core()?;
    for _ in 0..2000 {
        match pcore_alloc(root, other) {
            Ok(p) => {
                let _ = share_delobj(ObjRef::new(root, p));
                return Ok(());
            }
            Err(_) => {
                let _ = libatoll::thread::sleep_us(1000);
            }
        }
    }
    Err("the core's pcore stayed taken: the kernel core left behind still runs")
}

libatoll::main!(main);
