//! The paper's barrier (§2.2): each arrival decrements the count of threads left to enter;
//! all but the last yield on a predicate until the last one opens the barrier. A
//! generation number makes it reusable: waiters yield until it moves on.

use crate::predicate::Op;
use crate::thread::yield_until;
use core::sync::atomic::{AtomicU32, Ordering};

/// A barrier for `n` threads, reusable.
pub struct Barrier {
    /// Its size (atomic only so that an OpenMP team can resize its barrier in place
    /// before its members start, [`Barrier::reset`]).
    n: AtomicU32,
    left: AtomicU32,
    generation: AtomicU32,
}

impl Barrier {
    /// A barrier for `n` threads (at least one).
    pub const fn new(n: u32) -> Barrier {
        let n = if n == 0 { 1 } else { n };
        Barrier { n: AtomicU32::new(n), left: AtomicU32::new(n), generation: AtomicU32::new(0) }
    }

    /// Makes it a fresh barrier for `n` threads (at least one), as [`Barrier::new`] would.
    /// Only while nobody waits at it or can reach it until the caller publishes it (an
    /// OpenMP team before it opens its gate, with a Release store).
    pub(crate) fn reset(&self, n: u32) {
        let n = n.max(1);
        self.n.store(n, Ordering::Relaxed);
        self.left.store(n, Ordering::Relaxed);
        self.generation.store(0, Ordering::Relaxed);
    }

    /// Waits until all `n` have arrived; true for exactly one of them (the last).
    pub fn wait(&self) -> bool {
        let generation = self.generation.load(Ordering::Acquire);
        if self.left.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.left.store(self.n.load(Ordering::Relaxed), Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::Release);
            crate::notify_all();
            return true;
        }
        yield_until(&self.generation, Op::Ne, generation);
        false
    }
}
