//! What a test must leave as it found it, on every core: the frames (free, or held by
//! the core's kernel heap), the kernel heap bytes in use, the live kernel objects the
//! core's programs created, the live threads it made, the threads parked on it, and the
//! root ranges it dropped with a `wait` waiter bit left set, and its programs'
//! kernel-memory quotas still alive. xv6's `usertests` checks free pages around each test the same
//! way; counting heap bytes and objects too makes leaked metadata visible, not only
//! leaked pages.

use super::{all_ok, JOB_TIMEOUT_US};
use crate::{percpu, smp};
use alloc::format;
use alloc::string::String;
use spin::Mutex;

/// Longest wait for the other cores to flush a trimmed heap (they answer at once when
/// idle; this bounds a busy host).
const TRIM_TIMEOUT_US: u64 = 5_000_000;

/// One core's resources at a moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CoreResources {
    /// Free frames plus the frames its kernel heap holds.
    pub frames: u64,
    /// Kernel heap bytes in use (blocks freed on other cores taken back first).
    pub heap_bytes: u64,
    /// Live kernel objects made by this core's programs.
    pub objects: u64,
    /// Live threads made on this core (wherever they run now).
    pub threads: u64,
    /// Threads parked in this core's wait queues.
    pub parked: u64,
    /// Root ranges this core dropped with a `wait` waiter bit left set (only ever grows).
    pub stale_waiter_bits: u64,
    /// Resident-page uncharges here that found their count at zero (only ever grows).
    pub resident_underflows: u64,
    /// Entries of its revocation log (after letting go of those of gone objects).
    pub revocation_log: u64,
    /// 1 while the core is reserved for a `pcore_run` context (Corey §4.4), else 0.
    pub reserved: u64,
    /// Live kernel-memory quotas of programs started here (each lives until the last
    /// object, entry or mapping charged to it goes: a leak of any shows here).
    pub quotas: u64,
}

/// Every listed core's resources, by position in the list. Held on the stack: a
/// snapshot must not itself change the heap it counts.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Snapshot {
    cores: [CoreResources; percpu::MAX_CORES],
    len: usize,
}

impl Snapshot {
    fn as_slice(&self) -> &[CoreResources] {
        &self.cores[..self.len]
    }
}

/// Each listed core's resources. Every core first sends the foreign frames it freed
/// home and lets go of what it holds lazily (as it does when it goes idle: revocation log
/// entries of objects that are gone); then every core takes in what came home and counts.
pub fn snapshot(cores: &[usize]) -> Result<Snapshot, String> {
    // A core sends at most a channel's worth of frames per flush: it flushes, and reads
    // what comes (making room for the others), until it has nothing queued (a program
    // that freed thousands of another core's frames queued them all).
    let flush = |_| {
        let start = crate::arch::cpu::rdtsc();
        loop {
            crate::monitor::flush_frame_returns();
            crate::monitor::poll();
            if crate::mem::frames::queued_for_home() == 0 {
                break;
            }
            if crate::arch::timer::us_since(start) > TRIM_TIMEOUT_US {
                return Err(format!(
                    "{} frames still queued for home",
                    crate::mem::frames::queued_for_home()
                ));
            }
        }
        crate::corey::revocation::prune_revocations();
        Ok(())
    };
    all_ok(cores, &smp::run_on(cores, JOB_TIMEOUT_US, &flush))?;
    if cores.len() > percpu::MAX_CORES {
        return Err("too many cores".into());
    }
    let counts = [const {
        Mutex::new(CoreResources {
            frames: 0,
            heap_bytes: 0,
            objects: 0,
            threads: 0,
            parked: 0,
            stale_waiter_bits: 0,
            resident_underflows: 0,
            revocation_log: 0,
            reserved: 0,
            quotas: 0,
        })
    }; percpu::MAX_CORES];
    let count = |index: usize| {
        crate::monitor::poll();
        let me = percpu::this_core();
        let (heap_bytes, heap_frames) = crate::mem::heap::usage_this_core();
        let slot = cores.iter().position(|&c| c == index).ok_or("not a test core")?;
        *counts[slot].lock() = CoreResources {
            frames: me.free_frames() + heap_frames,
            heap_bytes,
            objects: crate::corey::live_objects(index) as u64,
            threads: crate::thread::live_threads(index),
            parked: crate::sched::parked_here(),
            stale_waiter_bits: crate::corey::stale_waiter_bits(index),
            resident_underflows: crate::thread::resident_underflows(index),
            revocation_log: crate::corey::revocation::revocation_log_len() as u64,
            reserved: u64::from(crate::sched::reserved_here()),
            quotas: crate::corey::live_quotas(index) as u64,
        };
        Ok(())
    };
    all_ok(cores, &smp::run_on(cores, JOB_TIMEOUT_US, &count))?;
    let mut snap =
        Snapshot { cores: [CoreResources::default(); percpu::MAX_CORES], len: cores.len() };
    for (slot, count) in snap.cores.iter_mut().zip(&counts) {
        *slot = *count.lock();
    }
    Ok(snap)
}

