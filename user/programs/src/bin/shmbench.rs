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

extern crate alloc;

use libatoll::platform::Atoll;
use libatoll::{args, cores, println};

const HELP: &str = "usage: shmbench [N] [--cores LIST]   (N updates per client, 1..=100000, default 500; default cores: all, at least 2, the last one the server)";

fn main() -> i32 {
    let line = args::arg_string();
    let mut words = line.split_whitespace();
    let mut list = cores::all_cores();
    let mut updates = workloads::shm::DEFAULT_UPDATES;
    while let Some(word) = words.next() {
        let ok = match word {
            "--cores" => args::cores_value(words.next()).map(|c| list = c).is_some(),
            _ => args::number(Some(word), 1..=100_000).map(|n| updates = n).is_some(),
        };
        if !ok {
            println!("{HELP}");
            return if word == "--help" { 0 } else { 2 };
        }
    }
    match workloads::shm::run(&Atoll::new(list), updates) {
        Ok(lines) => {
            for line in lines {
                println!("{line}");
            }
            0
        }
        Err(why) => {
            println!("shmbench: {why}");
            1
        }
    }
}

libatoll::main!(main);
