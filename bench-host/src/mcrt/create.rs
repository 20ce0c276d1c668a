//! `mcrt_create`, McRT Figure 2: the cost of creating a thread against the number of live
//! threads (created, none joined yet), up to 20,000: McRT against `std::thread` (64 KiB
//! stacks, as McRT's; up to 5,000, below the mapping limit).

use super::line;
use crate::median_of;
use mcrt::hosted::LinuxHost;
use mcrt::{Config, Policy};
use std::time::Instant;

const EXPERIMENT: &str = "mcrt_create";
/// Most OS threads live at once (see `run`).
const STD_THREADS_MAX: usize = 5_000;

/// ns per McRT thread created while `n` are live.
fn mcrt(n: usize) -> f64 {
    mcrt::run(Config::new(Policy::Local, 1), &LinuxHost::pinned(), move || {
        let start = Instant::now();
        let hs: Vec<_> = (0..n).map(|_| mcrt::spawn(|| ()).expect("spawn")).collect();
        let t = start.elapsed().as_secs_f64() * 1e9 / n as f64;
        for h in hs {
            h.join();
        }
        t
    })
    .expect("mcrt runs")
}

/// ns per OS thread created while `n` are live (each waits until all exist).
fn std_threads(n: usize) -> f64 {
    let gate = std::sync::Arc::new(std::sync::RwLock::new(()));
    let hold = gate.write().expect("lock");
    let start = Instant::now();
    let hs: Vec<_> = (0..n)
        .map(|_| {
            let g = gate.clone();
            std::thread::Builder::new()
                .stack_size(64 * 1024)
                .spawn(move || drop(g.read()))
                .expect("thread")
        })
        .collect();
    let t = start.elapsed().as_secs_f64() * 1e9 / n as f64;
    drop(hold);
    for h in hs {
        h.join().expect("thread");
    }
    t
}

/// The experiment's lines.
pub fn run(quick: bool) -> Vec<String> {
    let sizes: &[usize] = if quick { &[10, 100] } else { &[100, 1000, 5000, 10_000, 20_000] };
    let trials = if quick { 1 } else { 3 };
    let mut out = Vec::new();
    for &n in sizes {
        let config = format!("live{n}");
        out.push(line(
            EXPERIMENT,
            "mcrt",
            Some(&config),
            1,
            "create_ns",
            median_of(trials, || mcrt(n)),
            "ns",
        ));
        // Each OS thread costs the process several memory mappings (its stack, guard
        // pages, its signal stack): past a few thousand live ones they reach Linux's
        // default vm.max_map_count (65530), and creating one aborts the process.
        if n <= STD_THREADS_MAX {
            let ns = median_of(trials, || std_threads(n));
            out.push(line(EXPERIMENT, "std-thread", Some(&config), 1, "create_ns", ns, "ns"));
        }
    }
    out
}
