//! The pthread-like adaptor (McRT §2.5): POSIX threads' calls in Rust shapes, translated
//! onto McRT's threads ([`crate::spawn`]), mutexes, condition variable and barrier
//! ([`crate::sync`]) and thread-local data ([`crate::Key`]). Calls return
//! `Result<_, Errno>` where POSIX returns an error number, and handles are opaque.
//!
//! Read top to bottom:
//! 1. **Errors** ([`Errno`]).
//! 2. **Threads**: [`create`], [`join`], [`detach`], [`exit`], [`current`], [`equal`],
//!    [`yield_now`]. Each thread's record (its join state and exit value) lives in a
//!    per-thread block held in one McRT key.
//! 3. **Keys**: [`key_create`], [`key_delete`], [`getspecific`], [`setspecific`]; their
//!    values live in the same block, so a deleted key's destructor never runs.
//! 4. **Once**, **mutex**, **condition variable**, **barrier**.

use crate::malloc::raw::{boxed_mut, unbox, AtomicDestructor};
use crate::predicate::Op;
use crate::sync::{self, MutexKind, RawMutex};
use crate::thread::{current_id, yield_until, JoinHandle, Key};
use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::ptr;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicUsize, Ordering};

// ---------------------------------------------------------------------------------------
// Errors.

/// Why a call failed: POSIX's error numbers (the values Linux gives them, by [`Errno::code`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Errno {
    /// `EPERM`: the caller does not hold the mutex.
    Perm,
    /// `EAGAIN`: no memory for a thread, no free key, or a recursive count at its limit.
    Again,
    /// `EBUSY`: the mutex is held, or someone waits on the object being destroyed.
    Busy,
    /// `EINVAL`: a bad handle (destroyed object, deleted key, thread not joinable) or value.
    Invalid,
    /// `EDEADLK`: the call would wait for the caller itself.
    Deadlock,
}

impl Errno {
    /// Its number, as Linux gives it.
    pub fn code(self) -> i32 {
        match self {
            Errno::Perm => 1,
            Errno::Again => 11,
            Errno::Busy => 16,
            Errno::Invalid => 22,
            Errno::Deadlock => 35,
        }
    }
}

// ---------------------------------------------------------------------------------------
// Once (needed first: the adaptor's own key is made once).

/// `pthread_once_t`: runs an initializer once; callers that come while it runs wait.
pub struct Once {
    /// `NEW`, `RUNNING`, `DONE`.
    state: AtomicU32,
}

const NEW: u32 = 0;
const RUNNING: u32 = 1;
const DONE: u32 = 2;

impl Default for Once {
    fn default() -> Self {
        Once::new()
    }
}

impl Once {
    /// `PTHREAD_ONCE_INIT`.
    pub const fn new() -> Once {
        Once { state: AtomicU32::new(NEW) }
    }

