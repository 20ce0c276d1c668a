//! Corey Figure 3 (§2): a contended lock as cores are added. A spin lock's acquire grows
//! costlier with every core that contends, since each one adds coherence traffic on the
//! one lock line and every release starts a stampede; an MCS lock's waiters each spin on a
//! line of their own, so its cost stays flat (Corey §2). The locks are `crates/locks`'
//! (the ones the kernel and McRT use): `tts` (test-and-test-and-set: the spin lock),
//! `ticket` (FIFO, still one line) and `mcs`.
//!
//! For k = 1 ..= cores, the first k cores meet at a barrier, then each acquires the lock
//! `acquisitions` times, each time adding one to the counter it guards (the critical
//! section), with no work between: the most contention there is. Each core times its own
//! loop. Per lock and k: `acquisitions_per_mcycle`, the k cores' acquisitions over the
//! slowest core's cycles (the lock's throughput, what Corey plots as its inverse), and
//! `cycles_per_acquisition`, the median over cores of one core's cycles per acquire and
//! release. The counter must end at k × `acquisitions`, or the run fails: a lock that let
//! two cores in at once would lose increments.

use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};

use locks::{McsLock, TicketLock, TtsLock};

use crate::memory::SpinBarrier;
use crate::result::{self, median};
use crate::Platform;

/// Acquisitions per core and lock when none are asked for (`make bench` passes it to both
/// systems).
pub const DEFAULT_ACQUISITIONS: usize = 2000;

/// The locks compared, in the order they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Test-and-test-and-set: the spin lock.
    Tts,
    /// Ticket lock.
    Ticket,
    /// MCS queue lock.
    Mcs,
}

impl Kind {
    /// Every lock, in the order they run.
    pub const ALL: [Kind; 3] = [Kind::Tts, Kind::Ticket, Kind::Mcs];

    /// Its name in the result lines (`impl`).
    pub fn name(self) -> &'static str {
        match self {
            Kind::Tts => "tts",
            Kind::Ticket => "ticket",
            Kind::Mcs => "mcs",
        }
    }
}

/// One lock of each kind guarding a counter, each on cache lines of its own.
struct Locks {
    tts: Padded<TtsLock<u64>>,
    ticket: Padded<TicketLock<u64>>,
    mcs: Padded<McsLock<u64>>,
}

/// A value alone on its cache lines (two: the adjacent-line prefetcher pairs them).
#[repr(align(128))]
struct Padded<T>(T);

impl Locks {
    /// Every lock free, every counter 0.
    fn new() -> Locks {
        Locks {
            tts: Padded(TtsLock::new(0)),
            ticket: Padded(TicketLock::new(0)),
            mcs: Padded(McsLock::new(0)),
        }
    }

    /// Acquires lock `kind` and adds one to its counter.
    fn increment(&self, kind: Kind) {
        match kind {
            Kind::Tts => self.tts.0.with(|v| *v += 1),
            Kind::Ticket => self.ticket.0.with(|v| *v += 1),
            Kind::Mcs => self.mcs.0.with(|v| *v += 1),
        }
    }

    /// Lock `kind`'s counter.
    fn count(&self, kind: Kind) -> u64 {
        match kind {
            Kind::Tts => self.tts.0.with(|v| *v),
            Kind::Ticket => self.ticket.0.with(|v| *v),
            Kind::Mcs => self.mcs.0.with(|v| *v),
        }
    }
}

/// One point of the figure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Point {
    /// The lock.
    pub kind: Kind,
    /// Cores contending.
    pub cores: usize,
    /// All cores' acquisitions per million cycles of the slowest core's loop.
    pub per_mcycle: u64,
    /// Median over cores of one core's cycles per acquisition.
    pub cycles_per_acquisition: u64,
}

/// Runs lock `kind` on the first `cores` cores, `acquisitions` times each.
pub fn measure<P: Platform + ?Sized>(
    p: &P,
    kind: Kind,
    cores: usize,
    acquisitions: usize,
) -> Result<Point, String> {
    if cores == 0 || cores > p.cores() || acquisitions == 0 {
        return Err(format!("cannot run {cores} cores of {} with {acquisitions}", p.cores()));
    }
    // On the heap, which every thread of the workload maps (as `nullsys`'s samples are).
    let locks = Box::new(Locks::new());
    let barrier = Box::new(SpinBarrier::default());
    let cycles: Vec<AtomicU64> = (0..cores).map(|_| AtomicU64::new(0)).collect();
    let chosen: Vec<usize> = (0..cores).collect();
    p.run_on(&chosen, &|core| {
        barrier.wait(cores);
        let start = p.cycles();
        for _ in 0..acquisitions {
            locks.increment(kind);
        }
        cycles[core].store(p.cycles() - start, Ordering::Relaxed);
    })?;
    let expected = (cores * acquisitions) as u64;
    let counted = locks.count(kind);
    if counted != expected {
        return Err(format!("{}: the counter reads {counted}, not {expected}", kind.name()));
    }
    let mut each: Vec<u64> = cycles.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    let slowest = each.iter().copied().max().unwrap_or(1).max(1);
    let per_mcycle = expected.saturating_mul(1_000_000) / slowest;
    let per_core = median(&mut each).unwrap_or(0) / acquisitions as u64;
    Ok(Point { kind, cores, per_mcycle, cycles_per_acquisition: per_core })
}

/// The whole figure: every lock at k = 1 ..= cores (after one unreported warm-up run of
/// each lock on all cores, so what happens once per run is not counted).
pub fn run<P: Platform + ?Sized>(p: &P, acquisitions: usize) -> Result<Vec<String>, String> {
    for kind in Kind::ALL {
        measure(p, kind, p.cores(), acquisitions.div_ceil(10))?;
    }
    let mut lines = Vec::new();
    for k in 1..=p.cores() {
        for kind in Kind::ALL {
            let point = measure(p, kind, k, acquisitions)?;
            let extra = format!(",\"impl\":\"{}\"", kind.name());
            lines.push(result::line(
                p.system(),
                "locks_contended",
                k,
                "acquisitions_per_mcycle",
                point.per_mcycle,
                "acquisitions/Mcycle",
                &extra,
            ));
            lines.push(result::line(
                p.system(),
                "locks_contended",
                k,
                "cycles_per_acquisition",
                point.cycles_per_acquisition,
                "cycles",
                &extra,
            ));
        }
    }
    Ok(lines)
}
