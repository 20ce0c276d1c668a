//! Transaction descriptors and the scheduler's side of the STM (McRT §2.4 "STM and
//! scheduler").
//!
//! A descriptor is what an owned lock word points to. Descriptors are type-stable: made
//! once, never freed, listed in a global registry and reused by later transactions (of any
//! thread), so a transaction that finds a word owned can always read the owner's state.
//! The registry also gives the reclaimer every active transaction's start time (`limbo`).

use super::atomic::{fence, AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use super::{Abort, Undo};
use crate::cells::HeldLogs;
use crate::malloc::raw::{forever, leak, Forever};
use crate::runtime::Task;
use alloc::vec::Vec;
use core::alloc::Layout;

/// `Desc::status`: no transaction.
pub(crate) const IDLE: usize = 0;
/// Running.
pub(crate) const ACTIVE: usize = 1;
/// Another transaction asked it to abort while its thread had yielded.
pub(crate) const KILLED: usize = 2;
/// Past the point where an abort request is refused.
pub(crate) const COMMITTING: usize = 3;

/// `Desc::start` when no transaction runs.
pub(crate) const NOT_STARTED: u64 = u64::MAX;

/// One transaction's descriptor (McRT-STM's transaction descriptor).
#[repr(align(64))]
pub(crate) struct Desc {
    /// `IDLE`, `ACTIVE`, `KILLED` or `COMMITTING`.
    pub(crate) status: AtomicUsize,
    /// The McRT thread running it (its header), 0 on an OS thread or a processor's idle
    /// loop: such a transaction is never aborted by others, as they cannot tell whether it
    /// has been preempted.
    pub(crate) task: AtomicUsize,
    /// Transactions looking at `task` right now (the owner waits for 0 before it ends).
    pins: AtomicUsize,
    /// The clock when its transaction began (`NOT_STARTED` when idle; 0 while it begins).
    pub(crate) start: AtomicU64,
    /// The clock when its `atomic` began (kept across retries): the older of two
    /// transactions is never aborted by the younger.
    pub(crate) birth: AtomicU64,
    /// Taken by a thread for one `atomic`.
    taken: AtomicBool,
    /// Set by `on_resume` when it finds the transaction killed; its next operation fails.
    /// (Only its own thread touches it: atomic so that `on_resume` aliases nothing.)
    pub(crate) doomed: AtomicBool,
    /// The next descriptor in the registry (set once).
    next: AtomicPtr<Desc>,
    /// Counters (written by the holder only).
    pub(crate) commits: AtomicU64,
    pub(crate) aborts: AtomicU64,
    pub(crate) killed: AtomicU64,
    pub(crate) undone_allocs: AtomicU64,
    /// The holder's private state.
    pub(crate) local: HeldLogs<Local>,
}

// `Desc` is `Sync` and `Send`: `local` is touched only by the thread holding the
// descriptor (`taken`), and the addresses in it only by that holder (`HeldLogs`); the rest
// is atomic.

// Descriptors are made once (`take`, by `raw::leak`), never freed, and kept as addresses
// (in lock words, `Task::tx`, `Task::stm_desc`, the registry's links).
impl Forever for Desc {}

/// The descriptor at `addr` (non-zero): one `take` made.
pub(crate) fn at(addr: usize) -> &'static Desc {
    forever(addr)
}

/// A transaction's private logs, kept with the descriptor so their memory is reused.
pub(crate) struct Local {
    /// The time up to which every read is known consistent.
    pub(crate) snapshot: u64,
    /// Read set: (lock word, version read).
    pub(crate) reads: Vec<(*const AtomicUsize, u64)>,
    /// Write set: (lock word owned, version it had when taken).
    pub(crate) writes: Vec<(*const AtomicUsize, u64)>,
    /// Undo log of in-place writes, oldest first.
    pub(crate) undo: Vec<Undo>,
    /// Memory allocated in the transaction (freed if it aborts).
    pub(crate) allocs: Vec<(*mut u8, Layout)>,
    /// Memory freed in the transaction (deferred to limbo if it commits).
    pub(crate) frees: Vec<(*mut u8, Layout)>,
}

/// Every descriptor ever made.
static REGISTRY: AtomicPtr<Desc> = AtomicPtr::new(core::ptr::null_mut());

/// Bumps a counter only its holder writes.
pub(crate) fn bump(c: &AtomicU64, by: u64) {
    c.store(c.load(Ordering::Relaxed) + by, Ordering::Relaxed);
}

/// The registry's descriptors.
pub(crate) fn all() -> impl Iterator<Item = &'static Desc> {
    let mut p = REGISTRY.load(Ordering::Acquire);
    core::iter::from_fn(move || {
        // Registry entries are leaked descriptors, never freed.
        let d = (!p.is_null()).then(|| at(p as usize))?;
        p = d.next.load(Ordering::Acquire);
        Some(d)
    })
}

/// Takes an idle descriptor, or makes one.
pub(crate) fn take() -> &'static Desc {
    for d in all() {
        if !d.taken.load(Ordering::Relaxed)
            && d.taken.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok()
        {
            return d;
        }
    }
    let d: &'static Desc = leak(Desc {
        status: AtomicUsize::new(IDLE),
        task: AtomicUsize::new(0),
        pins: AtomicUsize::new(0),
        start: AtomicU64::new(NOT_STARTED),
        birth: AtomicU64::new(0),
        taken: AtomicBool::new(true),
        doomed: AtomicBool::new(false),
        next: AtomicPtr::new(core::ptr::null_mut()),
        commits: AtomicU64::new(0),
        aborts: AtomicU64::new(0),
        killed: AtomicU64::new(0),
        undone_allocs: AtomicU64::new(0),
        local: HeldLogs::new(Local {
            snapshot: 0,
            reads: Vec::new(),
            writes: Vec::new(),
            undo: Vec::new(),
            allocs: Vec::new(),
            frees: Vec::new(),
        }),
    });
    let mut head = REGISTRY.load(Ordering::Relaxed);
    loop {
        d.next.store(head, Ordering::Relaxed);
        let me = d as *const Desc as *mut Desc;
        match REGISTRY.compare_exchange(head, me, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => return d,
            Err(h) => head = h,
        }
    }
}

