//! `mcrt_futures`, McRT Figure 3: batches of empty futures against batches of empty
//! threads (spawn all, then read/join all; the median of many batches in one run), and the
//! per-operation cost of a future against `rayon::join` and a `tokio` spawn + await, on 1
//! and 2 processors.

use super::{cpus, line};
use crate::median_of;
use mcrt::hosted::LinuxHost;
use mcrt::{Config, Policy};
use std::hint::black_box;
use std::time::Instant;

const EXPERIMENT: &str = "mcrt_futures";

fn ns_per(start: Instant, n: usize) -> f64 {
    start.elapsed().as_secs_f64() * 1e9 / n as f64
}

/// Batches one timed sample covers: enough for 1,000 operations, so the clock's own cost
/// (about 20 ns a reading) does not swamp a batch of 10 empty futures.
fn batches_per_sample(batch: usize) -> usize {
    (1000 / batch).max(1)
}

/// The median over samples of `batch()`'s ns per operation (samples of
/// [`batches_per_sample`] batches, about 200,000 operations in all, 5 samples at least),
/// after one sample to warm up: the paper timed batches in a running program, and a
/// runtime's first batch also pays for its start.
fn median_batch(batch: usize, mut one_batch: impl FnMut()) -> f64 {
    let per_sample = batches_per_sample(batch);
    let mut sample = || {
        let start = Instant::now();
        for _ in 0..per_sample {
            one_batch();
        }
        ns_per(start, batch * per_sample)
    };
    sample();
    median_of((200_000 / (batch * per_sample)).clamp(5, 200), sample)
}

/// ns per future: batches of `batch` empty futures spawned, then all read, on `p`
/// processors.
fn mcrt_futures(p: usize, batch: usize) -> f64 {
    mcrt::run(Config::new(Policy::Stealing, p), &LinuxHost::pinned(), move || {
        // One vector of handles for every batch, as an array would be: the batch times the
        // futures, not the allocator (a fresh vector cost 2 ns a future in batches of 10).
        let mut fs = Vec::with_capacity(batch);
        median_batch(batch, || {
            fs.extend((0..batch).map(|i| mcrt::future::spawn(|x: usize| x, i)));
            for f in fs.drain(..) {
                black_box(f.read());
            }
        })
    })
    .expect("mcrt runs")
}

/// ns per thread: batches of `batch` empty threads created, then all joined.
fn mcrt_threads(p: usize, batch: usize) -> f64 {
    mcrt::run(Config::new(Policy::Stealing, p), &LinuxHost::pinned(), move || {
        let mut hs = Vec::with_capacity(batch);
        median_batch(batch, || {
            hs.extend((0..batch).map(|i| mcrt::spawn(move || i).expect("spawn")));
            for h in hs.drain(..) {
                black_box(h.join());
            }
        })
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
    median_batch(batch, || {
        rt.block_on(async {
            let hs: Vec<_> = (0..batch).map(|i| tokio::spawn(async move { i })).collect();
            for h in hs {
                black_box(h.await.expect("task"));
            }
        })
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
