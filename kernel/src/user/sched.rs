//! Threads and each core's scheduler (issue M7; AMPS, SC'07 §2–§3, in a multikernel).
//!
//! Every user context is a thread: a program's first context, a `pcore_run` context and a
//! `thread_create` thread alike. A thread that is not on the CPU is a `Box<Running>`
//! holding all of its user-visible state (registers, FPU/SSE image, share set, root
//! range), so it can sit in a queue or travel to another core in one message.
//!
//! Read top to bottom:
//! 1. **The per-core scheduler** ([`Scheduler`]): this core's round-robin run queue, its
//!    wait queues (`wait`, `join`, `sleep`), and its replica of every core's load. Only
//!    this core touches it; other cores reach it by message (`SCHED`), which the monitor
//!    hands to [`on_message`], which only files the message in the [`Inbox`]: the
//!    scheduler reads its inbox between threads and at every tick.
//! 2. **The loop** ([`run_until`], [`run_next`]): take the next ready thread, switch to its
//!    tables and FPU state, run it until it leaves (preempted at a tick, blocked in a call,
//!    ended), then file it where it belongs. The kernel runs on the core's one stack: a
//!    thread leaves by `leave_user`, its registers already saved in its box.
//! 3. **The tick** ([`on_tick`]): the time slice, wake-up deadlines, load reports, pulls.
//! 4. **Migration by message**: a thread is shipped as a pointer to its box (`ARRIVE`).
//!    A core that wants work pulls (`PULL`): the source alone decides which thread goes,
//!    a waiting one, or its running one (at once: the puller kicks it with an IPI), so two
//!    pullers never both win.
//! 5. **The calls**: `thread_create`, `join`, `status`, `yield`, `sleep`, `wait`, `wake`,
//!    `set_affinity`, `stat`.
//!
//! The policy (placement, which core to pull from) is `crates/sched`, pure functions
//! over this core's [`LoadTable`] replica.

use super::corey::{self, Ptr};
use super::revocation;
use super::{ExitStatus, Running};
use crate::arch::paging;
use crate::arch::user_entry::{self, KernelContext, SyscallFrame, UserRegs};
use crate::arch::{cpu, timer};
use crate::monitor::{self, protocol::Request};
use crate::percpu::{self, this_core, CoreState, PerCoreState};
use abi::{pcore_status, wait_result, Error, ObjectKind, SysResult};
use alloc::boxed::Box;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicU8, Ordering};
use sched::{LoadTable, NumaPolicy, Policy, Power, ResidentSet, RunQueue, WaitKey, WaitQueues};

/// Ready threads a run queue holds without growing (it shrinks back to this when empty,
/// so tests find a core's heap as they left it).
const QUEUE_CAPACITY: usize = 16;
/// Most live threads (thread objects) one core's programs may create.
pub const THREADS_PER_CORE_MAX: u64 = 1024;
/// Ticks between a core's unprompted load reports (it also reports when its load changes).
const REPORT_EVERY_TICKS: u64 = 10;
/// Ticks between balancing passes of a busy core (an idle core tries at every tick).
const BALANCE_EVERY_TICKS: u64 = 2;
/// Ticks a pull may stay unanswered before the puller tries again.
const PULL_PATIENCE_TICKS: u64 = 4;
/// Longest `sleep` (one minute).
const SLEEP_MAX_US: u64 = 60_000_000;

/// Wait-key spaces that are not address spaces (root-range ids never reach them: an id's
/// top 16 bits are its creating core).
const JOIN_SPACE: u64 = u64::MAX;
const SLEEP_SPACE: u64 = u64::MAX - 1;

/// NUMA nodes a thread's resident pages are counted on (a node past the last counts on
/// the last).
pub const NODES_MAX: usize = 8;

/// A thread's resident pages per node (AMPS §3.3): charged when it faults a page in, on
/// the node of the frame, and uncharged when that frame is freed, on whatever core (the
/// frame holds these counters: the paper's owner list). Kept apart from the thread so a
/// page that outlives it does not keep the thread counted against its core's cap.
pub struct Resident {
    pages: [AtomicU64; NODES_MAX],
}

impl Resident {
    fn new() -> Resident {
        Resident { pages: [const { AtomicU64::new(0) }; NODES_MAX] }
    }

    /// One more page on `node`.
    pub fn charge(&self, node: usize) {
        self.pages[node.min(NODES_MAX - 1)].fetch_add(1, Ordering::Relaxed);
    }

    /// One page fewer on `node` (its frame was freed). Every frame uncharges the node it
    /// charged, so the count cannot go below zero; if it would, the counter stays at zero
    /// and the mistake is counted ([`resident_underflows`]), never hidden.
    pub fn uncharge(&self, node: usize) {
        let counter = &self.pages[node.min(NODES_MAX - 1)];
        let fell = counter.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        if fell.is_err() {
            RESIDENT_UNDERFLOWS[this_core().index].fetch_add(1, Ordering::Relaxed);
            crate::println!("sched: a resident-page count went below zero on node {node}");
        }
    }

    fn counts(&self) -> [u64; NODES_MAX] {
        core::array::from_fn(|i| self.pages[i].load(Ordering::Relaxed))
    }
}

/// Resident-page uncharges that found their count at zero, by the core that freed the
/// frame (tests check it stays 0).
static RESIDENT_UNDERFLOWS: [AtomicU64; percpu::MAX_CORES] =
    [const { AtomicU64::new(0) }; percpu::MAX_CORES];

/// Resident-page uncharges on core `core` that found their count at zero (a bug if not 0).
pub fn resident_underflows(core: usize) -> u64 {
    RESIDENT_UNDERFLOWS.get(core).map_or(0, |n| n.load(Ordering::Relaxed))
}

/// What every core knows of a thread, wherever it runs: shared by its thread object
/// (`thread_join`, `thread_status`, `thread_stat`) and the thread itself.
pub struct ThreadShared {
    /// Unique for the boot: the creating core in the top 16 bits, a counter below.
    uid: u64,
    /// `pcore_status::RUNNING` while it lives, then its status word.
    status: AtomicU64,
    /// Cores where a joiner is parked, woken by message when the thread ends.
    joiners: AtomicU64,
    /// The core it is on (or was last on).
    core: AtomicU64,
    /// The cores it may run on (bit i: core i).
    affinity: AtomicU64,
    /// Moves to another core after its first placement.
    migrations: AtomicU64,
    /// Times it was switched onto a core.
    switches: AtomicU64,
    /// The core whose thread cap it counts against.
    creator: usize,
    /// Its resident pages per node (shared with the frames charged to it).
    resident: Arc<Resident>,
    /// Its total resident pages at the last tick it ran through, and whether that tick
    /// found the total grown (an allocation phase, §3.3).
    resident_before: AtomicU64,
    allocating: AtomicBool,
}

/// Live threads by creating core (the cap of [`THREADS_PER_CORE_MAX`]).
static LIVE_THREADS: [AtomicU64; percpu::MAX_CORES] =
    [const { AtomicU64::new(0) }; percpu::MAX_CORES];
/// Per-core counters for thread uids.
static NEXT_UID: [AtomicU64; percpu::MAX_CORES] = [const { AtomicU64::new(1) }; percpu::MAX_CORES];

