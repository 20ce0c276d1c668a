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

extern crate alloc;

use libatoll::platform::Atoll;
use libatoll::{args, cores, println};

const HELP: &str = "usage: urpcbench [N] [--cores LIST]   (N round trips per latency, 1..=100000, default 2000; default cores: all, at least 2)";

fn main() -> i32 {
    let line = args::arg_string();
    let mut words = line.split_whitespace();
    let mut list = cores::all_cores();
    let mut iterations = workloads::pingpong::DEFAULT_ITERATIONS;
    while let Some(word) = words.next() {
        let ok = match word {
            "--cores" => args::cores_value(words.next()).map(|c| list = c).is_some(),
            _ => args::number(Some(word), 1..=100_000).map(|n| iterations = n).is_some(),
        };
        if !ok {
            println!("{HELP}");
            return if word == "--help" { 0 } else { 2 };
        }
    }
    match workloads::pingpong::run(&Atoll::new(list), iterations) {
        Ok(lines) => {
            for line in lines {
                println!("{line}");
            }
            0
        }
        Err(why) => {
            println!("urpcbench: {why}");
            1
        }
    }
}

libatoll::main!(main);
