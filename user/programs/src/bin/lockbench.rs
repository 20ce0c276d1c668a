//! `lockbench [N] [--cores LIST]` (Corey Figure 3): a spin lock (TTS), a ticket lock and an
//! MCS lock, each contended by 1, 2, … of the listed cores (default: all), N acquisitions
//! per core (default 2000): acquisitions per million cycles and cycles per acquisition.
//!
//! It runs the workload written once, `workloads::locks::run`: the code the Linux guest
//! runs for `bench=locks,N` (`atoll-bench-linux locks N`), on libatoll's platform; the
//! cores are threads of this program. It prints the workload's own `RESULT` lines.
#![no_std]
#![no_main]

use libatoll::platform::WorkloadProgram;

const HELP: &str = "usage: lockbench [N] [--cores LIST]   (N acquisitions per core and lock, 1..=100000, default 2000; default cores: all)";

fn main() -> i32 {
    let program = WorkloadProgram {
        name: "lockbench",
        help: HELP,
        default_count: workloads::locks::DEFAULT_ACQUISITIONS,
        counts: 1..=100_000,
    };
    program.main(workloads::locks::run)
}

libatoll::main!(main);