    /// `pthread_once`: runs `init` if no caller has; otherwise waits (predicate yield)
    /// until it has run. An `init` that never returns blocks every later caller.
    pub fn call(&self, init: impl FnOnce()) {
        if self.state.load(Ordering::Acquire) == DONE {
            return;
        }
        if self.state.compare_exchange(NEW, RUNNING, Ordering::Acquire, Ordering::Acquire).is_ok() {
            init();
            self.state.store(DONE, Ordering::Release);
            crate::notify_all();
        } else {
            yield_until(&self.state, Op::Eq, DONE);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Threads.

/// `Record::state`.
const JOINABLE: u32 = 0;
const JOINING: u32 = 1;
const DETACHED: u32 = 2;
/// A thread the adaptor did not create (the runtime's main thread): nobody can join it.
const ADOPTED: u32 = 3;

/// What a thread's handles share: who may join it, the McRT handle to join, its exit value.
struct Record {
    state: AtomicU32,
    /// 1 once the creator has put the McRT handle in `handle`.
    stored: AtomicU32,
    /// The McRT handle, taken by the one joiner or detacher.
    handle: AtomicPtr<JoinHandle<usize>>,
    /// The value given to [`exit`].
    retval: AtomicUsize,
}

impl Record {
    fn new(state: u32) -> Record {
        Record {
            state: AtomicU32::new(state),
            stored: AtomicU32::new(0),
            handle: AtomicPtr::new(ptr::null_mut()),
            retval: AtomicUsize::new(0),
        }
    }

    /// Detaches the McRT thread, if its handle is here (taken at most once).
    fn drop_handle(&self) {
        let h = self.handle.swap(ptr::null_mut(), Ordering::AcqRel);
        if !h.is_null() {
            // Put there by `Box::into_raw` in `create`; the swap gave it to us alone.
            drop(unbox(h));
        }
    }
}

/// `pthread_t`: a thread's handle (clone it freely; compare with [`equal`] or `==`).
#[derive(Clone)]
pub struct Pthread(Arc<Record>);

impl PartialEq for Pthread {
    fn eq(&self, other: &Pthread) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Pthread {}

impl core::fmt::Debug for Pthread {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Pthread({:p})", Arc::as_ptr(&self.0))
    }
}

/// Whether a new thread can be joined.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DetachState {
    /// `PTHREAD_CREATE_JOINABLE`.
    #[default]
    Joinable,
    /// `PTHREAD_CREATE_DETACHED`.
    Detached,
}

/// `pthread_attr_t` (McRT stacks have one size, so only the detach state).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Attr {
    /// Joinable or detached.
    pub detach_state: DetachState,
}

/// A thread's adaptor state: its record and its key values, held in one McRT key.
struct Block {
    record: Arc<Record>,
    /// By key index: (the key's sequence number when set, the value).
    values: Vec<(u32, usize)>,
}

/// The McRT key holding each thread's `Block` (made on first use).
struct BlockKey {
    once: Once,
    /// The key's index plus one; 0 when McRT had no key left. Written once, inside
    /// `once`, and read only after `once.call` returned (whose Release/Acquire order it).
    key: AtomicUsize,
}

static BLOCK_KEY: BlockKey = BlockKey { once: Once::new(), key: AtomicUsize::new(0) };

/// The McRT key of the adaptor's blocks; `Again` when McRT has no key left.
fn block_key() -> Result<Key, Errno> {
    BLOCK_KEY.once.call(|| {
        let key = Key::new(Some(drop_block)).map_or(0, |k| k.index() + 1);
        BLOCK_KEY.key.store(key, Ordering::Relaxed);
    });
    match BLOCK_KEY.key.load(Ordering::Relaxed) {
        0 => Err(Errno::Again),
        k => Ok(Key::from_index(k - 1)),
    }
}

/// Gives the calling thread its block.
fn install(key: Key, record: Arc<Record>) -> *mut Block {
    let b = Box::into_raw(Box::new(Block { record, values: Vec::new() }));
    key.set(b as usize);
    b
}

/// Runs `f` on the calling thread's block (made, as an adopted thread's, if it has none).
/// `f` must not call code that may reach the block again.
fn with_block<R>(f: impl FnOnce(&mut Block) -> R) -> Result<R, Errno> {
    let key = block_key()?;
    let mut b = key.get() as *mut Block;
    if b.is_null() {
        b = install(key, Arc::new(Record::new(ADOPTED)));
    }
    // The block belongs to the calling thread alone, and `f` does not re-enter.
    Ok(f(boxed_mut(b)))
}

/// Most destructor rounds at a thread's end (`PTHREAD_DESTRUCTOR_ITERATIONS`).
pub const DESTRUCTOR_ITERATIONS: usize = 4;

/// The McRT key's destructor: runs the thread's key destructors, then frees its block.
fn drop_block(v: usize) {
    let b = v as *mut Block;
    // Set again (McRT took the values out) so that destructors may use keys.
    if let Ok(key) = block_key() {
        key.set(v);
    }
    for _ in 0..DESTRUCTOR_ITERATIONS {
        let mut ran = false;
        let mut k = 0;
        loop {
            // The ending thread's own block; no reference is held across `d(value)`.
            let entry = boxed_mut(b).values.get_mut(k).map(core::mem::take);
            let Some((seq, value)) = entry else { break };
            let d = KEY_DTOR[k].load();
            if let Some(d) = d.filter(|_| value != 0 && KEY_SEQ[k].load(Ordering::Acquire) == seq) {
                d(value);
                ran = true;
            }
            k += 1;
        }
        if !ran {
            break;
        }
    }
    if let Ok(key) = block_key() {
        key.set(0);
    }
    // Made by `install`; the thread is ending and its key no longer names it.
    drop(unbox(b));
}

/// `pthread_create`: starts a thread running `start`, whose result is the value [`join`]
/// returns (a `void *` in C: a word here). `Again` when McRT has no memory for it.
pub fn create(
    attr: &Attr,
    start: impl FnOnce() -> usize + Send + 'static,
) -> Result<Pthread, Errno> {
    let key = block_key()?;
    let state = match attr.detach_state {
        DetachState::Joinable => JOINABLE,
        DetachState::Detached => DETACHED,
    };
    let record = Arc::new(Record::new(state));
    let theirs = record.clone();
    let handle = crate::spawn(move || {
        install(key, theirs);
        start()
    })
    .map_err(|_| Errno::Again)?;
    if state == DETACHED {
        drop(handle);
        return Ok(Pthread(record));
    }
    // The thread may already detach itself (`detach(&current())`): whichever of us sees
    // the other's write (SeqCst both ways) drops the handle.
    record.handle.store(Box::into_raw(Box::new(handle)), Ordering::SeqCst);
    record.stored.store(1, Ordering::SeqCst);
    crate::notify();
    if record.state.load(Ordering::SeqCst) == DETACHED {
        record.drop_handle();
    }
    Ok(Pthread(record))
}

/// `pthread_join`: waits for `thread` to end and returns its value (what `start`
/// returned, or what it gave [`exit`]). `Deadlock` for the caller itself; `Invalid` for a
/// thread detached, already joined, or being joined.
pub fn join(thread: &Pthread) -> Result<usize, Errno> {
    if *thread == current() {
        return Err(Errno::Deadlock);
    }
    let r = &thread.0;
    r.state
        .compare_exchange(JOINABLE, JOINING, Ordering::SeqCst, Ordering::Relaxed)
        .map_err(|_| Errno::Invalid)?;
    yield_until(&r.stored, Op::Eq, 1);
    let h = r.handle.swap(ptr::null_mut(), Ordering::AcqRel);
    // Stored by `create` before `stored` became 1; as the one joiner we took it.
    let h = unbox(h);
    Ok(h.join().unwrap_or_else(|| r.retval.load(Ordering::Acquire)))
}

/// `pthread_detach`: nobody will join `thread`; it frees itself when it ends. `Invalid`
/// when it is already detached or joined (or is a thread the adaptor did not create).
pub fn detach(thread: &Pthread) -> Result<(), Errno> {
    let r = &thread.0;
    r.state
        .compare_exchange(JOINABLE, DETACHED, Ordering::SeqCst, Ordering::Relaxed)
        .map_err(|_| Errno::Invalid)?;
    if r.stored.load(Ordering::SeqCst) == 1 {
        r.drop_handle();
    }
    Ok(())
}

/// `pthread_exit`: ends the calling thread with `value` for its joiner. Its key
/// destructors run; what it has on its stack is not dropped (as [`crate::exit`]).
pub fn exit(value: usize) -> ! {
    let _ = with_block(|b| b.record.retval.store(value, Ordering::Release));
    crate::exit()
}

/// `pthread_self`: the calling thread's handle.
///
/// # Panics
/// When McRT has no key left for the adaptor's thread blocks (`crate::thread::KEYS_MAX`
/// taken by others).
pub fn current() -> Pthread {
    with_block(|b| Pthread(b.record.clone())).expect("mcrt::pthread: no McRT key left")
}

/// `pthread_equal`.
pub fn equal(a: &Pthread, b: &Pthread) -> bool {
    a == b
}

/// `sched_yield`: gives the processor to another ready thread, if any.
pub fn yield_now() {
    crate::yield_now()
}

// ---------------------------------------------------------------------------------------
// Keys.

/// Most keys alive at once (`PTHREAD_KEYS_MAX`).
pub const KEYS_MAX: usize = 128;

/// Each key slot's sequence number: odd while a key lives there, bumped at create and
/// delete (so values set under an older key are not seen under a newer one).
static KEY_SEQ: [AtomicU32; KEYS_MAX] = [const { AtomicU32::new(0) }; KEYS_MAX];
/// Each key's destructor, if it has one.
static KEY_DTOR: [AtomicDestructor; KEYS_MAX] = [const { AtomicDestructor::new() }; KEYS_MAX];

/// `pthread_key_t`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PthreadKey {
    index: u32,
    seq: u32,
}

