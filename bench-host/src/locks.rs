//! Corey Figure 3 on the real cores (issue M11 item 8): the locks of `crates/locks` (TTS,
//! ticket, MCS) against the ones a Rust user reaches for, `parking_lot::Mutex` and
//! `std::sync::Mutex`, contended by 1 and 2 pinned threads. Each thread acquires the lock
//! `acquisitions` times, adding one to the counter it guards, with no work between (the
//! most contention there is), as `workloads::locks` does in the VMs. The count must come
//! out exact. Lines: `locks_contended`, system `host`, the lock in `impl`,
//! `acquisitions_per_mcycle` (all threads' acquisitions over the slowest thread's cycles)
//! and `cycles_per_acquisition` (the median thread's); the median over trials.

use crate::mcrt::line;
use crate::tsc;
use locks::{McsLock, TicketLock, TtsLock};
use record::median;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;

/// The locks compared, as named in the lines.
pub const LOCKS: [&str; 5] = ["tts", "ticket", "mcs", "parking_lot", "std"];

/// One lock of each kind guarding a counter.
struct Locks {
    tts: TtsLock<u64>,
    ticket: TicketLock<u64>,
    mcs: McsLock<u64>,
    parking_lot: parking_lot::Mutex<u64>,
    std: std::sync::Mutex<u64>,
}

impl Locks {
    fn new() -> Locks {
        Locks {
            tts: TtsLock::new(0),
            ticket: TicketLock::new(0),
            mcs: McsLock::new(0),
            parking_lot: parking_lot::Mutex::new(0),
            std: std::sync::Mutex::new(0),
        }
    }

    /// Takes lock `name` and adds one to its counter; its count after.
    fn increment(&self, name: &str) -> u64 {
        match name {
            "tts" => self.tts.with(bump),
            "ticket" => self.ticket.with(bump),
            "mcs" => self.mcs.with(bump),
            "parking_lot" => bump(&mut self.parking_lot.lock()),
            _ => bump(&mut self.std.lock().unwrap_or_else(|e| e.into_inner())),
        }
    }
}

fn bump(v: &mut u64) -> u64 {
    *v += 1;
    *v
}

/// One trial of lock `name` with `threads` pinned threads: (acquisitions per Mcycle,
/// median cycles per acquisition), or `Err` if the count came out wrong.
pub fn trial(name: &str, threads: usize, acquisitions: usize) -> Result<(f64, f64), String> {
    let locks = Locks::new();
    let barrier = Barrier::new(threads);
    let cycles: Vec<AtomicU64> = (0..threads).map(|_| AtomicU64::new(0)).collect();
    let last = AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..threads {
            let (locks, barrier, cycles, last) = (&locks, &barrier, &cycles, &last);
            s.spawn(move || {
                crate::pin(t);
                barrier.wait();
                let start = tsc();
                let mut count = 0;
                for _ in 0..acquisitions {
                    count = locks.increment(name);
                }
                cycles[t].store(tsc() - start, Ordering::Relaxed);
                last.fetch_max(count, Ordering::Relaxed);
            });
        }
    });
    let expected = (threads * acquisitions) as u64;
    if last.load(Ordering::Relaxed) != expected {
        return Err(format!("{name}: counted {} of {expected}", last.load(Ordering::Relaxed)));
    }
    let mut each: Vec<u64> = cycles.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    let slowest = each.iter().copied().max().unwrap_or(1).max(1) as f64;
    let per_mcycle = expected as f64 * 1e6 / slowest;
    let per_acquisition = median(&mut each).unwrap_or(0) as f64 / acquisitions as f64;
    Ok((per_mcycle, per_acquisition))
}

/// Every lock at 1 and 2 threads (as many as the host allows), the median of `trials`.
pub fn run(quick: bool) -> Result<Vec<String>, String> {
    // 20,000 a thread: a queue lock whose next waiter's thread is descheduled hands over
    // only when it runs again (on a VM's vCPUs, milliseconds), and at 200,000 a run under
    // `make bench` passed the host experiment's 300 s limit.
    let (acquisitions, trials) = if quick { (1_000, 1) } else { (20_000, 3) };
    let mut lines = Vec::new();
    for threads in 1..=crate::mcrt::cpus().min(2) {
        for name in LOCKS {
            let mut rates = Vec::new();
            let mut costs = Vec::new();
            for _ in 0..trials {
                let (rate, cost) = trial(name, threads, acquisitions)?;
                rates.push(rate);
                costs.push(cost);
            }
            let rate = median(&mut rates).unwrap_or(f64::NAN);
            let cost = median(&mut costs).unwrap_or(f64::NAN);
            let put = |metric, value, unit| {
                line("locks_contended", name, None, threads, metric, value, unit)
            };
            lines.push(put("acquisitions_per_mcycle", rate, "acquisitions/Mcycle"));
            lines.push(put("cycles_per_acquisition", cost, "cycles"));
        }
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    /// Every lock counts exactly under 1 and 2 threads, and reports both metrics.
    #[test]
    fn every_lock_counts_exactly_and_reports() {
        for name in super::LOCKS {
            for threads in [1, 2] {
                let (rate, cost) = super::trial(name, threads, 2_000).expect("exact count");
                assert!(rate > 0.0 && cost > 0.0, "{name} at {threads}: {rate} {cost}");
            }
        }
        let lines = super::run(true).expect("runs");
        assert!(lines.len() >= 10 && lines.iter().all(|l| l.contains("locks_contended")));
    }
}
