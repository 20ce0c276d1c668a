//! The scheduler (McRT §2.2): logical processors running user-level threads from task
//! queues, cooperatively.
//!
//! Read top to bottom:
//! 1. **The thread header** ([`Task`]), at the base of each thread's stack.
//! 2. **The runtime** ([`Shared`]): the queues, the processors, the parking word.
//! 3. **Switching** ([`switch_to`], [`after_switch`]): a thread switches straight to the
//!    next one; what must happen once it is off its stack (requeue it, retire it) is left
//!    in its processor's `pending` slot, which the next thread carries out first.
//! 4. **Threads made and retired** ([`make_task`], [`retire`]).
//! 5. **A processor's idle loop** ([`idle`]): it runs on a stack of its own, takes
//!    threads (and futures) from the queues it snoops, spins a while when there are none,
//!    then parks on the runtime's `epoch` word until [`notify`] or a timeout.
//! 6. **Starting and stopping** ([`run`]).
//!
//! The runtime names none of the subsystems that hang state off a thread's header (the
//! allocator's heap, the STM's descriptors, thread-local values): each implements
//! [`crate::hooks::ThreadHooks`] and is listed in one place, [`crate::Subsystems`], whose
//! hooks the runtime calls when a thread ends, is switched in, or is freed unfinished
//! (§2.3: "when a thread exits, the scheduler uses a fast callback to notify the memory
//! manager").

mod idle;

use crate::cells::{Confined, Slot};
use crate::config::Config;
use crate::context::{self, Stack};
use crate::future_queues::FutureQueues;
use crate::hooks::ThreadHooks;
use crate::host::Host;
use crate::park::Parking;
use crate::predicate::Predicate;
use crate::queue::TaskQueue;
use crate::Subsystems;
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::cell::{Cell, RefCell};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// Marks a live thread header (a check that the stack pointer is on a McRT stack).
const CANARY: u64 = 0x4d63_5254_5f74_6872; // "McRT_thr"
/// Rounds of looking for work before a processor parks.
const SPIN_ROUNDS: u32 = 200;
/// Longest a parked processor sleeps before it looks again: a thread waiting on a word
/// that was written without [`notify`] is noticed within this time.
const PARK_US: u64 = 1000;
/// Stacks each processor keeps for new threads (more go to the process-wide pool, where
/// every processor finds them: a thread that moves between processors must not leave
/// stacks stranded in one's cache).
const STACK_CACHE: usize = 16;

/// `Task::state` bits.
pub(crate) const DONE: u32 = 1;
pub(crate) const DETACHED: u32 = 2;

/// A thread's header, in the highest bytes of its stack.
#[repr(C)]
pub(crate) struct Task {
    canary: u64,
    /// The stack pointer saved while it is switched out.
    sp: Cell<usize>,
    /// The runtime it belongs to (which outlives it: `context::for_the_run`).
    rt: &'static Shared,
    /// The processor running it (set when it is switched in).
    processor: Cell<usize>,
    /// The queue it goes back to when it yields (its domain's, §2.2).
    pub(crate) queue: Cell<usize>,
    /// `DONE` once it has ended and left its stack; `DETACHED` once nobody will join it.
    pub(crate) state: AtomicU32,
    /// While blocked: what must hold before it runs again.
    wait: Cell<Option<Predicate>>,
    /// What it runs (taken when it starts).
    entry: Cell<Option<Box<dyn FnOnce() + Send>>>,
    /// Its thread-local values, by key.
    pub(crate) tls: RefCell<Vec<usize>>,
    /// The allocator's per-thread state (§2.3), 0 until it allocates.
    pub(crate) heap: Cell<usize>,
    /// The STM's descriptor of the transaction it is in (§2.4), 0 outside one.
    pub(crate) tx: Cell<usize>,
    /// The STM descriptor this thread keeps between its transactions (0: none yet),
    /// given back when it ends.
    pub(crate) stm_desc: Cell<usize>,
    /// True while it is switched out by its own yield (the STM may abort its transaction
    /// only then, §2.4).
    pub(crate) yielded: AtomicBool,
    /// True from when a processor switches to it until it has left its stack again. A
    /// yielding thread is queued while still on its stack (one hold of the queue's lock
    /// both takes the next thread and queues it); a processor that takes it waits for this
    /// to clear before switching to it.
    on_cpu: AtomicBool,
    /// True for a processor's idle loop (not a thread of the program).
    idle: bool,
}

