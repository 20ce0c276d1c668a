//! MCS queue lock (Mellor-Crummey & Scott 1991): waiters form a linked queue of nodes, and
//! each spins only on the flag in its own node until its predecessor hands the lock over by
//! writing that flag. A release therefore touches one waiter's line instead of all of them,
//! which is why Corey's MCS lock keeps a flat acquire cost as cores are added while a spin
//! lock's grows (Corey §2, Figure 3). The price is a few more instructions uncontended (15
//! against 3 there): a swap to join, a CAS to leave.
//!
//! The queue node lives on the caller's stack for exactly the critical section: `with`
//! creates it, publishes its address in `tail`, and returns only after no other core can
//! still reach it. That is what the closure scope buys; a guard object could be moved or
//! leaked while its node is still linked.
//!
//! Only the lock is queued, not the data: `RawMcs` is the bare queue, also used to order
//! the writers of [`RwLock`](crate::RwLock).

use crate::cell::LockCell;
use crate::sync::{AtomicBool, AtomicPtr, Spin};
use core::ptr::{self, null_mut};
use core::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

/// One waiter's place in the queue, on its own stack.
struct Node {
    /// True until the predecessor hands the lock over; its owner spins on this alone.
    locked: AtomicBool,
    /// The successor's node, null until a successor links itself in.
    next: AtomicPtr<Node>,
}

impl Node {
    fn new() -> Self {
        Node { locked: AtomicBool::new(true), next: AtomicPtr::new(null_mut()) }
    }

    /// The node's address as stored in `tail` and `next` (only ever turned back into `&Node`).
    fn as_ptr(&self) -> *mut Node {
        ptr::from_ref(self).cast_mut()
    }
}

/// The MCS queue without data: `with_locked` runs a closure with the lock held.
pub(crate) struct RawMcs {
    /// The last node in the queue (the holder's, if nobody waits), null when free.
    tail: AtomicPtr<Node>,
}

impl RawMcs {
    /// A free lock.
    #[cfg(not(loom))]
    pub(crate) const fn new() -> Self {
        RawMcs { tail: AtomicPtr::new(null_mut()) }
    }

    /// A free lock (loom's atomics cannot be built in a `const fn`).
    #[cfg(loom)]
    pub(crate) fn new() -> Self {
        RawMcs { tail: AtomicPtr::new(null_mut()) }
    }

    /// Runs `f` with the lock held, queueing FIFO behind earlier callers.
    pub(crate) fn with_locked<R>(&self, f: impl FnOnce() -> R) -> R {
        let node = Node::new();
        // AcqRel. Release publishes our freshly initialised node to whoever swaps after us and
        // writes into it. Acquire: if the queue was empty, pairs with the Release CAS in
        // `release` of the last holder (its critical section happens-before ours); otherwise
        // makes the predecessor's initialised node visible before we write its `next`.
        let pred = self.tail.swap(node.as_ptr(), AcqRel);
        if !pred.is_null() {
            // SAFETY: `pred` was the tail until our swap, so its owner is inside
            // `with_locked`/`try_with_locked` (waiting or holding). It cannot return before
            // `release` has seen a successor in `pred.next`: its CAS on `tail` fails now that
            // the tail is our node. So the node on its stack is alive for this store, and we
            // never touch it again.
            let pred = unsafe { &*pred };
            // Release: our node's initial `locked = true` happens-before the predecessor's
            // Acquire load of `next`, hence before its handoff store of `false`.
            pred.next.store(node.as_ptr(), Release);
            // Acquire: pairs with the predecessor's Release handoff, so its critical section
            // happens-before ours.
            let mut spin = Spin::new();
            while node.locked.load(Acquire) {
                spin.wait();
            }
        }
        let _unlock = Unlock { lock: self, node: &node };
        f()
    }