impl PthreadKey {
    fn live(self) -> bool {
        KEY_SEQ[self.index as usize].load(Ordering::Acquire) == self.seq
    }
}

/// `pthread_key_create`: a key whose value is 0 in every thread; at a thread's end,
/// `destructor` runs with its non-zero value. `Again` when [`KEYS_MAX`] keys live.
pub fn key_create(destructor: Option<fn(usize)>) -> Result<PthreadKey, Errno> {
    for (i, seq) in KEY_SEQ.iter().enumerate() {
        let s = seq.load(Ordering::Relaxed);
        if s & 1 == 0
            && seq
                .compare_exchange(s, s.wrapping_add(1), Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            KEY_DTOR[i].store(destructor);
            return Ok(PthreadKey { index: i as u32, seq: s.wrapping_add(1) });
        }
    }
    Err(Errno::Again)
}

/// `pthread_key_delete`: the key goes; its destructor will not run. `Invalid` if it was
/// already deleted.
pub fn key_delete(key: PthreadKey) -> Result<(), Errno> {
    let i = key.index as usize;
    KEY_DTOR[i].store(None);
    KEY_SEQ[i]
        .compare_exchange(key.seq, key.seq.wrapping_add(1), Ordering::AcqRel, Ordering::Relaxed)
        .map(|_| ())
        .map_err(|_| Errno::Invalid)
}

