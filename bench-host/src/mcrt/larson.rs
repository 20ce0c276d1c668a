//! mcrt_larson (McRT Figure 11, §3.2.4): the Larson benchmark (Larson & Krishnan, ISMM
//! 1998) on McRT-Malloc, lock-based against non-blocking, on McRT threads against OS
//! threads as the software threads outnumber the CPUs, with the system allocator and
//! mimalloc as peers.
//!
//! The benchmark itself is `workloads::larson` (the code Atoll and the Linux guest run
//! too). A fixed total of ops is split among the threads; ops/s is that total over the
//! wall-clock time, the median of three runs.
//!
//! - McRT threads: `cpus()` pinned processors, N McRT threads (work stealing), each
//!   yielding every [`YIELD_EVERY`] ops (cooperative scheduling: never inside the
//!   allocator's critical sections).
//! - OS threads: N `std::thread`s, preempted by Linux wherever they are.
//! - Allocators: McRT-Malloc `locked` and `nonblocking` (`mcrt::malloc::McrtMalloc`,
//!   version set before the threads start), `system` (`std::alloc::System`), `mimalloc`
//!   (`mimalloc::MiMalloc`), each called directly as a `GlobalAlloc`.

use super::{cpus, line};
use crate::median_of;
use mcrt::hosted::LinuxHost;
use mcrt::malloc::{McrtMalloc, Version};
use std::alloc::{GlobalAlloc, System};
use std::sync::Arc;
use std::time::Instant;
use workloads::larson::{larson, Mail};

/// Ops between yields of a McRT thread.
const YIELD_EVERY: usize = 100;
/// Software thread counts.
const THREADS: [usize; 5] = [1, 2, 4, 8, 16];

/// The allocators compared.
#[derive(Clone, Copy, PartialEq)]
enum Allocator {
    Locked,
    NonBlocking,
    System,
    Mimalloc,
}

impl Allocator {
    const ALL: [Allocator; 4] =
        [Allocator::Locked, Allocator::NonBlocking, Allocator::System, Allocator::Mimalloc];

    fn name(self) -> &'static str {
        match self {
            Allocator::Locked => "mcrt-malloc-locked",
            Allocator::NonBlocking => "mcrt-malloc-nonblocking",
            Allocator::System => "system",
            Allocator::Mimalloc => "mimalloc",
        }
    }
}

/// Who runs the software threads.
#[derive(Clone, Copy, PartialEq)]
enum Threads {
    Mcrt,
    Os,
}

impl Threads {
    fn name(self) -> &'static str {
        match self {
            Threads::Mcrt => "mcrt-threads",
            Threads::Os => "os-threads",
        }
    }
}

static MCRT: McrtMalloc = McrtMalloc;
static SYSTEM: System = System;
static MIMALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The experiment's RESULT lines.
pub fn run(quick: bool) -> Vec<String> {
    let total_ops = if quick { 20_000 } else { 4_000_000 };
    let trials = if quick { 1 } else { 3 };
    let cores = cpus();
    let mut out = Vec::new();
    for threads in [Threads::Mcrt, Threads::Os] {
        for n in THREADS {
            let config = format!("{}/{n}", threads.name());
            let mut rate = [0.0; 4];
            for (k, a) in Allocator::ALL.into_iter().enumerate() {
                rate[k] = median_of(trials, || ops_per_s(threads, a, n, total_ops, cores));
                out.push(line(
                    "mcrt_larson",
                    a.name(),
                    Some(&config),
                    cores,
                    "ops_per_s",
                    rate[k],
                    "ops/s",
                ));
            }
            for k in 0..2 {
                let name = Allocator::ALL[k].name();
                for (peer, r) in [("system", rate[2]), ("mimalloc", rate[3])] {
                    let metric = format!("ratio_to_{peer}");
                    out.push(line(
                        "mcrt_larson",
                        name,
                        Some(&config),
                        cores,
                        &metric,
                        rate[k] / r,
                        "x",
                    ));
                }
            }
        }
    }
    out
}

/// One run: `n` software threads of kind `threads` on allocator `a`; ops per second.
fn ops_per_s(threads: Threads, a: Allocator, n: usize, total_ops: usize, cores: usize) -> f64 {
    match a {
        Allocator::Locked => mcrt::malloc::set_version(Version::Locked),
        Allocator::NonBlocking => mcrt::malloc::set_version(Version::NonBlocking),
        _ => {}
    }
    let per_thread = total_ops / n;
    let secs = match a {
        Allocator::Locked | Allocator::NonBlocking => timed(threads, &MCRT, n, per_thread, cores),
        Allocator::System => timed(threads, &SYSTEM, n, per_thread, cores),
        Allocator::Mimalloc => timed(threads, &MIMALLOC, n, per_thread, cores),
    };
    (per_thread * n) as f64 / secs
}

/// Runs `n` threads of Larson on `a`, each doing `ops` ops; seconds taken.
fn timed<A: GlobalAlloc + Sync>(
    threads: Threads,
    a: &'static A,
    n: usize,
    ops: usize,
    cores: usize,
) -> f64 {
    let mail = Arc::new(Mail::new(n));
    match threads {
        Threads::Os => {
            let start = Instant::now();
            let hs: Vec<_> = (0..n)
                .map(|i| {
                    let mail = mail.clone();
                    std::thread::spawn(move || larson(a, &mail, i, ops, None))
                })
                .collect();
            for h in hs {
                h.join().expect("larson thread");
            }
            let secs = start.elapsed().as_secs_f64();
            mail.drain(a);
            secs
        }
        Threads::Mcrt => {
            let config = mcrt::Config::new(mcrt::Policy::Stealing, cores);
            mcrt::run(config, &LinuxHost::pinned(), move || {
                let start = Instant::now();
                let hs: Vec<_> = (0..n)
                    .map(|i| {
                        let mail = mail.clone();
                        let body = move || larson(a, &mail, i, ops, Some(YIELD_EVERY));
                        mcrt::spawn(body).expect("mcrt spawn")
                    })
                    .collect();
                for h in hs {
                    h.join().expect("larson thread");
                }
                let secs = start.elapsed().as_secs_f64();
                mail.drain(a);
                secs
            })
            .expect("mcrt run")
        }
    }
}