impl ThreadShared {
    /// A live thread allowed on `affinity`, made on this core.
    pub fn new(affinity: u64) -> Arc<ThreadShared> {
        let me = this_core().index;
        LIVE_THREADS[me].fetch_add(1, Ordering::Relaxed);
        let uid = (me as u64) << 48 | NEXT_UID[me].fetch_add(1, Ordering::Relaxed);
        Arc::new(ThreadShared {
            uid,
            status: AtomicU64::new(pcore_status::RUNNING),
            joiners: AtomicU64::new(0),
            core: AtomicU64::new(me as u64),
            affinity: AtomicU64::new(affinity),
            migrations: AtomicU64::new(0),
            switches: AtomicU64::new(0),
            creator: me,
            resident: Arc::new(Resident::new()),
            resident_before: AtomicU64::new(0),
            allocating: AtomicBool::new(false),
        })
    }

    /// Its status word (`RUNNING` while it lives).
    pub fn status(&self) -> u64 {
        self.status.load(Ordering::Acquire)
    }

    /// Its resident-page counters (for the frames it faults in).
    pub fn resident(&self) -> &Arc<Resident> {
        &self.resident
    }

    /// The tick's allocation-phase check (§3.3): its resident pages grew since the last.
    fn note_tick(&self) {
        let total: u64 = self.resident.counts().iter().sum();
        let before = self.resident_before.swap(total, Ordering::Relaxed);
        self.allocating.store(total > before, Ordering::Relaxed);
    }

    /// Whether the NUMA policy lets it move, running, from core `from` to core `to`.
    fn may_move_running(&self, from: usize, to: usize) -> bool {
        let node = |c: usize| percpu::core(c).map_or(0, |c| c.node as usize);
        let set = ResidentSet::from_counts(
            &self.resident.counts(),
            self.allocating.load(Ordering::Relaxed),
            4096,
        );
        numa_policy().allows(&set, node(from), node(to), last_level_cache_bytes())
    }

    fn allowed_on(&self, core: usize) -> bool {
        core < 64 && self.affinity.load(Ordering::Relaxed) & (1 << core) != 0
    }
}

impl Drop for ThreadShared {
    fn drop(&mut self) {
        LIVE_THREADS[self.creator].fetch_sub(1, Ordering::Relaxed);
    }
}

/// Why a thread left the CPU without ending, and what the loop does with it.
pub enum After {
    /// Back on this core's run queue (preempted, yielded).
    Ready,
    /// Parked on a wait key until a wake-up or the deadline (TSC).
    Park { key: WaitKey, deadline: Option<u64>, on_wake: OnWake },
    /// Sent to another core (pulled, or moved by its affinity).
    Ship(usize),
}

/// What a parked thread's call returns when it runs again.
pub enum OnWake {
    /// `wait`: [`wait_result::WOKEN`], or `TIMED_OUT` at the deadline.
    Wait,
    /// `sleep`: 0.
    Sleep,
    /// `thread_join` / `program_run`: the joined thread's status word.
    Join(Arc<ThreadShared>),
}

/// The word a leaving thread hands the loop when it did not end (ExitStatus words use
/// the high half's values 0–4).
const SWITCHED: u64 = 0x10 << 32;

/// Counters the console's `sched` command prints.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    /// Threads switched onto this core.
    pub switches: u64,
    /// Slices ended by the tick.
    pub preemptions: u64,
    /// Threads that arrived from another core.
    pub migrations_in: u64,
    /// Threads sent to another core (pulled, or for their affinity).
    pub migrations_out: u64,
    /// Pull requests this core sent.
    pub pulls: u64,
    /// Load reports this core sent.
    pub reports: u64,
}

/// One core's scheduler state (only its own core opens it).
struct Scheduler {
    queue: RunQueue<Box<Running>>,
    waits: WaitQueues<Box<Running>>,
    /// This core's replica of every core's load (AMPS §2.2, by message).
    table: LoadTable,
    /// The length last reported, and the tick it was reported at.
    reported: Option<(u64, u64)>,
    /// The `pcore_run` context this core is dedicated to (its uid), if any: the core then
    /// reports itself as taking no threads (Corey §4.4).
    dedicated: Option<u64>,
    seq: u64,
    /// A pull is outstanding until this tick.
    pull_until: u64,
    /// A puller asked for the running thread: it goes at the next tick.
    ship_running: Option<usize>,
    /// The root range whose tables are in CR3 (held, so they cannot be freed under it).
    loaded: Option<Ptr>,
    stats: Stats,
}

impl Scheduler {
    fn new() -> Scheduler {
        let n = percpu::core_count();
        let speeds: Vec<Option<u64>> = (0..n).map(crate::knowledge::compute_speed).collect();
        // The paper's P = F × S (§3, S = 0.85) with F the measured speed ratio: the SKB's
        // speed loop runs in registers, so S stands for what memory does not speed up.
        // Speeds within an eighth of each other count as equal: a measurement's noise must
        // not make AMPS move single threads back and forth between twin cores.
        let known: Vec<u64> = speeds.iter().map(|s| s.unwrap_or(0)).collect();
        let powers: Vec<Power> = Power::from_frequencies(&known, sched::power::PAPER_S)
            .into_iter()
            .map(|p| p.quantized())
            .collect();
        let nodes: Vec<usize> =
            (0..n).map(|c| percpu::core(c).map_or(0, |c| c.node as usize)).collect();
        let mut table = LoadTable::new(&powers, &nodes);
        for c in 0..n {
            let online = percpu::core(c).is_some_and(|c| c.state() == CoreState::Online);
            table.set_online(c, online);
        }
        Scheduler {
            queue: RunQueue::with_capacity(1, QUEUE_CAPACITY),
            waits: WaitQueues::new(),
            table,
            reported: None,
            dedicated: None,
            seq: 0,
            pull_until: 0,
            ship_running: None,
            loaded: None,
            stats: Stats::default(),
        }
    }
}

static SCHED: PerCoreState<Option<Scheduler>> = crate::per_core_state!(None);

/// Makes this core's scheduler, with every core's power from the SKB's measured speeds
/// (at boot, on every core, once the SKB has measured; again when speeds change).
pub fn init_this_core() {
    SCHED.with(|slot| match slot {
        Some(s) => {
            let fresh = Scheduler::new();
            for (c, core) in fresh.table.cores().iter().enumerate() {
                s.table.set_power(c, core.power);
            }
        }
        None => *slot = Some(Scheduler::new()),
    });
}

fn with_sched<R>(f: impl FnOnce(&mut Scheduler) -> R) -> R {
    SCHED.with(|slot| f(slot.get_or_insert_with(Scheduler::new)))
}

/// The running thread of this core, if one is on the CPU (its system calls, faults and
/// ticks use it).
pub(super) fn with_current<R>(f: impl FnOnce(&mut Running) -> R) -> Option<R> {
    with_sched(|s| s.queue.running_mut().map(|r| f(r)))
}

/// The policy every core uses (`sched=amps|symmetric` on the command line; AMPS unless
/// told otherwise). Chosen once at boot, before any thread exists.
static POLICY: AtomicU8 = AtomicU8::new(0);

/// Sets the policy (at boot).
pub fn choose_policy(policy: Policy) {
    POLICY.store(if policy == Policy::Symmetric { 1 } else { 0 }, Ordering::Relaxed);
}

/// The NUMA policy for moving running threads (`numa=always|same-node|rss`; `always`
/// unless told otherwise). Chosen once at boot.
static NUMA: AtomicU8 = AtomicU8::new(0);

/// Sets the NUMA policy (at boot).
pub fn choose_numa(policy: NumaPolicy) {
    let code = match policy {
        NumaPolicy::Always => 0,
        NumaPolicy::SameNode => 1,
        NumaPolicy::Rss => 2,
    };
    NUMA.store(code, Ordering::Relaxed);
}

