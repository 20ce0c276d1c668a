//! Software transactional memory (McRT §2.4; McRT-STM, Saha et al., PPoPP 2006 [37]).
//!
//! ```
//! use mcrt::stm::TCell;
//! let from = TCell::new(100u64);
//! let to = TCell::new(0u64);
//! mcrt::stm::atomic(|tx| {
//!     let a = tx.read(&from)?;
//!     tx.write(&from, a - 1)?;
//!     let b = tx.read(&to)?;
//!     tx.write(&to, b + 1)
//! });
//! assert_eq!((from.load(), to.load()), (99, 1));
//! ```
//!
//! The design, as the paper's STM ([37] §3):
//! - **Writes: strict two-phase locking.** Writing a [`TCell`] takes its versioned lock word
//!   (a CAS to the transaction's descriptor) and keeps it until commit or abort.
//! - **Reads: versioned and optimistic.** A read takes no lock; it records (word, version)
//!   in the read set. Versions are times of a global clock, so a read that finds a version
//!   newer than the transaction's snapshot validates the read set and extends the snapshot
//!   (no transaction ever sees an inconsistent state); an updating transaction validates
//!   again at commit, when it draws its commit time. Read-only transactions commit free.
//! - **In-place update with an undo log**: a write stores into the cell at once, after
//!   logging the old value; an abort restores the log backwards.
//! - **Conflict detection at object or cache-line granularity** ([`Granularity`], per
//!   cell): one lock word in each cell, or a global table of words hashed by the cell's
//!   cache line (cells on one line conflict; so do lines that hash alike).
//! - **Nested transactions with partial rollback** ([`Tx::nested`]).
//! - **The scheduler** (§2.4 "STM and scheduler"): a transaction that finds a word owned
//!   asks the owner to abort only if the owner's thread has yielded the processor (McRT's
//!   scheduling is cooperative, so a running owner is making progress) and the owner is
//!   younger (began its `atomic` later: the oldest transaction is never aborted by others,
//!   so one that yields inside is not starved); else it spins, then yields, then aborts
//!   itself. A thread switched back in checks for such a request
//!   before it goes on ([`on_resume`]). Between writers, wait-die: a transaction that
//!   holds words and finds one held by an older transaction aborts at once rather than
//!   wait, so waits only go from older to younger and two writers never wait for each
//!   other.
//! - **The allocator** (§2.4 "STM and memory allocator"): [`Tx::alloc`] memory is freed if
//!   the transaction (or the nested part that allocated it) aborts; [`Tx::free`] memory is
//!   freed only after the transaction commits, and only once every transaction active at
//!   that commit has ended (limbo, [`collect`]).
//!
//! **Where it runs.** On McRT threads (inside [`crate::run`]), with the scheduler
//! integration above. Also on plain OS threads and on a processor's idle loop (futures):
//! the descriptor is the same, but such a transaction is never aborted by others (they
//! cannot tell whether it was preempted), and it waits by spinning (and, with `std`,
//! `std::thread::yield_now`) instead of yielding to McRT threads.
//!
//! Cells hold `Copy` values of at most [`MAX_BYTES`]; values are copied word by word with
//! atomic loads and stores, so a value should have no padding bytes. Do not call
//! [`atomic`] inside a transaction (use [`Tx::nested`]), nor end a thread inside one.

pub(crate) mod descriptor;
mod limbo;
mod protocol;

/// The atomics the protocol core uses (loom's in `tests/loom_stm.rs`).
mod atomic {
    pub(crate) use core::sync::atomic::{
        fence, AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering,
    };
}

use crate::cells::AtomicallyCopied;
use crate::malloc::raw::{self, load_bytes, store_bytes};
use crate::runtime::Task;
use atomic::{AtomicU64, AtomicUsize, Ordering};
use core::alloc::Layout;
use core::marker::PhantomData;
use core::mem::{size_of, MaybeUninit};
use descriptor::{bump, Desc, Local};
use protocol::Check;

