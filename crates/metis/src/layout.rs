//! The memory-layout hook (Corey §3.1, Figure 4). Metis allocates its intermediate data
//! through the global allocator (stable Rust's collections cannot take another one), on
//! the thread of the worker that owns it; so choosing *where* a worker's data lives is
//! choosing which memory that thread's allocations come from, phase by phase (on Atoll:
//! which address range backs the calling thread's McRT-Malloc heap). The engine calls a [`Layout`] at those points and does nothing
//! else about memory:
//!
//! - `shared` (Figure 4(a), threads on Linux): one address range for everything; the
//!   hooks do nothing ([`SharedLayout`]).
//! - `corey` (Figure 4(c), §3.1, §6.1): each core has a *private* root range (its McRT
//!   stack, its mapping of the input, its scratch) and one *shared* range of its own that
//!   every core maps. On a worker's `Begin` of [`Phase::Sample`], [`Phase::Map`] and
//!   [`Phase::Reduce`], the worker points its thread's heap at its core's shared range:
//!   what it allocates then (its row of the intermediate table; its reduce outputs) is
//!   read by other cores in the next phase. Only that core adds mappings to that range,
//!   so map does not contend, and every core shares the range's page tables, so "the
//!   reduce phase incurs no soft page faults" on the rows (§6.1). On `End` the heap goes
//!   back to the private range. The Atoll side implements this (issue 24).
//!
//! What the engine guarantees an implementation: a worker's data that another core reads
//! later (its sample and map rows, its reduce outputs, its merge segments) is allocated on
//! that worker's own thread between its `Begin` and `End` of the phase that makes it; the
//! coordinator allocates only small bookkeeping (the task list, slot vectors, the column
//! index of cells, the final concatenated output, whose buffer a `corey` layout may want
//! in a shared range too: it is made after the merge workers' `End`).
//!
//! The coordinator's calls ([`Layout::phase`]) bracket each phase, and are where a
//! benchmark reads the soft-fault counters per phase.

/// A phase of a job, in the order they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Running the sampled map tasks.
    Sample,
    /// Running the remaining map tasks (and moving the sample's output into the table).
    Map,
    /// Merging each column and reducing its keys.
    Reduce,
    /// Sorting the output (PSRS).
    Merge,
}

impl Phase {
    /// All four, in order.
    pub const ALL: [Phase; 4] = [Phase::Sample, Phase::Map, Phase::Reduce, Phase::Merge];

    /// Its name (`sample`, `map`, `reduce`, `merge`).
    pub fn name(self) -> &'static str {
        match self {
            Phase::Sample => "sample",
            Phase::Map => "map",
            Phase::Reduce => "reduce",
            Phase::Merge => "merge",
        }
    }
}

/// Which end of a phase (or of a worker's part in it) a hook call marks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Edge {
    /// Before any work of the phase.
    Begin,
    /// After all of it.
    End,
}

/// Where a job's memory goes: called by the engine at phase boundaries. Both methods do
/// nothing by default.
pub trait Layout: Sync {
    /// On the thread that called [`crate::run_with`], before a phase's workers start and
    /// after they have all finished.
    fn phase(&self, phase: Phase, edge: Edge) {
        let _ = (phase, edge);
    }

    /// On worker `worker`'s own thread (`0 .. threads`), before it takes its first task of
    /// `phase` and after its last. Worker `w` owns row `w` of the intermediate table.
    fn worker(&self, phase: Phase, worker: usize, edge: Edge) {
        let _ = (phase, worker, edge);
    }
}

/// Figure 4(a): everything in one shared address range; no hook does anything.
#[derive(Clone, Copy, Debug, Default)]
pub struct SharedLayout;

impl Layout for SharedLayout {}
