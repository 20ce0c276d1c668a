//! Mutexes in three algorithms (Mellor-Crummey & Scott 1991), selectable per lock: TTS,
//! ticket and MCS. The spin locks of `crates/locks` guard the runtime's own queues; these
//! are their blocking counterparts for McRT threads: a waiter spins briefly, then yields
//! on a predicate over the lock word it would have spun on.

use super::SPIN_TRIES;
use crate::cells::Held;
use crate::malloc::raw::{boxed, unbox};
use crate::predicate::Op;
use crate::thread::yield_until;
use alloc::boxed::Box;
use core::ops::{Deref, DerefMut};
use core::ptr;
use core::sync::atomic::{AtomicPtr, AtomicU32, Ordering};

/// Which algorithm a mutex uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MutexKind {
    /// Test-and-test-and-set: one word; waiters yield until it reads free.
    Tts,
    /// Tickets: FIFO; a waiter yields until its number is served.
    Ticket,
    /// MCS queue: FIFO; each waiter yields on a word of its own.
    Mcs,
}

impl MutexKind {
    /// All three, in the order benchmarks run them.
    pub const ALL: [MutexKind; 3] = [MutexKind::Tts, MutexKind::Ticket, MutexKind::Mcs];

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            MutexKind::Tts => "tts",
            MutexKind::Ticket => "ticket",
            MutexKind::Mcs => "mcs",
        }
    }
}

/// An MCS queue node (one per acquisition, freed at release).
struct Node {
    next: AtomicPtr<Node>,
    locked: AtomicU32,
}

/// A mutex without data: `lock` and `unlock` as separate calls (the pthread adaptor's).
pub struct RawMutex {
    kind: MutexKind,
    /// TTS: 0 free, 1 held. Ticket: the next ticket.
    word: AtomicU32,
    /// Ticket: the ticket served.
    serving: AtomicU32,
    /// MCS: the last waiter's node, and the holder's.
    tail: AtomicPtr<Node>,
    holder: AtomicPtr<Node>,
}

impl RawMutex {
    /// An unlocked mutex of `kind`.
    pub const fn new(kind: MutexKind) -> RawMutex {
        RawMutex {
            kind,
            word: AtomicU32::new(0),
            serving: AtomicU32::new(0),
            tail: AtomicPtr::new(ptr::null_mut()),
            holder: AtomicPtr::new(ptr::null_mut()),
        }
    }

    /// Its algorithm.
    pub fn kind(&self) -> MutexKind {
        self.kind
    }

    /// Takes the mutex, yielding while another thread holds it.
    pub fn lock(&self) {
        match self.kind {
            MutexKind::Tts => loop {
                for _ in 0..SPIN_TRIES {
                    if self.try_lock() {
                        return;
                    }
                    core::hint::spin_loop();
                }
                yield_until(&self.word, Op::Eq, 0);
            },
            MutexKind::Ticket => {
                let ticket = self.word.fetch_add(1, Ordering::Relaxed);
                for _ in 0..SPIN_TRIES {
                    if self.serving.load(Ordering::Acquire) == ticket {
                        return;
                    }
                    core::hint::spin_loop();
                }
                yield_until(&self.serving, Op::Eq, ticket);
            }
            MutexKind::Mcs => {
                let node = Box::into_raw(Box::new(Node {
                    next: AtomicPtr::new(ptr::null_mut()),
                    locked: AtomicU32::new(1),
                }));
                let prev = self.tail.swap(node, Ordering::AcqRel);
                if !prev.is_null() {
                    // `prev` is the node of a thread that has not yet released (it frees
                    // its node only after handing over to its successor, us).
                    boxed(prev).next.store(node, Ordering::Release);
                    // Our node lives until we release.
                    yield_until(&boxed(node).locked, Op::Eq, 0);
                }
                self.holder.store(node, Ordering::Relaxed);
            }
        }
    }

