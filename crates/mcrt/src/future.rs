//! Futures (McrtFuture, §2.1): `spawn(f, arg)` returns a handle and `read(handle)` the value
//! of `f(arg)`, with serial semantics, so the runtime may evaluate `f` whenever it likes:
//! - **eagerly**, inline at `spawn`, when no idle processor is left without a future
//!   queued for it (no parallel work would be gained, so none is made);
//! - **on an idle processor**, which takes queued futures when it has no thread to run,
//!   running them on its own stack (no thread is made: that is why a future costs a small
//!   fraction of a thread, Figure 3);
//! - **on demand**, inline in `read`, if nobody has started it yet.
//!
//! A future's function runs on whatever stack evaluates it, so it must not block (yield on
//! a predicate); it may spawn and read other futures.

use crate::cells::Slot;
use crate::future_queues::Job;
use crate::runtime::{self, Shared};
use alloc::sync::Arc;
use core::sync::atomic::{AtomicU32, Ordering};

const PENDING: u32 = 0;
const RUNNING: u32 = 1;
const DONE: u32 = 2;

/// A future as its reader sees it: a [`Job`] with a state and, once DONE, a value.
trait Evaluation<T>: Job {
    /// PENDING, RUNNING or DONE.
    fn state(&self) -> &AtomicU32;
    /// The value (once, after DONE was seen).
    fn take(&self) -> Option<T>;
}

/// A future's state, function and value. `f` is taken only by whoever wins PENDING ->
/// RUNNING; `value` is put by that evaluator before it publishes DONE (Release) and taken
/// by the reader after it sees DONE (Acquire).
struct Cell<F, T> {
    state: AtomicU32,
    f: Slot<F>,
    value: Slot<T>,
}

impl<F: FnOnce() -> T + Send, T: Send> Job for Cell<F, T> {
    fn run_if_pending(&self) -> bool {
        if self
            .state
            .compare_exchange(PENDING, RUNNING, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        // We won the state, so `f` is ours alone; nobody takes `value` before DONE.
        if let Some(f) = self.f.take() {
            self.value.put(f());
        }
        self.state.store(DONE, Ordering::Release);
        true
    }
}

impl<F: FnOnce() -> T + Send, T: Send> Evaluation<T> for Cell<F, T> {
    fn state(&self) -> &AtomicU32 {
        &self.state
    }

    fn take(&self) -> Option<T> {
        if self.state.load(Ordering::Acquire) != DONE {
            return None;
        }
        // DONE was published (Release) after the value was put, and the future's one
        // handle is the only reader.
        self.value.take()
    }
}

/// A future's handle. (Two words for a word-sized value, so it is returned in registers.)
pub struct Future<T>(Handle<T>);

enum Handle<T> {
    /// Evaluated eagerly at `spawn`: the value itself, nothing shared, nothing allocated.
    Ready(T),
    /// Queued for an idle processor or for `read`.
    Queued(Arc<dyn Evaluation<T>>),
}

/// `spawn(f, arg)`: a future of `f(arg)`.
#[inline(always)]
pub fn spawn<A: Send + 'static, T: Send + 'static>(
    f: impl FnOnce(A) -> T + Send + 'static,
    arg: A,
) -> Future<T> {
    spawn_with(move || f(arg))
}

/// A future of `f()`. (Inlined: an eager future then costs the call of `f` and two loads;
/// returned from a call, its handle came back through memory, which cost as much again.)
#[inline(always)]
pub fn spawn_with<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Future<T> {
    let rt = runtime::shared();
    // Offer a future only to a processor that has none waiting for it: when every idle
    // processor already has one queued (or none is idle), evaluate now (§2.1, eagerly). No
    // parallelism is lost, since nobody could start it sooner, and the future costs a
    // call, which is why it is so much cheaper than a thread. A queued future costs
    // cache-line transfers to whoever takes it, so small futures are mostly run here,
    // while every idle processor is kept fed.
    let idle = rt.idle_processors.load(Ordering::Relaxed);
    if idle == 0 || rt.futures.queued() >= idle {
        return Future(Handle::Ready(f()));
    }
    Future(Handle::Queued(queue(rt, f)))
}

/// `f()`, queued on this processor for an idle one (or for `read`). (It returns the cell,
/// two words in registers, not the handle: a handle returned through memory and then
/// copied stalls the eager path's store forwarding where the two paths meet.)
#[inline(never)]
fn queue<T: Send + 'static>(
    rt: &Shared,
    f: impl FnOnce() -> T + Send + 'static,
) -> Arc<dyn Evaluation<T>> {
    let cell =
        Arc::new(Cell { state: AtomicU32::new(PENDING), f: Slot::full(f), value: Slot::new() });
    let job: Arc<dyn Job> = cell.clone();
    rt.futures.push(runtime::processor(), job);
    runtime::notify_if_parked(rt);
    cell
}

impl<T> Future<T> {
    /// `read(handle)`: the value, evaluated here if nobody has started it (§2.1, on demand);
    /// if an idle processor is evaluating it, the caller yields until it is done.
    #[inline]
    pub fn read(self) -> T {
        let job = match self.0 {
            Handle::Ready(v) => return v,
            Handle::Queued(job) => job,
        };
        if !job.run_if_pending() {
            let state = job.state();
            while state.load(Ordering::Acquire) != DONE {
                if crate::in_runtime() && runtime::on_thread_stack() {
                    crate::thread::yield_until(state, crate::Op::Eq, DONE);
                } else {
                    core::hint::spin_loop();
                }
            }
        }
        job.take().expect("mcrt: a future's value was read twice")
    }

    /// True once its value is ready.
    pub fn is_ready(&self) -> bool {
        match &self.0 {
            Handle::Ready(_) => true,
            Handle::Queued(job) => job.state().load(Ordering::Acquire) == DONE,
        }
    }

    /// True if the runtime evaluated it eagerly, at `spawn`, because no processor was idle.
    pub fn was_eager(&self) -> bool {
        matches!(self.0, Handle::Ready(_))
    }
}
