//! `cowtest`: checks `cfork`'s copy-on-write (Corey §5.1). A child on another core sees
//! the parent's global variable and heap buffer as they were at the fork; then each side
//! writes its own values, and neither sees the other's (they meet through a shared slot
//! range). Prints `cowtest: ok`, `cowtest: FAIL <why>`, or `cowtest: skipped (1 core)`.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering::*};
use libatoll::shared::{SharedStatic, ZeroInit};
use libatoll::{cfork, cores_online, pcore_current, CforkOptions, Child, Status};

/// Words in the heap buffer (four pages).
const WORDS: usize = 2048;

/// A global variable in the image's data segment, which `cfork` copies.
static GLOBAL: AtomicU64 = AtomicU64::new(0);
/// The heap buffer's address (the same in the child's copy of the heap).
static BUFFER: AtomicU64 = AtomicU64::new(0);

/// Where parent and child meet: shared, not copied.
#[repr(C)]
struct Meet {
    /// 1: the child checked the snapshot and wrote its values; 2: the parent wrote its.
    step: AtomicU64,
    /// Why the child failed (0: it did not).
    child_error: AtomicU64,
}

// SAFETY: atomics only; all-zero is a valid value.
unsafe impl ZeroInit for Meet {}

static MEET: SharedStatic<Meet> = SharedStatic::new();

/// The child's failures, as codes.
const WHY: [&str; 5] = [
    "",
    "the child did not see the global as it was at the fork",
    "the child did not see the heap as it was at the fork",
    "the parent's later write to the global reached the child",
    "the parent's later write to the heap reached the child",
];

fn main() -> i32 {
    libatoll::cores::two_core_test("cowtest", None, test)
}

fn test() -> Result<(), &'static str> {
    let meet = MEET.init().map_err(|_| "no shared memory")?;
    let mut buffer: Vec<u64> = alloc::vec![1; WORDS];
    BUFFER.store(buffer.as_mut_ptr() as u64, Relaxed);
    GLOBAL.store(1, Relaxed);
    let me = pcore_current();
    let core = (0..cores_online()).find(|&c| c != me).ok_or("no other core")?;
    let child = cfork(core, &CforkOptions::default(), child_main, 0).map_err(|_| "cfork failed")?;
    // Wait for the child's writes, then check none of them reached us.
    wait_for(meet, 1, &child)?;
    if GLOBAL.load(Relaxed) != 1 {
        return Err("the child's write to the global reached the parent");
    }
    if buffer.iter().any(|&w| w != 1) {
        return Err("the child's write to the heap reached the parent");
    }
    GLOBAL.store(3, Relaxed);
    buffer.fill(3);
    meet.step.store(2, Release);
    let status = child.join();
    match meet.child_error.load(Acquire) {
        0 if status == Status::Exited(0) => Ok(()),
        0 => Err("the child did not exit 0"),
        code => Err(WHY.get(code as usize).copied().unwrap_or("the child failed")),
    }
}

/// Waits until the meeting step reaches `step`, or fails if the child ended first.
fn wait_for(meet: &Meet, step: u64, child: &Child) -> Result<(), &'static str> {
    let mut spins = 0u64;
    while meet.step.load(Acquire) < step {
        spins += 1;
        if spins.is_multiple_of(4096) && !matches!(child.status(), Ok(Status::Running)) {
            return Err("the child ended early");
        }
        core::hint::spin_loop();
    }
    Ok(())
}

/// The child: check the snapshot, write its own values, wait for the parent's, check
/// they did not arrive.
fn child_main(_: u64) -> i32 {
    let meet = MEET.get();
    let fail = |code: u64| {
        meet.child_error.store(code, Release);
        meet.step.fetch_max(1, AcqRel);
        1
    };
    // SAFETY: BUFFER is the address of the parent's heap buffer of WORDS words, which
    // this child's copy of the heap holds at the same address; nothing else uses it here.
    let buffer =
        unsafe { core::slice::from_raw_parts_mut(BUFFER.load(Relaxed) as *mut u64, WORDS) };
    if GLOBAL.load(Relaxed) != 1 {
        return fail(1);
    }
    if buffer.iter().any(|&w| w != 1) {
        return fail(2);
    }
    GLOBAL.store(2, Relaxed);
    buffer.fill(2);
    meet.step.store(1, Release);
    while meet.step.load(Acquire) < 2 {
        core::hint::spin_loop();
    }
    if GLOBAL.load(Relaxed) != 2 {
        return fail(3);
    }
    if buffer.iter().any(|&w| w != 2) {
        return fail(4);
    }
    0
}

libatoll::main!(main);
