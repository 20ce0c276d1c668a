//! The scheduler experiments of issue M7 (AMPS, SC'07), written once over the
//! [`crate::Platform`] threads: the threads are *not* pinned, so where they run and move is
//! the system's scheduler's choice — what these experiments measure. On Atoll they are
//! kernel threads (`libatoll::thread`), on Linux pthreads (`std::thread`).
//!
//! | function | stands for | paper |
//! | --- | --- | --- |
//! | [`thread_switch`] | a `yield` ping-pong of two threads on one core | thread costs |
//! | [`lrpc`] | a call and its reply between two threads on one core, through the kernel (`wait`/`wake`, futex) | Multikernel Table 1, issue M9 |
//! | [`thread_create`] | creating and joining an empty thread | thread costs |
//! | [`jobs`] | `4N` short single-threaded jobs at once (Kernbench) | Table 2, Figure 5 |
//! | [`omp`] | `N` threads, a data-parallel step and a barrier per iteration (SPEC OMP) | Table 2, Figure 5 |
//! | [`fairness`] | `4N` identical jobs, each replaced when it ends: completion times | Figure 6 |
//! | [`server`] | `W` workers doing short transactions for a fixed time (SPECjbb) | Figure 7 |
//! | [`numa`] | [`omp`] with a buffer of its own per thread, swept every step | Figure 11, Table 4 |
//! | [`thread_migrate`] | a thread moving itself between cores 0 and 1 | Table 3 (migration cost) |
//!
//! The work is an integer xorshift chain (no FPU, no memory traffic): the same on every
//! core, so a core's speed is all that differs between cores.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::result::{self, median};
use crate::Platform;

/// Units of work (xorshift rounds of 64 steps) in one job when none are asked for.
pub const DEFAULT_JOB_UNITS: u64 = 20_000;

/// `units` rounds of the fixed integer work; returns its value so it is not optimised away.
/// Never inlined: every experiment, on both systems, runs this same code (inlined, its
/// code changed with whatever else the crate held, and with it its speed under TCG).
#[inline(never)]
pub fn work(seed: u64, units: u64) -> u64 {
    let mut x = seed | 1;
    for _ in 0..units {
        for _ in 0..64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
    }
    x
}

/// Keeps a value alive (work whose result nobody reads could be dropped by the compiler).
fn keep(value: u64, sink: &AtomicU64) {
    sink.fetch_xor(value, Ordering::Relaxed);
}

/// Median cycles per switch of two threads on core 0 that yield to each other `rounds`
/// times each (a switch is one thread's yield giving the core to the other). Linux's peer
/// is `sched_yield`; Atoll's is `yield`.
pub fn thread_switch<P: Platform + ?Sized>(
    p: &P,
    rounds: u64,
    repeats: usize,
) -> Result<u64, String> {
    let mut samples = Vec::new();
    for _ in 0..repeats.max(1) {
        let started = AtomicU32::new(0);
        let spans: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];
        p.run_threads(2, Some(0), &|i| {
            // Both threads first: one that ran alone would yield to nobody.
            started.fetch_add(1, Ordering::AcqRel);
            while started.load(Ordering::Acquire) < 2 {
                p.yield_now();
            }
            let start = p.cycles();
            for _ in 0..rounds {
                p.yield_now();
            }
            spans[i].store(p.cycles() - start, Ordering::Relaxed);
        })?;
        let longest = spans[0].load(Ordering::Relaxed).max(spans[1].load(Ordering::Relaxed));
        // Each thread's span holds its own `rounds` yields and the other's: 2 × rounds
        // switches.
        samples.push(longest / (2 * rounds.max(1)));
    }
    Ok(median(&mut samples).unwrap_or(0))
}

/// The two words of an [`lrpc`] call, each on a cache line of its own.
#[repr(C, align(64))]
struct CallWords {
    call: AtomicU32,
    _pad: [u32; 15],
    reply: AtomicU32,
}

/// Sleeps (in the kernel) until `word` holds `value`.
fn wait_for<P: Platform + ?Sized>(p: &P, word: &AtomicU32, value: u32) {
    loop {
        let seen = word.load(Ordering::Acquire);
        if seen == value {
            return;
        }
        p.wait_word(word, seen);
    }
}

