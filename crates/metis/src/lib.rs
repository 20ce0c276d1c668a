//! Metis, the MapReduce library of Corey (OSDI'08 §6.1): Phoenix reimplemented "to use
//! better algorithms for manipulating the intermediate data", here on McRT (`crates/mcrt`),
//! `no_std` + `alloc`, so the same code runs hosted on Linux and as an Atoll program.
//!
//! A job goes through five steps ([`engine`]):
//! 1. **Split**: the input is cut into `threads × 16` map tasks at unit boundaries (words,
//!    for text: [`Job::split_at`]); workers take tasks from one shared counter.
//! 2. **Sample**: about 5 % of the map tasks (at least one per worker) run first, counting
//!    new keys, to predict the number of distinct keys ([`plan`]); reduce tasks =
//!    keys / 10, clamped to `[16 × threads, 100 × threads]` and rounded up to a prime.
//! 3. **Map**: the rest of the tasks. Each worker owns one row of the intermediate table,
//!    one cell per reduce task; a key goes to the column its hash picks. A cell is a sorted
//!    array or a B-tree ([`cell`], [`CellKind`]); values are grouped per key, or folded
//!    into one by the job's combiner ([`Job::COMBINES`]).
//! 4. **Reduce**: reduce task `c` merges column `c` of every row, key by key, and calls
//!    [`Job::reduce`] on each key's grouped values.
//! 5. **Merge**: the reduce outputs are sorted into the job's output order with PSRS,
//!    parallel sorting by regular sampling ([`psrs`]).
//!
//! A new application is one small file implementing [`Job`] (see [`apps`]). The memory
//! layout is a hook ([`Layout`]) the Atoll side fills in to place each worker's data in the
//! address ranges of Corey's Figure 4 (§3.1). Hosted, [`hosted::run`] starts McRT on Linux.
#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

pub mod apps;
pub mod cell;
pub mod engine;
#[cfg(feature = "std")]
pub mod hosted;
pub mod job;
pub mod layout;
pub mod plan;
pub mod psrs;
pub mod reference;
pub mod text;

pub use cell::CellKind;
pub use engine::{run, run_with, Output, Stats};
pub use job::{Emit, Groups, Job, Key, Values};
pub use layout::{Edge, Layout, Phase, SharedLayout};

/// The most workers a job may have: rows of the intermediate table, and McRT threads per
/// phase. More is refused ([`Error::TooManyThreads`]) rather than made to thrash.
pub const MAX_THREADS: usize = 256;

/// Why a job did not run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// `threads` was 0.
    NoThreads,
    /// More than [`MAX_THREADS`] workers were asked for.
    TooManyThreads {
        /// The number asked for.
        asked: usize,
    },
    /// A configuration value out of range (named).
    BadConfig(&'static str),
    /// [`run`] was called outside a McRT runtime (start one with `mcrt::run`, or
    /// [`hosted::run`] on Linux).
    NotInRuntime,
    /// McRT could not start (hosted: [`hosted::run`]).
    Runtime(mcrt::Error),
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::NoThreads => write!(f, "metis: threads must be at least 1"),
            Error::TooManyThreads { asked } => {
                write!(f, "metis: {asked} threads asked for, at most {MAX_THREADS}")
            }
            Error::BadConfig(what) => write!(f, "metis: bad configuration: {what}"),
            Error::NotInRuntime => write!(f, "metis: a job runs inside a McRT runtime"),
            Error::Runtime(e) => write!(f, "metis: McRT failed to start: {e:?}"),
        }
    }
}

/// How a job runs: workers, task counts, the cell structure and a clock.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Workers (McRT threads per phase, rows of the intermediate table): 1 ..= [`MAX_THREADS`].
    pub threads: usize,
    /// Map tasks per worker (Metis: 16).
    pub tasks_per_thread: usize,
    /// Percentage of the map tasks the sampling phase runs (Metis: 5; at least one task
    /// per worker; 0: no sampling, the fewest reduce tasks).
    pub sample_percent: usize,
    /// Reduce tasks, when given: no sampling phase then.
    pub reduce_tasks: Option<usize>,
    /// The structure of one cell of the intermediate table.
    pub cell: CellKind,
    /// Nanoseconds since any fixed point, for [`Stats`]; `None`: the times are 0.
    pub clock: Option<fn() -> u64>,
}

impl Config {
    /// Metis's defaults for `threads` workers: 16 map tasks per worker, 5 % sampled, the
    /// sorted-array cell (the faster one measured: `docs/metis.md`), no clock.
    pub fn new(threads: usize) -> Config {
        Config {
            threads,
            tasks_per_thread: 16,
            sample_percent: 5,
            reduce_tasks: None,
            cell: CellKind::SortedArray,
            clock: None,
        }
    }

    /// Checks the ranges; the first value out of range is the error.
    pub fn check(&self) -> Result<(), Error> {
        if self.threads == 0 {
            return Err(Error::NoThreads);
        }
        if self.threads > MAX_THREADS {
            return Err(Error::TooManyThreads { asked: self.threads });
        }
        if self.tasks_per_thread == 0 || self.tasks_per_thread > 1024 {
            return Err(Error::BadConfig("tasks_per_thread must be 1..=1024"));
        }
        if self.sample_percent > 100 {
            return Err(Error::BadConfig("sample_percent must be 0..=100"));
        }
        if self.reduce_tasks == Some(0) || self.reduce_tasks.is_some_and(|r| r > 1 << 20) {
            return Err(Error::BadConfig("reduce_tasks must be 1..=2^20"));
        }
        Ok(())
    }
}
