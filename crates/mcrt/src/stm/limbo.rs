//! Deferred frees (McRT §2.4 "STM and memory allocator", [38]): memory freed by a committed
//! transaction may still be seen by optimistic readers that loaded a pointer to it before
//! the commit, so it waits in limbo, stamped with the commit's time, until every active
//! transaction began after that time (a quiescence scheme over the global clock).

use super::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use super::descriptor;
use crate::cells::Held;
use crate::malloc::raw;
use alloc::vec::Vec;
use core::alloc::Layout;

/// A block waiting to be freed.
struct Deferred {
    stamp: u64,
    /// Its address (a word: the list crosses threads).
    ptr: usize,
    layout: Layout,
}

/// The limbo list, behind a test-and-test-and-set flag (held for a push or one sweep).
struct Limbo {
    busy: AtomicBool,
    /// Touched only with `busy` held; the blocks it lists belong to nobody else.
    list: Held<Vec<Deferred>>,
}

static LIMBO: Limbo = Limbo { busy: AtomicBool::new(false), list: Held::new(Vec::new()) };
/// Blocks in limbo now.
pub(crate) static PENDING: AtomicUsize = AtomicUsize::new(0);
/// Blocks freed from limbo so far.
pub(crate) static RECLAIMED: AtomicU64 = AtomicU64::new(0);

fn with_list<R>(f: impl FnOnce(&mut Vec<Deferred>) -> R) -> R {
    while LIMBO.busy.load(Ordering::Relaxed)
        || LIMBO.busy.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_err()
    {
        core::hint::spin_loop();
    }
    // `busy` is held.
    let r = f(LIMBO.list.get_mut());
    LIMBO.busy.store(false, Ordering::Release);
    r
}

/// Puts a committed transaction's frees in limbo with its commit time `stamp`.
pub(crate) fn defer(stamp: u64, frees: &mut Vec<(*mut u8, Layout)>) {
    if frees.is_empty() {
        return;
    }
    let n = frees.len();
    with_list(|l| {
        l.extend(frees.drain(..).map(|(ptr, layout)| Deferred { stamp, ptr: ptr as usize, layout }))
    });
    PENDING.fetch_add(n, Ordering::Relaxed);
}

/// Frees what no active transaction can still see; returns how many blocks it freed.
pub(crate) fn collect(clock: &AtomicU64) -> usize {
    if PENDING.load(Ordering::Relaxed) == 0 {
        return 0;
    }
    // A transaction the scan misses begins after this time; one that is starting counts
    // as 0. A block stamped no later than the oldest start is unreachable to all of them:
    // a transaction that began at or after a commit's time cannot load what that commit
    // unlinked (the commit owned the words it changed when it drew its time).
    let before = clock.load(Ordering::SeqCst);
    let oldest = descriptor::all().map(|d| d.start.load(Ordering::SeqCst)).fold(before, u64::min);
    let ready: Vec<Deferred> = with_list(|l| {
        let (ready, keep): (Vec<_>, Vec<_>) = l.drain(..).partition(|b| b.stamp <= oldest);
        *l = keep;
        ready
    });
    for b in &ready {
        // The block came from `malloc::alloc` with this layout (the promise of `Tx::free`),
        // was unlinked by a committed transaction, and every transaction that could have
        // loaded a pointer to it has ended.
        raw::give_back(b.ptr as *mut u8, b.layout);
    }
    PENDING.fetch_sub(ready.len(), Ordering::Relaxed);
    RECLAIMED.fetch_add(ready.len() as u64, Ordering::Relaxed);
    ready.len()
}