/// Multikernel Table 1's LRPC (Bershad's lightweight RPC, the paper's comparison for a
/// call within one core): median one-way cycles of a call between two threads on core 0
/// through the kernel. The caller writes the request word and wakes the callee, asleep in
/// the kernel (`wait_word`: Atoll's `wait`, Linux's futex), then sleeps until the reply
/// word changes; one way is half the round trip, each a wake-up and a switch on one core.
pub fn lrpc<P: Platform + ?Sized>(p: &P, rounds: u32) -> Result<u64, String> {
    let words = CallWords { call: AtomicU32::new(0), _pad: [0; 15], reply: AtomicU32::new(0) };
    let samples: Vec<AtomicU64> = (0..rounds.max(1)).map(|_| AtomicU64::new(0)).collect();
    p.run_threads(2, Some(0), &|i| {
        for (r, sample) in (1..).zip(&samples) {
            if i == 0 {
                let start = p.cycles();
                words.call.store(r, Ordering::Release);
                p.wake_word(&words.call, 1);
                wait_for(p, &words.reply, r);
                sample.store(p.cycles() - start, Ordering::Relaxed);
            } else {
                wait_for(p, &words.call, r);
                words.reply.store(r, Ordering::Release);
                p.wake_word(&words.reply, 1);
            }
        }
    })?;
    let mut rtts: Vec<u64> = samples.iter().map(|s| s.load(Ordering::Relaxed)).collect();
    Ok(median(&mut rtts).unwrap_or(0) / 2)
}

/// Median cycles to create an empty thread and join it, over `n` in a row.
pub fn thread_create<P: Platform + ?Sized>(p: &P, n: usize) -> Result<u64, String> {
    let mut samples = Vec::with_capacity(n);
    let sink = AtomicU64::new(0);
    for i in 0..n.max(1) {
        let start = p.cycles();
        p.run_threads(1, None, &|_| keep(i as u64, &sink))?;
        samples.push(p.cycles() - start);
    }
    Ok(median(&mut samples).unwrap_or(0))
}

/// Kernbench's analogue: `4N` jobs of `units` each, all started at once, unpinned.
/// Returns the makespan in cycles (start to the last job's end).
pub fn jobs<P: Platform + ?Sized>(p: &P, units: u64) -> Result<u64, String> {
    let n = 4 * p.cores();
    let sink = AtomicU64::new(0);
    let start = p.cycles();
    p.run_threads(n, None, &|i| keep(work(i as u64, units), &sink))?;
    Ok(p.cycles() - start)
}

/// SPEC OMP's analogue: `N` threads (unpinned), `iterations` steps, each thread doing its
/// share of `units` per step, then a barrier (on a futex word: a waiting thread gives up
/// its core). Returns the makespan in cycles.
pub fn omp<P: Platform + ?Sized>(p: &P, units: u64, iterations: u32) -> Result<u64, String> {
    let n = p.cores() as u32;
    let barrier = Barrier::new(n);
    let sink = AtomicU64::new(0);
    let start = p.cycles();
    p.run_threads(n as usize, None, &|i| {
        for step in 0..iterations {
            keep(work(i as u64 + u64::from(step), units / u64::from(n)), &sink);
            barrier.wait(p);
        }
    })?;
    Ok(p.cycles() - start)
}

/// AMPS §3.3's experiment (SPEC OMP on a NUMA machine): `N` threads (unpinned), each
/// with a buffer of `mb` MiB of its own that it fills (an allocation phase) and then sweeps
/// every step beside its share of `units`, a barrier per step, 10 steps. Returns the
/// makespan in cycles. Run under each NUMA policy (`numa=`) on a VM with a node per core.
pub fn numa<P: Platform + ?Sized>(p: &P, units: u64, mb: usize) -> Result<u64, String> {
    let n = p.cores() as u32;
    let barrier = Barrier::new(n);
    let sink = AtomicU64::new(0);
    let start = p.cycles();
    p.run_threads(n as usize, None, &|i| {
        let mut buffer = alloc::vec![i as u64; mb * 1024 * 1024 / 8];
        for step in 0..10u64 {
            let mut sum = 0u64;
            for word in buffer.iter_mut() {
                *word = word.wrapping_add(step);
                sum = sum.wrapping_add(*word);
            }
            keep(sum ^ work(i as u64 + step, units / u64::from(n)), &sink);
            barrier.wait(p);
        }
    })?;
    Ok(p.cycles() - start)
}

