//! `ampsbench EXPERIMENT [UNITS] [--config NAME] [--asym TEXT]`: the scheduler experiments
//! written once (`workloads::amps`: `thread_switch`, `thread_create`, `thread_migrate`,
//! `amps_jobs`, `amps_omp`, `amps_fairness`, `amps_server`, `amps_numa`, or `all`), the code the Linux guest runs, with this
//! program's threads as kernel threads on every core. UNITS sizes a job (default 20000).
//! `--config` and `--asym` only label the result lines with how the machine was booted
//! (`sched=`, `asym=`; `make bench` passes them). Prints `RESULT` lines; exits 2 on a bad
//! argument, 1 if an experiment fails.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::string::String;
use alloc::vec::Vec;
use libatoll::platform::Atoll;
use libatoll::{args, println};
use workloads::amps::{self, Setting, DEFAULT_JOB_UNITS, EXPERIMENTS};

const HELP: &str = "usage: ampsbench thread_switch|thread_create|lrpc|thread_migrate|amps_jobs|amps_omp|amps_fairness|amps_server|amps_numa|all [UNITS] [--config NAME] [--asym TEXT]";

fn main() -> i32 {
    let line = args::arg_string();
    let mut words = line.split_whitespace();
    let mut chosen: Vec<&str> = Vec::new();
    let mut units = None;
    // The kernel does not tell a program how it was booted: unlabelled unless told.
    let mut setting = Setting { sched: String::from("unstated"), asym: String::from("unstated") };
    while let Some(word) = words.next() {
        let ok = match word {
            "--config" => words.next().map(|w| setting.sched = String::from(w)).is_some(),
            "--asym" => words.next().map(|w| setting.asym = String::from(w)).is_some(),
            "all" => {
                chosen.extend_from_slice(EXPERIMENTS);
                true
            }
            w if EXPERIMENTS.contains(&w) => {
                chosen.push(w);
                true
            }
            w if units.is_none() => {
                args::number(Some(w), 1..=10_000_000).map(|n| units = Some(n as u64)).is_some()
            }
            _ => false,
        };
        if !ok {
            println!("{HELP}");
            return if word == "--help" { 0 } else { 2 };
        }
    }
    if chosen.is_empty() {
        println!("{HELP}");
        return 2;
    }
    let p = Atoll::new(libatoll::cores::all_cores());
    for experiment in chosen {
        let lines = amps::run(&p, experiment, units.unwrap_or(DEFAULT_JOB_UNITS), &setting);
        if !libatoll::bench::print_lines(experiment, lines) {
            return 1;
        }
    }
    0
}

libatoll::main!(main);