/// Largest value a [`TCell`] holds (a few words, as the undo log keeps them inline).
pub const MAX_BYTES: usize = 32;
/// Lock words in the cache-line granularity table.
const STRIPES: usize = 1 << 12;
/// Spins on an owned word between looks at whether its owner has yielded.
const SPIN_TRIES: u32 = 64;
/// Rounds of spinning (and yielding) before a waiting transaction aborts itself.
const WAIT_ROUNDS: u32 = 4;

/// The global version clock (the times of commits, McRT-STM's timestamps).
static CLOCK: AtomicU64 = AtomicU64::new(0);
/// Lock words for cells of cache-line granularity, by line.
static STRIPE_WORDS: [AtomicUsize; STRIPES] = [const { AtomicUsize::new(0) }; STRIPES];

/// Why a transaction (or a nested part) stops short of committing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Abort {
    /// A read is stale or a word stayed owned too long: roll back and run again.
    Conflict,
    /// Another transaction aborted this one while its thread had yielded (McRT §2.4).
    Killed,
    /// The program asked for it ([`Tx::retry`]): a nested part is undone and its parent
    /// goes on; a whole transaction is undone, yields, and runs again.
    Retry,
}

/// What a lock word covers (McRT-STM: object or cache-line conflict detection).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Granularity {
    /// One lock word per cell (the cell is the object).
    #[default]
    Object,
    /// One lock word per cache line, in a global table hashed by the cell's address >> 6
    /// (a cell is covered by the line it starts on).
    CacheLine,
}

/// A transactional cell: read and written only inside [`atomic`].
#[repr(C)]
pub struct TCell<T: Copy> {
    /// The versioned lock word (used at object granularity).
    lock: AtomicUsize,
    granularity: Granularity,
    /// The value, copied only word by word with atomics (so `TCell` is `Sync`), stored
    /// only by the transaction owning its lock word.
    value: AtomicallyCopied<T>,
}

impl<T: Copy> TCell<T> {
    /// A cell holding `value`, with a lock word of its own ([`Granularity::Object`]).
    pub const fn new(value: T) -> TCell<T> {
        TCell::with_granularity(value, Granularity::Object)
    }

    /// A cell holding `value`, whose conflicts are detected at `granularity`.
    pub const fn with_granularity(value: T, granularity: Granularity) -> TCell<T> {
        const { assert!(size_of::<T>() <= MAX_BYTES, "mcrt::stm: a TCell value is too large") };
        TCell { lock: AtomicUsize::new(0), granularity, value: AtomicallyCopied::new(value) }
    }

    /// Its granularity.
    pub fn granularity(&self) -> Granularity {
        self.granularity
    }

    /// The value, by a one-read transaction.
    pub fn load(&self) -> T {
        atomic(|tx| tx.read(self))
    }

    /// The value, when nobody else can reach the cell.
    pub fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }

    /// Unwraps the value.
    pub fn into_inner(self) -> T {
        self.value.into_inner()
    }

    fn lock_word(&self) -> &AtomicUsize {
        match self.granularity {
            Granularity::Object => &self.lock,
            Granularity::CacheLine => {
                let line = self as *const TCell<T> as usize >> 6;
                &STRIPE_WORDS[(line ^ (line >> 12)) % STRIPES]
            }
        }
    }

    fn value_ptr(&self) -> *mut u8 {
        self.value.as_ptr() as *mut u8
    }
}

/// One undo-log entry: where a write went and what was there before.
pub(crate) struct Undo {
    addr: *mut u8,
    len: usize,
    old: [u64; MAX_BYTES / 8],
}

/// A running transaction: the argument of [`atomic`]'s closure. Cells it touches must
/// outlive the `atomic` call (`'env`).
pub struct Tx<'env> {
    d: &'static Desc,
    l: &'static mut Local,
    /// The McRT thread running it (its header's address), 0 elsewhere.
    task: usize,
    _env: PhantomData<fn(&'env ()) -> &'env ()>,
}

