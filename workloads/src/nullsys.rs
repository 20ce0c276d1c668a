//! The cost of the cheapest system call, in cycles: the median over batches of 1000 calls,
//! timed on core 0. Atoll's `nullsys` user program measures its `null` call the same way;
//! on Linux the call is `getpid` through a raw `syscall` instruction.

use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};

use crate::{median, result, Platform};

/// Calls per timed batch.
pub const CALLS_PER_BATCH: u64 = 1000;

/// Batches when none are asked for (the `nullsys` program's default).
pub const DEFAULT_BATCHES: usize = 21;

/// Median cycles per call over `batches` batches of [`CALLS_PER_BATCH`] calls on core 0.
pub fn cycles_per_call<P: Platform + ?Sized>(p: &P, batches: usize) -> Result<u64, String> {
    let samples: Vec<AtomicU64> = (0..batches.max(1)).map(|_| AtomicU64::new(0)).collect();
    p.run_on(&[0], &|_| {
        for sample in &samples {
            let start = p.cycles();
            for _ in 0..CALLS_PER_BATCH {
                p.null_call();
            }
            sample.store((p.cycles() - start) / CALLS_PER_BATCH, Ordering::Relaxed);
        }
    })?;
    let mut values: Vec<u64> = samples.iter().map(|s| s.load(Ordering::Relaxed)).collect();
    Ok(median(&mut values))
}

/// Runs the experiment and returns its result line (`experiment":"nullsys"`).
pub fn run<P: Platform + ?Sized>(p: &P, batches: usize) -> Result<Vec<String>, String> {
    let cycles = cycles_per_call(p, batches)?;
    let config = if p.system() == "linux" { "getpid" } else { "null" };
    let extra = alloc::format!(",\"config\":\"{config}\",\"core\":0");
    Ok(alloc::vec![result::line(
        p.system(),
        "nullsys",
        1,
        "cycles_per_call",
        cycles,
        "cycles",
        &extra
    )])
}