/// A barrier for `n` threads on one futex word (the generation) and a count.
pub struct Barrier {
    n: u32,
    arrived: AtomicU32,
    generation: AtomicU32,
}

impl Barrier {
    /// A barrier for `n` threads.
    pub fn new(n: u32) -> Barrier {
        Barrier { n: n.max(1), arrived: AtomicU32::new(0), generation: AtomicU32::new(0) }
    }

    /// Waits until all `n` have arrived.
    pub fn wait<P: Platform + ?Sized>(&self, p: &P) {
        let generation = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.n {
            self.arrived.store(0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::AcqRel);
            p.wake_word(&self.generation, u32::MAX);
            return;
        }
        while self.generation.load(Ordering::Acquire) == generation {
            p.wait_word(&self.generation, generation);
        }
    }
}

/// Figure 6: `4N` worker threads (unpinned) each run identical jobs of `units` until `8N`
/// jobs have started (each job's end starts the next, so the load stays at `4N`). Returns
/// the completion time (cycles from the start) of each worker's first job: the first `4N`.
pub fn fairness<P: Platform + ?Sized>(p: &P, units: u64) -> Result<Vec<u64>, String> {
    let n = 4 * p.cores();
    let started = AtomicU64::new(n as u64);
    let firsts: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
    let sink = AtomicU64::new(0);
    let start = p.cycles();
    p.run_threads(n, None, &|i| {
        keep(work(i as u64, units), &sink);
        firsts[i].store(p.cycles() - start, Ordering::Relaxed);
        while started.fetch_add(1, Ordering::AcqRel) < 2 * n as u64 {
            keep(work(i as u64 + 1, units), &sink);
        }
    })?;
    Ok(firsts.iter().map(|f| f.load(Ordering::Relaxed)).collect())
}

/// Median cycles for a thread to move itself from one core to the other (cores 0 and 1),
/// over `moves` moves: the cost of one migration (AMPS Table 3).
pub fn thread_migrate<P: Platform + ?Sized>(p: &P, moves: usize) -> Result<u64, String> {
    if p.cores() < 2 {
        return Err("needs 2 cores".into());
    }
    let samples: Vec<AtomicU64> = (0..moves.max(1)).map(|_| AtomicU64::new(0)).collect();
    let failed = AtomicU32::new(0);
    p.run_threads(1, Some(0), &|_| {
        for (i, sample) in samples.iter().enumerate() {
            let start = p.cycles();
            if p.move_to((i + 1) % 2).is_err() {
                failed.store(1, Ordering::Relaxed);
                return;
            }
            sample.store(p.cycles() - start, Ordering::Relaxed);
        }
    })?;
    if failed.load(Ordering::Relaxed) != 0 {
        return Err("a move failed".into());
    }
    let mut values: Vec<u64> = samples.iter().map(|s| s.load(Ordering::Relaxed)).collect();
    Ok(median(&mut values).unwrap_or(0))
}

/// SPECjbb's analogue (Figure 7): `workers` threads (unpinned) each run transactions of
/// `units / 100` work for `budget` cycles from a common start; returns the transactions
/// done per billion cycles.
pub fn server<P: Platform + ?Sized>(
    p: &P,
    workers: usize,
    units: u64,
    budget: u64,
) -> Result<u64, String> {
    let done = AtomicU64::new(0);
    let sink = AtomicU64::new(0);
    let start = p.cycles();
    p.run_threads(workers, None, &|i| {
        let mut n = 0u64;
        while p.cycles() - start < budget {
            keep(work(i as u64 + n, (units / 100).max(1)), &sink);
            n += 1;
        }
        done.fetch_add(n, Ordering::Relaxed);
    })?;
    Ok(done.load(Ordering::Relaxed) * 1_000_000_000 / budget.max(1))
}

/// What the scheduler experiment lines say about the run: which scheduler (`amps`,
/// `symmetric`, `linux`) and which cores were slowed (`asym`), given by the caller (the
/// program's arguments, from how the system was booted).
#[derive(Clone, Debug, Default)]
pub struct Setting {
    /// The scheduler: `amps` or `symmetric` on Atoll, `cfs` on Linux.
    pub sched: String,
    /// The slowed cores as `make` was told (`ASYM`), or `none`.
    pub asym: String,
}

