//! mcrt_stm (McRT Figure 12): a concurrent AVL tree, 80 % lookups and 20 % updates (half
//! inserts, half deletes) over a small key range, with the whole operation in one
//! critical section: one coarse lock (`mcrt::sync::Mutex`) against McRT's STM over the
//! same coarse atomic blocks (object and cache-line conflict detection), on McRT threads
//! (one per processor, pinned), and the same tree under the `stm-core` crate on std
//! threads. Reports operations per second at 1 and 2 cores.
//!
//! The tree is written once, over [`Mem`] (a node's left, right and height fields); each
//! variant supplies the memory. Node `k` holds key `k` (nodes live in an arena indexed by
//! key, since a key is in the tree at most once), so no variant allocates.

use super::line;
use mcrt::hosted::LinuxHost;
use mcrt::stm::{self, Granularity, TCell};
use mcrt::sync::{Mutex, MutexKind};
use mcrt::{Config, Policy};
use std::sync::Arc;
use std::time::Instant;
use workloads::avl::{operate, prefill, xorshift, InTx, Mem, Plain, StmNodes, KEYS, NIL};
#[cfg(test)]
use workloads::avl::{HEIGHT, LEFT, RIGHT, ROOT};

const EXPERIMENT: &str = "mcrt_stm";
/// `stm-core`'s transactional variables.
struct CoreNodes(Vec<[stm_core::TVar<u32>; 3]>);

struct InCoreTx<'a> {
    tx: &'a mut stm_core::Transaction,
    nodes: &'a CoreNodes,
}

impl Mem for InCoreTx<'_> {
    type E = stm_core::StmError;
    fn get(&mut self, n: u32, f: usize) -> Result<u32, Self::E> {
        self.nodes.0[n as usize][f].read(self.tx)
    }
    fn set(&mut self, n: u32, f: usize, v: u32) -> Result<(), Self::E> {
        self.nodes.0[n as usize][f].write(self.tx, v)
    }
}

// ---------------------------------------------------------------------------------------
// The variants: each runs `ops` operations on each of `cores` threads; returns ops/s.

/// Runs `body(thread)` on `cores` McRT threads (pinned processors); the seconds it took.
fn on_mcrt(cores: usize, body: impl Fn(u64) + Send + Sync + 'static) -> f64 {
    let body = Arc::new(body);
    mcrt::run(Config::new(Policy::Stealing, cores), &LinuxHost::pinned(), move || {
        let start = Instant::now();
        let hs: Vec<_> = (0..cores as u64)
            .map(|t| {
                let body = body.clone();
                mcrt::spawn(move || body(t)).expect("mcrt_stm: spawn")
            })
            .collect();
        for h in hs {
            h.join();
        }
        start.elapsed().as_secs_f64()
    })
    .expect("mcrt_stm: run")
}

fn coarse_lock(cores: usize, ops: u64) -> f64 {
    let mut plain = Plain(vec![[NIL, NIL, 0]; KEYS as usize + 1]);
    let Ok(()) = prefill(&mut plain);
    let tree = Arc::new(Mutex::new(MutexKind::Tts, plain));
    let secs = on_mcrt(cores, move |t| {
        let mut x = 0x9e37_79b9_7f4a_7c15 ^ (t + 1);
        for _ in 0..ops {
            let r = xorshift(&mut x);
            let Ok(_) = operate(&mut *tree.lock(), r);
        }
    });
    (ops * cores as u64) as f64 / secs
}

fn mcrt_stm(cores: usize, ops: u64, g: Granularity) -> f64 {
    let nodes =
        StmNodes((0..=KEYS).map(|_| [0; 3].map(|v| TCell::with_granularity(v, g))).collect());
    let nodes: &'static StmNodes = Box::leak(Box::new(nodes));
    stm::atomic(|tx| prefill(&mut InTx { tx, nodes }));
    let secs = on_mcrt(cores, move |t| {
        let mut x = 0x9e37_79b9_7f4a_7c15 ^ (t + 1);
        for _ in 0..ops {
            let r = xorshift(&mut x);
            stm::atomic(|tx| operate(&mut InTx { tx, nodes }, r));
        }
    });
    (ops * cores as u64) as f64 / secs
}

/// Longest a `stm-core` trial may take before it counts as livelocked.
const STM_CORE_LIMIT: std::time::Duration = std::time::Duration::from_secs(20);

/// `stm-core`'s trial, given [`STM_CORE_LIMIT`]: NaN (reported as null) if it livelocks.
/// Its threads are then left spinning until the process exits, so it runs last.
fn stm_core_bounded(cores: usize, ops: u64) -> f64 {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(stm_core(cores, ops));
    });
    match rx.recv_timeout(STM_CORE_LIMIT) {
        Ok(v) => v,
        Err(_) => {
            eprintln!("bench-host: mcrt_stm: stm-core at {cores} cores livelocked (no end in {STM_CORE_LIMIT:?})");
            f64::NAN
        }
    }
}