/// The NUMA policy in force.
pub fn numa_policy() -> NumaPolicy {
    match NUMA.load(Ordering::Relaxed) {
        1 => NumaPolicy::SameNode,
        2 => NumaPolicy::Rss,
        _ => NumaPolicy::Always,
    }
}

/// The last-level cache's size as this core's SKB replica holds it (CPUID's vendor leaf,
/// or measured by a pointer chase; `knowledge::measure_at_boot`); 0 before the SKB is
/// measured or where nothing told it, when RSS behaves as Same-Node for any thread with
/// pages (AMPS §2.4.2, condition 3).
pub fn last_level_cache_bytes() -> u64 {
    crate::knowledge::get().and_then(|s| s.last_level_cache()).map_or(0, |l| l.bytes)
}

/// The policy in force.
pub fn policy() -> Policy {
    if POLICY.load(Ordering::Relaxed) == 1 {
        Policy::Symmetric
    } else {
        Policy::Amps
    }
}

// ---------------------------------------------------------------------------------------
// Messages: the monitor hands every `SCHED` message to `on_message`, which files it here.

/// Scheduler message operations (word 0 of a `SCHED` message).
mod op {
    /// `[ARRIVE, box]`: a thread for this core; the box at kernel address `box` is ours.
    pub const ARRIVE: u64 = 1;
    /// `[WAKE, space, addr, n, cores]`: wake up to `n` waiters on the word, then pass the
    /// rest on to the lowest core in `cores`.
    pub const WAKE: u64 = 2;
    /// `[JOINED, uid]`: thread `uid` ended; wake its joiners here.
    pub const JOINED: u64 = 3;
    /// `[LOAD, length, seq, online, origin + 1, forward]`: core `origin`'s run-queue length
    /// (origin 0: the sender); with `forward` the receiver, its package's aggregator in
    /// the SKB's multicast tree, passes it on within its package.
    pub const LOAD: u64 = 4;
    /// `[PULL, may_take_running]`: the sender asks for one thread.
    pub const PULL: u64 = 5;
    /// `[NONE]`: the answer to a pull that found nothing to give (the puller waits out its
    /// patience before it asks again: a source whose extra threads are pinned would
    /// otherwise be asked at every turn).
    pub const NONE: u64 = 6;
    /// `[REAP]`: a program was stopped (its main thread ended, its pcore was halted):
    /// end the threads of stopped programs parked or queued here (issue M14).
    pub const REAP: u64 = 7;
}

/// Messages filed for the scheduler, read between threads and at every tick. Load
/// reports and pulls keep the latest per sender in place (no allocation: they come and
/// go while no thread exists).
// A thread is one box that moves between cores by pointer; the inbox keeps it boxed.
#[allow(clippy::vec_box)]
struct Inbox {
    arrivals: Vec<Box<Running>>,
    wakes: Vec<(WaitKey, u64, u64)>,
    joined: Vec<u64>,
    /// Per reporting core: its latest load report (length, seq, online), and whether this
    /// core is to pass it on within its package.
    loads: [Option<(u64, u64, bool, bool)>; percpu::MAX_CORES],
    /// Per sender: its pull, and whether it may take the running thread.
    pulls: [Option<bool>; percpu::MAX_CORES],
    /// A program was stopped: look for its threads here.
    reap: bool,
    /// Whether anything above is filed.
    any: bool,
}

impl Inbox {
    const fn new() -> Inbox {
        Inbox {
            arrivals: Vec::new(),
            wakes: Vec::new(),
            joined: Vec::new(),
            loads: [None; percpu::MAX_CORES],
            pulls: [None; percpu::MAX_CORES],
            reap: false,
            any: false,
        }
    }
}

static INBOX: PerCoreState<Inbox> = crate::per_core_state!(Inbox::new());

/// Lowest address of the kernel half: an `ARRIVE` pointer must lie above it.
const KERNEL_HALF: u64 = 0xffff_8000_0000_0000;

/// A `SCHED` message from core `from` (from the monitor, in any context): filed only.
pub fn on_message(from: usize, w: [u64; urpc::PAYLOAD_WORDS]) -> Result<(), ()> {
    if from >= percpu::MAX_CORES {
        return Err(());
    }
    INBOX.with(|inbox| {
        inbox.any = true;
        match w[0] {
            op::ARRIVE => {
                if w[1] < KERNEL_HALF || !w[1].is_multiple_of(8) {
                    return Err(());
                }
                // SAFETY: `ship` made this pointer with `Box::into_raw` and sent it to us
                // alone; it no longer touches the box.
                inbox.arrivals.push(unsafe { Box::from_raw(w[1] as *mut Running) });
            }
            op::WAKE => inbox.wakes.push(((w[1], w[2]), w[3], w[4])),
            op::JOINED => inbox.joined.push(w[1]),
            op::LOAD => {
                let origin = match w[4] {
                    0 => from,
                    n => usize::try_from(n - 1).map_err(|_| ())?,
                };
                if origin >= percpu::MAX_CORES {
                    return Err(());
                }
                if inbox.loads[origin].is_none_or(|(_, seq, _, _)| seq < w[2]) {
                    inbox.loads[origin] = Some((w[1], w[2], w[3] != 0, w[5] != 0));
                }
            }
            op::PULL => inbox.pulls[from] = Some(w[1] != 0),
            op::NONE => {}
            op::REAP => inbox.reap = true,
            _ => return Err(()),
        }
        Ok(())
    })
}

fn message(words: &[u64]) -> Request {
    let mut w = [0u64; urpc::PAYLOAD_WORDS];
    w[..words.len()].copy_from_slice(words);
    Request::Sched(w)
}

/// Reads the inbox: arrivals join the run queue, wake-ups and joins release parked
/// threads, load reports update the replica, pulls are answered. Messages this causes
/// are sent afterwards, outside the scheduler state (a send may poll).
fn read_inbox() {
    if !INBOX.with(|i| i.any) {
        return;
    }
    let mut inbox = INBOX.with(|i| core::mem::replace(i, Inbox::new()));
    let me = this_core().index;
    let mut outgoing: Vec<(usize, Request)> = Vec::new();
    let mut ships: Vec<(Box<Running>, usize)> = Vec::new();
    let mut forwards: Vec<(usize, u64, u64, bool)> = Vec::new();
    let mut stopped: Vec<Box<Running>> = Vec::new();
    with_sched(|s| {
        if inbox.reap {
            stopped = take_stopped(s);
        }
        for t in inbox.arrivals {
            t.shared.core.store(me as u64, Ordering::Relaxed);
            s.stats.migrations_in += 1;
            // Sent before the sender heard that this core is dedicated: it goes on to
            // where the policy places it now, if anywhere else.
            if s.dedicated.is_some() {
                if let Some(to) = policy().place(&s.table, |c| c != me && t.shared.allowed_on(c)) {
                    ships.push((t, to));
                    continue;
                }
            }
            s.queue.push(t);
        }
        for ((space, addr), n, cores) in inbox.wakes {
            let woken = wake_here(s, (space, addr), n);
            if woken < n {
                if let Some(next) = next_core(cores, me) {
                    let rest = cores & !(1 << me);
                    outgoing.push((next, message(&[op::WAKE, space, addr, n - woken, rest])));
                }
            }
        }
        for uid in inbox.joined {
            wake_here(s, (JOIN_SPACE, uid), u64::MAX);
        }
        for (core, load) in inbox.loads.iter_mut().enumerate() {
            if let Some((length, seq, online, forward)) = load.take() {
                if s.table.report(core, length, seq) {
                    s.table.set_online(core, online);
                }
                if forward {
                    forwards.push((core, length, seq, online));
                }
            }
        }
        for (puller, pull) in inbox.pulls.iter_mut().enumerate() {
            let Some(may_take_running) = pull.take() else { continue };
            if let Some(t) = s.queue.take_ready(|t| t.shared.allowed_on(puller)) {
                ships.push((t, puller));
            } else if may_take_running
                && s.ship_running.is_none()
                && s.queue.running().is_some_and(|t| {
                    // AMPS §3.3: the NUMA policy decides whether a running thread moves.
                    t.shared.allowed_on(puller) && t.shared.may_move_running(me, puller)
                })
            {
                s.ship_running = Some(puller);
            } else {
                outgoing.push((puller, message(&[op::NONE])));
            }
        }
    });
    for (origin, length, seq, taking) in forwards {
        forward_load(origin, length, seq, taking);
    }
    for (t, to) in ships {
        ship(t, to);
    }
    for (to, request) in outgoing {
        let _ = monitor::send(to, &request);
    }
    for t in stopped {
        end_off_cpu(t);
    }
}

