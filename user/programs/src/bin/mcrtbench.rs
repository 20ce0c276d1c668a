//! `mcrtbench EXPERIMENT...`: McRT's experiments written once (`workloads::mcrt`:
//! `mcrt_micro`, `mcrt_create`, `mcrt_futures`, `mcrt_policies`, `mcrt_stm`, `mcrt_larson`, or `all`), the code the
//! Linux guest runs, with McRT's processors as kernel threads, one per core
//! (`libatoll::mcrt_host`), beside Atoll's own kernel threads. Prints `RESULT` lines;
//! exits 2 on a bad argument, 1 if an experiment fails.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec::Vec;
use libatoll::mcrt_host::AtollHost;
use libatoll::platform::Atoll;
use libatoll::{args, println};
use workloads::mcrt::{self, EXPERIMENTS};

const HELP: &str =
    "usage: mcrtbench mcrt_micro|mcrt_create|mcrt_futures|mcrt_policies|mcrt_stm|mcrt_larson|all...";

fn main() -> i32 {
    let line = args::arg_string();
    let mut chosen: Vec<&str> = Vec::new();
    for word in line.split_whitespace() {
        match word {
            "all" => chosen.extend_from_slice(&EXPERIMENTS),
            w if EXPERIMENTS.contains(&w) => chosen.push(w),
            _ => {
                println!("{HELP}");
                return if word == "--help" { 0 } else { 2 };
            }
        }
    }
    if chosen.is_empty() {
        println!("{HELP}");
        return 2;
    }
    let p = Atoll::new(libatoll::cores::all_cores());
    for experiment in chosen {
        if !libatoll::bench::print_lines(experiment, mcrt::run(&p, &AtollHost, experiment)) {
            return 1;
        }
    }
    0
}

libatoll::main!(main);
