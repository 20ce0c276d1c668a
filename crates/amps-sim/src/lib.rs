//! A host simulator of Atoll's per-core schedulers running the AMPS experiments (Li et
//! al., SC'07, §4; `workloads/src/amps.rs`) on performance-asymmetric cores, to find where
//! AMPS's speedup over the symmetric baseline goes (issue M15, item 2).
//!
//! The policy is not re-implemented: every decision is `crates/sched`'s (placement,
//! pulls, the load-table replica, the run queue and its slice, the inbox machine that
//! answers pulls and applies reports, `choose`). What the simulator adds is the kernel's
//! mechanism around it (`kernel/src/sched/`: the tick, load reports every
//! `REPORT_EVERY_TICKS`, balancing every `BALANCE_EVERY_TICKS`, pull patience, kicks,
//! message and migration latencies) and the workloads' shapes, stepped deterministically.
//!
//! Read top to bottom:
//! 1. [`machine`]: the cores' speeds (the paper's mixes, §4.1) and the kernel tunables;
//! 2. [`workload`]: the experiments' thread counts and work;
//! 3. [`ideal`]: the best any scheduler could do on those speeds (the bound);
//! 4. [`sim`]: the engine;
//! 5. [`report`]: AMPS against symmetric against the bound, factors and parameter sweeps.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod ideal;
pub mod machine;
pub mod report;
pub mod sim;
pub mod thread;
pub mod workload;

pub use machine::{Machine, Params};
pub use sim::{run, Outcome};
pub use workload::Workload;