/// Takes out every thread parked or queued here whose program was stopped.
// Threads stay in their boxes: each moves between queues and cores by pointer.
#[allow(clippy::vec_box)]
fn take_stopped(s: &mut Scheduler) -> Vec<Box<Running>> {
    let mut stopped = Vec::new();
    while let Some(t) = s.waits.remove(|t| t.program.stopping().is_some()) {
        stopped.push(t);
    }
    while let Some(t) = s.queue.remove(|t| t.program.stopping().is_some()) {
        stopped.push(t);
    }
    stopped
}

/// Asks `cores` (bit i: core i; this one included) to end the threads of stopped
/// programs they hold off the CPU (`REAP`). This core does it at its next housekeeping.
pub fn reap_on(cores: u64) {
    let me = this_core().index;
    if me < 64 && cores & (1 << me) != 0 {
        INBOX.with(|i| {
            i.reap = true;
            i.any = true;
        });
    }
    for c in crate::smp::online_cores() {
        if c != me && c < 64 && cores & (1 << c) != 0 {
            let _ = monitor::send(c, &message(&[op::REAP]));
        }
    }
}

/// The lowest core in `cores` other than `me`.
fn next_core(cores: u64, me: usize) -> Option<usize> {
    let rest = cores & !(1u64 << me);
    (rest != 0).then(|| rest.trailing_zeros() as usize)
}

/// Wakes up to `n` threads parked here on `key` (each returns from its call); returns
/// how many. An address space with no waiter left here loses this core's waiter bit.
fn wake_here(s: &mut Scheduler, key: WaitKey, n: u64) -> u64 {
    let woken = s.waits.wake(key, usize::try_from(n).unwrap_or(usize::MAX));
    let count = woken.len() as u64;
    let root = woken.first().map(|t| t.objects.root_ar.clone());
    for mut t in woken {
        t.regs.rax = match &t.on_wake {
            Some(OnWake::Join(target)) => target.status(),
            _ => wait_result::WOKEN,
        };
        t.on_wake = None;
        s.queue.push(t);
    }
    if let Some(root) = root.filter(|_| key.0 < SLEEP_SPACE && !s.waits.has_space(key.0)) {
        clear_waiter_bit(&root);
    }
    count
}

/// Clears this core's bit in root range `root`'s waiter mask (none of its threads waits
/// here any more).
fn clear_waiter_bit(root: &Ptr) {
    if let Some(mask) = corey::range_waiters(root) {
        mask.fetch_and(!(1u64 << this_core().index), Ordering::AcqRel);
    }
}

/// Threads whose deadline passed return from `wait` (timed out) or `sleep`; those whose
/// program's time limit passed (a park never outlasts it) are returned, to be ended.
// Threads stay in their boxes: each moves between queues and cores by pointer.
#[allow(clippy::vec_box)]
fn expire_deadlines(s: &mut Scheduler) -> Vec<Box<Running>> {
    let mut stopped = Vec::new();
    if s.waits.is_empty() {
        return stopped;
    }
    let expired = s.waits.expire(cpu::rdtsc());
    // Their address spaces may have no waiter left here: those lose this core's bit.
    let roots: Vec<Ptr> = expired.iter().map(|t| t.objects.root_ar.clone()).collect();
    for mut t in expired {
        if t.program.stopping().is_some() {
            stopped.push(t);
            continue;
        }
        t.regs.rax = match t.on_wake {
            Some(OnWake::Wait) => wait_result::TIMED_OUT,
            _ => 0,
        };
        t.on_wake = None;
        s.queue.push(t);
    }
    for root in roots {
        if !s.waits.has_space(root.id().0) {
            clear_waiter_bit(&root);
        }
    }
    stopped
}

/// Sends thread `t` to core `to` (a migration: counted). If the message cannot go, the
/// thread stays here.
fn ship(t: Box<Running>, to: usize) {
    t.shared.migrations.fetch_add(1, Ordering::Relaxed);
    undedicate(&t.shared);
    send_thread(t, to, true);
}

/// Sends thread `t` to core `to`'s monitor; `moved` counts it as a migration out.
fn send_thread(t: Box<Running>, to: usize, moved: bool) {
    let raw = Box::into_raw(t);
    if monitor::send(to, &message(&[op::ARRIVE, raw as u64])).is_err() {
        // SAFETY: not sent, so the box is still ours alone.
        let t = unsafe { Box::from_raw(raw) };
        with_sched(|s| s.queue.push(t));
        return;
    }
    with_sched(|s| {
        if moved {
            s.stats.migrations_out += 1;
        }
        // Until its report comes, count the thread on its new core.
        let length = s.table.get(to).map_or(0, |c| c.length);
        s.table.set_length(to, length + 1);
    });
}

/// Sends this core's run-queue length to every other online core when it changed (at
/// most once a tick, except to or from empty) and every [`REPORT_EVERY_TICKS`]. A full
/// channel skips that core this time (the next report corrects it).
fn report_load() {
    let now = this_core().ticks();
    let me = this_core().index;
    let report = with_sched(|s| {
        let length = s.queue.len() as u64;
        s.table.set_length(me, length);
        let due = match s.reported {
            None => true,
            // A core with no threads repeats nothing: idle cores stay asleep.
            Some((last, at)) => {
                (last != length && (at != now || (last == 0) != (length == 0)))
                    || (length > 0 && now >= at + REPORT_EVERY_TICKS)
            }
        };
        if !due {
            return None;
        }
        s.reported = Some((length, now));
        s.seq += 1;
        s.stats.reports += 1;
        Some((length, s.seq, s.dedicated.is_none()))
    });
    let Some((length, seq, taking)) = report else { return };
    send_load(length, seq, taking);
}

/// Sends this core's load report to every other online core (`taking`: false while the
/// core is dedicated to one context and takes no threads).
fn send_load(length: u64, seq: u64, taking: bool) {
    let me = this_core().index;
    // Along the SKB's multicast tree (Multikernel §5.1): one message per other package,
    // to its aggregator, which passes it on within its package; this package directly.
    let origin = me as u64 + 1;
    let taking = u64::from(taking);
    let online = |c: usize| percpu::core(c).is_some_and(|c| c.state() == CoreState::Online);
    match crate::knowledge::get().map(|skb| skb.multicast_tree(me)) {
        Some(tree) if !tree.aggregators.is_empty() => {
            for branch in &tree.aggregators {
                if branch.core != me && online(branch.core) {
                    let forward = message(&[op::LOAD, length, seq, taking, origin, 1]);
                    let _ = monitor::try_send(branch.core, &forward);
                } else {
                    let direct = message(&[op::LOAD, length, seq, taking, origin, 0]);
                    for &c in branch.members.iter().filter(|&&c| online(c)) {
                        let _ = monitor::try_send(c, &direct);
                    }
                }
            }
        }
        _ => {
            let direct = message(&[op::LOAD, length, seq, taking, origin, 0]);
            for c in (0..percpu::core_count()).filter(|&c| c != me && online(c)) {
                let _ = monitor::try_send(c, &direct);
            }
        }
    }
}

