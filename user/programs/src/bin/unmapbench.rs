//! `unmapbench [ROUNDS] [--cores LIST]` (Multikernel §5.1, Figure 7): the latency of
//! taking write access to a page away, and of giving it back, while N = 1 .. all listed
//! cores have it mapped (default: every core; the first listed core measures), the median
//! of ROUNDS rounds (default 50, at most 1000). It runs the workload written once,
//! `workloads::unmap` (the code the Linux guest runs with `mprotect`), on libatoll's
//! platform: a thread per core reading one `Shared` page, and `set_writable`, an
//! `ar_set_seg` of the page's segment at the same address without `map::WRITE` (and with
//! it), for which the kernel shoots down the TLB of every core running the page's slot
//! range by message before it returns. Prints the workload's `RESULT` lines (`cores` = N,
//! `config` `reduce` and `restore`).
//!
//! The measuring core must be the one the program runs on (the console's `run` starts it
//! on core 0): the page's slot range and segment are in the program's root share, which a
//! thread's context on another core cannot name, so its `ar_set_seg` would be refused.
#![no_std]
#![no_main]

use libatoll::platform::WorkloadProgram;

const HELP: &str = "usage: unmapbench [ROUNDS] [--cores LIST]   (rounds per core count: 1..=1000, default 50; default cores: all, the first measures and must be this one)";

/// The most rounds accepted (two shootdowns each, per core count).
const MAX_ROUNDS: usize = 1000;

fn main() -> i32 {
    let program = WorkloadProgram {
        name: "unmapbench",
        help: HELP,
        default_count: workloads::unmap::DEFAULT_ROUNDS,
        counts: 1..=MAX_ROUNDS,
    };
    program.main(workloads::unmap::run)
}

libatoll::main!(main);