fn stm_core(cores: usize, ops: u64) -> f64 {
    let nodes = Arc::new(CoreNodes((0..=KEYS).map(|_| [0; 3].map(stm_core::TVar::new)).collect()));
    stm_core::atomically(|tx| prefill(&mut InCoreTx { tx, nodes: &nodes }));
    let start = Instant::now();
    let hs: Vec<_> = (0..cores as u64)
        .map(|t| {
            let nodes = nodes.clone();
            std::thread::spawn(move || {
                let mut x = 0x9e37_79b9_7f4a_7c15 ^ (t + 1);
                for _ in 0..ops {
                    let r = xorshift(&mut x);
                    stm_core::atomically(|tx| operate(&mut InCoreTx { tx, nodes: &nodes }, r));
                }
            })
        })
        .collect();
    for h in hs {
        h.join().expect("mcrt_stm: a stm-core thread panicked");
    }
    (ops * cores as u64) as f64 / start.elapsed().as_secs_f64()
}

/// An implementation, its configuration, and one trial (ops/s).
type Variant<'a> = (&'static str, Option<&'static str>, &'a dyn Fn() -> f64);

/// Trials of each McRT variant (interleaved).
const TRIALS: usize = 5;

/// The experiment's RESULT lines: ops/s per variant at 1 and 2 cores (medians of
/// [`TRIALS`]).
/// `stm-core` runs a twentieth of the operations (it is far slower, and livelock-prone
/// under contention).
pub fn run(quick: bool) -> Vec<String> {
    let ops: u64 = if quick { 2_000 } else { 200_000 };
    let max = super::cpus().min(2);
    let mut out = Vec::new();
    for cores in 1..=max {
        let variants: [Variant; 3] = [
            ("mcrt-lock", Some("coarse"), &|| coarse_lock(cores, ops)),
            ("mcrt-stm", Some("object"), &|| mcrt_stm(cores, ops, Granularity::Object)),
            ("mcrt-stm", Some("cacheline"), &|| mcrt_stm(cores, ops, Granularity::CacheLine)),
        ];
        // Trials interleaved (lock, STM, STM, lock, ...): the host's speed drifts (two
        // vCPUs may share one physical core for a while), and each variant's median
        // should see the same drift.
        let mut trials: Vec<Vec<f64>> = variants.iter().map(|_| Vec::new()).collect();
        for _ in 0..TRIALS {
            for (i, (_, _, f)) in variants.iter().enumerate() {
                trials[i].push(f());
            }
        }
        for ((implementation, config, _), mut v) in variants.into_iter().zip(trials) {
            let m = record::median(&mut v).unwrap_or(f64::NAN);
            out.push(line(EXPERIMENT, implementation, config, cores, "ops_per_s", m, "ops/s"));
        }
    }
    // The peer last: a livelocked trial leaves its threads spinning.
    for cores in 1..=max {
        let mut v = Vec::new();
        for _ in 0..3 {
            let t = stm_core_bounded(cores, ops / 20);
            if t.is_nan() {
                v.clear();
                break;
            }
            v.push(t);
        }
        let m = record::median(&mut v).unwrap_or(f64::NAN);
        out.push(line(EXPERIMENT, "stm-core", None, cores, "ops_per_s", m, "ops/s"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tree stays a balanced search tree under the operation mix (checked on the plain
    /// memory, which every variant shares the code of).
    #[test]
    fn the_tree_stays_a_balanced_search_tree() {
        fn check(m: &mut Plain, n: u32, lo: u32, hi: u32) -> u32 {
            if n == NIL {
                return 0;
            }
            assert!(lo <= n && n < hi, "order broken at {n}");
            let (l, r) = (m.0[n as usize][LEFT], m.0[n as usize][RIGHT]);
            let (hl, hr) = (check(m, l, lo, n), check(m, r, n + 1, hi));
            assert!(hl.abs_diff(hr) <= 1, "unbalanced at {n}");
            assert_eq!(m.0[n as usize][HEIGHT], 1 + hl.max(hr));
            1 + hl.max(hr)
        }
        let mut m = Plain(vec![[NIL, NIL, 0]; KEYS as usize + 1]);
        let Ok(()) = prefill(&mut m);
        let mut x = 7;
        for _ in 0..20_000 {
            let Ok(_) = operate(&mut m, xorshift(&mut x));
            let root = m.0[ROOT as usize][LEFT];
            check(&mut m, root, 0, KEYS);
        }
    }

    #[test]
    fn quick_run_reports_every_variant() {
        let lines = run(true);
        assert_eq!(lines.len(), 4 * super::super::cpus().min(2));
    }
}
