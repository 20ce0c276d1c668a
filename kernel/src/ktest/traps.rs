//! Layer 5 tests: an exception stops only the core it happens on.

use super::{all_ok, JOB_TIMEOUT_US};
use crate::arch::trap::{VECTOR_DOUBLE_FAULT, VECTOR_PAGE_FAULT};
use crate::mem::frames;
use crate::percpu::{self, CoreState};
use crate::{kernel_test, smp};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

kernel_test!(FAULT_ISOLATION, "trap.fault_isolation", 2, Alone, fault_isolation);
kernel_test!(STACK_OVERFLOW, "trap.stack_overflow", 2, Alone, stack_overflow);

/// The last core writes to an unmapped address. Its page fault is reported, the core stops,
/// and every other core then runs and finishes a frame-allocation job.
fn fault_isolation() -> Result<(), String> {
    fault_stops_only_the_victim(VECTOR_PAGE_FAULT, &|_| super::fault_this_core())
}

/// The last core overflows its kernel stack into the guard page. The page fault cannot be
/// delivered on that stack, so it becomes a double fault, handled on the core's IST stack:
/// reported, and only that core stops.
fn stack_overflow() -> Result<(), String> {
    fault_stops_only_the_victim(VECTOR_DOUBLE_FAULT, &|_| {
        let depth = recurse(0);
        Err(format!("recursed {depth} levels without overflowing"))
    })
}

/// Recurses with 1 KiB frames until the stack runs out (or a very large depth).
#[inline(never)]
fn recurse(depth: u64) -> u64 {
    let mut frame = [0u8; 1024];
    frame[0] = depth as u8;
    let frame = core::hint::black_box(frame);
    if depth > 1_000_000 {
        return depth;
    }
    recurse(depth + 1) + frame[0] as u64
}

/// Runs `crash` on the last core, expects it to stop with exception `vector`, then checks
/// that the other cores still run and finish a frame-allocation job.
fn fault_stops_only_the_victim(vector: u8, crash: &smp::Work<'_>) -> Result<(), String> {
    let cores = smp::online_cores();
    let victim = *cores.last().ok_or("no cores")?;
    let outcome = smp::run_on(&[victim], JOB_TIMEOUT_US, crash);
    match outcome.first() {
        Some(smp::Outcome::Faulted(v)) if *v == vector => {}
        other => {
            return Err(format!("victim core {victim}: expected exception {vector}, got {other:?}"))
        }
    }
    let state = percpu::core(victim).map(|c| c.state());
    if state != Some(CoreState::Faulted) {
        return Err(format!("victim core state {state:?}, expected Faulted"));
    }
    let survivors: Vec<usize> = cores.iter().copied().filter(|&c| c != victim).collect();
    let work = |_| -> Result<(), String> {
        for _ in 0..100 {
            let pa = frames::alloc().ok_or("out of frames")?;
            frames::free(pa).map_err(|e| format!("{e:?}"))?;
        }
        Ok(())
    };
    all_ok(&survivors, &smp::run_on(&survivors, JOB_TIMEOUT_US, &work))
}
