//! Futures (McrtFuture, §2.1): `spawn(f, arg)` returns a handle and `read(handle)` the value
//! of `f(arg)`, with serial semantics, so the runtime may evaluate `f` whenever it likes:
//! - **eagerly**, inline at `spawn`, when every processor is busy (no parallel work would
//!   be gained, so none is made);
//! - **on an idle processor**, which takes queued futures when it has no thread to run,
//!   running them on its own stack (no thread is made: that is why a future costs a small
//!   fraction of a thread, Figure 3);
//! - **on demand**, inline in `read`, if nobody has started it yet.
//!
//! A future's function runs on whatever stack evaluates it, so it must not block (yield on
//! a predicate); it may spawn and read other futures.

use crate::runtime::{self, Shared};
use alloc::collections::VecDeque;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use locks::TtsLock;

const PENDING: u32 = 0;
const RUNNING: u32 = 1;
const DONE: u32 = 2;

/// Something a processor can evaluate.
trait Job: Send + Sync {
    /// Evaluates it if nobody has started it; true if this call did.
    fn run_if_pending(&self) -> bool;
}

/// A future's state, function and value.
struct Cell<F, T> {
    state: AtomicU32,
    f: UnsafeCell<Option<F>>,
    value: UnsafeCell<Option<T>>,
}

// SAFETY: `f` is touched only by whoever wins PENDING -> RUNNING; `value` is written by
// that evaluator before it publishes DONE (Release) and read by the reader after it sees
// DONE (Acquire).
unsafe impl<F: Send, T: Send> Sync for Cell<F, T> {}

impl<F: FnOnce() -> T + Send, T: Send> Job for Cell<F, T> {
    fn run_if_pending(&self) -> bool {
        if self
            .state
            .compare_exchange(PENDING, RUNNING, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        // SAFETY: we won the state, so `f` is ours alone.
        let f = unsafe { (*self.f.get()).take() };
        if let Some(f) = f {
            let v = f();
            // SAFETY: nobody reads `value` before DONE.
            unsafe { *self.value.get() = Some(v) };
        }
        self.state.store(DONE, Ordering::Release);
        true
    }
}

/// A future's handle.
pub struct Future<T>(Handle<T>);

enum Handle<T> {
    /// Evaluated eagerly at `spawn`: the value itself, nothing shared, nothing allocated.
    Ready(T),
    /// Queued for an idle processor or for `read`.
    Queued { job: Arc<dyn Job>, value: *const UnsafeCell<Option<T>>, state: *const AtomicU32 },
}

// SAFETY: the pointers point into `job`, which the handle keeps alive; `T: Send`.
unsafe impl<T: Send> Send for Future<T> {}

/// Each processor's queue of futures not yet started.
pub(crate) struct FutureQueues {
    queues: Vec<TtsLock<VecDeque<Arc<dyn Job>>>>,
    /// Futures queued in all (kept under the queues' locks, read without them: idle
    /// processors look here before they take any lock).
    queued: AtomicUsize,
}

impl FutureQueues {
    pub(crate) fn new(processors: usize) -> FutureQueues {
        FutureQueues {
            queues: (0..processors).map(|_| TtsLock::new(VecDeque::new())).collect(),
            queued: AtomicUsize::new(0),
        }
    }
}

/// `spawn(f, arg)`: a future of `f(arg)`.
pub fn spawn<A: Send + 'static, T: Send + 'static>(
    f: impl FnOnce(A) -> T + Send + 'static,
    arg: A,
) -> Future<T> {
    spawn_with(move || f(arg))
}

/// A future of `f()`.
pub fn spawn_with<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Future<T> {
    let rt = runtime::shared();
    if rt.idle_processors.load(Ordering::Relaxed) == 0 {
        // Every processor is busy: evaluate now (§2.1, eagerly). No parallelism is lost,
        // and the future costs a call, which is why it is so much cheaper than a thread.
        return Future(Handle::Ready(f()));
    }
    let cell = Arc::new(Cell {
        state: AtomicU32::new(PENDING),
        f: UnsafeCell::new(Some(f)),
        value: UnsafeCell::new(None),
    });
    let value = &cell.value as *const UnsafeCell<Option<T>>;
    let state = &cell.state as *const AtomicU32;
    let job: Arc<dyn Job> = cell;
    let p = runtime::processor();
    rt.futures.queues[p].with(|q| {
        q.push_back(job.clone());
        rt.futures.queued.fetch_add(1, Ordering::Relaxed);
    });
    runtime::notify_if_parked(rt);
    Future(Handle::Queued { job, value, state })
}

impl<T> Future<T> {
    /// `read(handle)`: the value, evaluated here if nobody has started it (§2.1, on demand);
    /// if an idle processor is evaluating it, the caller yields until it is done.
    pub fn read(self) -> T {
        let (job, value, state) = match self.0 {
            Handle::Ready(v) => return v,
            Handle::Queued { job, value, state } => (job, value, state),
        };
        if !job.run_if_pending() {
            // SAFETY: `state` points into `job`, alive while `job` is.
            let state = unsafe { &*state };
            while state.load(Ordering::Acquire) != DONE {
                if crate::in_runtime() && runtime::on_thread_stack() {
                    crate::thread::yield_until(state, crate::Op::Eq, DONE);
                } else {
                    core::hint::spin_loop();
                }
            }
        }
        // SAFETY: DONE was published after the value was written; we are the only reader,
        // and `job` keeps the cell alive.
        let v = unsafe { (*(*value).get()).take() };
        drop(job);
        v.expect("mcrt: a future's value was read twice")
    }

    /// True once its value is ready.
    pub fn is_ready(&self) -> bool {
        match &self.0 {
            Handle::Ready(_) => true,
            // SAFETY: as in `read`.
            Handle::Queued { state, .. } => unsafe { (**state).load(Ordering::Acquire) == DONE },
        }
    }

    /// True if the runtime evaluated it eagerly, at `spawn`, because no processor was idle.
    pub fn was_eager(&self) -> bool {
        matches!(self.0, Handle::Ready(_))
    }
}

/// An idle processor's turn: evaluates one queued future (its own queue's newest first,
/// then the oldest of another's); true if it ran one.
pub(crate) fn run_one(rt: &Shared, processor: usize) -> bool {
    if rt.futures.queued.load(Ordering::Relaxed) == 0 {
        return false;
    }
    let n = rt.futures.queues.len();
    for k in 0..n {
        let q = &rt.futures.queues[(processor + k) % n];
        let job = q.with(|q| {
            let job = if k == 0 { q.pop_back() } else { q.pop_front() };
            if job.is_some() {
                rt.futures.queued.fetch_sub(1, Ordering::Relaxed);
            }
            job
        });
        if let Some(job) = job {
            if job.run_if_pending() {
                runtime::notify_if_parked(rt);
                return true;
            }
        }
    }
    false
}

/// True if any future is queued.
pub(crate) fn any_queued(rt: &Shared) -> bool {
    rt.futures.queued.load(Ordering::Relaxed) != 0
}

/// Drops every queued future (the runtime stopped).
pub(crate) fn drain(rt: &Shared) {
    for q in &rt.futures.queues {
        q.with(|q| q.clear());
    }
    rt.futures.queued.store(0, Ordering::Relaxed);
}
