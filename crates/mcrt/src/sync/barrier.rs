//! The paper's barrier (§2.2): each arrival decrements the count of threads left to enter;
//! all but the last yield on a predicate until the last one opens the barrier. A
//! generation number makes it reusable: waiters yield until it moves on.

use crate::predicate::Op;
use crate::thread::yield_until;
use core::sync::atomic::{AtomicU32, Ordering};

/// A barrier for `n` threads, reusable.
pub struct Barrier {
    n: u32,
    left: AtomicU32,
    generation: AtomicU32,
}

impl Barrier {
    /// A barrier for `n` threads (at least one).
    pub const fn new(n: u32) -> Barrier {
        let n = if n == 0 { 1 } else { n };
        Barrier { n, left: AtomicU32::new(n), generation: AtomicU32::new(0) }
    }

    /// Waits until all `n` have arrived; true for exactly one of them (the last).
    pub fn wait(&self) -> bool {
        let generation = self.generation.load(Ordering::Acquire);
        if self.left.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.left.store(self.n, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::Release);
            crate::notify_all();
            return true;
        }
        yield_until(&self.generation, Op::Ne, generation);
        false
    }
}
