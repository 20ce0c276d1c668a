//! Layer 5 tests: an exception stops only the core it happens on.

use super::{all_ok, JOB_TIMEOUT_US};
use crate::arch::trap::VECTOR_PAGE_FAULT;
use crate::mem::frames;
use crate::percpu::{self, CoreState};
use crate::{kernel_test, smp};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

kernel_test!(
    FAULT_ISOLATION,
    "trap.fault_isolation",
    2,
    true,
    fault_isolation
);

/// The last core writes to an unmapped address. Its page fault is reported, the core stops,
/// and every other core then runs and finishes a frame-allocation job.
fn fault_isolation() -> Result<(), String> {
    let cores = smp::online_cores();
    let victim = *cores.last().ok_or("no cores")?;
    let outcome = smp::run_on(&[victim], JOB_TIMEOUT_US, &|_| {
        // An address below the direct map, mapped by nothing.
        let wild = 0x0000_0000_dead_0000 as *mut u64;
        // SAFETY: deliberately not safe: this write must fault and stop this core.
        unsafe { wild.write_volatile(1) };
        Err("the wild write did not fault".into())
    });
    match outcome.first() {
        Some(smp::Outcome::Faulted(v)) if *v == VECTOR_PAGE_FAULT => {}
        other => {
            return Err(format!(
                "victim core {victim}: expected a page fault, got {other:?}"
            ))
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
