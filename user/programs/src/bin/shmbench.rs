//! `shmbench [N] [--cores LIST]` (Multikernel Figure 3): cycles per update of 1, 2, 4 or 8
//! shared cache lines, by client cores updating them directly with atomic adds (SHMn) or
//! by sending each update over a URPC channel of their own to a server that owns the lines
//! (MSGn). The server is the last listed core (default: all cores, at least 2); the first
//! 1, 2, ... of the others are clients, each doing N updates (default 500).
//!
//! It runs the workload written once, `workloads::shm::run`: the code the Linux guest runs
//! for `bench=shm,N` (`atoll-bench-linux shm N`), on libatoll's platform. Clients and server
//! are threads of this program (contexts on its one root address range, as Linux's are
//! threads of one process), meeting at a barrier in `Shared` memory before they start; the
//! shared lines and the channels are `Shared` memory. It prints the workload's own
//! `RESULT` lines, so they are the Linux guest's field for field.
#![no_std]
#![no_main]

use libatoll::platform::WorkloadProgram;

const HELP: &str = "usage: shmbench [N] [--cores LIST]   (N updates per client, 1..=100000, default 500; default cores: all, at least 2, the last one the server)";

fn main() -> i32 {
    let program = WorkloadProgram {
        name: "shmbench",
        help: HELP,
        default_count: workloads::shm::DEFAULT_UPDATES,
        counts: 1..=100_000,
    };
    program.main(workloads::shm::run)
}

libatoll::main!(main);
