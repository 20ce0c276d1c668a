//! `nullsys [N] [--cores LIST]`: the cost of a null system call in cycles, the median of
//! N batches of 1000 (default 21), on this core or on each listed core at once (cforked;
//! each core prints its own line, `cores` = how many took part).
#![no_std]
#![no_main]

extern crate alloc;

use core::sync::atomic::{AtomicU64, Ordering};
use libatoll::cores::spread;
use libatoll::{args, println, rdtsc, CforkOptions};

const HELP: &str = "usage: nullsys [N] [--cores LIST]   (median of N batches of 1000 calls; default 21, this core)";

/// Batches per core, and how many cores take part (set before any cfork, so every core
/// reads the same values from its copy).
static BATCHES: AtomicU64 = AtomicU64::new(21);
static CORES: AtomicU64 = AtomicU64::new(1);

fn main() -> i32 {
    let line = args::arg_string();
    let mut words = line.split_whitespace();
    let mut cores = alloc::vec![libatoll::pcore_current()];
    while let Some(word) = words.next() {
        let ok = match word {
            "--cores" => args::cores_value(words.next()).map(|c| cores = c).is_some(),
            _ => args::number(Some(word), 1..=101)
                .map(|n| BATCHES.store(n, Ordering::Relaxed))
                .is_some(),
        };
        if !ok {
            println!("{HELP}");
            return if word == "--help" { 0 } else { 2 };
        }
    }
    CORES.store(cores.len() as u64, Ordering::Relaxed);
    match spread(&cores, &CforkOptions::default(), measure) {
        Ok(statuses) if statuses.iter().all(|s| s.ok()) => 0,
        Ok(statuses) => {
            println!("nullsys: {statuses:?}");
            1
        }
        Err(e) => {
            println!("nullsys: {e:?}");
            1
        }
    }
}

/// Times the batches on this core and prints the median.
fn measure(_: u64) -> i32 {
    let batches = BATCHES.load(Ordering::Relaxed) as usize;
    let mut samples = [0u64; 101];
    for s in samples.iter_mut().take(batches) {
        let start = rdtsc();
        for _ in 0..1000 {
            let _ = libatoll::null();
        }
        *s = (rdtsc() - start) / 1000;
    }
    let used = &mut samples[..batches];
    used.sort_unstable();
    let median = used[batches / 2];
    println!(
        "RESULT {{\"experiment\":\"nullsys\",\"system\":\"atoll\",\"cores\":{},\"config\":\"null\",\"metric\":\"cycles_per_call\",\"value\":{median},\"unit\":\"cycles\",\"core\":{}}}",
        CORES.load(Ordering::Relaxed),
        libatoll::pcore_current()
    );
    0
}

libatoll::main!(main);