/// An aggregator's part of a load report's tree: the report of `origin` goes on to the
/// other online cores of this core's package.
fn forward_load(origin: usize, length: u64, seq: u64, taking: bool) {
    let me = this_core();
    let request = message(&[op::LOAD, length, seq, u64::from(taking), origin as u64 + 1, 0]);
    for c in percpu::all_cores() {
        let member = c.location.package == me.location.package
            && c.index != me.index
            && c.index != origin
            && c.state() == CoreState::Online;
        if member {
            let _ = monitor::try_send(c.index, &request);
        }
    }
}

/// Asks the core the policy names for one thread, if this core's replica says to
/// (AMPS §2.3: pull-based, on the tick and when idle).
fn balance() {
    let now = this_core().ticks();
    let me = this_core().index;
    let pull = with_sched(|s| {
        if now < s.pull_until {
            return None;
        }
        let m = policy().pull_from(&s.table, me)?;
        s.pull_until = now + PULL_PATIENCE_TICKS;
        s.stats.pulls += 1;
        Some(m)
    });
    if let Some(m) = pull {
        let sent = monitor::try_send(m.from, &message(&[op::PULL, u64::from(m.may_take_running)]));
        if sent.is_ok() && m.may_take_running {
            // The source's running thread may be the one to move: it answers now, not at
            // its next tick (AMPS §3.2: "at once on an IPI").
            monitor::kick(m.from);
        }
    }
}

/// What the scheduler does between threads and at ticks: its inbox, deadlines, load.
fn housekeeping() {
    read_inbox();
    for t in with_sched(expire_deadlines) {
        end_off_cpu(t);
    }
    report_load();
}

// ---------------------------------------------------------------------------------------
// The loop.

/// How deep this core is in [`run_until`] (the idle loop's work stays out while it runs).
static DEPTH: PerCoreState<u32> = crate::per_core_state!(0);

/// Runs this core's threads until `stop()` holds (checked between threads); with none
/// ready, the core serves its monitor and halts as the idle loop does.
pub fn run_until(stop: &dyn Fn() -> bool) {
    let core = this_core();
    let saved_rsp0 = core.rsp0();
    let saved_syscall_stack = core.syscall_stack();
    DEPTH.with(|d| *d += 1);
    loop {
        // Between threads the core serves its monitor whole: calls and starts deferred
        // while a thread ran are served here, never after the threads end.
        monitor::poll();
        housekeeping();
        if stop() {
            break;
        }
        if !run_next() {
            unload_tables();
            balance();
            if stop() {
                break;
            }
            crate::monitor::idle_once(core);
        }
    }
    DEPTH.with(|d| *d -= 1);
    core.set_rsp0(saved_rsp0);
    core.set_syscall_stack(saved_syscall_stack);
    cpu::enable_interrupts();
}

/// The idle loop's work (installed at boot): runs one ready thread, if there is one.
pub fn idle_work() -> bool {
    if DEPTH.with(|d| *d > 0) {
        return false;
    }
    monitor::poll();
    housekeeping();
    if run_next() {
        cpu::enable_interrupts();
        return true;
    }
    unload_tables();
    balance();
    false
}

/// Puts `t` on this core's run queue (a new thread started here).
pub fn enqueue(t: Box<Running>) {
    with_sched(|s| s.queue.push(t));
}

/// Puts `pcore_run`'s context `t` on this core's run queue and dedicates the core to it
/// (Corey §4.4: a pcore runs one context; cores are space-multiplexed). Until the context
/// ends or leaves, the core reports that it takes no threads, so no core places or moves
/// one here, and the ready threads it holds go where the policy places them now. Threads
/// whose affinity allows this core alone stay and share it with the context.
pub fn enqueue_dedicated(t: Box<Running>) {
    let me = this_core().index;
    let evicted = with_sched(|s| {
        s.dedicated = Some(t.shared.uid);
        s.table.set_online(me, false);
        s.reported = None; // the next report says so at once
        let mut evicted = Vec::new();
        while let Some(x) =
            s.queue.take_ready(|x| x.shared.affinity.load(Ordering::Relaxed) & !(1 << me) != 0)
        {
            evicted.push(x);
        }
        s.queue.push(t);
        evicted
    });
    for x in evicted {
        match place(&x.shared) {
            Some(to) if to != me => ship(x, to),
            _ => enqueue(x),
        }
    }
    report_load();
}

/// Ends this core's dedication if `shared` is the context it is dedicated to (it ended,
/// or it moved away by changing its own affinity).
fn undedicate(shared: &ThreadShared) {
    let me = this_core().index;
    with_sched(|s| {
        if s.dedicated == Some(shared.uid) {
            s.dedicated = None;
            s.table.set_online(me, true);
            s.reported = None;
        }
    });
}

/// The cores that, by this core's replica, are dedicated to one context (bit i: core i).
fn dedicated_mask() -> u64 {
    let mut mask = 0;
    for c in crate::smp::online_cores().into_iter().filter(|&c| c < 64) {
        if with_sched(|s| s.table.get(c).is_some_and(|l| !l.online)) {
            mask |= 1 << c;
        }
    }
    mask
}