/// A processor's action for the thread switched in next (run on that thread's stack).
#[derive(Clone, Copy)]
enum Pending {
    None,
    /// Put the thread that switched out back in its queue.
    Requeue(*const Task),
    /// The thread that switched out is already queued: mark it off the CPU.
    Release(*const Task),
    /// The thread that switched out has ended.
    Retire(*const Task),
}

/// One logical processor (§2.2). Only the system thread running it touches its cells.
pub(crate) struct Processor {
    index: usize,
    /// Its idle loop's header.
    idle: Cell<*const Task>,
    /// The system thread's stack pointer, to return to when the runtime stops.
    host_sp: Cell<usize>,
    pending: Cell<Pending>,
    /// Stacks of retired threads, for the next ones.
    stacks: RefCell<Vec<Stack>>,
    /// Round-robin position in its `spawn_to` list.
    next_spawn: Cell<usize>,
    /// Its switches, written only by its own system thread (no locked instruction on
    /// the switch path), read by [`stats`].
    switches: AtomicU64,
}

/// The runtime's counters.
#[derive(Default)]
struct Counters {
    spawned: AtomicU64,
    steals: AtomicU64,
    parks: AtomicU64,
}

/// A snapshot of the runtime's counters, for reports and benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Threads created.
    pub spawned: u64,
    /// Switches from one context to another.
    pub switches: u64,
    /// Threads taken from a queue other than the processor's home queue.
    pub steals: u64,
    /// Times a processor parked.
    pub parks: u64,
}

/// The runtime's state, shared by its processors.
pub(crate) struct Shared {
    pub(crate) config: Config,
    pub(crate) queues: Vec<TaskQueue>,
    /// Each processor's own state, confined to the system thread running it.
    processors: Vec<Confined<Processor>>,
    /// Where idle processors sleep ([`crate::park`]).
    parking: Parking,
    /// Processors in their idle loops looking for work, not parked: futures are queued for
    /// them (§2.1). A parked processor does not count: waking it costs more than a small
    /// future, which the spawner then evaluates eagerly.
    pub(crate) idle_processors: AtomicUsize,
    stopping: AtomicBool,
    /// Live threads (the main thread included).
    pub(crate) live: AtomicUsize,
    /// Borrowed for the whole of [`run`], which erases its lifetime (see there why that
    /// is sound).
    host: &'static dyn Host,
    pub(crate) futures: FutureQueues,
    stats: Counters,
    /// Whether switches keep each thread's FPU control words now: from the start under
    /// `FpuControl::Saved`, never under `Shared`, and under `Auto` once a thread has called
    /// [`crate::fpu::set_control`] (only that call sets it).
    pub(crate) fpu_saving: AtomicBool,
}

// `Shared` is `Sync`: a processor's cells are touched only by the system thread running
// it (`Confined`); everything else in it is atomic or behind the queues' locks, and the
// host is `Sync` and outlives the run (`context::for_the_run`).

impl Shared {
    pub(crate) fn host(&self) -> &dyn Host {
        self.host
    }

    fn processor(&self, i: usize) -> &Processor {
        self.processors[i].get()
    }
}

// ---------------------------------------------------------------------------------------
// The running thread.

