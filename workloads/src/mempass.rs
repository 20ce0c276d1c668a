//! Corey §8.2, Figure 7(b), `mempass`: the cost of memory used on several cores. One
//! buffer of `mb` MiB of demand-zero shared memory is touched (one word written per page)
//! by core 0, then passed to core 1, which touches every page too, and so on until every
//! core has touched every page; the result is the total time, from core 0's start to the
//! last core's end, and that time per page per core. In one address space only the first
//! core faults (the others find the pages mapped); with an address space per core every
//! core takes a soft fault on every page. Atoll's `mempass` program runs this code for these
//! two configurations (on `libatoll::platform`) and adds `shared-ranges` of its own (the
//! buffer mapped through one address range that every core's address space includes, so
//! its page table is shared).

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::hint::spin_loop;
use core::sync::atomic::{AtomicU64, Ordering};

use crate::memclone::WORDS_PER_PAGE;
use crate::memory::{alloc_slice, CacheLine, Placement, SpinBarrier, REGION_ALIGN};
use crate::{result, Platform, Spaces};

/// MiB in the buffer when none are asked for (the paper's 100 MB would take minutes under
/// TCG).
pub const DEFAULT_MB: usize = 16;

/// One pass of the buffer through cores `0..cores`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pass {
    /// Cycles from core 0's first touch to the last core's last.
    pub total_cycles: u64,
    /// `total_cycles / (pages × cores)`: one core's touch of one page.
    pub cycles_per_page: u64,
    /// Soft faults of all cores per page of the buffer, if the platform counts them: 1 when
    /// only the first core faults (one address space), the number of cores when each
    /// faults every page in (an address space each).
    pub faults_per_page: Option<f64>,
}

/// Passes `bytes` of fresh shared memory through cores `0..cores` in the address spaces
/// `spaces` asks, each core writing one word of every page in its turn.
pub fn measure<P: Platform + ?Sized>(
    p: &P,
    spaces: Spaces,
    cores: usize,
    bytes: usize,
) -> Result<Pass, String> {
    let pages = bytes.div_ceil(REGION_ALIGN).max(1);
    let buffer = p
        .reserve(pages * REGION_ALIGN, Placement::Shared)?
        .typed::<AtomicU64>(pages * WORDS_PER_PAGE)?;
    // [0]: whose turn it is; [1]: core 0's start; [2]: the last core's end; [3]: the
    // faults all cores took (u64::MAX once a core could not count them).
    let state = alloc_slice::<CacheLine, P>(p, 4, Placement::Shared)?;
    let barrier = alloc_slice::<SpinBarrier, P>(p, 1, Placement::Shared)?;
    let list: Vec<usize> = (0..cores).collect();
    spaces.run(p, &list, &|core| {
        barrier[0].wait(cores);
        if core == 0 {
            state[1].0.store(p.cycles(), Ordering::Relaxed);
        }
        while state[0].0.load(Ordering::Acquire) != core as u64 {
            spin_loop();
        }
        let faults_before = p.soft_faults();
        for page in 0..pages {
            buffer[page * WORDS_PER_PAGE].store(core as u64 + 1, Ordering::Relaxed);
        }
        match faults_before.zip(p.soft_faults()) {
            // One core at a time: its turn orders the updates.
            Some((a, b)) => {
                let sum = state[3].0.load(Ordering::Relaxed).saturating_add(b.saturating_sub(a));
                state[3].0.store(sum, Ordering::Relaxed);
            }
            None => state[3].0.store(u64::MAX, Ordering::Relaxed),
        }
        if core + 1 == cores {
            state[2].0.store(p.cycles(), Ordering::Relaxed);
        }
        // Hand the buffer on: the next core's touches come after all of ours.
        state[0].0.store(core as u64 + 1, Ordering::Release);
    })?;
    let total =
        state[2].0.load(Ordering::Relaxed).saturating_sub(state[1].0.load(Ordering::Relaxed));
    let faults = state[3].0.load(Ordering::Relaxed);
    Ok(Pass {
        total_cycles: total,
        cycles_per_page: total / (pages * cores.max(1)) as u64,
        faults_per_page: (faults != u64::MAX).then(|| faults as f64 / pages as f64),
    })
}

/// The unreported first pass [`run`] makes (and Atoll's `mempass` program): a 1 MiB
/// buffer in one address space, to warm the fault path (and an emulator's translations).
pub fn warm_up<P: Platform + ?Sized>(p: &P) -> Result<(), String> {
    measure(p, Spaces::Shared, p.cores(), 1 << 20).map(|_| ())
}

/// Both configurations on all the platform's cores with an `mb` MiB buffer, as
/// `"experiment":"mempass"` lines: `total_cycles` and `cycles_per_page` per `config`
/// (`shared-as`, `separate-as`), after [`warm_up`].
pub fn run<P: Platform + ?Sized>(p: &P, mb: usize) -> Result<Vec<String>, String> {
    let cores = p.cores();
    warm_up(p)?;
    let mut lines = Vec::new();
    for spaces in Spaces::ALL {
        let pass = measure(p, spaces, cores, mb << 20)?;
        let extra = format!(",\"config\":\"{}\",\"mb\":{mb}", spaces.name());
        for (metric, value) in
            [("total_cycles", pass.total_cycles), ("cycles_per_page", pass.cycles_per_page)]
        {
            lines.push(result::line(p.system(), "mempass", cores, metric, value, "cycles", &extra));
        }
        if let Some(faults) = pass.faults_per_page {
            let value = result::Fixed2(faults);
            lines.push(result::line(
                p.system(),
                "mempass",
                cores,
                "faults_per_page",
                value,
                "faults",
                &extra,
            ));
        }
    }
    Ok(lines)
}
