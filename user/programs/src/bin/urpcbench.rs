//! `urpcbench [N] [--cores LIST]` (Multikernel Table 2): URPC one-way latency, the raw
//! cache-line floor, their ratio and pipelined throughput (a 16-slot channel,
//! `10 × N` messages) between every pair of the listed cores (default: all), N round trips
//! per latency (default 2000).
//!
//! It runs the workload written once, `workloads::pingpong::run`: the code the Linux guest
//! runs for `bench=urpc,N` (`atoll-bench-linux urpc N`), on libatoll's platform. The two
//! ends of each pair are threads of this program (contexts on its one root address range,
//! as Linux's are threads of one process); the channels and lines are `Shared` memory (slot
//! ranges whose page tables both contexts include). It prints the workload's own `RESULT`
//! lines, so they are the Linux guest's field for field.
#![no_std]
#![no_main]

use libatoll::platform::WorkloadProgram;

const HELP: &str = "usage: urpcbench [N] [--cores LIST]   (N round trips per latency, 1..=100000, default 2000; default cores: all, at least 2)";

fn main() -> i32 {
    let program = WorkloadProgram {
        name: "urpcbench",
        help: HELP,
        default_count: workloads::pingpong::DEFAULT_ITERATIONS,
        counts: 1..=100_000,
    };
    program.main(workloads::pingpong::run)
}

libatoll::main!(main);