impl<'env> Tx<'env> {
    /// Reads `cell` (optimistically: no lock taken, McRT-STM).
    #[inline]
    pub fn read<T: Copy>(&mut self, cell: &'env TCell<T>) -> Result<T, Abort> {
        self.alive()?;
        let lock = cell.lock_word();
        let (src, len) = (cell.value_ptr() as *const u8, size_of::<T>());
        let mut out = MaybeUninit::<T>::uninit();
        let dst = out.as_mut_ptr() as *mut u8;
        let mut tries = 0;
        loop {
            // `src` is the cell's 8-aligned value, `dst` a local of its size.
            match protocol::read(lock, || load_bytes(dst, src, len)) {
                Ok(v) => {
                    self.l.reads.push((lock as *const AtomicUsize, v));
                    if v > self.l.snapshot {
                        self.extend()?;
                    }
                    // The copy is of one version (the word did not change across it),
                    // which was a whole `T` stored by a commit, an abort, or `new`.
                    return Ok(raw::copied(out));
                }
                Err(w) if w == protocol::owner_word(self.d.addr()) => {
                    load_bytes(dst, src, len);
                    // This transaction owns the word: nobody else stores there, and the
                    // value is the whole `T` it (or a commit before) stored.
                    return Ok(raw::copied(out));
                }
                Err(w) => self.contend(lock, w, &mut tries)?,
            }
        }
    }

    /// Writes `value` into `cell` in place, after taking its lock word (held to the end:
    /// strict two-phase locking) and logging the old value for an abort.
    #[inline]
    pub fn write<T: Copy>(&mut self, cell: &'env TCell<T>, value: T) -> Result<(), Abort> {
        self.alive()?;
        self.own(cell.lock_word())?;
        let (dst, len) = (cell.value_ptr(), size_of::<T>());
        let mut undo = Undo { addr: dst, len, old: [0; MAX_BYTES / 8] };
        // The transaction owns the cell's word; `len` ≤ MAX_BYTES, the log's size.
        load_bytes(undo.old.as_mut_ptr() as *mut u8, dst, len);
        store_bytes(dst, &value as *const T as *const u8, len);
        self.l.undo.push(undo);
        Ok(())
    }