/// Takes the next ready thread and runs it until it leaves the CPU; returns false if none
/// was ready.
fn run_next() -> bool {
    let core = this_core();
    let me = core.index;
    let Some((misplaced, stopping)) = with_sched(|s| {
        s.queue.switch()?;
        let t = s.queue.running()?;
        // Marked before the check (both SeqCst): a stop that missed this core's mark
        // is seen here (`Program::stop`).
        t.program.touch(me);
        Some((!t.shared.allowed_on(me), t.program.stopping()))
    }) else {
        return false;
    };
    if let Some(status) = stopping {
        // Its program was stopped while it was queued, parked or on its way here.
        if let Some(t) = with_sched(|s| s.queue.take_running()) {
            end_thread(t, status);
        }
        return true;
    }
    if misplaced {
        // Its affinity changed: it runs elsewhere (AMPS places it among its cores).
        let t = with_sched(|s| s.queue.take_running());
        if let Some(t) = t {
            // With no core to place it on (its cores became dedicated since), it goes to
            // its first online core anyway, where it shares the core with the context
            // (as a thread pinned there does), rather than waiting here for ever.
            let to = place(&t.shared)
                .or_else(|| {
                    crate::smp::online_cores().into_iter().find(|&c| t.shared.allowed_on(c))
                })
                .unwrap_or(me);
            if to == me {
                with_sched(|s| s.queue.push(t));
            } else {
                ship(t, to);
            }
        }
        return true;
    }
    let mut kcontext = KernelContext::default();
    let context: *const KernelContext = &kcontext;
    let prepared = with_sched(|s| {
        s.stats.switches += 1;
        let t = s.queue.running_mut()?;
        t.context = context;
        t.shared.switches.fetch_add(1, Ordering::Relaxed);
        t.shared.core.store(me as u64, Ordering::Relaxed);
        let hz = t.pcore.as_ref().and_then(corey::pcore).map(|p| {
            p.status.store(pcore_status::RUNNING, Ordering::Release);
            p.hz.load(Ordering::Relaxed)
        });
        let pml4 = corey::enter_root(&t.objects);
        if let Ok(pml4) = pml4 {
            t.space = super::space::AddressSpace::view(pml4);
        }
        let root = t.objects.root_ar.clone();
        let fpu = &t.fpu as *const user_entry::FpuState;
        Some((pml4, &t.regs as *const UserRegs, fpu, t.fs_base, hz, root))
    });
    let Some((pml4, regs, fpu, fs_base, hz, root)) = prepared else { return false };
    let Ok(pml4) = pml4 else {
        if let Some(t) = with_sched(|s| s.queue.take_running()) {
            end_thread(t, ExitStatus::Failed);
        }
        return true;
    };
    // A throttled core keeps its duty-cycle phases: its tick is not a pcore's to set.
    let own_tick =
        hz.filter(|&hz| hz != timer::tick_hz() && crate::throttle::duty_eighths(me) == 8);
    if let Some(hz) = own_tick {
        crate::throttle::set_tick_hz(me, hz);
    }
    load_tables(root, pml4);
    // SAFETY: the box is in the run queue's running slot until it leaves, and stable.
    unsafe { (*fpu).restore() };
    // Every switch loads the thread's own FS base, 0 included: the last thread's never
    // stays for the next.
    user_entry::load_fs_base(fs_base);
    core.in_context.store(true, Ordering::Release);
    // SAFETY: `kcontext` lives on this frame until the thread leaves; RSP0 is this core's;
    // the box (and `regs` in it) stays in the running slot while the thread runs.
    let word = unsafe { user_entry::run_saved(&mut kcontext, &*regs, core.rsp0_slot()) };
    core.in_context.store(false, Ordering::Release);
    if own_tick.is_some() {
        crate::throttle::start_tick(me);
    }
    let Some(mut t) = with_sched(|s| {
        let t = s.queue.take_running();
        s.queue.shrink_when_empty(QUEUE_CAPACITY);
        // A pull of the running thread lapses with it (the puller asks again).
        s.ship_running = None;
        t
    }) else {
        return true;
    };
    // The kernel never touches the FPU or FS: they still hold the thread's state.
    t.fpu.save();
    t.fs_base = user_entry::fs_base();
    if word == SWITCHED {
        match core::mem::replace(&mut t.after, After::Ready) {
            After::Ready => with_sched(|s| s.queue.push(t)),
            After::Park { key, deadline, on_wake } => {
                t.on_wake = Some(on_wake);
                // A park never outlasts the program's time limit (it ends the thread).
                let limit = t.program.deadline();
                let deadline = Some(deadline.map_or(limit, |d| d.min(limit)));
                with_sched(|s| s.waits.park(key, t, deadline));
            }
            After::Ship(to) => ship(t, to),
        }
    } else {
        end_thread(t, ExitStatus::decode(word));
    }
    true
}

/// An ended thread that was on the CPU (or about to be): the core leaves its tables
/// (before its root forgets this core), then [`retire`].
fn end_thread(t: Box<Running>, status: ExitStatus) {
    unload_tables();
    retire(t, status, super::Cr3::SwitchedAway);
}

/// A thread of a stopped program, taken from a wait or run queue here: it ends with its
/// program's status; the tables in CR3 stay (the running thread may share them).
fn end_off_cpu(t: Box<Running>) {
    let status = t.program.stopping().unwrap_or(ExitStatus::Halted);
    let root = t.objects.root_ar.clone();
    retire(t, status, super::Cr3::MayHoldThem);
    // It may have been the last waiter of its address space here.
    if !with_sched(|s| s.waits.has_space(root.id().0)) {
        clear_waiter_bit(&root);
    }
}

/// An ended thread's last steps: its objects go, its status is published, its joiners
/// wake (by message elsewhere); a main thread's end stops the rest of its program.
fn retire(t: Box<Running>, status: ExitStatus, cr3: super::Cr3) {
    let shared = t.shared.clone();
    undedicate(&shared);
    // Stopped before its status is published: whoever sees the status finds the rest of
    // the program stopping.
    let reap = (t.role == super::Role::Main).then(|| t.program.stop(ExitStatus::Halted));
    super::finish(*t, status, cr3);
    let word = status.status_word();
    shared.status.store(word, Ordering::SeqCst);
    let joiners = shared.joiners.swap(0, Ordering::SeqCst);
    let me = this_core().index;
    if joiners & (1 << me) != 0 {
        with_sched(|s| wake_here(s, (JOIN_SPACE, shared.uid), u64::MAX));
    }
    for c in 0..percpu::core_count().min(64) {
        if c != me && joiners & (1 << c) != 0 {
            let _ = monitor::send(c, &message(&[op::JOINED, shared.uid]));
        }
    }
    if let Some(cores) = reap {
        reap_on(cores);
    }
}

/// Switches this core to `root`'s tables (`pml4`) unless they are in CR3 already. The
/// scheduler holds the loaded root, so its tables cannot be freed while CR3 points at
/// them (a thread that moved away or ended elsewhere may take the last other reference);
/// the root it replaces loses this core from its shootdown set (a CR3 write flushed its
/// translations).
fn load_tables(root: Ptr, pml4: u64) {
    let same = with_sched(|s| s.loaded.as_ref().is_some_and(|l| l.id() == root.id()));
    if same {
        return;
    }
    // SAFETY: the root's tables map the kernel half like the kernel's own; the thread's
    // pages fault in through its root range; the scheduler holds the root (below).
    unsafe { paging::activate(pml4) };
    let old = with_sched(|s| s.loaded.replace(root));
    if let Some(old) = old {
        corey::leave_root_range(&old);
    }
}

/// Back to the kernel's tables, letting the loaded root go (the core is idle, or the
/// thread on it ended).
fn unload_tables() {
    let old = with_sched(|s| s.loaded.take());
    if let Some(old) = old {
        // SAFETY: the kernel tables map everything the kernel uses.
        unsafe { paging::activate(crate::mem::heap::kernel_pml4()) };
        corey::leave_root_range(&old);
    }
}

/// The core a thread should start on (or move to): the policy's placement among the
/// online cores its affinity allows, by this core's replica.
fn place(shared: &ThreadShared) -> Option<usize> {
    with_sched(|s| policy().place(&s.table, |c| shared.allowed_on(c)))
}

/// Starts `t` on core `to`: here, or shipped (not counted as a migration).
pub fn start_on(t: Box<Running>, to: usize) {
    let me = this_core().index;
    if to == me {
        with_sched(|s| {
            s.queue.push(t);
            // Counted at once, so a burst of creations spreads by the replica.
            s.table.set_length(me, s.queue.len() as u64);
        });
    } else {
        send_thread(t, to, false);
    }
}

// ---------------------------------------------------------------------------------------
// The tick.

/// A timer tick that interrupted a thread in user mode: the scheduler's turn. Ends the
/// thread's slice (its registers saved from `frame`) when its slice is over and another
/// is ready, when a puller asked for it, when its affinity excludes this core, or when
/// calls or starts wait for the core.
pub fn on_tick(frame: &crate::arch::trap::TrapFrame) {
    housekeeping();
    let now = this_core().ticks();
    if now.is_multiple_of(BALANCE_EVERY_TICKS) {
        balance();
    }
    let over = with_sched(|s| s.queue.tick());
    with_current(|r| r.shared.note_tick());
    switch_if_due(frame, over);
}

