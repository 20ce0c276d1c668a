//! `revoketest` (issue M9): `obj_revoke` takes an object back from every share on every
//! core, by two-phase commit among the cores, except the one entry it names. A thread on
//! core 1 names a segment through the share the program's threads hold in common; core 0
//! revokes it, keeping its root-share entry: afterwards the thread can no longer name it,
//! core 0's own descriptor of it is gone too, and the kept entry still works. Shared again
//! afterwards, the thread names it again (a late catch-up never takes a newer entry). Bad
//! arguments are refused.
//!
//! Then the race of issue M14, forced: a thread on core 1 sits in one long system call
//! (a `segment_copy` of several MiB), so a `program_run` start sent there waits; the start
//! is to give the new program a segment, which core 0 revokes meanwhile (core 1 votes and
//! commits from inside its call). When core 1 serves the start, after the revocation, the
//! new program (`revoketest given`) must not hold the segment: it does not start, or it
//! starts without it (`revoketest given` exits 3 if it holds what it was given).
//!
//! Prints `revoketest: ok`, `revoketest: FAIL <why>` (exit 1), or `revoketest: skipped (1
//! core)`.
#![no_std]
#![no_main]

use core::sync::atomic::{AtomicU64, Ordering::*};
use libatoll::abi::Error;
use libatoll::obj::{self, root_share, segment_alloc, ObjRef};
use libatoll::println;
use libatoll::thread::Builder;

const HELP: &str = "usage: revoketest   (no arguments; needs 2 cores)";

/// The race test's long call: set once the thread on core 1 is about to make it, once it
/// returned, and (instead of both) when there was no memory to set it up.
static IN_CALL: AtomicU64 = AtomicU64::new(0);
static CALL_DONE: AtomicU64 = AtomicU64::new(0);
static NO_ROOM: AtomicU64 = AtomicU64::new(0);

/// The segment's id and the common share's, for the thread.
static SEG: AtomicU64 = AtomicU64::new(0);
static HOME: AtomicU64 = AtomicU64::new(0);
/// Where the two sides are: core 0 sets 0 (the ids are published), 1 (revoked) and 2
/// (shared again); the thread sets 10 + n once it has checked phase n, or 99 on a failure.
static PHASE: AtomicU64 = AtomicU64::new(NOT_YET);
const NOT_YET: u64 = u64::MAX;
static SEEN: AtomicU64 = AtomicU64::new(0);

fn main() -> i32 {
    // The program the race test starts: whether it holds the object it was given.
    if libatoll::args::arg_string().trim() == "given" {
        return match libatoll::given_object() {
            Some(given) if obj::obj_get_name(given).is_ok() => 3,
            _ => 0,
        };
    }
    libatoll::cores::two_core_test("revoketest", Some(HELP), || {
        run()?;
        escape()
    })
}

/// The thread on core 1 for [`escape`]: `mib` MiB written, then copied in one call.
fn long_call(mib: u64) -> i32 {
    let Ok(m) = libatoll::private::map_new(mib << 20) else {
        NO_ROOM.store(1, Release);
        return 1;
    };
    let mut va = m.va;
    while va < m.va + m.bytes {
        // SAFETY: a fresh read-write mapping of our own root range.
        unsafe { core::ptr::write_volatile(va as *mut u64, va) };
        va += 4096;
    }
    let Some(seg) = libatoll::private::named(m.segment) else {
        NO_ROOM.store(1, Release);
        return 1;
    };
    IN_CALL.store(1, Release);
    let copy = obj::segment_copy(root_share(), seg, libatoll::abi::copy_mode::PLAIN);
    match copy {
        Ok(copy) => {
            CALL_DONE.store(1, Release);
            let _ = obj::share_delobj(ObjRef::new(root_share(), copy));
        }
        // Refused at once (no room for the copy): no long call was made.
        Err(_) => {
            NO_ROOM.store(1, Release);
            CALL_DONE.store(1, Release);
        }
    }
    0
}

