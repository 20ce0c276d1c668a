//! User-level threads (McrtThread, §2): create, join, exit, yield, and thread-local data.
//! A thread is a stack whose base holds its header (see [`crate::runtime`]); it runs until
//! it yields, blocks on a predicate, or ends.

use crate::cells::Slot;
use crate::malloc::raw::AtomicDestructor;
use crate::predicate::{Op, Predicate};
use crate::runtime::{self, current, Task, DETACHED, DONE};
use crate::Error;
use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

/// A thread to join (dropping it detaches the thread).
pub struct JoinHandle<T> {
    /// The thread's header, as an address (the handle only reads the header's atomic
    /// state, and frees it once the thread is done, from whichever thread holds it).
    task: usize,
    slot: Arc<Slot<T>>,
}

impl<T> JoinHandle<T> {
    /// Waits until the thread has ended; its result, or `None` if it ended by [`exit`].
    pub fn join(self) -> Option<T> {
        let state = &self.header().state;
        runtime::block_until(Predicate::new(state, Op::AnySet, DONE));
        runtime::free_task(self.task as *const Task);
        let value = self.slot.take();
        core::mem::forget(self);
        value
    }

    /// True once the thread has ended.
    pub fn is_finished(&self) -> bool {
        self.header().state.load(Ordering::Acquire) & DONE != 0
    }

    /// The thread's header: it lives until the handle frees it (the thread is not
    /// detached while the handle exists).
    fn header(&self) -> &Task {
        crate::context::header(self.task as *const Task)
    }

    /// The thread's id (unique among live threads).
    pub fn id(&self) -> usize {
        self.task
    }
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        let before = self.header().state.fetch_or(DETACHED, Ordering::AcqRel);
        if before & DONE != 0 {
            runtime::free_task(self.task as *const Task);
        }
    }
}

/// Starts a thread running `f`, in the queue the scheduler's mapping gives the caller's
/// processor (§2.2: its own, or the next round robin); `NoMemory` when no stack can be had.
pub fn spawn<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<JoinHandle<T>, Error> {
    let me = current();
    let queue = runtime::spawn_queue(me);
    spawn_to(queue, f)
}

/// Starts a thread running `f` in queue `queue`.
pub fn spawn_to<T: Send + 'static>(
    queue: usize,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<JoinHandle<T>, Error> {
    let me = current();
    let rt = me.rt();
    if queue >= rt.queues.len() {
        return Err(Error::InvalidArgument);
    }
    let slot = Arc::new(Slot::new());
    let out = slot.clone();
    let body: Box<dyn FnOnce() + Send> = Box::new(move || out.put(f()));
    let task = runtime::make_task(rt, Some(me), queue, body, false).ok_or(Error::NoMemory)?;
    rt.queues[queue].push(task as usize);
    runtime::notify_if_parked(rt);
    Ok(JoinHandle { task: task as usize, slot })
}

/// Ends the calling thread (a joiner gets `None`).
pub fn exit() -> ! {
    runtime::exit()
}

/// An id of the calling thread, unique among live threads.
pub fn current_id() -> usize {
    current() as *const Task as usize
}

/// Yields until `word op value` holds (§2.2's predicate yield): the caller is scheduled
/// back only then. Whoever changes the word should call [`crate::notify`] so that parked
/// processors look again (otherwise they notice within a millisecond).
pub fn yield_until(word: &AtomicU32, op: Op, value: u32) {
    runtime::block_until(Predicate::new(word, op, value));
}

// ---------------------------------------------------------------------------------------
// Thread-local data.

/// Keys handed out so far.
static KEYS: AtomicUsize = AtomicUsize::new(0);
/// Most keys (as POSIX's `PTHREAD_KEYS_MAX`).
pub const KEYS_MAX: usize = 1024;
/// Each key's destructor, if it has one.
static DESTRUCTORS: [AtomicDestructor; KEYS_MAX] = [const { AtomicDestructor::new() }; KEYS_MAX];

/// A key for one word of thread-local data per thread (0 until set).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Key(usize);

impl Key {
    /// Its index (for code that keeps a key in an atomic word).
    pub(crate) fn index(self) -> usize {
        self.0
    }

    /// The key with index `index`, one that [`Key::new`] handed out.
    pub(crate) fn from_index(index: usize) -> Key {
        Key(index)
    }

    /// A new key; `destructor` runs with a thread's non-zero value when it ends.
    pub fn new(destructor: Option<fn(usize)>) -> Result<Key, Error> {
        let k = KEYS.fetch_add(1, Ordering::Relaxed);
        if k >= KEYS_MAX {
            KEYS.fetch_sub(1, Ordering::Relaxed);
            return Err(Error::NoMemory);
        }
        DESTRUCTORS[k].store(destructor);
        Ok(Key(k))
    }

    /// The calling thread's value.
    pub fn get(self) -> usize {
        // Only the running thread touches its own `tls`, and never while it is borrowed.
        current().tls.borrow().get(self.0).copied().unwrap_or(0)
    }

    /// Sets the calling thread's value.
    pub fn set(self, value: usize) {
        // As in `get`.
        let mut tls = current().tls.borrow_mut();
        if tls.len() <= self.0 {
            tls.resize(self.0 + 1, 0);
        }
        tls[self.0] = value;
    }
}

/// The runtime's calls into thread-local data ([`crate::Subsystems`]): an ending thread's
/// destructors run on its own stack.
pub(crate) struct ThreadHooks;

impl crate::hooks::ThreadHooks<Task> for ThreadHooks {
    fn ending(t: &Task) {
        run_tls_destructors(t);
    }
}

/// Runs the destructors of `t`'s non-zero thread-local values (it is ending).
fn run_tls_destructors(t: &Task) {
    // The running thread's own `tls`; taken out so a destructor may set keys.
    let values: Vec<usize> = t.tls.take();
    for (k, &v) in values.iter().enumerate() {
        if let Some(d) = DESTRUCTORS[k].load().filter(|_| v != 0) {
            d(v);
        }
    }
}