/// A kick (wake-up IPI) that interrupted a thread in user mode: as the tick, without
/// counting against the slice.
pub fn on_kick(frame: &crate::arch::trap::TrapFrame) {
    housekeeping();
    switch_if_due(frame, false);
}

/// Ends the running thread's slice (`over`), ships it to a puller, or moves it off a core
/// its affinity excludes; `frame` holds its registers.
fn switch_if_due(frame: &crate::arch::trap::TrapFrame, over: bool) {
    let deferred = monitor::has_deferred();
    let me = this_core().index;
    let after = with_sched(|s| {
        let t = s.queue.running()?;
        if let Some(to) = s.ship_running.take() {
            if t.shared.allowed_on(to) {
                return Some(After::Ship(to));
            }
        }
        if over || deferred || !t.shared.allowed_on(me) {
            s.stats.preemptions += 1;
            return Some(After::Ready);
        }
        None
    });
    if let Some(after) = after {
        with_current(|r| {
            r.regs = UserRegs::from_trap(frame);
            r.after = after;
        });
        super::leave_raw(SWITCHED);
    }
}

// ---------------------------------------------------------------------------------------
// The calls.

/// Blocks the calling thread (its registers from `frame`; the call returns the word the
/// wake-up sets) or requeues it (`Ready`, returning `result`).
fn switch_out(frame: &SyscallFrame, result: u64, after: After) -> ! {
    with_current(|r| {
        r.regs = UserRegs::from_syscall(frame, result);
        r.after = after;
    });
    super::leave_raw(SWITCHED)
}

/// A bit mask of the online cores.
fn online_mask() -> u64 {
    let mut mask = 0;
    for c in crate::smp::online_cores() {
        if c < 64 {
            mask |= 1 << c;
        }
    }
    mask
}

/// `thread_create(&ThreadCreate)`.
pub fn thread_create(ptr: u64) -> SysResult {
    if LIVE_THREADS[this_core().index].load(Ordering::Relaxed) >= THREADS_PER_CORE_MAX {
        return Err(Error::NoResources);
    }
    corey::room_for_thread()?;
    let dedicated = dedicated_mask();
    let (t, id) = with_current(|r| {
        let a = abi::ThreadCreate::from_words(super::read_words_of(r, ptr)?);
        let root_ar = corey::lookup(&r.objects, a.ar[0], a.ar[1], ObjectKind::AddressRange)?;
        if !corey::is_root_range(&root_ar) || a.entry >= paging::USER_END {
            return Err(Error::InvalidArgument);
        }
        let n = usize::try_from(a.nshares).map_err(|_| Error::InvalidArgument)?;
        if n > abi::PcoreRun::MAX_SHARES {
            return Err(Error::InvalidArgument);
        }
        let online = online_mask();
        let affinity = if a.affinity == 0 { online } else { a.affinity & online };
        if affinity == 0 {
            return Err(Error::InvalidArgument);
        }
        if a.core != abi::ANY_CORE && (a.core >= 64 || affinity & (1 << a.core) == 0) {
            return Err(Error::InvalidArgument);
        }
        if a.core != abi::ANY_CORE && dedicated & (1 << a.core) != 0 {
            return Err(Error::Busy); // Corey §4.4: that pcore runs one context
        }
        if affinity & !dedicated == 0 {
            return Err(Error::Busy); // only dedicated cores: nowhere to place it
        }
        let shares = corey::shares_for_child(&r.objects, &a.shares[..n])?;
        // Revoked while the call read its block (a step serves two-phase messages): the
        // new set would start caught up with that revocation and keep them (issue M14).
        let seen = super::CAUGHT_UP.with(|c| *c);
        let carried: Vec<&Ptr> = core::iter::once(&root_ar).chain(shares.iter()).collect();
        if revocation::revoked_since(seen, &carried) {
            return Err(Error::NoSuchObject);
        }
        drop(carried);
        // Its objects are charged to its program's kernel memory, as the creator's are.
        let quota = r.objects.set.quota().clone();
        let objects = corey::new_context(root_ar, shares, quota)?;
        let shared = ThreadShared::new(affinity);
        let id = corey::thread_alloc(&mut r.objects, a.share, shared.clone())?;
        let mut name = r.name.clone();
        name.push_str("/thread");
        let regs = UserRegs::start(a.entry, a.stack, a.arg);
        // It lives within its program's time limit, and ends when its program does.
        let program = r.program.clone();
        let t = Running::new_thread(name, objects, shared, regs, program, super::Role::Spawned);
        Ok((t, (id, a.core)))
    })
    .ok_or(Error::NotPermitted)??;
    let (id, core) = id;
    let to = if core == abi::ANY_CORE {
        place(&t.shared).unwrap_or(this_core().index)
    } else {
        core as usize
    };
    start_on(t, to);
    Ok(id)
}

/// The thread ⟨rs, ro⟩ names, or the caller's own for ⟨0, 0⟩.
fn target(rs: u64, ro: u64) -> Result<Arc<ThreadShared>, Error> {
    with_current(|r| {
        if rs == 0 && ro == 0 {
            return Ok(r.shared.clone());
        }
        let ptr: Ptr = corey::lookup(&r.objects, rs, ro, ObjectKind::Thread)?;
        corey::thread(&ptr).cloned().ok_or(Error::InvalidArgument)
    })
    .ok_or(Error::NotPermitted)?
}

/// `thread_status(ref_share, ref_obj)`.
pub fn thread_status(rs: u64, ro: u64) -> SysResult {
    Ok(target(rs, ro)?.status())
}

/// `thread_join(ref_share, ref_obj)`: returns the status word once the thread has ended.
pub fn thread_join(frame: &SyscallFrame, rs: u64, ro: u64) -> SysResult {
    let t = target(rs, ro)?;
    let own = with_current(|r| r.shared.uid).ok_or(Error::NotPermitted)?;
    if t.uid == own {
        return Err(Error::InvalidArgument); // it would wait for itself forever
    }
    join(frame, t)
}

/// Parks the caller until `t` ends; returns its status word.
pub fn join(frame: &SyscallFrame, t: Arc<ThreadShared>) -> SysResult {
    let me = this_core().index;
    t.joiners.fetch_or(1 << me, Ordering::SeqCst);
    let status = t.status.load(Ordering::SeqCst);
    if status != pcore_status::RUNNING {
        return Ok(status);
    }
    let key = (JOIN_SPACE, t.uid);
    switch_out(frame, 0, After::Park { key, deadline: None, on_wake: OnWake::Join(t) })
}

/// `yield()`.
pub fn yield_now(frame: &SyscallFrame) -> SysResult {
    switch_out(frame, 0, After::Ready)
}

/// `sleep(us)`.
pub fn sleep(frame: &SyscallFrame, us: u64) -> SysResult {
    if us > SLEEP_MAX_US {
        return Err(Error::InvalidArgument);
    }
    let uid = with_current(|r| r.shared.uid).ok_or(Error::NotPermitted)?;
    let deadline = cpu::rdtsc().saturating_add(timer::us_to_tsc(us));
    let after =
        After::Park { key: (SLEEP_SPACE, uid), deadline: Some(deadline), on_wake: OnWake::Sleep };
    switch_out(frame, 0, after)
}