    /// Takes the mutex if it is free now.
    pub fn try_lock(&self) -> bool {
        match self.kind {
            MutexKind::Tts => {
                self.word.load(Ordering::Relaxed) == 0
                    && self
                        .word
                        .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
                        .is_ok()
            }
            MutexKind::Ticket => {
                let serving = self.serving.load(Ordering::Acquire);
                self.word
                    .compare_exchange(
                        serving,
                        serving.wrapping_add(1),
                        Ordering::Acquire,
                        Ordering::Relaxed,
                    )
                    .is_ok()
            }
            MutexKind::Mcs => {
                let node = Box::into_raw(Box::new(Node {
                    next: AtomicPtr::new(ptr::null_mut()),
                    locked: AtomicU32::new(0),
                }));
                if self
                    .tail
                    .compare_exchange(ptr::null_mut(), node, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
                {
                    self.holder.store(node, Ordering::Relaxed);
                    true
                } else {
                    // Never published.
                    drop(unbox(node));
                    false
                }
            }
        }
    }

    /// Releases the mutex. The caller must hold it.
    pub fn unlock(&self) {
        match self.kind {
            MutexKind::Tts => self.word.store(0, Ordering::Release),
            MutexKind::Ticket => {
                self.serving.fetch_add(1, Ordering::Release);
            }
            MutexKind::Mcs => {
                let node = self.holder.load(Ordering::Relaxed);
                // The holder's node, ours until we free it below.
                let mut next = boxed(node).next.load(Ordering::Acquire);
                if next.is_null() {
                    if self
                        .tail
                        .compare_exchange(
                            node,
                            ptr::null_mut(),
                            Ordering::AcqRel,
                            Ordering::Relaxed,
                        )
                        .is_ok()
                    {
                        // Nobody queued behind us, and the tail no longer names it.
                        drop(unbox(node));
                        return;
                    }
                    // A successor swapped the tail but has not linked itself yet.
                    loop {
                        // As above.
                        next = boxed(node).next.load(Ordering::Acquire);
                        if !next.is_null() {
                            break;
                        }
                        core::hint::spin_loop();
                    }
                }
                // The successor's node lives until it releases.
                boxed(next).locked.store(0, Ordering::Release);
                // Nobody refers to our node any more.
                drop(unbox(node));
            }
        }
        crate::notify();
    }
}

/// A mutex guarding a `T`.
pub struct Mutex<T> {
    raw: RawMutex,
    /// Reached only through a guard, with the mutex held.
    value: Held<T>,
}

/// The mutex held; released when dropped.
pub struct MutexGuard<'a, T> {
    mutex: &'a Mutex<T>,
}

impl<T> Mutex<T> {
    /// An unlocked mutex of `kind` around `value`.
    pub const fn new(kind: MutexKind, value: T) -> Mutex<T> {
        Mutex { raw: RawMutex::new(kind), value: Held::new(value) }
    }

    /// Waits for the mutex (yielding) and returns the guard.
    pub fn lock(&self) -> MutexGuard<'_, T> {
        self.raw.lock();
        MutexGuard { mutex: self }
    }

    /// The guard, if the mutex is free now.
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        self.raw.try_lock().then_some(MutexGuard { mutex: self })
    }

    /// The raw mutex (for a condition variable).
    pub fn raw(&self) -> &RawMutex {
        &self.raw
    }

    /// The value, with no one else able to hold the mutex.
    pub fn into_inner(self) -> T {
        self.value.into_inner()
    }
}

impl<T> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // The mutex is held.
        self.mutex.value.get()
    }
}

impl<T> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // The mutex is held, by this guard alone (and `&mut self` is unique).
        self.mutex.value.get_mut()
    }
}

impl<'a, T> MutexGuard<'a, T> {
    /// The guard of `mutex`, which the caller has taken through its raw mutex.
    pub(crate) fn relocked(mutex: &'a Mutex<T>) -> MutexGuard<'a, T> {
        MutexGuard { mutex }
    }

    /// The mutex this guard holds.
    pub fn mutex(&self) -> &'a Mutex<T> {
        self.mutex
    }
}

impl<T> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        self.mutex.raw.unlock();
    }
}
