//! `nullsys [N] [--cores LIST]`: the cost of a null system call in cycles, the median of
//! N batches of 1000 (default 21), on this core or on each listed core at once. It runs
//! the workload written once, `workloads::nullsys` (the code the Linux guest runs with
//! `getpid`), on libatoll's platform: the listed cores are threads of this program. Prints
//! a line per core (`cores` = how many took part, `core` = which).
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use alloc::vec::Vec;
use libatoll::bench::Record;
use libatoll::platform::Atoll;
use libatoll::{args, println};

const HELP: &str = "usage: nullsys [N] [--cores LIST]   (median of N batches of 1000 calls; default 21, this core)";

fn main() -> i32 {
    let line = args::arg_string();
    let mut words = line.split_whitespace();
    let mut cores = alloc::vec![libatoll::pcore_current()];
    let mut batches = workloads::nullsys::DEFAULT_BATCHES;
    while let Some(word) = words.next() {
        let ok = match word {
            "--cores" => args::cores_value(words.next()).map(|c| cores = c).is_some(),
            _ => args::number(Some(word), 1..=101).map(|n| batches = n).is_some(),
        };
        if !ok {
            println!("{HELP}");
            return if word == "--help" { 0 } else { 2 };
        }
    }
    let p = Atoll::new(cores.clone());
    let all: Vec<usize> = (0..cores.len()).collect();
    match workloads::nullsys::cycles_per_call_on(&p, &all, batches) {
        Ok(medians) => {
            for (core, median) in cores.iter().zip(medians) {
                let extra = format!(",\"core\":{core}");
                let record = Record {
                    experiment: "nullsys",
                    config: "null",
                    active_cores: cores.len(),
                    metric: "cycles_per_call",
                    unit: "cycles",
                    extra: &extra,
                };
                record.print(median);
            }
            0
        }
        Err(why) => {
            println!("nullsys: {why}");
            1
        }
    }
}

libatoll::main!(main);