/// `wait(addr, expected, timeout_us)`: parks the caller on the 32-bit word at `addr` if
/// it holds `expected`. This core's waiter bit on the address space is set before the
/// word is read, and a waker reads the bits after its store (both SeqCst), so a wake-up
/// that follows the store that changed the word always finds this thread.
pub fn wait(frame: &SyscallFrame, addr: u64, expected: u64, timeout_us: u64) -> SysResult {
    if !addr.is_multiple_of(4) || expected > u64::from(u32::MAX) || timeout_us > SLEEP_MAX_US {
        return Err(Error::InvalidArgument);
    }
    let me = this_core().index;
    let (space, word) = with_current(|r| {
        let root = r.objects.root_ar.clone();
        if let Some(mask) = corey::range_waiters(&root) {
            mask.fetch_or(1 << me, Ordering::SeqCst);
        }
        let word = super::read_u32_of(r, addr);
        (root, word)
    })
    .ok_or(Error::NotPermitted)?;
    // Not parking (the word changed, or it cannot be read): the bit set above goes again
    // unless another thread here waits in this address space.
    let not_parking = |space: &Ptr| {
        if !with_sched(|s| s.waits.has_space(space.id().0)) {
            clear_waiter_bit(space);
        }
    };
    let word = match word {
        Ok(word) => word,
        Err(e) => {
            not_parking(&space);
            return Err(e);
        }
    };
    if u64::from(word) != expected {
        not_parking(&space);
        return Ok(wait_result::CHANGED);
    }
    let deadline = (timeout_us > 0)
        .then(|| cpu::rdtsc().saturating_add(timeout_us * (timer::tsc_hz() / 1_000_000)));
    let key = (space.id().0, addr);
    drop(space);
    switch_out(frame, wait_result::WOKEN, After::Park { key, deadline, on_wake: OnWake::Wait })
}

/// `wake(addr, n)`: wakes up to `n` waiters on the word, here first, then on the other
/// cores with waiters in this address space, one after another by message.
pub fn wake(addr: u64, n: u64) -> SysResult {
    if !addr.is_multiple_of(4) {
        return Err(Error::InvalidArgument);
    }
    if n == 0 {
        return Ok(0);
    }
    let root = with_current(|r| r.objects.root_ar.clone()).ok_or(Error::NotPermitted)?;
    let space = root.id().0;
    // Pairs with the waiter's: its bit is visible, or it sees the new word.
    fence(Ordering::SeqCst);
    let cores = corey::range_waiters(&root).map_or(0, |m| m.load(Ordering::SeqCst));
    drop(root);
    let me = this_core().index;
    let woken = with_sched(|s| wake_here(s, (space, addr), n));
    if woken < n {
        if let Some(next) = next_core(cores, me) {
            let rest = cores & !(1 << me);
            let _ = monitor::send(next, &message(&[op::WAKE, space, addr, n - woken, rest]));
        }
    }
    Ok(woken)
}

/// `thread_set_affinity(ref_share, ref_obj, mask)`.
pub fn set_affinity(frame: &SyscallFrame, rs: u64, ro: u64, mask: u64) -> SysResult {
    let t = target(rs, ro)?;
    let mask = mask & online_mask();
    if mask == 0 {
        return Err(Error::InvalidArgument);
    }
    if mask & !dedicated_mask() == 0 {
        return Err(Error::Busy); // only dedicated cores (Corey §4.4): nowhere to run it
    }
    t.affinity.store(mask, Ordering::Relaxed);
    let me = this_core().index;
    let own = with_current(|r| Arc::ptr_eq(&r.shared, &t)).unwrap_or(false);
    if own && !t.allowed_on(me) {
        // Leave this core now: the loop sends it where it may run.
        drop(t);
        switch_out(frame, 0, After::Ready);
    }
    Ok(0)
}

/// `thread_stat(ref_share, ref_obj, &mut ThreadStat)`.
pub fn thread_stat(rs: u64, ro: u64, out: u64) -> SysResult {
    let t = target(rs, ro)?;
    let stat = abi::ThreadStat {
        status: t.status(),
        core: t.core.load(Ordering::Relaxed),
        migrations: t.migrations.load(Ordering::Relaxed),
        switches: t.switches.load(Ordering::Relaxed),
        resident_pages: t.resident.counts().iter().sum(),
    };
    drop(t);
    with_current(|r| super::write_words_of(r, out, &stat.to_words()))
        .ok_or(Error::NotPermitted)??;
    Ok(0)
}

/// `set_fs_base(base)`: the calling thread's FS base, loaded now and kept in its box
/// whenever it is off the CPU (`run_next`), so every switch and migration keeps it. A
/// base outside the user half is `InvalidArgument` (`abi::fs_base_allowed`).
pub fn set_fs_base(base: u64) -> SysResult {
    if !abi::fs_base_allowed(base) {
        return Err(Error::InvalidArgument);
    }
    with_current(|r| r.fs_base = base).ok_or(Error::NotPermitted)?;
    user_entry::load_fs_base(base);
    Ok(0)
}

/// Changes cores' duty cycles at run time (`groups`: core and eighths, as `asym=`), then
/// measures every core's speed again and gives every scheduler the new powers (AMPS
/// §2.2: power is re-measured when a core's speed changes; every core's replica is
/// updated by a call to that core). Refused, changing nothing, unless every listed core
/// is online (one that is not could not restart its timer at the new duty).
pub fn change_duty(groups: &[(usize, u8)]) -> Result<(), String> {
    let listed: Vec<usize> = groups.iter().map(|&(c, _)| c).collect();
    let online = |c: usize| percpu::core(c).is_some_and(|p| p.state() == CoreState::Online);
    if let Some(down) = listed.iter().find(|&&c| !online(c)) {
        return Err(alloc::format!("core {down} is not online: no core's duty changed"));
    }
    for &(core, eighths) in groups {
        crate::throttle::configure(core, eighths);
    }
    let restart = |core: usize| {
        crate::throttle::start_tick(core);
        Ok(())
    };
    crate::smp::all_ok(&listed, &crate::smp::run_on(&listed, 10_000_000, &restart))?;
    crate::knowledge::remeasure_speeds()?;
    let cores = crate::smp::online_cores();
    let refresh = |_| {
        init_this_core();
        Ok(())
    };
    crate::smp::all_ok(&cores, &crate::smp::run_on(&cores, 10_000_000, &refresh))
}

/// Live threads made on core `core` (wherever they are now): tests check they come back
/// to a baseline.
pub fn live_threads(core: usize) -> u64 {
    LIVE_THREADS.get(core).map_or(0, |n| n.load(Ordering::Relaxed))
}

/// Whether this core is reserved for a `pcore_run` context (dedicated to it).
pub fn reserved_here() -> bool {
    with_sched(|s| s.dedicated.is_some())
}

/// Threads parked in this core's wait queues.
pub fn parked_here() -> u64 {
    with_sched(|s| s.waits.len() as u64)
}

/// Reports `length` as this core's load now (the kernel test of the report tree), and
/// returns the report's sequence number.
pub fn report_for_test(length: u64) -> u64 {
    let seq = with_sched(|s| {
        s.seq += 1;
        s.reported = None; // the next real report goes out whatever it says
        s.seq
    });
    send_load(length, seq, true);
    seq
}

/// What this core's replica says of `core`'s load: (length, report sequence number).
pub fn replica_of(core: usize) -> Option<(u64, u64)> {
    housekeeping();
    with_sched(|s| s.table.get(core).map(|c| (c.length, c.seq)))
}

/// This core's counters, its run-queue length and parked threads, and its replica of the
/// loads (length and scaled power in thousandths per core), for the console.
pub fn report() -> (Stats, usize, usize, Vec<(u64, u64, bool)>) {
    with_sched(|s| {
        let loads = s.table.cores().iter().map(|c| (c.length, c.power.0, c.online)).collect();
        (s.stats, s.queue.len(), s.waits.len(), loads)
    })
}