/// `pthread_getspecific`: the calling thread's value (0 if never set, or the key is
/// deleted).
pub fn getspecific(key: PthreadKey) -> usize {
    if !key.live() {
        return 0;
    }
    with_block(|b| match b.values.get(key.index as usize) {
        Some(&(seq, v)) if seq == key.seq => v,
        _ => 0,
    })
    .unwrap_or(0)
}

/// `pthread_setspecific`: sets the calling thread's value. `Invalid` for a deleted key.
pub fn setspecific(key: PthreadKey, value: usize) -> Result<(), Errno> {
    if !key.live() {
        return Err(Errno::Invalid);
    }
    with_block(|b| {
        let i = key.index as usize;
        if b.values.len() <= i {
            b.values.resize(i + 1, (0, 0));
        }
        b.values[i] = (key.seq, value);
    })
}

// ---------------------------------------------------------------------------------------
// Mutexes.

/// `PTHREAD_MUTEX_*`: what relocking and foreign unlocking do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MutexType {
    /// `PTHREAD_MUTEX_NORMAL`: the owner relocking deadlocks (as POSIX says).
    Normal,
    /// `PTHREAD_MUTEX_ERRORCHECK`: the owner relocking gets `Deadlock`.
    ErrorCheck,
    /// `PTHREAD_MUTEX_RECURSIVE`: the owner may lock again; as many unlocks release it.
    Recursive,
    /// `PTHREAD_MUTEX_DEFAULT`: here as `ErrorCheck`.
    #[default]
    Default,
}

