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
//! Where each part is: [`running`] (a thread off or on the CPU, and how it leaves),
//! [`lifetime`] (what a program's threads share: its time limit and stop), [`inbox`]
//! (messages), [`balance`] (load reports, pulls, placement), [`run`] (the loop and the
//! tick), [`idle`] (the idle loop), [`calls`] (the thread system calls).
//!
//! The policy (placement, which core to pull from) is `crates/sched`, pure functions
//! over this core's [`LoadTable`] replica.

pub mod balance;
pub mod calls;
pub mod idle;
pub mod inbox;
pub mod lifetime;
pub mod message;
pub mod run;
pub mod running;

pub use balance::*;
pub use calls::*;
pub use idle::{idle_loop, idle_once, idle_work, run_until};
pub use inbox::*;
pub use run::*;
pub use running::*;

use crate::corey::Ptr;
pub use crate::param::THREADS_PER_CORE_MAX;
use crate::param::{
    BALANCE_EVERY_TICKS, PULL_PATIENCE_TICKS, QUEUE_CAPACITY, REPORT_EVERY_TICKS, SLEEP_MAX_US,
};
use crate::percpu::{self, CoreState, PerCoreState};
use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU8, Ordering};
use sched::{LoadTable, NumaPolicy, Policy, Power, RunQueue, WaitQueues};

/// Wait-key spaces that are not address spaces (root-range ids never reach them: an id's
/// top 16 bits are its creating core).
pub(super) use sched::{JOIN_SPACE, SLEEP_SPACE};

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
pub(super) struct Scheduler {
    pub(super) queue: RunQueue<Box<Running>>,
    pub(super) waits: WaitQueues<Box<Running>>,
    /// This core's replica of every core's load (AMPS §2.2, by message).
    pub(super) table: LoadTable,
    /// The length last reported, and the tick it was reported at.
    pub(super) reported: Option<(u64, u64)>,
    /// The `pcore_run` context this core is dedicated to (its uid), if any: the core then
    /// reports itself as taking no threads (Corey §4.4).
    pub(super) dedicated: Option<u64>,
    pub(super) seq: u64,
    /// A pull is outstanding until this tick.
    pub(super) pull_until: u64,
    /// A puller asked for the running thread: it goes at the next tick.
    pub(super) ship_running: Option<usize>,
    /// The root range whose tables are in CR3 (held, so they cannot be freed under it).
    pub(super) loaded: Option<Ptr>,
    pub(super) stats: Stats,
}

impl Scheduler {
    pub(super) fn new() -> Scheduler {
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

pub(super) static SCHED: PerCoreState<Option<Scheduler>> = crate::per_core_state!(None);

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

pub(super) fn with_sched<R>(f: impl FnOnce(&mut Scheduler) -> R) -> R {
    SCHED.with(|slot| f(slot.get_or_insert_with(Scheduler::new)))
}

/// The running thread of this core, if one is on the CPU (its system calls, faults and
/// ticks use it).
pub(super) fn with_current<R>(f: impl FnOnce(&mut Running) -> R) -> Option<R> {
    with_sched(|s| s.queue.running_mut().map(|r| f(r)))
}

/// The policy every core uses (`sched=amps|symmetric` on the command line; AMPS unless
/// told otherwise). Chosen once at boot, before any thread exists.
pub(super) static POLICY: AtomicU8 = AtomicU8::new(0);

/// Sets the policy (at boot).
pub fn choose_policy(policy: Policy) {
    POLICY.store(if policy == Policy::Symmetric { 1 } else { 0 }, Ordering::Relaxed);
}

/// The NUMA policy for moving running threads (`numa=always|same-node|rss`; `always`
/// unless told otherwise). Chosen once at boot.
pub(super) static NUMA: AtomicU8 = AtomicU8::new(0);

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
    crate::skb_replica::get().and_then(|s| s.last_level_cache()).map_or(0, |l| l.bytes)
}

/// The policy in force.
pub fn policy() -> Policy {
    if POLICY.load(Ordering::Relaxed) == 1 {
        Policy::Symmetric
    } else {
        Policy::Amps
    }
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
