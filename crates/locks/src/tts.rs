//! Test-and-test-and-set spin lock: one flag; waiters spin reading it (in their own cache)
//! and only try the atomic compare-and-swap when it looks free (Anderson 1990;
//! Mellor-Crummey & Scott 1991). The cheapest lock when uncontended (Corey Figure 3: a Linux
//! spin lock is 3 instructions), but each release lets every waiter race for the line at
//! once, so its cost grows with the number of contending cores. Not FIFO: a waiter can be
//! overtaken forever.

use crate::cell::LockCell;
use crate::sync::{AtomicBool, Spin};
use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};

/// A test-and-test-and-set spin lock protecting a `T`.
pub struct TtsLock<T> {
    /// True while some caller is inside `with`.
    locked: AtomicBool,
    data: LockCell<T>,
}

// SAFETY: the lock hands out `&mut T` to one thread at a time (the CAS in `lock` admits one
// caller until `Unlock`), and Acquire/Release order successive critical sections, so sharing
// the lock only ever moves the `T` between threads: `T: Send` suffices, as for std's Mutex.
unsafe impl<T: Send> Sync for TtsLock<T> {}

impl<T> TtsLock<T> {
    /// An unlocked lock around `value` (usable in a `static`).
    #[cfg(not(loom))]
    pub const fn new(value: T) -> Self {
        TtsLock { locked: AtomicBool::new(false), data: LockCell::new(value) }
    }

    /// An unlocked lock around `value` (loom's atomics cannot be built in a `const fn`).
    #[cfg(loom)]
    pub fn new(value: T) -> Self {
        TtsLock { locked: AtomicBool::new(false), data: LockCell::new(value) }
    }

    /// Runs `f` on the value with the lock held, spinning until it is free.
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        self.lock();
        self.locked_with(f)
    }

    /// Runs `f` with the lock held if it is free right now; `None` (and `f` not run) if not.
    pub fn try_with<R>(&self, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        // Test first so a held lock's line is only read, never written; the CAS is the one
        // attempt. Orderings as in `lock`.
        if self.locked.load(Relaxed)
            || self.locked.compare_exchange(false, true, Acquire, Relaxed).is_err()
        {
            return None;
        }
        Some(self.locked_with(f))
    }

    /// Unwraps the value.
    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }

    fn lock(&self) {
        let mut spin = Spin::new();
        loop {
            // Acquire: pairs with the Release in `Unlock`, so the previous holder's writes to
            // the value happen-before ours. A CAS rather than a swap so that a failed attempt
            // stores nothing; with a swap every loser would write `true` again, and loom
            // (which orders such racing stores only partially) would let a waiter reread a
            // stale `true` forever.
            if self.locked.compare_exchange(false, true, Acquire, Relaxed).is_ok() {
                return;
            }
            // The "test": wait with plain reads, which hit our cached copy of the line until
            // the holder's release invalidates it. Relaxed: this only decides when to retry
            // the CAS, which does the synchronising.
            while self.locked.load(Relaxed) {
                spin.wait();
            }
        }
    }

    /// Runs `f` on the value, then unlocks (also if `f` unwinds). Called with the lock held.
    fn locked_with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let _unlock = Unlock(self);
        // SAFETY: the caller's CAS took the flag from false to true, and only `Unlock` (after
        // `f` returns) stores false, so we are the only holder; Acquire/Release order us after
        // the previous holder.
        unsafe { self.data.with_mut(f) }
    }
}

/// Releases a held [`TtsLock`] when dropped.
struct Unlock<'a, T>(&'a TtsLock<T>);

impl<T> Drop for Unlock<'_, T> {
    fn drop(&mut self) {
        // Release: our writes to the value happen-before the next holder's Acquire CAS.
        self.0.locked.store(false, Release);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    crate::mutex_tests!(TtsLock);
}
