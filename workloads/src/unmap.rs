//! Multikernel §5.1, Figure 7 ("end-to-end unmap latency"): the latency of taking the
//! right to write a page away while N cores have it mapped, for N = 1 ..= cores. The paper
//! changes the rights of a page mapped by a varying number of cores with `mprotect` on
//! Linux (the kernel sends an IPI to each core and waits for its acknowledgement) and
//! `VirtualProtect` on Windows, against Barrelfish's unmap, whose shootdown goes by
//! message along the SKB's multicast tree.
//!
//! One `Shared` page; core 0 measures and cores `1..N` each read the page in a loop, so
//! their TLBs hold its translation. Before each timed call every core has read the page
//! again since the last change (each acknowledges the call's number in a line of its own),
//! so the call always has N TLBs to reach. Core 0 times [`Platform::set_writable`]`(false)`
//! (the reduction: `config` `reduce`) and then `set_writable(true)` (the restore, a second
//! metric: `restore`), `rounds` times each after a few untimed rounds; the results are the
//! medians. N = 1 is the local floor: the call with nobody else to reach.
//!
//! The result lines say `cores` = N (the cores that map the page), as `multicast` does.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::hint::{black_box, spin_loop};
use core::sync::atomic::{AtomicU64, Ordering};

use crate::memory::{alloc_slice, CacheLine, Placement};
use crate::result::{self, median};
use crate::Platform;

/// Timed rounds per core count when none are asked for (as `multicast`).
pub const DEFAULT_ROUNDS: usize = 50;

/// Untimed rounds before the timed ones at each core count: the helpers' first faults and
/// the first shootdowns to newly started cores (and an emulator's first translations) are
/// not what Figure 7 measures.
const WARM_ROUNDS: usize = 3;

/// The phase word's value that tells the readers to stop.
const STOP: u64 = u64::MAX;

/// The medians of one core count, in cycles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Latency {
    /// Taking write access away (`set_writable(false)`).
    pub reduce: u64,
    /// Giving it back (`set_writable(true)`).
    pub restore: u64,
}

/// The two timed calls, in the order each round makes them, with their `config` names.
const CALLS: [(&str, bool); 2] = [("reduce", false), ("restore", true)];

/// The median cycles of a rights reduction and of its restore on one page that cores
/// `0..n` have mapped (`rounds` of each, after [`WARM_ROUNDS`] untimed ones).
pub fn measure<P: Platform + ?Sized>(p: &P, n: usize, rounds: usize) -> Result<Latency, String> {
    if n == 0 || n > p.cores() {
        return Err(format!("{n} cores do not fit the {} there are", p.cores()));
    }
    let rounds = rounds.max(1);
    let page = alloc_slice::<CacheLine, P>(p, 1, Placement::Shared)?;
    let region = page.region();
    // Once untimed before any thread starts: a platform that cannot change rights says why
    // here, not as a failure in the middle of a run.
    p.set_writable(region, false)?;
    p.set_writable(region, true)?;
    // [0]: the number of the call core 0 makes next (STOP: readers leave); [c]: the last
    // call number reader c has read the page for.
    let phase = alloc_slice::<CacheLine, P>(p, n, Placement::Shared)?;
    let samples: Vec<AtomicU64> = (0..2 * rounds).map(|_| AtomicU64::new(0)).collect();
    // The first call that failed (0: none), as its number.
    let failed = AtomicU64::new(0);
    let reader = |c: usize| {
        let mut acked = 0;
        loop {
            let now = phase[0].0.load(Ordering::Acquire);
            if now == STOP {
                break;
            }
            // A read, never a write: the page may be read-only now.
            black_box(page[0].0.load(Ordering::Relaxed));
            if now != acked {
                phase[c].0.store(now, Ordering::Release);
                acked = now;
            }
            spin_loop();
        }
    };
    let measurer = || {
        let mut call = 0u64;
        'rounds: for round in 0..WARM_ROUNDS + rounds {
            for (i, (_, writable)) in CALLS.iter().enumerate() {
                call += 1;
                phase[0].0.store(call, Ordering::Release);
                // Every reader has read the page since the last change: its TLB holds the
                // translation the call must take away.
                for line in &phase[1..] {
                    while line.0.load(Ordering::Acquire) < call {
                        spin_loop();
                    }
                }
                black_box(page[0].0.load(Ordering::Relaxed));
                let start = p.cycles();
                let done = p.set_writable(region, *writable);
                let cycles = p.cycles().saturating_sub(start);
                if done.is_err() {
                    failed.store(call, Ordering::Relaxed);
                    break 'rounds;
                }
                if let Some(at) = round.checked_sub(WARM_ROUNDS) {
                    samples[i * rounds + at].store(cycles, Ordering::Relaxed);
                }
            }
        }
        phase[0].0.store(STOP, Ordering::Release);
    };
    let cores: Vec<usize> = (0..n).collect();
    p.run_on(&cores, &|c| if c == 0 { measurer() } else { reader(c) })?;
    let call = failed.load(Ordering::Relaxed);
    if call != 0 {
        let (name, writable) = CALLS[(call as usize - 1) % 2];
        return Err(format!(
            "{name} (set_writable({writable}) number {call} on core 0) failed at {n} cores"
        ));
    }
    let of = |i: usize| {
        let mut cycles: Vec<u64> = samples[i * rounds..(i + 1) * rounds]
            .iter()
            .map(|s| s.load(Ordering::Relaxed))
            .collect();
        median(&mut cycles).unwrap_or(0)
    };
    Ok(Latency { reduce: of(0), restore: of(1) })
}

/// Figure 7 on the platform's cores: N = 1 ..= cores, `rounds` of each call, as
/// `"experiment":"unmap"` lines of `latency_cycles` (`cores` = N; `config` `reduce`, then
/// `restore`).
pub fn run<P: Platform + ?Sized>(p: &P, rounds: usize) -> Result<Vec<String>, String> {
    let mut lines = Vec::new();
    for n in 1..=p.cores() {
        let latency = measure(p, n, rounds)?;
        for ((config, _), value) in CALLS.iter().zip([latency.reduce, latency.restore]) {
            let extra = format!(",\"config\":\"{config}\"");
            let system = p.system();
            lines.push(result::line(system, "unmap", n, "latency_cycles", value, "cycles", &extra));
        }
    }
    Ok(lines)
}
