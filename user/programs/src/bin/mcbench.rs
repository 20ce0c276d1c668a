//! `mcbench [ROUNDS] [--cores LIST]` (Multikernel Figure 6, §5.1): the latency of a message
//! to every core and the collection of their acks, by broadcast line, unicast and the
//! per-package multicast tree, for k = 2 .. all listed cores (default: every core; the
//! first listed core is the source), the median of ROUNDS rounds (default 50, at most
//! 200). It runs the workload written once, `workloads::multicast` (the code the Linux
//! guest runs), on libatoll's platform: a thread per core, URPC channels in `Shared`
//! memory, the tree from each core's package as `locality_get` gives it. Prints the
//! workload's `RESULT` lines (`cores` = k, `packages` = packages among the k cores).
#![no_std]
#![no_main]

use libatoll::platform::WorkloadProgram;

const HELP: &str = "usage: mcbench [ROUNDS] [--cores LIST]   (rounds per protocol and core count: 1..=200, default 50; default cores: all, the first is the source)";

/// The most rounds accepted (the kernel's `bench multicast` limit).
const MAX_ROUNDS: usize = 200;

fn main() -> i32 {
    let program = WorkloadProgram {
        name: "mcbench",
        help: HELP,
        default_count: workloads::multicast::DEFAULT_ROUNDS,
        counts: 1..=MAX_ROUNDS,
    };
    program.main(workloads::multicast::run)
}

libatoll::main!(main);