/// Gives a descriptor back for later transactions.
pub(crate) fn give_back(d: &Desc) {
    d.taken.store(false, Ordering::Release);
}

impl Desc {
    /// The owner word's payload: this descriptor's address.
    #[inline]
    pub(crate) fn addr(&self) -> usize {
        self as *const Desc as usize
    }

    /// Begins a transaction on thread `task` (0: not a McRT thread); returns its snapshot.
    pub(crate) fn begin(&self, task: usize, clock: &AtomicU64) -> u64 {
        // Those who look at `task` and `status` find this descriptor through a lock word
        // it took (Acquire of its Release CAS), so plain stores suffice for them.
        self.task.store(task, Ordering::Relaxed);
        self.status.store(ACTIVE, Ordering::Release);
        // Published as 0 first so that a reclaimer never misses a reader that is starting
        // (limbo: reclaim needs every start later than the free): the 0 before our read
        // of the clock, both in the single SeqCst order the reclaimer's loads are in. (A
        // SeqCst swap is one locked instruction; a store and a fence cost two barriers.)
        self.start.swap(0, Ordering::SeqCst);
        let s = clock.load(Ordering::SeqCst);
        // A reclaimer that still sees 0 only waits longer.
        self.start.store(s, Ordering::Release);
        s
    }

    /// Past the point of no return: false if it was killed first.
    pub(crate) fn enter_commit(&self) -> bool {
        self.status
            .compare_exchange(ACTIVE, COMMITTING, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Ends the transaction once it has released its words: waits until nobody looks at
    /// its thread any more (`request_abort`), then goes idle.
    pub(crate) fn end(&self, held_words: bool) {
        if held_words {
            // Pairs with `request_abort`'s pin then look at the word: either it sees our
            // release, or we see its pin and wait for it.
            fence(Ordering::SeqCst);
            while self.pins.load(Ordering::Acquire) != 0 {
                core::hint::spin_loop();
            }
        }
        self.start.store(NOT_STARTED, Ordering::Release);
        self.task.store(0, Ordering::Relaxed);
        self.status.store(IDLE, Ordering::Release);
    }
}

/// The descriptor an owned lock word `seen` points to.
fn owner_of(seen: usize) -> &'static Desc {
    // An owned word holds a descriptor's address.
    at(seen & !super::protocol::OWNED)
}

/// True if the transaction owning word `seen` began its `atomic` before `me` did (ties go
/// by address): the older of two transactions, which the younger never makes wait or
/// abort. (A stale answer, if the owner has moved on since, costs one needless abort.)
pub(crate) fn is_older(seen: usize, me: &Desc) -> bool {
    let owner = owner_of(seen);
    (owner.birth.load(Ordering::Relaxed), owner.addr())
        < (me.birth.load(Ordering::Relaxed), me.addr())
}

/// McRT §2.4: `me` asks the transaction owning `lock` (seen as `seen`) to abort, which is
/// allowed only while the owner's thread has yielded the processor, and (so that a
/// transaction that yields inside is not starved) only if the owner is younger than `me`.
/// True if the request was made.
pub(crate) fn request_abort(me: &Desc, lock: &AtomicUsize, seen: usize) -> bool {
    let owner = owner_of(seen);
    owner.pins.fetch_add(1, Ordering::SeqCst);
    let mut killed = false;
    // Still owned (so still in a transaction that cannot end while we hold the pin)?
    if lock.load(Ordering::SeqCst) == seen
        && owner.status.load(Ordering::SeqCst) == ACTIVE
        && (owner.birth.load(Ordering::Relaxed), owner.addr())
            > (me.birth.load(Ordering::Relaxed), me.addr())
    {
        let task = owner.task.load(Ordering::SeqCst);
        // `task` is the header of the thread running the owner's transaction, which
        // lives at least until that transaction ends, and it cannot end while pinned.
        if task != 0 && crate::context::header(task as *const Task).yielded.load(Ordering::Acquire)
        {
            killed = owner
                .status
                .compare_exchange(ACTIVE, KILLED, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok();
        }
    }
    owner.pins.fetch_sub(1, Ordering::Release);
    killed
}

/// The scheduler's call when thread `t`, switched out inside a transaction, runs again
/// (McRT §2.4): it is active again (the scheduler cleared `yielded`), and it checks whether
/// it was aborted meanwhile; if so its next transactional operation fails with
/// [`Abort::Killed`] and `atomic` rolls it back.
pub(crate) fn on_resume(t: &Task) {
    // `Task::tx` is set only by `atomic` on this thread, to its descriptor.
    let d = at(t.tx.get());
    if d.status.load(Ordering::Acquire) == KILLED {
        d.doomed.store(true, Ordering::Relaxed);
    }
}

/// Why a transaction aborted, for the counters.
pub(crate) fn count_abort(d: &Desc, why: Abort) {
    bump(&d.aborts, 1);
    if why == Abort::Killed {
        bump(&d.killed, 1);
    }
}