/// `pthread_mutexattr_t`: the type, and the McRT algorithm under it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MutexAttr {
    /// Normal, error-checking, recursive.
    pub kind: MutexType,
    /// TTS, ticket or MCS (McRT's mutexes, §2).
    pub algorithm: MutexKind,
}

impl Default for MutexAttr {
    fn default() -> Self {
        MutexAttr { kind: MutexType::Default, algorithm: MutexKind::Tts }
    }
}

/// `pthread_mutex_t`, over a McRT [`RawMutex`]. Unlocking by a thread that does not
/// hold it gets `Perm` whatever the type.
pub struct Mutex {
    raw: RawMutex,
    kind: MutexType,
    /// The holder's thread id (0: none); written only by the holder.
    owner: AtomicUsize,
    /// Times the holder has locked it (recursive).
    count: AtomicU32,
    destroyed: AtomicBool,
}

impl Default for Mutex {
    fn default() -> Self {
        Mutex::new(MutexAttr::default())
    }
}

impl Mutex {
    /// `pthread_mutex_init`: an unlocked mutex.
    pub const fn new(attr: MutexAttr) -> Mutex {
        Mutex {
            raw: RawMutex::new(attr.algorithm),
            kind: attr.kind,
            owner: AtomicUsize::new(0),
            count: AtomicU32::new(0),
            destroyed: AtomicBool::new(false),
        }
    }

    fn check(&self) -> Result<(), Errno> {
        if self.destroyed.load(Ordering::Acquire) {
            return Err(Errno::Invalid);
        }
        Ok(())
    }

    /// True when the caller holds it (only the caller writes its own id there).
    fn held_by(&self, me: usize) -> bool {
        self.owner.load(Ordering::Relaxed) == me
    }

    fn relock(&self) -> Result<(), Errno> {
        let c = self.count.load(Ordering::Relaxed);
        if c == u32::MAX {
            return Err(Errno::Again);
        }
        self.count.store(c + 1, Ordering::Relaxed);
        Ok(())
    }

    fn took(&self, me: usize) {
        self.owner.store(me, Ordering::Relaxed);
        self.count.store(1, Ordering::Relaxed);
    }

    /// `pthread_mutex_lock`: waits (predicate yield) until the caller holds it.
    pub fn lock(&self) -> Result<(), Errno> {
        self.check()?;
        let me = current_id();
        if self.held_by(me) {
            match self.kind {
                MutexType::Recursive => return self.relock(),
                MutexType::ErrorCheck | MutexType::Default => return Err(Errno::Deadlock),
                MutexType::Normal => {}
            }
        }
        self.raw.lock();
        self.took(me);
        Ok(())
    }

    /// `pthread_mutex_trylock`: takes it if free now, else `Busy`.
    pub fn trylock(&self) -> Result<(), Errno> {
        self.check()?;
        let me = current_id();
        if self.kind == MutexType::Recursive && self.held_by(me) {
            return self.relock();
        }
        if !self.raw.try_lock() {
            return Err(Errno::Busy);
        }
        self.took(me);
        Ok(())
    }

    /// `pthread_mutex_unlock`: `Perm` unless the caller holds it.
    pub fn unlock(&self) -> Result<(), Errno> {
        self.check()?;
        if !self.held_by(current_id()) {
            return Err(Errno::Perm);
        }
        let c = self.count.load(Ordering::Relaxed) - 1;
        self.count.store(c, Ordering::Relaxed);
        if c == 0 {
            self.owner.store(0, Ordering::Relaxed);
            self.raw.unlock();
        }
        Ok(())
    }

