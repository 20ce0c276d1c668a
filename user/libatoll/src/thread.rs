//! Kernel threads (issue M7): user contexts in the program's address space that the
//! per-core schedulers time-share and move between cores, plus the calls a thread makes
//! about itself (`yield`, `sleep`, `wait`/`wake` on a 32-bit word) and about others
//! (`join`, status, affinity, counters).
//!
//! Unlike [`crate::threads`] (one context per core, Corey's pcores), any number of these
//! may share a core. Each gets its own stack mapped in the root range, and its share set
//! holds the program's home share ([`crate::obj::home_share`]), so it reaches the root
//! range and what the program maps there (the heap grows from any thread). The home
//! share lives while any thread spawned here does; when the last is joined, the objects
//! the threads made go back into the root share, as after [`crate::threads::run`].

use crate::obj::{self, root_ar, root_share, share_delobj, ObjRef, Status};
use crate::private;
use crate::sys::syscall3;
use abi::{nr, wait_result, Error, ThreadCreate, ThreadStat, ANY_CORE};
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Each thread's stack (pages are filled on first touch, so only what is used costs).
pub const STACK_BYTES: u64 = 256 * 1024;

/// Threads spawned here and not yet joined (the home share lives while this is not 0).
static LIVE: AtomicU64 = AtomicU64::new(0);
/// The root share of the thread that made the home share: only it can put the threads'
/// objects back into its root share (another thread's root share dies with it).
static HOME_OWNER: AtomicU64 = AtomicU64::new(0);

/// The thread objects (in the home share) spawned and not yet joined, so a thread waiting
/// for its peers can see one of them end badly ([`wait_for_peers`]). 0 marks a free
/// slot; a thread spawned while all are taken is not watched.
static SPAWNED: [AtomicU64; 256] = [const { AtomicU64::new(0) }; 256];

/// How long [`wait_for_peers`] sleeps before it looks at the peers again: a dead peer is
/// noticed this long after it died, and a live wait costs a system call this often.
pub const PEER_CHECK_US: u64 = 10_000;

/// The exit code of a thread that gave up waiting because a peer ended badly
/// (`platform`'s `wait_word`): sysexits' `EX_SOFTWARE`.
pub const PEER_ENDED_EXIT: i32 = 70;

/// A peer ended badly while a thread waited for it ([`wait_for_peers`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerEnded {
    /// A thread this program spawned and has not joined: its object id, how it ended.
    Thread(u64, Status),
    /// A context this one started (`cfork`, `threads::run`) and has not joined: its
    /// pcore's id, how it ended.
    Child(usize, Status),
}

impl core::fmt::Display for PeerEnded {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            PeerEnded::Thread(id, status) => write!(f, "thread {id} ended {status:?}"),
            PeerEnded::Child(id, status) => write!(f, "child (pcore {id}) ended {status:?}"),
        }
    }
}

/// What a new thread runs, boxed in the spawner's heap; the thread takes it.
struct Start {
    work: Box<dyn FnOnce() -> i32 + Send>,
}

/// How to start a thread: where, and where it may run.
#[derive(Clone, Copy, Debug, Default)]
pub struct Builder {
    core: Option<usize>,
    affinity: u64,
}

impl Builder {
    /// Anywhere the scheduler places it, on any core.
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Start on `core` (it must be in the affinity set).
    pub fn core(mut self, core: usize) -> Builder {
        self.core = Some(core);
        self
    }

    /// Run only on the cores in `mask` (bit i: core i; 0: every core).
    pub fn affinity(mut self, mask: u64) -> Builder {
        self.affinity = mask;
        self
    }

    /// Starts a thread running `work`; its return value is the thread's exit code.
    pub fn spawn<F: FnOnce() -> i32 + Send + 'static>(self, work: F) -> Result<Thread, Error> {
        let home = enter_threaded()?;
        let stack = match private::map_new(STACK_BYTES) {
            Ok(m) => m,
            Err(e) => {
                leave_threaded();
                return Err(e);
            }
        };
        let start = Box::into_raw(Box::new(Start { work: Box::new(work) }));
        let mut args = ThreadCreate {
            share: home,
            core: self.core.map_or(ANY_CORE, |c| c as u64),
            entry: thread_entry as *const () as u64,
            // As if `thread_entry` had been called: 8 below a 16-byte boundary.
            stack: stack.va + stack.bytes - 8,
            ar: [home, root_ar()],
            arg: start as u64,
            nshares: 1,
            affinity: self.affinity,
            ..ThreadCreate::default()
        };
        args.shares[0] = home;
        let words = args.to_words();
        match syscall3(nr::THREAD_CREATE, words.as_ptr() as u64, 0, 0) {
            Ok(id) => {
                // Watched until joined (in the first free slot, if any).
                let _ = SPAWNED.iter().any(|slot| {
                    slot.compare_exchange(0, id, Ordering::AcqRel, Ordering::Relaxed).is_ok()
                });
                Ok(Thread { obj: ObjRef::new(home, id), stack: stack.va })
            }
            Err(e) => {
                // SAFETY: the thread was not created, so the box is still ours alone.
                drop(unsafe { Box::from_raw(start) });
                private::free(stack.va, stack.bytes);
                leave_threaded();
                Err(e)
            }
        }
    }
}

