//! `sysdevbench [N] [--core C]`: the experiment `syscall_device` (issue M12, Corey §3.2,
//! §4.4): what a system call costs through a syscall device served by a kernel core on
//! core C (default: the next core), against a trap on the caller's own core. Three
//! configurations, each the median of N batches of 1000 calls (default 21), in cycles per
//! call of the caller's time-stamp counter:
//! - `trap`: the `null` system call;
//! - `ring`: one null call at a time through the syscall device (post, wait for the
//!   reply): the round trip between two cores;
//! - `ring_pipelined`: the same calls with up to 16 in flight: the throughput of one
//!   kernel core serving one program.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec::Vec;
use libatoll::abi::sysdev::{call, RING_SLOTS};
use libatoll::abi::EXIT_SKIPPED;
use libatoll::bench::Record;
use libatoll::kcore::{KernelCore, SyscallRing};
use libatoll::{args, cores_online, pcore_current, println, rdtsc};

const HELP: &str =
    "usage: sysdevbench [N] [--core C]   (median of N batches of 1000 calls, 1-101, default 21; C: the kernel core, not this one)";
/// Calls in a batch.
const BATCH: u64 = 1000;

fn main() -> i32 {
    let line = args::arg_string();
    let mut words = line.split_whitespace();
    let mut batches = 21;
    let mut core = None;
    while let Some(word) = words.next() {
        let ok = match word {
            "--core" => args::number(words.next(), 0..=63).map(|c| core = Some(c)).is_some(),
            _ => args::number(Some(word), 1..=101).map(|n| batches = n).is_some(),
        };
        if !ok {
            println!("{HELP}");
            return if word == "--help" { 0 } else { 2 };
        }
    }
    if cores_online() < 2 {
        println!("sysdevbench: skipped (a kernel core needs a second core)");
        return EXIT_SKIPPED;
    }
    let me = pcore_current();
    let core = core.unwrap_or((me + 1) % cores_online());
    if core == me || core >= cores_online() {
        println!("sysdevbench: the kernel core must be another online core, not {core}");
        return 2;
    }
    match measure(core, batches as usize) {
        Ok(medians) => {
            for (config, cycles) in ["trap", "ring", "ring_pipelined"].into_iter().zip(medians) {
                let extra = alloc::format!(",\"kernel_core\":{core}");
                let record = Record {
                    experiment: "syscall_device",
                    config,
                    active_cores: 2,
                    metric: "cycles_per_call",
                    unit: "cycles",
                    extra: &extra,
                };
                record.print(cycles);
            }
            0
        }
        Err(why) => {
            println!("sysdevbench: {why}");
            1
        }
    }
}

/// The three medians, in cycles per call: trap, ring, ring pipelined.
fn measure(core: usize, batches: usize) -> Result<[u64; 3], &'static str> {
    let mut ring = SyscallRing::new(0).map_err(|_| "no syscall device")?;
    let kernel_core =
        KernelCore::start(core, &[ring.device()]).map_err(|_| "the kernel core did not start")?;
    ring.served_by(&kernel_core);
    let mut samples: [Vec<u64>; 3] = [Vec::new(), Vec::new(), Vec::new()];
    for _ in 0..batches {
        let start = rdtsc();
        for _ in 0..BATCH {
            let _ = libatoll::sys::null();
        }
        samples[0].push((rdtsc() - start) / BATCH);

        let start = rdtsc();
        for _ in 0..BATCH {
            ring.call(call::NULL, &[]).map_err(|_| "a call through the ring failed")?;
        }
        samples[1].push((rdtsc() - start) / BATCH);

        let start = rdtsc();
        let (mut posted, mut answered) = (0, 0);
        while answered < BATCH {
            // The request channel may lack room before its credits come back: then the
            // replies are taken first.
            while posted < BATCH
                && ring.in_flight() < RING_SLOTS as u64
                && ring.post(call::NULL, &[]).is_ok()
            {
                posted += 1;
            }
            match ring.reply() {
                Some((_, Ok(_))) => answered += 1,
                Some((_, Err(_))) => return Err("a pipelined call failed"),
                None if !kernel_core.running() => return Err("the kernel core stopped"),
                None => core::hint::spin_loop(),
            }
        }
        samples[2].push((rdtsc() - start) / BATCH);
    }
    Ok(samples.map(|mut s| record::median(&mut s).unwrap_or(0)))
}

libatoll::main!(main);
