//! The commit/validate protocol's core (McRT-STM [37]: strict two-phase locking for writes,
//! versioned optimistic reads), over one versioned lock word per stripe and a global
//! version clock. Kept free of the rest of the STM so that `tests/loom_stm.rs` model-checks
//! this very file with loom's atomics (it includes it by path, with its own `atomic`).
//!
//! A lock word is either a **version** (`version << 1`, low bit clear): the commit time of
//! the last transaction that wrote the stripe; or an **owner** (`descriptor | 1`): the
//! transaction holding it for writing, which updates in place until it commits or aborts.
//!
//! Orderings, seqlock style: a reader loads the word (Acquire), copies the data (Relaxed
//! atomics), fences (Acquire) and loads the word again; equal words mean the copy is the
//! version's. A writer takes the word with a CAS, then fences (Release) before its first
//! in-place store, so a reader that sees any such store also sees the word taken. A commit
//! draws its time from the clock before it releases its words with it, so every version
//! ever seen is at most the clock's value when it is seen.

use super::atomic::{fence, AtomicU64, AtomicUsize, Ordering};

/// The low bit of an owned lock word.
pub(crate) const OWNED: usize = 1;

/// The lock word of version `v`.
#[inline]
pub(crate) fn version_word(v: u64) -> usize {
    (v as usize) << 1
}

/// The lock word owned by the descriptor at `owner` (an even address).
#[inline]
pub(crate) fn owner_word(owner: usize) -> usize {
    owner | OWNED
}

/// True when word `w` is owned by a writer.
#[inline]
pub(crate) fn is_owned(w: usize) -> bool {
    w & OWNED != 0
}

/// The version in an unowned word `w`.
#[inline]
pub(crate) fn version_of(w: usize) -> u64 {
    (w >> 1) as u64
}

/// The clock's present time: a transaction's snapshot (McRT-STM's timestamp).
#[inline]
pub(crate) fn now(clock: &AtomicU64) -> u64 {
    clock.load(Ordering::Acquire)
}

/// A new time for a commit (or for the words an abort releases): strictly later than every
/// snapshot taken before.
#[inline]
pub(crate) fn tick(clock: &AtomicU64) -> u64 {
    clock.fetch_add(1, Ordering::AcqRel) + 1
}

/// An optimistic read: runs `copy` (which must copy the data with Relaxed atomic loads)
/// until it copied one version's data, and returns that version; `Err(word)` without
/// copying if a writer owns the word.
#[inline]
pub(crate) fn read(lock: &AtomicUsize, mut copy: impl FnMut()) -> Result<u64, usize> {
    loop {
        let w1 = lock.load(Ordering::Acquire);
        if is_owned(w1) {
            return Err(w1);
        }
        copy();
        // The copy's loads come before the second look at the word.
        fence(Ordering::Acquire);
        let w2 = lock.load(Ordering::Relaxed);
        if w1 == w2 {
            return Ok(version_of(w1));
        }
        core::hint::spin_loop();
    }
}

/// Takes the lock word for writing if it still holds `seen` (an unowned word); the caller
/// may store in place once this returns true (strict two-phase locking: held to the end).
#[inline]
pub(crate) fn try_acquire(lock: &AtomicUsize, seen: usize, owner: usize) -> bool {
    let taken =
        lock.compare_exchange(seen, owner_word(owner), Ordering::AcqRel, Ordering::Relaxed).is_ok();
    if taken {
        // In-place stores that follow are ordered after the word's change (seqlock writer).
        fence(Ordering::Release);
    }
    taken
}

/// Releases an owned word with version `v` (the commit's time, or a fresh one on abort):
/// the in-place stores before it are visible to whoever sees the new version.
#[inline]
pub(crate) fn release(lock: &AtomicUsize, v: u64) {
    lock.store(version_word(v), Ordering::Release);
}

/// What validating one read-set entry found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Check {
    /// Still the version read.
    Same,
    /// Owned by the validating transaction itself (it must compare the version it took
    /// the word at).
    Mine,
    /// Another version or another owner: the read is stale.
    Changed,
}

/// Validates a read of version `v` of `lock` by the transaction `owner`.
#[inline]
pub(crate) fn check(lock: &AtomicUsize, v: u64, owner: usize) -> Check {
    let w = lock.load(Ordering::Acquire);
    if w == version_word(v) {
        Check::Same
    } else if w == owner_word(owner) {
        Check::Mine
    } else {
        Check::Changed
    }
}