/// Most snapshots [`steady_snapshot`] takes waiting for the counts to hold still.
const STEADY_TRIES: u32 = 20;

/// [`snapshot`], once two in a row 10 ms apart agree (or after [`STEADY_TRIES`]): a
/// baseline must not count what an earlier run is still giving back. A program's run ends
/// when its main thread does; its threads on other cores end at those cores' next pass,
/// and what they free goes home by message after that (in `fuzz4`, core 0's baseline taken
/// at once after the warm-up run was 200 frames short, and the run "gained" them).
pub fn steady_snapshot(cores: &[usize]) -> Result<Snapshot, String> {
    let mut last = snapshot(cores)?;
    for _ in 0..STEADY_TRIES {
        crate::arch::timer::spin_us(10_000);
        let now = snapshot(cores)?;
        if now == last {
            break;
        }
        last = now;
    }
    Ok(last)
}

/// Checks that every core is back to `before`. A frame may still be on its way home in a
/// message when a core counts, and a lost one never arrives: so count again (a few times,
/// with a pause) before calling anything lost. The pause is idle time on this core too: a
/// kernel core a test's program left here (it polls only when the core idles) sees its
/// pcore go and stops, as it would on a core that runs no tests.
pub fn check(cores: &[usize], before: &Snapshot) -> Result<(), String> {
    let mut after = snapshot(cores)?;
    for _ in 0..3 {
        if *before == after {
            return Ok(());
        }
        let start = crate::arch::cpu::rdtsc();
        crate::sched::run_until(&|| crate::arch::timer::us_since(start) >= 10_000);
        after = snapshot(cores)?;
    }
    let mut diffs = String::new();
    for ((core, b), a) in cores.iter().zip(before.as_slice()).zip(after.as_slice()) {
        if a != b {
            diffs += &format!(
                " core {core}: frames {} -> {}, heap bytes {} -> {}, objects {} -> {}, \
                 threads {} -> {}, parked {} -> {}, stale waiter bits {} -> {}, \
                 resident underflows {} -> {}, revocation log {} -> {}, reserved {} -> {}, \
                 program quotas {} -> {};",
                b.frames,
                a.frames,
                b.heap_bytes,
                a.heap_bytes,
                b.objects,
                a.objects,
                b.threads,
                a.threads,
                b.parked,
                a.parked,
                b.stale_waiter_bits,
                a.stale_waiter_bits,
                b.resident_underflows,
                a.resident_underflows,
                b.revocation_log,
                a.revocation_log,
                b.reserved,
                a.reserved,
                b.quotas,
                a.quotas
            );
        }
    }
    Err(format!("resources not back to their baseline:{diffs}"))
}

/// Runs `f` (which may use every core) once and checks that every online core is back to
/// its resources from before, exactly. There is no second chance for growth that happens
/// once: a table the kernel keeps for good is sized at boot (`twophase::init_this_core`,
/// `tlb::init_this_core`), and one that empties lets go of its memory (the revocation log,
/// a two-phase participant's locks), so a test's first run must balance.
pub fn balanced(f: impl Fn() -> Result<(), String>) -> Result<(), String> {
    let cores = smp::online_cores();
    // Start from a clean slate on this core, which runs the tests and never goes idle to
    // trim: the free top of its heap, grown by an earlier test, goes back to its frames,
    // so a test's programs here find the core's memory as frames (on a 64 MiB VM with 16
    // cores an earlier test's burst of objects once left too few for a segment copy).
    crate::mem::heap::give_back_this_core(TRIM_TIMEOUT_US);
    let before = steady_snapshot(&cores)?;
    f()?;
    check(&cores, &before)
}