/// The forced race (see the module comment); tries with a longer call each time, should
/// core 1's call end before the revocation did. A machine whose core 1 has no room for a
/// call long enough cannot force it, and says so.
fn escape() -> Result<(), &'static str> {
    let root = root_share();
    let pcore = ObjRef::new(
        root,
        libatoll::cfork::patiently(|| obj::pcore_alloc(root, 1)).map_err(|_| "pcore_alloc(1)")?,
    );
    // Above 4 vCPUs (on a host of 2 CPUs under TCG) the agreement among every core can
    // outlast any copy core 1 has room for: a try that was not forced says so below.
    let mut result = if libatoll::cores_online() > 4 {
        Ok(())
    } else {
        Err("the start never waited for core 1's long call")
    };
    for mib in [1, 4, 16] {
        match escape_once(root, pcore, mib) {
            Ok(Some(true)) => {
                FORCED.store(true, Release);
                result = Ok(());
                break;
            }
            Ok(Some(false)) => continue, // the call ended first: not forced
            Ok(None) => {
                println!("revoketest: the start race was not forced (no room for a {mib} MiB call on core 1)");
                result = Ok(());
                break;
            }
            Err(why) => {
                result = Err(why);
                break;
            }
        }
    }
    let _ = obj::share_delobj(pcore);
    if result.is_ok() && !FORCED.load(Acquire) {
        println!("revoketest: the start race was not forced at {} cores", libatoll::cores_online());
    }
    result
}

/// Whether a try of [`escape`] forced the race.
static FORCED: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// One try: whether the race was forced (and the segment stayed out of the new program),
/// or `None` if core 1 had no room for the call.
fn escape_once(root: u64, pcore: ObjRef, mib: u64) -> Result<Option<bool>, &'static str> {
    IN_CALL.store(0, Release);
    CALL_DONE.store(0, Release);
    NO_ROOM.store(0, Release);
    let busy = Builder::new()
        .core(1)
        .affinity(1 << 1)
        .spawn(move || long_call(mib))
        .map_err(|_| "no thread on core 1")?;
    while IN_CALL.load(Acquire) == 0 {
        if NO_ROOM.load(Acquire) != 0 {
            let _ = busy.join();
            return Ok(None);
        }
        core::hint::spin_loop();
    }
    let seg = segment_alloc(root, 4096).map_err(|_| "segment_alloc failed")?;
    let given = ObjRef { share: root, object: seg };
    let started = obj::program_run_giving(pcore, "revoketest given", seg);
    let revoked = obj::obj_revoke(given);
    let forced = CALL_DONE.load(Acquire) == 0;
    let _ = busy.join();
    let no_room = NO_ROOM.load(Acquire) != 0;
    let _ = obj::share_delobj(given);
    started.map_err(|_| "program_run failed")?;
    revoked.map_err(|_| "obj_revoke failed")?;
    let status = loop {
        match obj::pcore_status(pcore) {
            Ok(libatoll::Status::Running) => core::hint::spin_loop(),
            Ok(status) => break status,
            Err(_) => return Err("pcore_status failed"),
        }
    };
    match status {
        libatoll::Status::Exited(3) => {
            Err("a given object escaped a revocation committed before it was given")
        }
        libatoll::Status::Exited(0) | libatoll::Status::Failed if no_room => Ok(None),
        libatoll::Status::Exited(0) | libatoll::Status::Failed => Ok(Some(forced)),
        _ => Err("revoketest given ended oddly"),
    }
}

libatoll::main!(main);

/// Waits until the thread reports `n` (true) or a failure / 20 s (false).
fn wait_seen(n: u64) -> bool {
    let start = libatoll::rdtsc();
    loop {
        match SEEN.load(Acquire) {
            s if s == n => return true,
            99 => return false,
            _ if libatoll::rdtsc() - start > 40_000_000_000 => return false,
            _ => core::hint::spin_loop(),
        }
    }
}