    /// Runs `f` with the lock held if it is free right now; `None` (and `f` not run) if not.
    pub(crate) fn try_with_locked<R>(&self, f: impl FnOnce() -> R) -> Option<R> {
        let node = Node::new();
        // AcqRel on success, for the same two reasons as the swap in `with_locked`. Relaxed
        // on failure: we read nothing through the value and just give up.
        self.tail.compare_exchange(null_mut(), node.as_ptr(), AcqRel, Relaxed).ok()?;
        let _unlock = Unlock { lock: self, node: &node };
        Some(f())
    }

    /// Passes the lock to the successor of `node`, or frees it if there is none.
    fn release(&self, node: &Node) {
        // Acquire: pairs with the successor's Release store of our `next`, so its node's
        // `locked = true` is visible before we overwrite it with `false`.
        let mut next = node.next.load(Acquire);
        if next.is_null() {
            // Nobody linked in yet. If we are still the tail, nobody is coming: free the lock.
            // Release: our critical section happens-before the next acquirer's swap or CAS.
            // Relaxed on failure: the value read is not used.
            if self.tail.compare_exchange(node.as_ptr(), null_mut(), Release, Relaxed).is_ok() {
                return;
            }
            // A successor swapped itself in but has not linked to us yet: wait for it.
            let mut spin = Spin::new();
            loop {
                next = node.next.load(Acquire);
                if !next.is_null() {
                    break;
                }
                spin.wait();
            }
        }
        // SAFETY: `next` is the successor's node. Its owner spins in `with_locked` until this
        // store, so the node is alive; we never touch it after the store.
        let next = unsafe { &*next };
        // The handoff. Release: our critical section happens-before the successor's Acquire
        // load of its `locked`. (Weaken this to Relaxed and the loom models in
        // `tests/loom.rs` report a data race on the protected value.)
        next.locked.store(false, Release);
    }
}

/// Releases a held [`RawMcs`] when dropped (also during unwinding), while `node` is alive.
struct Unlock<'a> {
    lock: &'a RawMcs,
    node: &'a Node,
}

impl Drop for Unlock<'_> {
    fn drop(&mut self) {
        self.lock.release(self.node);
    }
}

/// An MCS queue lock protecting a `T`.
pub struct McsLock<T> {
    raw: RawMcs,
    data: LockCell<T>,
}

// SAFETY: `RawMcs` admits one closure at a time, in FIFO order, and orders successive holders
// with Acquire/Release, so the `T` only moves between threads: `T: Send` suffices, as for
// std's Mutex. (The raw node pointers it holds are never dereferenced outside the protocol
// above.)
unsafe impl<T: Send> Sync for McsLock<T> {}

impl<T> McsLock<T> {
    /// An unlocked lock around `value` (usable in a `static`).
    #[cfg(not(loom))]
    pub const fn new(value: T) -> Self {
        McsLock { raw: RawMcs::new(), data: LockCell::new(value) }
    }

    /// An unlocked lock around `value` (loom's atomics cannot be built in a `const fn`).
    #[cfg(loom)]
    pub fn new(value: T) -> Self {
        McsLock { raw: RawMcs::new(), data: LockCell::new(value) }
    }

    /// Runs `f` on the value with the lock held, waiting in FIFO order behind earlier
    /// callers, each spinning on a node on its own stack.
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        // SAFETY: `with_locked` runs the closure only while we hold the lock (see `RawMcs`).
        self.raw.with_locked(|| unsafe { self.data.with_mut(f) })
    }

    /// Runs `f` with the lock held if nobody holds or waits for it right now; `None` (and `f`
    /// not run) if not.
    pub fn try_with<R>(&self, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        // SAFETY: as in `with`.
        self.raw.try_with_locked(|| unsafe { self.data.with_mut(f) })
    }

    /// Unwraps the value.
    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    crate::mutex_tests!(McsLock);

    #[test]
    fn queue_is_empty_after_release() {
        let lock = McsLock::new(());
        lock.with(|()| assert!(!lock.raw.tail.load(Relaxed).is_null()));
        assert!(lock.raw.tail.load(Relaxed).is_null());
        lock.try_with(|()| ()).unwrap();
        assert!(lock.raw.tail.load(Relaxed).is_null());
    }
}