/// Starts a thread running `work` wherever the scheduler places it.
pub fn spawn<F: FnOnce() -> i32 + Send + 'static>(work: F) -> Result<Thread, Error> {
    Builder::new().spawn(work)
}

/// Runs `work(i)` for every `i` in `0..n`, each in a thread of its own (pinned to `pin`'s
/// core, or placed and moved by the scheduler), and returns when all have ended: scoped,
/// so `work` may borrow. Fails if a thread cannot start (those started are joined first)
/// or one does not exit 0 (a panic ends it with 101).
pub fn run_scoped(
    n: usize,
    pin: Option<usize>,
    work: &(dyn Fn(usize) + Sync),
) -> Result<(), Error> {
    // SAFETY: every thread started here is joined below before this function returns, so
    // `work` outlives every use the threads make of it.
    let work: &'static (dyn Fn(usize) + Sync) = unsafe { core::mem::transmute(work) };
    let mut threads = Vec::with_capacity(n);
    let mut failed = None;
    for i in 0..n {
        let builder = match pin {
            Some(core) => Builder::new().core(core).affinity(1 << core),
            None => Builder::new(),
        };
        match builder.spawn(move || {
            work(i);
            0
        }) {
            Ok(t) => threads.push(t),
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    // Joined threads stay watched until the whole group is joined: a thread still waiting
    // for a peer that ended badly must see it even after this joined that peer (issue
    // M14: joined and forgotten one by one, a faulted peer vanished before the last waiter
    // looked, and that waiter waited until the program's time limit).
    let mut bad = false;
    let mut joined = Vec::with_capacity(threads.len());
    for t in threads {
        let (status, watched) = t.join_watched();
        bad |= status != Status::Exited(0);
        joined.push(watched);
    }
    for watched in joined {
        watched.forget();
    }
    match failed {
        Some(e) => Err(e),
        None if bad => Err(Error::Busy),
        None => Ok(()),
    }
}

/// A joined thread that its peers still see: its object stays in the home share and on
/// the watch list until [`Watched::forget`].
struct Watched {
    obj: ObjRef,
}

impl Watched {
    /// Takes it off the watch list, drops its object, and counts one thread fewer.
    fn forget(self) {
        for slot in &SPAWNED {
            let _ = slot.compare_exchange(self.obj.object, 0, Ordering::AcqRel, Ordering::Relaxed);
        }
        let _ = share_delobj(self.obj);
        leave_threaded();
    }
}

/// A thread this program started: join it to collect its status and free its stack.
#[derive(Debug)]
pub struct Thread {
    obj: ObjRef,
    stack: u64,
}

impl Thread {
    /// The thread object (for `thread_status`, `thread_join`, ...).
    pub fn object(&self) -> ObjRef {
        self.obj
    }

    /// Waits until the thread ends; returns how it ended.
    pub fn join(self) -> Status {
        let (status, watched) = self.join_watched();
        // Joined: how it ended is the joiner's to handle now, not its peers'.
        watched.forget();
        status
    }

    /// Waits until the thread ends; returns how it ended, and the ended thread, which its
    /// peers still see ([`peer_ended_badly`]) until it is forgotten.
    fn join_watched(self) -> (Status, Watched) {
        let word = syscall3(nr::THREAD_JOIN, self.obj.share, self.obj.object, 0);
        let status = word.map_or(Status::Failed, Status::from_word);
        private::free(self.stack, STACK_BYTES);
        (status, Watched { obj: self.obj })
    }

    /// Its status now (`Running` while it lives).
    pub fn status(&self) -> Status {
        syscall3(nr::THREAD_STATUS, self.obj.share, self.obj.object, 0)
            .map_or(Status::Failed, Status::from_word)
    }

    /// Where it is and how often it moved.
    pub fn stat(&self) -> Result<ThreadStat, Error> {
        stat_of(self.obj)
    }

    /// The cores it may run on (bit i: core i).
    pub fn set_affinity(&self, mask: u64) -> Result<(), Error> {
        syscall3(nr::THREAD_SET_AFFINITY, self.obj.share, self.obj.object, mask).map(|_| ())
    }
}

fn stat_of(obj: ObjRef) -> Result<ThreadStat, Error> {
    let mut words = [0u64; 5];
    syscall3(nr::THREAD_STAT, obj.share, obj.object, words.as_mut_ptr() as u64)?;
    Ok(ThreadStat::from_words(words))
}

/// The calling thread's own counters (its core, migrations, switches).
pub fn my_stat() -> Result<ThreadStat, Error> {
    stat_of(ObjRef::new(0, 0))
}

/// Restricts the calling thread to the cores in `mask`; it moves at once if this core
/// is not among them.
pub fn set_my_affinity(mask: u64) -> Result<(), Error> {
    syscall3(nr::THREAD_SET_AFFINITY, 0, 0, mask).map(|_| ())
}

/// Gives the core to the next ready thread on it.
pub fn yield_now() {
    let _ = syscall3(nr::YIELD, 0, 0, 0);
}

/// Sleeps at least `us` microseconds (at most a minute per call).
pub fn sleep_us(us: u64) -> Result<(), Error> {
    syscall3(nr::SLEEP, us, 0, 0).map(|_| ())
}

/// How a [`wait`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Woken {
    /// A [`wake`] on the word.
    Woken,
    /// The word no longer held the expected value: the caller did not sleep.
    Changed,
    /// The timeout passed.
    TimedOut,
}

/// Sleeps while `word` holds `expected`, until a [`wake`] on it or `timeout_us` (0: no
/// timeout). The futex pair: a waker changes the word first, then wakes.
pub fn wait(word: &AtomicU32, expected: u32, timeout_us: u64) -> Result<Woken, Error> {
    let addr = word as *const AtomicU32 as u64;
    match syscall3(nr::WAIT, addr, u64::from(expected), timeout_us)? {
        wait_result::WOKEN => Ok(Woken::Woken),
        wait_result::CHANGED => Ok(Woken::Changed),
        _ => Ok(Woken::TimedOut),
    }
}

/// Like [`wait`] with no timeout, for a word the program's other threads will change (a
/// barrier, a join by word): it waits in slices of [`PEER_CHECK_US`], and after each looks
/// whether a peer it may be waiting for ended badly ([`Status::ended_badly`]: a fault, its
/// time limit, a halt, a failing exit): a thread this program spawned and has not joined,
/// or a context this one started. Then it returns that peer instead of waiting for a
/// wake that may never come (a spawned thread's fault ends only that thread, so its peers
/// would otherwise wait until the program's time limit). `Ok` as [`wait`] returns it, but
/// never `TimedOut`.
pub fn wait_for_peers(word: &AtomicU32, expected: u32) -> Result<Woken, PeerEnded> {
    loop {
        match wait(word, expected, PEER_CHECK_US) {
            Ok(Woken::TimedOut) => {}
            Ok(woken) => return Ok(woken),
            // A word `wait` refuses (unaligned, unmapped) is the caller's bug: say
            // "changed" and let it look at the word itself.
            Err(_) => return Ok(Woken::Changed),
        }
        if let Some(peer) = peer_ended_badly() {
            return Err(peer);
        }
    }
}

/// A peer of the caller that ended badly (see [`wait_for_peers`]), if one did.
pub fn peer_ended_badly() -> Option<PeerEnded> {
    let home = obj::current_home();
    if home != 0 {
        for id in SPAWNED.iter().map(|slot| slot.load(Ordering::Acquire)).filter(|&id| id != 0) {
            let word = syscall3(nr::THREAD_STATUS, home, id, 0);
            if let Ok(status) = word.map(Status::from_word) {
                if status.ended_badly() {
                    return Some(PeerEnded::Thread(id, status));
                }
            }
        }
    }
    crate::cfork::child_ended_badly().map(|(id, status)| PeerEnded::Child(id, status))
}

/// Wakes up to `n` threads waiting on `word`; returns how many it woke on this core
/// (those on other cores are woken by message).
pub fn wake(word: &AtomicU32, n: u64) -> Result<u64, Error> {
    syscall3(nr::WAKE, word as *const AtomicU32 as u64, n, 0)
}

/// Where the first thread finds the program's objects: makes the home share (holding
/// the root range) if no thread is live, and counts one more thread. Returns it.
fn enter_threaded() -> Result<u64, Error> {
    if LIVE.fetch_add(1, Ordering::AcqRel) == 0 && obj::current_home() == 0 {
        if let Err(e) = crate::threads::open_home() {
            LIVE.fetch_sub(1, Ordering::AcqRel);
            return Err(e);
        }
        HOME_OWNER.store(root_share(), Ordering::Release);
    }
    Ok(obj::home_share())
}

/// One thread fewer; after the last, the threads' objects go back to the root share.
fn leave_threaded() {
    if LIVE.fetch_sub(1, Ordering::AcqRel) != 1 {
        return;
    }
    let (home, root) = (obj::current_home(), root_share());
    if home != 0 && HOME_OWNER.load(Ordering::Acquire) == root {
        obj::set_home_share(0);
        crate::threads::take_up(root, home);
        obj::share_free(home);
    }
}

/// Where a thread starts (`rdi` = its [`Start`], boxed by the spawner).
extern "C" fn thread_entry(start: *mut Start) -> ! {
    // SAFETY: `spawn` boxed this for the new thread alone and never touches it again.
    let start = unsafe { Box::from_raw(start) };
    crate::tls::run_thread(start.work, crate::exit)
}
