//! `cowshared`: a copy made with `segment_copy(COW)` never changes after it is made,
//! whoever writes the original (Corey §4.3). A child on another core maps the segment
//! itself, in its own root range (`cfork`'s `share_segments`), and keeps writing a
//! counter into it; the parent makes a copy-on-write copy, then reads the copy twice with
//! the child still writing in between. Both reads must agree, and the child's writes must
//! go on landing in the original. (A copy must take back the writable mappings of every
//! range that maps the segment, not only the caller's.) Prints `cowshared: ok`,
//! `cowshared: FAIL <why>`, or `cowshared: skipped (1 core)` (exit 77, `EXIT_SKIPPED`).
#![no_std]
#![no_main]

use core::sync::atomic::{AtomicU64, Ordering::*};
use libatoll::abi::copy_mode;
use libatoll::shared::{SharedStatic, ZeroInit};
use libatoll::{cfork, cores_online, obj, pcore_current, println, private, CforkOptions, Status};

/// Where parent and child meet: shared, not copied.
#[repr(C)]
struct Meet {
    /// The address the child writes to.
    va: AtomicU64,
    /// How many writes the child has made.
    writes: AtomicU64,
    /// Set by the parent: the child stops.
    stop: AtomicU64,
}

// SAFETY: atomics only; all-zero is a valid value.
unsafe impl ZeroInit for Meet {}

static MEET: SharedStatic<Meet> = SharedStatic::new();

/// Child writes to wait for before the copy, and again between the two reads.
const WRITES: u64 = 2_000;

fn main() -> i32 {
    match run() {
        Ok(true) => {
            println!("cowshared: ok");
            0
        }
        Ok(false) => {
            println!("cowshared: skipped (1 core)");
            libatoll::abi::EXIT_SKIPPED
        }
        Err(why) => {
            println!("cowshared: FAIL {why}");
            1
        }
    }
}

fn run() -> Result<bool, &'static str> {
    if cores_online() < 2 {
        return Ok(false);
    }
    let meet = MEET.init().map_err(|_| "no shared memory")?;
    let original = private::map_new(4096).map_err(|_| "map_new failed")?;
    meet.va.store(original.va, Release);
    let me = pcore_current();
    let core = (me + 1) % cores_online();
    let opts = CforkOptions { share_segments: &[original.segment], shares: &[], stack: 0 };
    let child = cfork(core, &opts, child_main, 0).map_err(|_| "cfork failed")?;
    let outcome = compare(meet, original.segment);
    meet.stop.store(1, Release);
    if child.join() != Status::Exited(0) {
        return Err("the child did not exit 0");
    }
    outcome.map(|_| true)
}

/// Waits until the child has written `n` more times; fails if it stops writing.
fn wait_writes(meet: &Meet, n: u64) -> Result<(), &'static str> {
    let target = meet.writes.load(Acquire) + n;
    for _ in 0..1u64 << 32 {
        if meet.writes.load(Acquire) >= target {
            return Ok(());
        }
        core::hint::spin_loop();
    }
    Err("the child stopped writing")
}

/// The copy, read twice around more of the child's writes: the same both times.
fn compare(meet: &Meet, segment: u64) -> Result<(), &'static str> {
    let seg = private::named(segment).ok_or("the segment has no name")?;
    wait_writes(meet, WRITES)?;
    let root = obj::root_share();
    let copy = obj::segment_copy(root, seg, copy_mode::COW).map_err(|_| "segment_copy failed")?;
    let copy = libatoll::ObjRef::new(root, copy);
    let read = |r| -> Result<u64, &'static str> {
        let mut word = [0u8; 8];
        obj::segment_read(r, 0, &mut word).map_err(|_| "segment_read failed")?;
        Ok(u64::from_le_bytes(word))
    };
    let first = read(copy)?;
    wait_writes(meet, WRITES)?;
    let second = read(copy)?;
    let now = read(seg)?;
    let _ = obj::share_delobj(copy);
    if first != second {
        println!("cowshared: the copy read {first}, then {second}");
        return Err("the copy changed after it was made");
    }
    if now <= first {
        return Err("the child's writes no longer reach the original");
    }
    Ok(())
}

/// Writes a rising counter into the shared segment until told to stop.
fn child_main(_: u64) -> i32 {
    let meet = MEET.get();
    let va = meet.va.load(Acquire) as *mut u64;
    let mut n = 0u64;
    while meet.stop.load(Acquire) == 0 {
        n += 1;
        // SAFETY: the shared segment's page, mapped read-write in this child's root range.
        unsafe { va.write_volatile(n) };
        meet.writes.store(n, Release);
    }
    0
}

libatoll::main!(main);
