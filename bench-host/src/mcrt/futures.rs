//! `mcrt_futures`, McRT Figure 3: batches of empty futures against batches of empty
//! threads (spawn all, then read/join all), and the per-operation cost of a future
//! against `rayon::join` and a `tokio` spawn + await, on 1 and 2 processors.

use super::{cpus, line, median_of};
use mcrt::hosted::LinuxHost;
use mcrt::{Config, Policy};
use std::hint::black_box;
use std::time::Instant;

const EXPERIMENT: &str = "mcrt_futures";

fn ns_per(start: Instant, n: usize) -> f64 {
    start.elapsed().as_secs_f64() * 1e9 / n as f64
}

fn mcrt_futures(p: usize, batch: usize) -> f64 {
    mcrt::run(Config::new(Policy::Stealing, p), &LinuxHost::pinned(), move || {
        let start = Instant::now();
        let fs: Vec<_> = (0..batch).map(|i| mcrt::future::spawn(|x: usize| x, i)).collect();
        for f in fs {
            black_box(f.read());
        }
        ns_per(start, batch)
    })
    .expect("mcrt runs")
}

fn mcrt_threads(p: usize, batch: usize) -> f64 {
    mcrt::run(Config::new(Policy::Stealing, p), &LinuxHost::pinned(), move || {
        let start = Instant::now();
        let hs: Vec<_> = (0..batch).map(|i| mcrt::spawn(move || i).expect("spawn")).collect();
        for h in hs {
            black_box(h.join());
        }
        ns_per(start, batch)
    })
    .expect("mcrt runs")
}

fn rayon_join(p: usize, n: usize) -> f64 {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(p).build().expect("pool");
    pool.install(|| {
        let start = Instant::now();
        for i in 0..n {
            black_box(rayon::join(|| black_box(i), || black_box(i)));
        }
        ns_per(start, n)
    })
}

fn tokio_spawn(p: usize, batch: usize) -> f64 {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(p).build().expect("tokio");
    rt.block_on(async move {
        let start = Instant::now();
        let hs: Vec<_> = (0..batch).map(|i| tokio::spawn(async move { i })).collect();
        for h in hs {
            black_box(h.await.expect("task"));
        }
        ns_per(start, batch)
    })
}

/// The experiment's lines.
pub fn run(quick: bool) -> Vec<String> {
    let batches: &[usize] = if quick { &[10] } else { &[10, 100, 1000, 10_000] };
    let trials = if quick { 1 } else { 5 };
    let mut out = Vec::new();
    for p in [1, 2].into_iter().filter(|&p| p <= cpus()) {
        for &b in batches {
            let config = format!("batch{b}");
            let fut = median_of(trials, || mcrt_futures(p, b));
            let thr = median_of(trials, || mcrt_threads(p, b));
            out.push(line(EXPERIMENT, "mcrt-future", Some(&config), p, "ns_per_op", fut, "ns"));
            out.push(line(EXPERIMENT, "mcrt-thread", Some(&config), p, "ns_per_op", thr, "ns"));
            out.push(line(
                EXPERIMENT,
                "mcrt",
                Some(&config),
                p,
                "thread_over_future",
                thr / fut,
                "ratio",
            ));
            out.push(line(
                EXPERIMENT,
                "tokio",
                Some(&config),
                p,
                "ns_per_op",
                median_of(trials, || tokio_spawn(p, b)),
                "ns",
            ));
        }
        let n = if quick { 100 } else { 100_000 };
        out.push(line(
            EXPERIMENT,
            "rayon-join",
            Some("join"),
            p,
            "ns_per_op",
            median_of(trials, || rayon_join(p, n)),
            "ns",
        ));
    }
    out
}
