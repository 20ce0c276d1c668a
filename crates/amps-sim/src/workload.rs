//! The shapes of the scheduler experiments of `workloads/src/amps.rs` (issue M7), as the
//! M7 runs ran them (`run ampsbench <experiment> 200000`): thread counts, work per thread
//! and how the threads wait for each other. Work is in cycles of a full-speed core.

/// TSC cycles of one work unit (64 xorshift steps) on a full-speed core under TCG: the M7
/// run's `amps_jobs` at full speed took 221 Mcycles for 8 jobs of 200,000 units on 2 cores
/// (docs/bench.md's first M7 table), 221e6 × 2 / 1.6e6 = 276.
pub const CYCLES_PER_UNIT: u64 = 276;

/// Units per job in the M7 runs (`xtask` registry: `amps_jobs,200000`).
pub const UNITS: u64 = 200_000;

/// `amps_numa`'s sweep of its 4 MiB buffer per step, in full-speed cycles: its symmetric
/// makespan (608 Mcycles, 10 steps at half speed) less the work units' share.
pub const NUMA_SWEEP_CYCLES: u64 = 2_800_000;

/// `amps_server`'s time budget (cycles).
pub const SERVER_BUDGET: u64 = 200_000_000;

/// One experiment of `workloads::amps`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// `jobs`: `4N` jobs of `UNITS` each, all started at once (Kernbench, Figure 5).
    Jobs,
    /// `omp`: `N` threads, 20 steps of `UNITS / N` each, a barrier after each step
    /// (SPEC OMP, Figure 5).
    Omp,
    /// `fairness`: `4N` workers, each job replaced when it ends until `8N` have started;
    /// the metric is the median completion of the first `4N` (Ogg Vorbis, Figure 6).
    Fairness,
    /// `server`: `workers` threads doing transactions of `UNITS / 100` until the budget
    /// is spent; the metric is transactions per Gcycle (SPECjbb, Figure 7).
    Server {
        /// W.
        workers: usize,
    },
    /// `numa` under `numa=always`: `omp` with a buffer per thread swept every step, 10
    /// steps (Figure 11; under TCG remote memory costs what local memory does).
    Numa,
}

impl Workload {
    /// The experiment's name (`amps_jobs`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Workload::Jobs => "amps_jobs",
            Workload::Omp => "amps_omp",
            Workload::Fairness => "amps_fairness",
            Workload::Server { .. } => "amps_server",
            Workload::Numa => "amps_numa",
        }
    }

    /// A label with the workers for `amps_server` (`amps_server/W=3`).
    pub fn label(self) -> String {
        match self {
            Workload::Server { workers } => format!("amps_server/W={workers}"),
            w => w.name().to_string(),
        }
    }

    /// Every experiment the M7 median counts on `cores` cores, in the doc's order: jobs,
    /// omp, fairness, server at W = 1 … 2N, numa.
    pub fn all(cores: usize) -> Vec<Workload> {
        let mut all = vec![Workload::Jobs, Workload::Omp, Workload::Fairness];
        all.extend((1..=2 * cores).map(|workers| Workload::Server { workers }));
        all.push(Workload::Numa);
        all
    }

    /// Worker threads on `cores` cores.
    pub fn threads(self, cores: usize) -> usize {
        match self {
            Workload::Jobs | Workload::Fairness => 4 * cores,
            Workload::Omp | Workload::Numa => cores,
            Workload::Server { workers } => workers,
        }
    }

    /// Barrier steps per thread (`omp`: 20, `numa`: 10; 1 otherwise).
    pub fn steps(self) -> u32 {
        match self {
            Workload::Omp => 20,
            Workload::Numa => 10,
            _ => 1,
        }
    }

    /// Work of one segment (a job, a step, a transaction) in full-speed cycles, with a
    /// work unit costing `unit_cycles` ([`CYCLES_PER_UNIT`] as measured).
    pub fn segment_cycles(self, cores: usize, unit_cycles: u64) -> u64 {
        let n = cores.max(1) as u64;
        match self {
            Workload::Jobs | Workload::Fairness => UNITS * unit_cycles,
            Workload::Omp => UNITS / n * unit_cycles,
            Workload::Numa => UNITS / n * unit_cycles + NUMA_SWEEP_CYCLES,
            Workload::Server { .. } => (UNITS / 100).max(1) * unit_cycles,
        }
    }

    /// Whether the metric is a throughput (higher is better) rather than a time.
    pub fn higher_is_better(self) -> bool {
        matches!(self, Workload::Server { .. })
    }
}
