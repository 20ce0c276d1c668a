//! `nullsys [n]`: the cost of a null system call in cycles (median of n batches of 1000).
#![no_std]
#![no_main]

use libatoll::println;

fn main() -> i32 {
    let mut buf = [0u8; 32];
    let batches: usize = libatoll::args(&mut buf).trim().parse().unwrap_or(21).clamp(1, 101);
    let mut samples = [0u64; 101];
    for s in samples.iter_mut().take(batches) {
        let start = read_tsc();
        for _ in 0..1000 {
            let _ = libatoll::null();
        }
        *s = (read_tsc() - start) / 1000;
    }
    let used = &mut samples[..batches];
    used.sort_unstable();
    let median = used[batches / 2];
    println!(
        "RESULT {{\"experiment\":\"nullsys\",\"system\":\"atoll\",\"cores\":1,\"config\":\"null\",\"metric\":\"cycles_per_call\",\"value\":{median},\"unit\":\"cycles\",\"core\":{}}}",
        libatoll::pcore_current()
    );
    0
}

/// The TSC, read in user mode (RDTSC is not privileged here).
fn read_tsc() -> u64 {
    // SAFETY: RDTSC has no side effects.
    unsafe { core::arch::x86_64::_rdtsc() }
}

libatoll::main!(main);