impl Setting {
    /// The fields every result line of this setting carries (`config`, `asym`).
    pub fn extra(&self) -> String {
        format!(",\"config\":\"{}\",\"asym\":\"{}\"", self.sched, self.asym)
    }
}

/// Runs `experiment` (`thread_switch`, `thread_create`, `amps_jobs`, `amps_omp`,
/// `amps_fairness`) and returns its result lines.
pub fn run<P: Platform + ?Sized>(
    p: &P,
    experiment: &str,
    units: u64,
    setting: &Setting,
) -> Result<Vec<String>, String> {
    let (sys, cores, extra) = (p.system(), p.cores(), setting.extra());
    let line = |metric: &str, value: u64, unit: &str| {
        result::line(sys, experiment, cores, metric, value, unit, &extra)
    };
    let mut lines = run_one(p, experiment, units, &line)?;
    // AMPS Table 3: how often the threads moved (where the system counts it).
    if experiment.starts_with("amps_") {
        if let Some(m) = p.migrations() {
            lines.push(line("migrations", m, "moves"));
        }
    }
    Ok(lines)
}

/// The lines of one experiment, made by `line(metric, value, unit)`.
fn run_one<P: Platform + ?Sized>(
    p: &P,
    experiment: &str,
    units: u64,
    line: &dyn Fn(&str, u64, &str) -> String,
) -> Result<Vec<String>, String> {
    Ok(match experiment {
        "thread_switch" => {
            alloc::vec![line("cycles_per_switch", thread_switch(p, 2000, 5)?, "cycles")]
        }
        "thread_create" => {
            alloc::vec![line("cycles_per_create_join", thread_create(p, 101)?, "cycles")]
        }
        "lrpc" => {
            // UNITS, when given, is the number of calls (1000 by default).
            let calls = if units == DEFAULT_JOB_UNITS { 1000 } else { units.clamp(1, 100_000) };
            alloc::vec![line("one_way_cycles", lrpc(p, calls as u32)?, "cycles")]
        }
        "amps_jobs" => alloc::vec![line("makespan_kcycles", jobs(p, units)? / 1000, "kcycles")],
        "amps_omp" => {
            alloc::vec![line("makespan_kcycles", omp(p, units, 20)? / 1000, "kcycles")]
        }
        "thread_migrate" => alloc::vec![line("cycles_per_move", thread_migrate(p, 101)?, "cycles")],
        "amps_server" => {
            // W = 1 … 2N workers, for 200 Mcycles each (a run per W; REPEAT gives the
            // paper's three runs for repeatability).
            let mut lines = Vec::new();
            for workers in 1..=2 * p.cores() {
                let tput = server(p, workers, units, 200_000_000)?;
                let text = line("tx_per_gcycle", tput, "tx/Gcycle");
                // `workers` makes rows of its own in the report.
                lines.push(text.replacen(
                    "\"unit\"",
                    &format!("\"workers\":{workers},\"unit\""),
                    1,
                ));
            }
            lines
        }
        "amps_numa" => {
            alloc::vec![line("makespan_kcycles", numa(p, units, 4)? / 1000, "kcycles")]
        }
        "amps_fairness" => {
            let mut times = fairness(p, units)?;
            times.sort_unstable();
            let (first, last) = (times[0], times[times.len() - 1]);
            let mid = median(&mut times.clone()).unwrap_or(1).max(1);
            alloc::vec![
                line("completion_median_kcycles", mid / 1000, "kcycles"),
                line("completion_spread_pct", (last - first) * 100 / mid, "%"),
                line("completion_last_kcycles", last / 1000, "kcycles"),
            ]
        }
        other => return Err(format!("no scheduler experiment `{other}`")),
    })
}

/// The experiments [`run`] knows.
pub const EXPERIMENTS: &[&str] = &[
    "thread_switch",
    "thread_create",
    "lrpc",
    "thread_migrate",
    "amps_jobs",
    "amps_omp",
    "amps_fairness",
    "amps_server",
    "amps_numa",
];
