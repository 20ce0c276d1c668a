//! A condition variable over a McRT mutex. Waiters take numbers; `signal` lets the next
//! number through, `broadcast` all those taken so far, and a waiter yields until its number
//! is let through, so a signal before the waiter sleeps is not lost.

use super::mutex::RawMutex;
use super::MutexGuard;
use crate::predicate::Op;
use crate::thread::yield_until;
use core::sync::atomic::{AtomicU32, Ordering};

/// A condition variable.
pub struct Condvar {
    /// Numbers handed to waiters.
    waiters: AtomicU32,
    /// Waiters with a number below this may go (wrapping; 2^31 apart at most).
    released: AtomicU32,
}

impl Default for Condvar {
    fn default() -> Self {
        Condvar::new()
    }
}

impl Condvar {
    /// A condition variable nobody waits on.
    pub const fn new() -> Condvar {
        Condvar { waiters: AtomicU32::new(0), released: AtomicU32::new(0) }
    }

    /// Releases `mutex` (held by the caller), waits for a signal, takes `mutex` again.
    pub fn wait_raw(&self, mutex: &RawMutex) {
        let ticket = self.waiters.fetch_add(1, Ordering::AcqRel);
        mutex.unlock();
        // Released once `released - ticket` (wrapping) is in 1..2^31.
        loop {
            let r = self.released.load(Ordering::Acquire);
            let ahead = r.wrapping_sub(ticket);
            if ahead != 0 && ahead < 1 << 31 {
                break;
            }
            yield_until(&self.released, Op::Ne, r);
        }
        mutex.lock();
    }

    /// As [`Condvar::wait_raw`], for a guard.
    pub fn wait<'a, T>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        let mutex = guard.mutex();
        core::mem::forget(guard);
        self.wait_raw(mutex.raw());
        // SAFETY (of building the guard): `wait_raw` returned with the mutex held again.
        MutexGuard::relocked(mutex)
    }

    /// Lets one waiter go (if any).
    pub fn signal(&self) {
        loop {
            let r = self.released.load(Ordering::Acquire);
            if r == self.waiters.load(Ordering::Acquire) {
                return;
            }
            if self
                .released
                .compare_exchange(r, r.wrapping_add(1), Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                crate::notify();
                return;
            }
        }
    }

    /// Lets every current waiter go.
    pub fn broadcast(&self) {
        let w = self.waiters.load(Ordering::Acquire);
        self.released.store(w, Ordering::Release);
        crate::notify_all();
    }
}