/// What the thread on core 1 does: name the segment through the common share, and through
/// its own root share (whose entry only its own core can take out), before the
/// revocation (yes), after it (no), and through the common share after it was shared
/// again (yes).
fn thread() -> i32 {
    while PHASE.load(Acquire) == NOT_YET {
        core::hint::spin_loop();
    }
    let at = ObjRef { share: HOME.load(Acquire), object: SEG.load(Acquire) };
    // Its own root share's entry.
    let own = ObjRef { share: root_share(), object: at.object };
    if obj::share_addobj(root_share(), at).is_err() {
        println!("revoketest: core 1: share_addobj to its root share failed");
        SEEN.store(99, Release);
        return 1;
    }
    for (phase, want) in [(0, true), (1, false), (2, true)] {
        while PHASE.load(Acquire) != phase {
            core::hint::spin_loop();
        }
        // Its root entry stays revoked after the segment is shared again.
        let checks = [(own, want && phase == 0), (at, want)];
        for (what, want) in checks {
            let named = obj::obj_get_name(what);
            let ok = match named {
                Ok(_) => want,
                Err(Error::NoSuchObject) => !want,
                Err(_) => false,
            };
            if !ok {
                println!(
                    "revoketest: core 1, phase {phase}: obj_get_name({what:?}) gave {named:?}"
                );
                SEEN.store(99, Release);
                return 1;
            }
        }
        SEEN.store(10 + phase, Release);
    }
    0
}

fn run() -> Result<(), &'static str> {
    let root = root_share();
    let seg = segment_alloc(root, 4096).map_err(|_| "segment_alloc failed")?;
    let kept = ObjRef { share: root, object: seg };
    let reader = Builder::new().core(1).affinity(1 << 1).spawn(thread).map_err(|_| "no thread")?;
    // Threads run: the common share is set now.
    let home = obj::home_share();
    let result = (|| {
        if home == root {
            return Err("no common share while a thread runs");
        }
        obj::share_addobj(home, kept).map_err(|_| "share_addobj to the common share failed")?;
        let desc = obj::share_dupobj(root, kept).map_err(|_| "share_dupobj failed")?;
        SEG.store(seg, Release);
        HOME.store(home, Release);
        PHASE.store(0, Release);
        if !wait_seen(10) {
            return Err("core 1 could not name the segment before the revocation");
        }
        // Bad arguments first: nothing may change.
        if obj::obj_revoke(ObjRef { share: root, object: home }) != Err(Error::InvalidArgument) {
            return Err("a share was revoked");
        }
        if obj::obj_revoke(ObjRef { share: root, object: 0xdead }) != Err(Error::NoSuchObject) {
            return Err("a missing object was revoked");
        }
        if obj::obj_revoke(ObjRef { share: 0, object: seg }).is_ok() {
            return Err("an object named through no share was revoked");
        }
        obj::obj_revoke(kept).map_err(|_| "obj_revoke failed")?;
        if obj::obj_get_name(ObjRef { share: root, object: desc }) != Err(Error::NoSuchObject) {
            return Err("core 0's descriptor survived the revocation");
        }
        if obj::obj_get_name(ObjRef { share: home, object: seg }) != Err(Error::NoSuchObject) {
            return Err("the common share's entry survived on core 0");
        }
        if obj::obj_get_name(kept).is_err() {
            return Err("the kept entry went too");
        }
        PHASE.store(1, Release);
        if !wait_seen(11) {
            return Err("core 1 could still name the segment after the revocation");
        }
        obj::share_addobj(home, kept).map_err(|_| "sharing it again failed")?;
        PHASE.store(2, Release);
        if !wait_seen(12) {
            return Err("core 1 could not name the segment shared again");
        }
        Ok(())
    })();
    PHASE.store(3, Release);
    let _ = reader.join();
    result
}
