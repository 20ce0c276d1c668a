//! `mcrttest`: McRT (issue M8) on Atoll, on kernel threads (M7) as its processors, one per
//! core: the runtime's self-checks (`mcrt::selftest`: threads, yield, predicate yield,
//! barrier, mutexes, futures, keys, 10,000 threads, the allocator, the STM, the pthread and
//! OpenMP adaptors), each as the main thread of a fresh runtime, under every scheduler
//! policy (or those named); then, at 2 cores and more, scheduling domains.
//!
//! `mcrttest [--processors N] [POLICY...]` (single, local, sharing, stealing, neighbour;
//! all by default; one processor per core, at most N); prints each policy's checks' times
//! (`start` is the runtime's start and stop alone), then `mcrttest: ok` or
//! `mcrttest: FAIL <policy> <check>`, and exits 0, 1, or 2 on bad arguments.
//!
//! `mcrttest --live N` instead makes N threads live at once on one processor
//! (`mcrt::selftest::live`, issue M15) and prints `mcrttest: N live threads` or
//! `mcrttest: FAIL live: K of N` (a spawn failed after K).
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec::Vec;
use libatoll::mcrt_host::AtollHost;
use libatoll::{cores_online, println};
use mcrt::selftest::{self, CHECKS};
use mcrt::{Config, Policy};

fn main() -> i32 {
    let mut buf = [0u8; 256];
    let args = libatoll::args(&mut buf);
    let mut policies = Vec::new();
    let mut most = usize::MAX;
    let mut words = args.split_whitespace();
    while let Some(word) = words.next() {
        if word == "--live" {
            let n = words.next().and_then(|n| n.parse::<usize>().ok());
            let Some(n) = n.filter(|n| (1..=1_000_000).contains(n)) else {
                println!("mcrttest: --live wants a number from 1 to 1000000");
                return 2;
            };
            return live(n);
        }
        if word == "--processors" {
            let n = words.next().and_then(|n| n.parse::<usize>().ok());
            match n.filter(|n| (1..=1024).contains(n)) {
                Some(n) => most = n,
                None => {
                    println!("mcrttest: --processors wants a number from 1 to 1024");
                    return 2;
                }
            }
            continue;
        }
        match Policy::parse(word) {
            Some(p) => policies.push(p),
            None => {
                println!(
                    "mcrttest: unknown policy {word} (single, local, sharing, stealing, neighbour)"
                );
                return 2;
            }
        }
    }
    if policies.is_empty() {
        policies = Policy::ALL.to_vec();
    }
    let p = cores_online().min(most);
    for policy in policies {
        let mut times = alloc::string::String::new();
        for c in CHECKS {
            let name = c.name;
            let start = libatoll::cycles();
            let config = if c.one_processor {
                Config::new(Policy::Local, 1)
            } else {
                Config::new(policy, p)
            };
            match mcrt::run(config, &AtollHost, c.run) {
                Ok(Ok(())) => {}
                Ok(Err(why)) => {
                    println!("mcrttest: FAIL {} {name}: {why}", policy.name());
                    return 1;
                }
                Err(e) => {
                    println!("mcrttest: FAIL {} {name}: the runtime: {e:?}", policy.name());
                    return 1;
                }
            }
            let mcycles = (libatoll::cycles() - start) / 1_000_000;
            times.push_str(&alloc::format!(" {name} {mcycles}"));
        }
        println!("mcrttest: {} passed on {p} processors (Mcycles:{times})", policy.name());
    }
    if p >= 2 {
        match mcrt::run(Config::domains(&[1, p - 1]), &AtollHost, selftest::domains) {
            Ok(Ok(())) => println!("mcrttest: domains passed"),
            other => {
                println!("mcrttest: FAIL domains: {other:?}");
                return 1;
            }
        }
    }
    println!("mcrttest: ok");
    0
}

/// `--live N`: N threads live at once on one processor.
fn live(n: usize) -> i32 {
    let start = libatoll::cycles();
    match mcrt::run(Config::new(Policy::Local, 1), &AtollHost, move || selftest::live(n)) {
        Ok(Ok(())) => {
            let mcycles = (libatoll::cycles() - start) / 1_000_000;
            println!("mcrttest: {n} live threads ({mcycles} Mcycles)");
            0
        }
        Ok(Err(made)) => {
            println!("mcrttest: FAIL live: {made} of {n}");
            1
        }
        Err(e) => {
            println!("mcrttest: FAIL live: the runtime: {e:?}");
            1
        }
    }
}

libatoll::main!(main);