    /// Runs `f` as a nested transaction (McRT-STM's partial rollback): `Ok(Some(r))` when
    /// it succeeds (its effects join the parent's); `Ok(None)` when it returns
    /// [`Abort::Retry`]: only its own writes and allocations are undone, its frees are
    /// forgotten, and the parent goes on. A conflict aborts the whole transaction.
    pub fn nested<R>(
        &mut self,
        f: impl FnOnce(&mut Tx<'env>) -> Result<R, Abort>,
    ) -> Result<Option<R>, Abort> {
        let save = (self.l.undo.len(), self.l.allocs.len(), self.l.frees.len());
        match f(self) {
            Ok(r) => Ok(Some(r)),
            Err(Abort::Retry) => {
                // Its reads stay in the read set (the parent's choice may depend on them);
                // the words it took stay owned until the parent ends (two-phase locking).
                self.undo_to(save.0, save.1);
                self.l.frees.truncate(save.2);
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Abandons the transaction (or the nested part): `return tx.retry();`.
    pub fn retry<R>(&self) -> Result<R, Abort> {
        Err(Abort::Retry)
    }

    /// Allocates `layout` from the McRT allocator (null when memory is short, or for a zero
    /// size); freed again if the transaction, or the nested part that allocated it, aborts.
    pub fn alloc(&mut self, layout: Layout) -> *mut u8 {
        let p = crate::malloc::alloc(layout);
        if !p.is_null() {
            self.l.allocs.push((p, layout));
        }
        p
    }

    /// Allocates a `T` holding `value`, as [`Tx::alloc`] (null when memory is short).
    pub fn alloc_value<T>(&mut self, value: T) -> *mut T {
        let p = raw::alloc_value(value);
        if !p.is_null() {
            self.l.allocs.push((p as *mut u8, Layout::new::<T>()));
        }
        p
    }

    /// Frees `ptr` if the transaction commits, once no transaction can still see it (§2.4:
    /// optimistic readers may hold pointers to it); forgotten if it aborts.
    ///
    /// # Safety
    /// `ptr` came from [`Tx::alloc`] (or `crate::malloc::alloc`) with `layout`, and the
    /// transaction makes it unreachable from every cell; nothing outside transactions uses
    /// it after the commit.
    #[allow(unsafe_code)] // (the contract of `free`)
    pub unsafe fn free(&mut self, ptr: *mut u8, layout: Layout) {
        self.l.frees.push((ptr, layout));
    }

    /// Frees a `T` made by [`Tx::alloc_value`], as [`Tx::free`] (it is not dropped).
    ///
    /// # Safety
    /// As [`Tx::free`].
    #[allow(unsafe_code)] // (the contract of `free`)
    pub unsafe fn free_value<T>(&mut self, ptr: *mut T) {
        // (As `free`, whose caller's promise this caller made.)
        self.l.frees.push((ptr as *mut u8, Layout::new::<T>()));
    }

    /// Fails once the transaction has been killed (seen by [`on_resume`]).
    #[inline]
    fn alive(&self) -> Result<(), Abort> {
        if self.d.doomed.load(Ordering::Relaxed) {
            Err(Abort::Killed)
        } else {
            Ok(())
        }
    }

    /// Takes `lock` for writing (or finds it already ours).
    #[inline]
    fn own(&mut self, lock: &AtomicUsize) -> Result<(), Abort> {
        let me = self.d.addr();
        let mut tries = 0;
        loop {
            let w = lock.load(Ordering::Acquire);
            if w == protocol::owner_word(me) {
                return Ok(());
            }
            if protocol::is_owned(w) {
                self.contend(lock, w, &mut tries)?;
                continue;
            }
            let v = protocol::version_of(w);
            // Later reads of this cell see memory as of version `v`: the snapshot must
            // cover it (the clock, read after `w`, is at least `v`).
            if v > self.l.snapshot {
                self.extend()?;
            }
            if protocol::try_acquire(lock, w, me) {
                self.l.writes.push((lock as *const AtomicUsize, v));
                return Ok(());
            }
        }
    }

    /// Validates the read set and moves the snapshot to now.
    fn extend(&mut self) -> Result<(), Abort> {
        let now = protocol::now(&CLOCK);
        if self.valid() {
            self.l.snapshot = now;
            Ok(())
        } else {
            Err(Abort::Conflict)
        }
    }

    /// True if every read still holds: its word has the version read, or is owned by this
    /// transaction, which took it at that version.
    fn valid(&self) -> bool {
        let me = self.d.addr();
        self.l.reads.iter().all(|&(lock, v)| {
            // Lock words outlive the transaction (`'env` cells, the static table).
            match protocol::check(raw::logged(lock), v, me) {
                Check::Same => true,
                Check::Mine => self.l.writes.iter().any(|&(w, old)| w == lock && old == v),
                Check::Changed => false,
            }
        })
    }

    /// Waits for the owner of `lock` (seen as `seen`), McRT §2.4: asks it to abort if its
    /// thread has yielded; spins, yields, and in the end aborts itself (an owner that
    /// yielded and is older may not come back soon).
    fn contend(&mut self, lock: &AtomicUsize, seen: usize, tries: &mut u32) -> Result<(), Abort> {
        // Wait-die: a transaction that holds words never waits for an older one (it
        // aborts, releasing them, and runs again later, keeping its age), so waits only
        // ever go from older to younger and two writers cannot wait for each other (they
        // did, until both timed out, whenever two updates of the tree met on one path).
        // Checked at every look, as the word may have passed to another owner meanwhile.
        if !self.l.writes.is_empty() && descriptor::is_older(seen, self.d) {
            return Err(Abort::Conflict);
        }
        if (*tries).is_multiple_of(SPIN_TRIES) {
            descriptor::request_abort(self.d, lock, seen);
            if *tries > 0 {
                pause(self.task);
            }
        }
        *tries += 1;
        if *tries >= SPIN_TRIES * WAIT_ROUNDS {
            return Err(Abort::Conflict);
        }
        core::hint::spin_loop();
        self.alive()
    }

    /// Undoes writes back to undo-log length `undo` and frees allocations past `allocs`.
    fn undo_to(&mut self, undo: usize, allocs: usize) {
        while self.l.undo.len() > undo {
            let Some(u) = self.l.undo.pop() else { break };
            // The transaction still owns the word of the cell at `u.addr` (words are
            // released only after the undo), which lives as long as the transaction.
            store_bytes(u.addr, u.old.as_ptr() as *const u8, u.len);
        }
        let undone = self.l.allocs.len().saturating_sub(allocs);
        for (p, layout) in self.l.allocs.drain(allocs..) {
            // Allocated in the undone part, so unreachable once its writes are undone.
            raw::give_back(p, layout);
        }
        bump(&self.d.undone_allocs, undone as u64);
    }

    /// Commits (McRT-STM): a read-only transaction is consistent at its snapshot; an update
    /// refuses abort requests from here, draws its time, validates its reads if anyone
    /// committed since its snapshot, and releases its words with that time.
    fn commit(&mut self) -> Result<(), Abort> {
        self.alive()?;
        if self.l.writes.is_empty() {
            // (The clock only when there is something to stamp: its line moves between
            // cores with every update's commit.)
            if !self.l.frees.is_empty() {
                limbo::defer(protocol::now(&CLOCK), &mut self.l.frees);
            }
            return Ok(());
        }
        if !self.d.enter_commit() {
            return Err(Abort::Killed);
        }
        let ts = protocol::tick(&CLOCK);
        if ts != self.l.snapshot + 1 && !self.valid() {
            return Err(Abort::Conflict);
        }
        for &(lock, _) in &self.l.writes {
            // Lock words outlive the transaction.
            protocol::release(raw::logged(lock), ts);
        }
        limbo::defer(ts, &mut self.l.frees);
        Ok(())
    }

    /// Rolls the whole transaction back and releases its words with a fresh version (so a
    /// reader that copied a value mid-way sees the word change).
    fn rollback(&mut self) {
        self.undo_to(0, 0);
        self.l.frees.clear();
        if !self.l.writes.is_empty() {
            let v = protocol::tick(&CLOCK);
            for &(lock, _) in &self.l.writes {
                // Lock words outlive the transaction.
                protocol::release(raw::logged(lock), v);
            }
        }
    }

    /// Clears the logs after a commit or an abort; true if it had owned words.
    fn clear(&mut self) -> bool {
        let held = !self.l.writes.is_empty();
        self.l.reads.clear();
        self.l.writes.clear();
        self.l.undo.clear();
        self.l.allocs.clear();
        self.l.frees.clear();
        held
    }
}

/// Runs `f` as a transaction until it commits, and returns its result. `f` returns
/// `Err(Abort)` (with `?` on [`Tx::read`] and [`Tx::write`], or [`Tx::retry`]) to have it
/// rolled back and run again; so it runs more than once and should do nothing outside its
/// cells that cannot be repeated.
pub fn atomic<'env, R>(mut f: impl FnMut(&mut Tx<'env>) -> Result<R, Abort>) -> R {
    let me = running_task();
    // A McRT thread keeps its descriptor between transactions (no search of the
    // registry, whose flags every thread would write); a nested `atomic` takes another.
    let cached = me.filter(|t| t.tx.get() == 0).map(|t| {
        if t.stm_desc.get() == 0 {
            t.stm_desc.set(descriptor::take().addr());
        }
        // This one is the thread's (taken above).
        descriptor::at(t.stm_desc.get())
    });
    let d = cached.unwrap_or_else(descriptor::take);
    let outer = me.map(|t| t.tx.replace(d.addr()));
    let task = me.map_or(0, |t| t as *const Task as usize);
    d.birth.store(CLOCK.load(Ordering::Relaxed), Ordering::Relaxed);
    let mut attempt = 0u32;
    loop {
        d.doomed.store(false, Ordering::Relaxed);
        // This thread holds the descriptor (`take`); its logs are ours until
        // `give_back`, and `tx` does not outlive this iteration.
        let l = d.local.get_mut();
        l.snapshot = d.begin(task, &CLOCK);
        let mut tx = Tx { d, l, task, _env: PhantomData };
        let result = f(&mut tx);
        let freed = !tx.l.frees.is_empty();
        match result.and_then(|r| tx.commit().map(|()| r)) {
            Ok(r) => {
                let held = tx.clear();
                bump(&d.commits, 1);
                d.end(held);
                if let (Some(t), Some(outer)) = (me, outer) {
                    t.tx.set(outer);
                }
                if cached.is_none() {
                    descriptor::give_back(d);
                }
                if freed || limbo::PENDING.load(Ordering::Relaxed) >= LIMBO_SWEEP {
                    limbo::collect(&CLOCK);
                }
                return r;
            }
            Err(why) => {
                tx.rollback();
                let held = tx.clear();
                descriptor::count_abort(d, why);
                d.end(held);
                backoff(why, attempt, task, d.addr());
                attempt = attempt.saturating_add(1);
            }
        }
    }
}

/// Blocks in limbo above which every commit sweeps it.
const LIMBO_SWEEP: usize = 256;

/// The running McRT thread (not a processor's idle loop), if any.
fn running_task() -> Option<&'static Task> {
    (crate::in_runtime() && crate::runtime::on_thread_stack()).then(crate::runtime::current)
}

/// Gives way to others: a yield on a McRT thread, an OS yield (with `std`) elsewhere.
fn pause(task: usize) {
    if task != 0 {
        crate::yield_now();
    } else {
        #[cfg(feature = "std")]
        std::thread::yield_now();
        #[cfg(not(feature = "std"))]
        core::hint::spin_loop();
    }
}

/// Before running an aborted transaction again: a killed or retrying one yields (its
/// killer, or whoever it waits for, runs first); a conflicting one backs off for a random,
/// growing time (then yields too).
fn backoff(why: Abort, attempt: u32, task: usize, seed: usize) {
    if why != Abort::Conflict {
        pause(task);
        return;
    }
    let mut x = (seed as u64 ^ u64::from(attempt).wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    let spins = x % (16u64 << attempt.min(8));
    for _ in 0..spins {
        core::hint::spin_loop();
    }
    if attempt >= 4 {
        pause(task);
    }
}

/// The scheduler's callbacks ([`crate::Subsystems`]): a thread's kept descriptor goes
/// back when it will never run again; a thread inside a transaction checks, when it is
/// switched in, whether it was aborted meanwhile.
pub(crate) struct ThreadHooks;

impl crate::hooks::ThreadHooks<Task> for ThreadHooks {
    fn release(t: &Task) {
        on_thread_exit(t);
    }

    #[inline(always)]
    fn resume(t: &Task) {
        on_resume(t);
    }
}

/// The scheduler's call when a thread will never run again: the descriptor it kept (if
/// any) goes back to the registry.
fn on_thread_exit(t: &Task) {
    let d = t.stm_desc.replace(0);
    if d != 0 {
        // This one was the thread's.
        descriptor::give_back(descriptor::at(d));
    }
}

/// The scheduler's call when a thread is switched in (§2.4): one inside a transaction
/// marks itself active, then checks whether it was aborted while it had yielded. Runs on
/// every switch, so outside a transaction it is one load.
#[inline(always)]
fn on_resume(t: &Task) {
    if t.tx.get() != 0 {
        descriptor::on_resume(t);
    }
}

/// Frees the limbo blocks that no active transaction can still see (commits that free
/// memory do this themselves); returns how many it freed.
pub fn collect() -> usize {
    limbo::collect(&CLOCK)
}

/// The STM's counters, summed over all transactions so far (of every runtime and thread).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Transactions committed.
    pub commits: u64,
    /// Runs rolled back (each retry of a transaction counts).
    pub aborts: u64,
    /// Of those, the ones aborted by another transaction while yielded (§2.4).
    pub killed: u64,
    /// Blocks allocated in a transaction (or nested part) and freed by its abort.
    pub undone_allocs: u64,
    /// Blocks freed by committed transactions and still in limbo.
    pub limbo: u64,
    /// Blocks freed from limbo.
    pub reclaimed: u64,
}

/// The STM's counters now (a sum of per-descriptor counts: exact once transactions rest).
pub fn stats() -> Stats {
    let mut s = Stats {
        limbo: limbo::PENDING.load(Ordering::Relaxed) as u64,
        reclaimed: limbo::RECLAIMED.load(Ordering::Relaxed),
        ..Stats::default()
    };
    for d in descriptor::all() {
        s.commits += d.commits.load(Ordering::Relaxed);
        s.aborts += d.aborts.load(Ordering::Relaxed);
        s.killed += d.killed.load(Ordering::Relaxed);
        s.undone_allocs += d.undone_allocs.load(Ordering::Relaxed);
    }
    s
}