/// The running thread's header.
///
/// # Panics
/// When called off a McRT stack (outside [`run`]).
pub(crate) fn current() -> &'static Task {
    let task = context::running_header::<Task>();
    assert!(crate::in_runtime(), "mcrt: called outside the runtime");
    // A McRT processor's system thread runs only on McRT stacks, whose top holds a live
    // header (checked by its canary).
    let task = context::header(task);
    assert_eq!(task.canary, CANARY, "mcrt: stack overflow or not a McRT stack");
    task
}

impl Task {
    pub(crate) fn rt(&self) -> &'static Shared {
        self.rt
    }

    fn proc(&self) -> &'static Processor {
        self.rt().processor(self.processor.get())
    }

    fn runnable(&self) -> bool {
        self.wait.get().is_none_or(|p| p.holds())
    }
}

/// True when the caller runs on a thread's stack (not on a processor's idle loop, where
/// futures run and nothing may block).
pub(crate) fn on_thread_stack() -> bool {
    !current().idle
}

/// The runtime of the running thread.
pub(crate) fn shared() -> &'static Shared {
    current().rt()
}

// ---------------------------------------------------------------------------------------
// Switching.

/// Switches from `me` to `next` (on `me`'s processor), leaving `pending` for `next` to carry
/// out; returns when `me` runs again (on whatever processor).
fn switch_to(me: &Task, next: *const Task, pending: Pending) {
    let p = me.proc();
    p.pending.set(pending);
    p.switches.store(p.switches.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    // `next` was taken from a queue (or is this processor's idle loop), so no other
    // processor runs it once it is off its stack; `me`'s header outlives the switch.
    let next = context::header(next);
    // A yielding thread taken from a queue may still be leaving its stack elsewhere.
    // (An idle loop is never queued: it is this processor's alone.)
    if !next.idle {
        while next.on_cpu.load(Ordering::Acquire) {
            core::hint::spin_loop();
        }
        next.on_cpu.store(true, Ordering::Relaxed);
    }
    next.processor.set(p.index);
    // Relaxed: a late read of a flip by another processor's thread is harmless
    // (`crate::fpu`); this thread's own flip it reads in program order.
    let keep_fpu = me.rt().fpu_saving.load(Ordering::Relaxed);
    context::switch_threads(&me.sp, next.sp.get(), keep_fpu);
    after_switch(me);
}

/// What the thread `me`, just switched in, does first: the pending action of the one it
/// replaced.
fn after_switch(me: &Task) {
    let p = me.proc();
    match p.pending.replace(Pending::None) {
        Pending::None => {}
        Pending::Requeue(t) => {
            // The thread has left its stack; it is ours to queue.
            let t = context::header(t);
            t.yielded.store(true, Ordering::Relaxed);
            t.on_cpu.store(false, Ordering::Relaxed);
            me.rt().queues[t.queue.get()].push(t as *const Task as usize);
            notify_if_parked(me.rt());
        }
        Pending::Release(t) => {
            // The thread has left its stack; it sits in its queue.
            let t = context::header(t);
            t.yielded.store(true, Ordering::Relaxed);
            // Release: whoever takes it next sees every write it made.
            t.on_cpu.store(false, Ordering::Release);
        }
        Pending::Retire(t) => {
            // The thread has left its stack for good.
            let t = context::header(t);
            retire(t, p);
        }
    }
    me.yielded.store(false, Ordering::Release);
    Subsystems::resume(me);
}

/// Takes the next thread whose predicate holds from the queues `p` snoops, in order.
fn find_work(rt: &Shared, p: &Processor) -> Option<*const Task> {
    let snoop = &rt.config.snoop[p.index];
    for (k, &q) in snoop.iter().enumerate() {
        // Entries are headers of queued, switched-out threads.
        let found = rt.queues[q].take(|t| context::header(t as *const Task).runnable());
        if let Some(t) = found {
            if k > 0 {
                rt.stats.steals.fetch_add(1, Ordering::Relaxed);
            }
            return Some(t as *const Task);
        }
    }
    None
}

/// Gives the processor to another thread whose predicate holds, if there is one; the
/// caller goes back to its queue (§2.2: cooperative scheduling).
pub fn yield_now() {
    let me = current();
    let (rt, p) = (me.rt(), me.proc());
    if rt.stopping.load(Ordering::Acquire) {
        switch_to(me, p.idle.get(), Pending::Requeue(me));
        return;
    }
    if let Some(next) = swap_with_next(me) {
        switch_to(me, next, Pending::Release(me));
    } else if let Some(next) = find_work(rt, p) {
        switch_to(me, next, Pending::Requeue(me));
    }
}

/// The fast path of a yield or a block: takes the next ready thread from `me`'s own queue
/// (if `me`'s processor snoops it first) and queues `me` in the same hold of its lock.
fn swap_with_next(me: &Task) -> Option<*const Task> {
    let (rt, p) = (me.rt(), me.proc());
    let home = me.queue.get();
    if rt.config.snoop[p.index].first() != Some(&home) {
        return None;
    }
    // Entries are headers of queued threads.
    let next = rt.queues[home]
        .swap(me as *const Task as usize, |t| context::header(t as *const Task).runnable())?;
    Some(next as *const Task)
}

/// What the running thread `me` switches to when it blocks or ends: the next thread whose
/// predicate holds, else its processor's idle loop (always, once the runtime stops).
fn next_or_idle(me: &Task) -> *const Task {
    let (rt, p) = (me.rt(), me.proc());
    if rt.stopping.load(Ordering::Acquire) {
        return p.idle.get();
    }
    find_work(rt, p).unwrap_or(p.idle.get())
}

/// Blocks until `pred` holds: the thread waits in its queue, skipped by the processors
/// until then (§2.2's predicate yield).
pub(crate) fn block_until(pred: Predicate) {
    if pred.holds() {
        return;
    }
    let me = current();
    me.wait.set(Some(pred));
    if rt_stopping(me) {
        switch_to(me, me.proc().idle.get(), Pending::Requeue(me));
    } else if let Some(next) = swap_with_next(me) {
        switch_to(me, next, Pending::Release(me));
    } else {
        let next = next_or_idle(me);
        switch_to(me, next, Pending::Requeue(me));
    }
    me.wait.set(None);
}

fn rt_stopping(me: &Task) -> bool {
    me.rt().stopping.load(Ordering::Acquire)
}

/// Moves the calling thread to queue `queue` (another scheduling domain, §2.2) and
/// yields; it runs next on a processor that snoops that queue. A queue past Q is refused.
pub fn switch_to_queue(queue: usize) -> Result<(), crate::Error> {
    let me = current();
    if queue >= me.rt().queues.len() {
        return Err(crate::Error::InvalidArgument);
    }
    me.queue.set(queue);
    let next = next_or_idle(me);
    switch_to(me, next, Pending::Requeue(me));
    Ok(())
}

/// Ends the calling thread: its thread-local destructors run, then it leaves its stack for
/// good (what it had on the stack is not dropped).
pub fn exit() -> ! {
    let me = current();
    Subsystems::ending(me);
    Subsystems::release(me);
    let next = next_or_idle(me);
    switch_to(me, next, Pending::Retire(me));
    unreachable!("mcrt: a retired thread was switched in");
}

/// Wakes a parked processor if there is one: call after a store that may make some
/// thread's predicate hold (one thread's: else [`notify_all`]).
pub fn notify() {
    if crate::in_runtime() {
        notify_if_parked(shared());
    }
}

/// As [`notify`], for a store that may release many threads at once (a barrier opening,
/// a broadcast): wakes every parked processor, not one.
pub fn notify_all() {
    if crate::in_runtime() {
        let rt = shared();
        if rt.parking.must_wake() {
            rt.parking.wake(rt.host(), true);
        }
    }
}

pub(crate) fn notify_if_parked(rt: &Shared) {
    // Dekker with the parking processor (`idle_main`), see `crate::park`. One unit of
    // work, one processor.
    if rt.parking.must_wake() {
        rt.parking.wake(rt.host(), false);
    }
}

// ---------------------------------------------------------------------------------------
// Threads: made, retired.

/// Makes a thread that runs `entry`, in queue `queue` (not yet queued); `None` when memory
/// is short. `creator`: the McRT thread making it, if one is (its processor's stack cache
/// is used).
pub(crate) fn make_task(
    rt: &Shared,
    creator: Option<&Task>,
    queue: usize,
    entry: Box<dyn FnOnce() + Send>,
    idle: bool,
) -> Option<*const Task> {
    let stack = take_stack(rt, creator)?;
    let header = Task {
        canary: CANARY,
        sp: Cell::new(0),
        rt: context::for_the_run(rt),
        processor: Cell::new(0),
        queue: Cell::new(queue),
        state: AtomicU32::new(0),
        wait: Cell::new(None),
        entry: Cell::new(Some(entry)),
        tls: RefCell::new(Vec::new()),
        heap: Cell::new(0),
        tx: Cell::new(0),
        stm_desc: Cell::new(0),
        yielded: AtomicBool::new(false),
        on_cpu: AtomicBool::new(false),
        idle,
    };
    // The stack starts below the header.
    let (task, sp) = context::place_header(stack, header, task_main);
    context::header(task).sp.set(sp);
    if !idle {
        rt.live.fetch_add(1, Ordering::Relaxed);
        rt.stats.spawned.fetch_add(1, Ordering::Relaxed);
    }
    Some(task)
}

/// A stack from the creator's processor's cache, else the pool, else a new one.
fn take_stack(rt: &Shared, creator: Option<&Task>) -> Option<Stack> {
    if let Some(me) = creator {
        if core::ptr::eq(me.rt, rt) {
            // Only this processor's system thread touches its cache.
            if let Some(s) = me.proc().stacks.borrow_mut().pop() {
                return Some(s);
            }
        }
    }
    context::take_pooled(rt.host())
}

/// Every thread starts here, on its own stack.
extern "C" fn task_main(task: usize) -> ! {
    // `task` is this thread's header (made by `make_task`).
    let me = context::header(task as *const Task);
    after_switch(me);
    if let Some(entry) = me.entry.take() {
        entry();
    }
    if me.idle {
        unreachable!("mcrt: an idle loop returned");
    }
    exit()
}

/// The thread `t` has left its stack for good: it is done; its header and stack go now if
/// nobody will join it (else the joiner frees them, [`free_task`]).
fn retire(t: &Task, p: &Processor) {
    let rt = t.rt();
    let state = t.state.fetch_or(DONE, Ordering::AcqRel);
    rt.live.fetch_sub(1, Ordering::Relaxed);
    if state & DETACHED != 0 {
        free_task_on(t as *const Task, Some(p));
    }
    notify_if_parked(rt);
}

/// Frees a done thread's header and stack (the stack goes to the running processor's
/// cache when there is room).
pub(crate) fn free_task(t: *const Task) {
    let p = crate::in_runtime().then(|| current().proc());
    free_task_on(t, p);
}

fn free_task_on(t: *const Task, p: Option<&Processor>) {
    // `t` is a header nobody else will touch again (done and detached, or joined).
    let stack = context::free_header(t);
    if let Some(p) = p {
        // Only this processor's system thread touches its cache.
        let mut cache = p.stacks.borrow_mut();
        if cache.len() < STACK_CACHE {
            cache.push(stack);
            return;
        }
    }
    context::give_to_pool(stack);
}

/// The queue a thread made by the running thread goes to (its processor's `spawn_to`,
/// dealt round robin).
pub(crate) fn spawn_queue(me: &Task) -> usize {
    let p = me.proc();
    let list = &me.rt().config.spawn_to[p.index];
    let i = p.next_spawn.get();
    p.next_spawn.set((i + 1) % list.len());
    list[i % list.len()]
}

// ---------------------------------------------------------------------------------------
// Starting and stopping.

/// Runs `main` as the first McRT thread on a runtime configured by `config`, carried by
/// `host`'s system threads (one per logical processor), and returns its result once it
/// has returned. The runtime stops then: threads still queued are freed without running
/// to the end (as a process ends with its threads), so join what must finish. Threads
/// are cooperative: one that never yields keeps its processor until it ends.
pub fn run<R: Send + 'static>(
    config: Config,
    host: &dyn Host,
    main: impl FnOnce() -> R + Send + 'static,
) -> Result<R, crate::Error> {
    config.check().map_err(|_| crate::Error::InvalidArgument)?;
    if crate::in_runtime() {
        return Err(crate::Error::InvalidArgument); // one runtime per system thread
    }
    // The host is reached only through the runtime (`Shared::host`), which this call
    // makes and drops before it returns, and through its processors' system threads,
    // which `run_processors` joins before it returns.
    let host: &'static dyn Host = context::host_for_the_run(host);
    let processors = (0..config.processors)
        .map(|index| {
            Confined::new(Processor {
                index,
                idle: Cell::new(core::ptr::null()),
                host_sp: Cell::new(0),
                pending: Cell::new(Pending::None),
                stacks: RefCell::new(Vec::new()),
                next_spawn: Cell::new(0),
                switches: AtomicU64::new(0),
            })
        })
        .collect();
    let config_saves_fpu = config.fpu == crate::FpuControl::Saved;
    let rt = Box::new(Shared {
        queues: (0..config.queues).map(|_| TaskQueue::new(config.lock)).collect(),
        futures: FutureQueues::new(config.processors),
        config,
        processors,
        parking: Parking::new(),
        idle_processors: AtomicUsize::new(0),
        stopping: AtomicBool::new(false),
        live: AtomicUsize::new(0),
        host,
        stats: Counters::default(),
        fpu_saving: AtomicBool::new(config_saves_fpu),
    });
    let result: alloc::sync::Arc<Slot<R>> = alloc::sync::Arc::new(Slot::new());
    let out = result.clone();
    let main_body: Box<dyn FnOnce() + Send> = Box::new(move || {
        out.put(main());
        let rt = shared();
        rt.stopping.store(true, Ordering::Release);
        rt.parking.move_on();
        rt.parking.wake(rt.host(), true);
    });
    let first = rt.config.spawn_to[0][0];
    let main_task = make_task(&rt, None, first, main_body, false).ok_or(crate::Error::NoMemory)?;
    // The main thread is detached: its result comes back through `result`.
    // Just made, not yet queued.
    context::header(main_task).state.store(DETACHED, Ordering::Relaxed);
    rt.queues[first].push(main_task as usize);
    let started = rt.host().run_processors(rt.config.processors, &|i| idle::processor_main(&rt, i));
    // Whatever is left in the queues will not run.
    for q in &rt.queues {
        while let Some(t) = q.take(|_| true) {
            let t = t as *const Task;
            // A queued thread that will never run again; its header is ours.
            Subsystems::release(context::header(t));
            free_task_on(t, None);
        }
    }
    rt.futures.drain();
    started.map_err(|_| crate::Error::HostFailed)?;
    result.take().ok_or(crate::Error::HostFailed)
}

/// A snapshot of the running runtime's counters.
pub fn stats() -> Stats {
    let rt = shared();
    Stats {
        spawned: rt.stats.spawned.load(Ordering::Relaxed),
        switches: rt.processors.iter().map(|p| p.get().switches.load(Ordering::Relaxed)).sum(),
        steals: rt.stats.steals.load(Ordering::Relaxed),
        parks: rt.stats.parks.load(Ordering::Relaxed),
    }
}

/// The logical processor running the caller.
pub fn processor() -> usize {
    current().processor.get()
}

/// Logical processors in the running runtime (P).
pub fn processors() -> usize {
    shared().config.processors
}
