//! Ticket lock: take a number, wait until it is served (Mellor-Crummey & Scott 1991, after
//! Reed & Kanodia's sequencers). Callers enter in the order they arrived, so nobody starves,
//! and releasing is a plain store rather than a locked instruction. Every waiter still spins
//! on the one `serving` word, so a release invalidates all their copies: fair, but not
//! scalable the way [`McsLock`](crate::McsLock) is. McRT §3.2.3 (Figure 7) measured it
//! overtaking a TTS lock on a contended scheduling queue at 64 hardware threads.
//!
//! The two counters share a line on purpose: the lock stays small enough to embed in every
//! object, and an uncontended acquire touches one line.

use crate::cell::LockCell;
use crate::sync::{AtomicU32, Spin};
use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};

/// A FIFO ticket lock protecting a `T`.
pub struct TicketLock<T> {
    /// The next ticket to hand out. Wraps; equality is all that is compared, so up to 2^32 - 1
    /// simultaneous waiters are fine.
    next: AtomicU32,
    /// The ticket now allowed in. Written only by the holder, when it leaves.
    serving: AtomicU32,
    data: LockCell<T>,
}

// SAFETY: one ticket is served at a time and only its holder touches the value (see
// `locked_with`), with Acquire/Release ordering successive holders, so the `T` only moves
// between threads: `T: Send` suffices, as for std's Mutex.
unsafe impl<T: Send> Sync for TicketLock<T> {}

impl<T> TicketLock<T> {
    /// An unlocked lock around `value` (usable in a `static`).
    #[cfg(not(loom))]
    pub const fn new(value: T) -> Self {
        TicketLock {
            next: AtomicU32::new(0),
            serving: AtomicU32::new(0),
            data: LockCell::new(value),
        }
    }

    /// An unlocked lock around `value` (loom's atomics cannot be built in a `const fn`).
    #[cfg(loom)]
    pub fn new(value: T) -> Self {
        TicketLock {
            next: AtomicU32::new(0),
            serving: AtomicU32::new(0),
            data: LockCell::new(value),
        }
    }

    /// Runs `f` on the value with the lock held, waiting in FIFO order behind earlier callers.
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        // Relaxed: a ticket is only a place in the queue; the Acquire load below is what
        // orders us after the previous holder.
        let ticket = self.next.fetch_add(1, Relaxed);
        // Acquire: pairs with the previous holder's Release store of `serving`, so its writes
        // to the value happen-before ours.
        let mut spin = Spin::new();
        while self.serving.load(Acquire) != ticket {
            spin.wait();
        }
        self.locked_with(ticket, f)
    }

    /// Runs `f` with the lock held if nobody holds or waits for it right now; `None` (and `f`
    /// not run) if not. Like every `try_with` here it may also fail just after another core's
    /// release, before that release is visible to this core.
    pub fn try_with<R>(&self, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        // Acquire: as in `with`; this is the load that synchronises with the last release.
        let serving = self.serving.load(Acquire);
        // Take ticket `serving` only if it is still the next one to hand out. If so, nobody
        // holds ticket `serving` yet, so `serving` cannot have moved since we read it (it only
        // grows, and never past `next`): the ticket is served at once. Relaxed: the Acquire
        // load above already ordered us after the holder that published `serving`.
        self.next.compare_exchange(serving, serving.wrapping_add(1), Relaxed, Relaxed).ok()?;
        Some(self.locked_with(serving, f))
    }

    /// Unwraps the value.
    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }

    /// Runs `f` on the value while `ticket` is served, then serves the next ticket (also if
    /// `f` unwinds).
    fn locked_with<R>(&self, ticket: u32, f: impl FnOnce(&mut T) -> R) -> R {
        let _unlock = Unlock { lock: self, ticket };
        // SAFETY: `serving == ticket` and tickets are unique (handed out by an atomic RMW on
        // `next`), so we are the only holder until `Unlock` stores `ticket + 1`; the Acquire
        // that saw `serving == ticket` orders us after the previous holder.
        unsafe { self.data.with_mut(f) }
    }
}

/// Serves the ticket after `ticket` when dropped.
struct Unlock<'a, T> {
    lock: &'a TicketLock<T>,
    ticket: u32,
}

impl<T> Drop for Unlock<'_, T> {
    fn drop(&mut self) {
        // A plain store, not an RMW: only the holder writes `serving`. Release: our writes to
        // the value happen-before the next holder's Acquire load of `serving`.
        self.lock.serving.store(self.ticket.wrapping_add(1), Release);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    crate::mutex_tests!(TicketLock);

    #[test]
    fn tickets_wrap_around() {
        let lock = TicketLock::new(0u32);
        lock.next.store(u32::MAX - 1, Relaxed);
        lock.serving.store(u32::MAX - 1, Relaxed);
        for _ in 0..4 {
            lock.with(|v| *v += 1);
            assert_eq!(lock.try_with(|v| *v += 1), Some(()));
        }
        assert_eq!(lock.serving.load(Relaxed), 6);
        assert_eq!(lock.into_inner(), 8);
    }
}
