//! The cost of the cheapest system call, in cycles: the median over batches of 1000 calls,
//! timed on core 0. Atoll's `nullsys` user program runs this code with its `null` call
//! (on `libatoll::platform`); on Linux the call is `getpid` through a raw `syscall`
//! instruction.

use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};

use crate::result::{self, median};
use crate::Platform;

/// Calls per timed batch.
pub const CALLS_PER_BATCH: u64 = 1000;

/// Batches when none are asked for (the `nullsys` program's default).
pub const DEFAULT_BATCHES: usize = 21;

/// Median cycles per call over `batches` batches of [`CALLS_PER_BATCH`] calls on core 0.
pub fn cycles_per_call<P: Platform + ?Sized>(p: &P, batches: usize) -> Result<u64, String> {
    Ok(cycles_per_call_on(p, &[0], batches)?[0])
}

/// Like [`cycles_per_call`], on each of `cores` at the same time: each core's median, in
/// the order of `cores` (Atoll's `nullsys --cores LIST`).
pub fn cycles_per_call_on<P: Platform + ?Sized>(
    p: &P,
    cores: &[usize],
    batches: usize,
) -> Result<Vec<u64>, String> {
    let batches = batches.max(1);
    let samples: Vec<AtomicU64> = (0..batches * cores.len()).map(|_| AtomicU64::new(0)).collect();
    p.run_on(cores, &|core| {
        let Some(slot) = cores.iter().position(|&c| c == core) else { return };
        for sample in &samples[slot * batches..(slot + 1) * batches] {
            let start = p.cycles();
            for _ in 0..CALLS_PER_BATCH {
                p.null_call();
            }
            sample.store((p.cycles() - start) / CALLS_PER_BATCH, Ordering::Relaxed);
        }
    })?;
    Ok(samples
        .chunks(batches)
        .map(|chunk| {
            let mut values: Vec<u64> = chunk.iter().map(|s| s.load(Ordering::Relaxed)).collect();
            median(&mut values).unwrap_or(0)
        })
        .collect())
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
