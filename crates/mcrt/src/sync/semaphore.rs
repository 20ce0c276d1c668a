//! A counting semaphore: `wait` takes one unit, yielding while there is none; `post`
//! gives one back.

use crate::predicate::Op;
use crate::thread::yield_until;
use core::sync::atomic::{AtomicU32, Ordering};

/// A counting semaphore.
pub struct Semaphore {
    count: AtomicU32,
}

impl Semaphore {
    /// A semaphore holding `count` units.
    pub const fn new(count: u32) -> Semaphore {
        Semaphore { count: AtomicU32::new(count) }
    }

    /// Takes a unit, yielding until there is one.
    pub fn wait(&self) {
        while !self.try_wait() {
            yield_until(&self.count, Op::Gt, 0);
        }
    }

    /// Takes a unit if there is one now.
    pub fn try_wait(&self) -> bool {
        let mut c = self.count.load(Ordering::Relaxed);
        while c > 0 {
            match self.count.compare_exchange_weak(c, c - 1, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(now) => c = now,
            }
        }
        false
    }

    /// Gives a unit back.
    pub fn post(&self) {
        self.count.fetch_add(1, Ordering::Release);
        crate::notify();
    }

    /// Units now.
    pub fn value(&self) -> u32 {
        self.count.load(Ordering::Relaxed)
    }
}