    /// `pthread_mutex_destroy`: `Busy` while held; afterwards every call gets `Invalid`.
    pub fn destroy(&self) -> Result<(), Errno> {
        self.check()?;
        if !self.raw.try_lock() {
            return Err(Errno::Busy);
        }
        self.destroyed.store(true, Ordering::Release);
        self.raw.unlock();
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// Condition variables.

/// `pthread_cond_t`, over McRT's [`sync::Condvar`] (numbered waiters: a signal sent
/// after a waiter released the mutex is never lost).
#[derive(Default)]
pub struct Cond {
    cv: sync::Condvar,
    waiters: AtomicU32,
    destroyed: AtomicBool,
}

impl Cond {
    /// `pthread_cond_init`.
    pub const fn new() -> Cond {
        Cond {
            cv: sync::Condvar::new(),
            waiters: AtomicU32::new(0),
            destroyed: AtomicBool::new(false),
        }
    }

    fn check(&self) -> Result<(), Errno> {
        if self.destroyed.load(Ordering::Acquire) {
            return Err(Errno::Invalid);
        }
        Ok(())
    }

    /// `pthread_cond_wait`: releases `mutex` (held by the caller, else `Perm`), waits for
    /// a signal, takes `mutex` again (a recursive one back to its count).
    pub fn wait(&self, mutex: &Mutex) -> Result<(), Errno> {
        self.check()?;
        mutex.check()?;
        let me = current_id();
        if !mutex.held_by(me) {
            return Err(Errno::Perm);
        }
        let count = mutex.count.load(Ordering::Relaxed);
        mutex.owner.store(0, Ordering::Relaxed);
        self.waiters.fetch_add(1, Ordering::Relaxed);
        self.cv.wait_raw(&mutex.raw);
        self.waiters.fetch_sub(1, Ordering::Relaxed);
        mutex.owner.store(me, Ordering::Relaxed);
        mutex.count.store(count, Ordering::Relaxed);
        Ok(())
    }

    /// `pthread_cond_signal`: lets one waiter go.
    pub fn signal(&self) -> Result<(), Errno> {
        self.check()?;
        self.cv.signal();
        Ok(())
    }

    /// `pthread_cond_broadcast`: lets every waiter go.
    pub fn broadcast(&self) -> Result<(), Errno> {
        self.check()?;
        self.cv.broadcast();
        Ok(())
    }

    /// `pthread_cond_destroy`: `Busy` while a thread waits; afterwards `Invalid`.
    pub fn destroy(&self) -> Result<(), Errno> {
        self.check()?;
        if self.waiters.load(Ordering::Acquire) != 0 {
            return Err(Errno::Busy);
        }
        self.destroyed.store(true, Ordering::Release);
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// Barriers.

/// What [`Barrier::wait`] tells a thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BarrierWait {
    /// `PTHREAD_BARRIER_SERIAL_THREAD`: exactly one thread per round gets it.
    Serial,
    /// Every other thread.
    Other,
}

/// `pthread_barrier_t`, over the paper's barrier ([`sync::Barrier`], §2.2).
pub struct Barrier {
    barrier: sync::Barrier,
    inside: AtomicU32,
    destroyed: AtomicBool,
}

impl Barrier {
    /// `pthread_barrier_init` for `count` threads; `Invalid` for 0.
    pub fn new(count: u32) -> Result<Barrier, Errno> {
        if count == 0 {
            return Err(Errno::Invalid);
        }
        Ok(Barrier {
            barrier: sync::Barrier::new(count),
            inside: AtomicU32::new(0),
            destroyed: AtomicBool::new(false),
        })
    }

    /// `pthread_barrier_wait`: waits until `count` threads have come.
    pub fn wait(&self) -> Result<BarrierWait, Errno> {
        if self.destroyed.load(Ordering::Acquire) {
            return Err(Errno::Invalid);
        }
        self.inside.fetch_add(1, Ordering::Relaxed);
        let last = self.barrier.wait();
        self.inside.fetch_sub(1, Ordering::Release);
        Ok(if last { BarrierWait::Serial } else { BarrierWait::Other })
    }

    /// `pthread_barrier_destroy`: `Busy` while a thread waits; afterwards `Invalid`.
    pub fn destroy(&self) -> Result<(), Errno> {
        if self.inside.load(Ordering::Acquire) != 0 {
            return Err(Errno::Busy);
        }
        self.destroyed
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
            .map(|_| ())
            .map_err(|_| Errno::Invalid)
    }
}
