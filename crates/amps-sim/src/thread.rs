//! A simulated thread: what it is doing and how much is left, as `crates/sched`'s
//! [`Thread`] sees it.

use sched::Thread;

/// The benchmark program's address space (its wait keys' first half).
pub(crate) const SPACE: u64 = 1;

/// A thread as the simulation holds it: what it is doing, and how much of it is left.
#[derive(Debug)]
pub struct SimThread {
    /// The worker's index (`usize::MAX` for the main thread).
    pub(crate) id: usize,
    /// The program's main thread: it creates the workers on core 0, where it is pinned
    /// (a program's first context runs on the core it was started on).
    pub(crate) main: bool,
    /// Work left in the current segment, in thousandths of a full-speed cycle.
    pub(crate) left: u64,
    /// Barrier steps done.
    pub(crate) step: u32,
    /// Woken from the barrier: its next segment starts when it runs.
    pub(crate) after_barrier: bool,
    /// `amps_fairness`: its first job is done.
    pub(crate) first_done: bool,
}

impl Thread for SimThread {
    type Space = u64;

    fn allowed_on(&self, core: usize) -> bool {
        !self.main || core == 0
    }

    fn stopping(&self) -> bool {
        false
    }

    /// `numa=always`, the default.
    fn may_move_running(&self, _from: usize, _to: usize) -> bool {
        true
    }

    fn arrived(&mut self, _core: usize) {}

    fn woken(&mut self) {}

    fn space(&self) -> u64 {
        SPACE
    }
}
