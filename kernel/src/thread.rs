//! What every core knows of a thread, wherever it runs ([`ThreadShared`]), the pages it
//! holds per node ([`Resident`], AMPS §3.3), and how a thread or program ended
//! ([`ExitStatus`]). Below both Corey's objects (a thread object holds a `ThreadShared`,
//! a frame charges a `Resident`) and the scheduler.

use crate::percpu::{self, this_core, PerCoreState, SpreadCounts};
use abi::pcore_status;
use alloc::sync::Arc;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use sched::{NumaPolicy, ResidentSet};

/// NUMA nodes a thread's resident pages are counted on (a node past the last counts on
/// the last).
pub const NODES_MAX: usize = 8;

/// A thread's resident pages per node (AMPS §3.3): charged when it faults a page in, on
/// the node of the frame, and uncharged when that frame is freed, on whatever core (the
/// frame holds these counters: the paper's owner list). Kept apart from the thread so a
/// page that outlives it does not keep the thread counted against its core's cap.
pub struct Resident {
    pub(crate) pages: [AtomicU64; NODES_MAX],
}

impl Resident {
    pub(crate) fn new() -> Resident {
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

    pub(crate) fn counts(&self) -> [u64; NODES_MAX] {
        core::array::from_fn(|i| self.pages[i].load(Ordering::Relaxed))
    }
}

/// Resident-page uncharges that found their count at zero, by the core that freed the
/// frame (tests check it stays 0).
pub(crate) static RESIDENT_UNDERFLOWS: [AtomicU64; percpu::MAX_CORES] =
    [const { AtomicU64::new(0) }; percpu::MAX_CORES];

/// Resident-page uncharges on core `core` that found their count at zero (a bug if not 0).
pub fn resident_underflows(core: usize) -> u64 {
    RESIDENT_UNDERFLOWS.get(core).map_or(0, |n| n.load(Ordering::Relaxed))
}

/// What every core knows of a thread, wherever it runs: shared by its thread object
/// (`thread_join`, `thread_status`, `thread_stat`) and the thread itself.
pub struct ThreadShared {
    /// Unique for the boot: the creating core in the top 16 bits, a counter below.
    pub(crate) uid: u64,
    /// `pcore_status::RUNNING` while it lives, then its status word.
    pub(crate) status: AtomicU64,
    /// Cores where a joiner is parked, woken by message when the thread ends.
    pub(crate) joiners: AtomicU64,
    /// The core it is on (or was last on).
    pub(crate) core: AtomicU64,
    /// The cores it may run on (bit i: core i).
    pub(crate) affinity: AtomicU64,
    /// Moves to another core after its first placement.
    pub(crate) migrations: AtomicU64,
    /// Times it was switched onto a core.
    pub(crate) switches: AtomicU64,
    /// The core whose thread cap it counts against.
    pub(crate) creator: usize,
    /// Its resident pages per node (shared with the frames charged to it).
    pub(crate) resident: Arc<Resident>,
    /// Its total resident pages at the last tick it ran through, and whether that tick
    /// found the total grown (an allocation phase, §3.3).
    pub(crate) resident_before: AtomicU64,
    pub(crate) allocating: AtomicBool,
}

/// Live threads by creating core (the cap of `sched::THREADS_PER_CORE_MAX`): a thread
/// counts +1 in its creator's column on the core that makes it and -1 on the core where it
/// ends, so each core writes only its own row.
static LIVE_THREADS: SpreadCounts<{ percpu::MAX_CORES }> = SpreadCounts::new();
/// Each core's counter for thread uids.
static NEXT_UID: PerCoreState<u64> = crate::per_core_state!(1);

impl ThreadShared {
    /// A live thread allowed on `affinity`, made on this core.
    pub fn new(affinity: u64) -> Arc<ThreadShared> {
        let me = this_core().index;
        LIVE_THREADS.add(me, 1);
        let uid = (me as u64) << 48
            | NEXT_UID.with(|n| {
                *n += 1;
                *n - 1
            });
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
    pub(crate) fn note_tick(&self) {
        let total: u64 = self.resident.counts().iter().sum();
        let before = self.resident_before.swap(total, Ordering::Relaxed);
        self.allocating.store(total > before, Ordering::Relaxed);
    }

    /// Whether the NUMA policy lets it move, running, from core `from` to core `to`.
    /// (`policy` with a last-level cache of `llc_bytes`: the scheduler's choice, AMPS §3.3.)
    pub(crate) fn may_move_running(
        &self,
        from: usize,
        to: usize,
        policy: NumaPolicy,
        llc_bytes: u64,
    ) -> bool {
        let node = |c: usize| percpu::core(c).map_or(0, |c| c.node as usize);
        let set = ResidentSet::from_counts(
            &self.resident.counts(),
            self.allocating.load(Ordering::Relaxed),
            4096,
        );
        policy.allows(&set, node(from), node(to), llc_bytes)
    }

    pub(crate) fn allowed_on(&self, core: usize) -> bool {
        core < 64 && self.affinity.load(Ordering::Relaxed) & (1 << core) != 0
    }
}

impl Drop for ThreadShared {
    fn drop(&mut self) {
        LIVE_THREADS.add(self.creator, -1);
    }
}

/// Live threads made on core `core` (wherever they are now): tests check they come back
/// to a baseline.
pub fn live_threads(core: usize) -> u64 {
    LIVE_THREADS.sum(core)
}

/// How a program ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitStatus {
    /// It called `exit(code)`.
    Exited(i32),
    /// It took exception `vector` and was stopped.
    Faulted(u8),
    /// It ran past its time limit and was stopped.
    TimedOut,
    /// `pcore_halt` stopped it.
    Halted,
    /// It could not start (bad program, no memory for its page tables).
    Failed,
}

impl ExitStatus {
    pub(crate) fn encode(self) -> u64 {
        match self {
            ExitStatus::Exited(code) => code as u32 as u64,
            ExitStatus::Faulted(vector) => 1 << 32 | vector as u64,
            ExitStatus::TimedOut => 2 << 32,
            ExitStatus::Halted => 3 << 32,
            ExitStatus::Failed => 4 << 32,
        }
    }

    /// The status a leaving context's word encodes (see `leave`).
    pub fn decode(word: u64) -> ExitStatus {
        match word >> 32 {
            1 => ExitStatus::Faulted(word as u8),
            2 => ExitStatus::TimedOut,
            3 => ExitStatus::Halted,
            4 => ExitStatus::Failed,
            _ => ExitStatus::Exited(word as u32 as i32),
        }
    }

    /// The status a `pcore_status` word reports.
    pub fn from_status_word(word: u64) -> ExitStatus {
        match pcore_status::state(word) {
            pcore_status::EXITED => ExitStatus::Exited(word as u32 as i32),
            pcore_status::FAULTED => ExitStatus::Faulted(word as u8),
            pcore_status::TIMED_OUT => ExitStatus::TimedOut,
            pcore_status::HALTED => ExitStatus::Halted,
            _ => ExitStatus::Failed,
        }
    }

    /// As `pcore_status` reports it.
    pub fn status_word(self) -> u64 {
        match self {
            ExitStatus::Exited(code) => pcore_status::EXITED | code as u32 as u64,
            ExitStatus::Faulted(v) => pcore_status::FAULTED | v as u64,
            ExitStatus::TimedOut => pcore_status::TIMED_OUT,
            ExitStatus::Halted => pcore_status::HALTED,
            ExitStatus::Failed => pcore_status::FAILED,
        }
    }
}
