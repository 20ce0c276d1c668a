//! Corey §8.2, Figure 7(a), `memclone`: the cost of private memory. Every core reserves
//! `mb` MiB of demand-zero memory of its own and writes one word in each page, so each page
//! costs a soft page fault that allocates and clears it; the result is the cycles per page,
//! averaged over the cores. In one address space shared by all cores the faults of every
//! core update the same address-space structures (Linux's `mm_struct` and its lock); with
//! an address space per core they share nothing. Atoll's `memclone` program runs this code
//! for these two configurations (on `libatoll::platform`) and adds a third of its own,
//! `shared-ranges` (an address space per core whose memory is mapped through address
//! ranges, Corey's answer).

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};

use crate::memory::{alloc_slice, CacheLine, Placement, SpinBarrier, REGION_ALIGN};
use crate::{result, Platform, Spaces};

/// MiB per core when none are asked for (the paper's 100 MB would take minutes under TCG).
pub const DEFAULT_MB: usize = 16;

/// Words of 8 bytes in a page.
pub const WORDS_PER_PAGE: usize = REGION_ALIGN / 8;

/// What a core whose memory could not be reserved reports instead of cycles (and a core
/// whose platform cannot count faults instead of a count).
const FAILED: u64 = u64::MAX;

/// One measurement: the cost of a first touch, and how many faults the touches took.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Touches {
    /// Cycles per page, averaged over the cores.
    pub cycles_per_page: u64,
    /// Soft faults per page touched, over all cores (1 when every first touch of a 4 KiB
    /// page faults once; less with huge pages), if the platform counts them.
    pub faults_per_page: Option<f64>,
}

/// Cycles per page, averaged over cores `0..cores`, of every core writing each page of
/// `bytes` of its own fresh memory at the same time, in the address spaces `spaces` asks;
/// and the soft faults per page those writes took.
pub fn measure<P: Platform + ?Sized>(
    p: &P,
    spaces: Spaces,
    cores: usize,
    bytes: usize,
) -> Result<Touches, String> {
    let pages = bytes.div_ceil(REGION_ALIGN).max(1);
    let per_core = alloc_slice::<CacheLine, P>(p, cores, Placement::Shared)?;
    let faults = alloc_slice::<CacheLine, P>(p, cores, Placement::Shared)?;
    let barrier = alloc_slice::<SpinBarrier, P>(p, 1, Placement::Shared)?;
    let list: Vec<usize> = (0..cores).collect();
    spaces.run(p, &list, &|core| {
        let memory = p
            .reserve(pages * REGION_ALIGN, Placement::Local(core))
            .and_then(|region| region.typed::<AtomicU64>(pages * WORDS_PER_PAGE));
        // Everyone has mapped its memory before anyone faults (a mapping call in one
        // address space would disturb the others' faults).
        barrier[0].wait(cores);
        if let Ok(words) = &memory {
            let faults_before = p.soft_faults();
            let start = p.cycles();
            for page in 0..pages {
                words[page * WORDS_PER_PAGE].store(page as u64 + 1, Ordering::Relaxed);
            }
            let cycles = p.cycles() - start;
            let taken = faults_before.zip(p.soft_faults()).map(|(a, b)| b.saturating_sub(a));
            per_core[core].0.store(cycles / pages as u64, Ordering::Relaxed);
            faults[core].0.store(taken.unwrap_or(FAILED), Ordering::Relaxed);
        } else {
            per_core[core].0.store(FAILED, Ordering::Relaxed);
        }
        // Nobody unmaps while another core still faults.
        barrier[0].wait(cores);
    })?;
    let values: Vec<u64> = per_core.iter().map(|v| v.0.load(Ordering::Relaxed)).collect();
    if values.contains(&FAILED) {
        return Err(format!("a core could not reserve {} bytes", pages * REGION_ALIGN));
    }
    let counts: Vec<u64> = faults.iter().map(|v| v.0.load(Ordering::Relaxed)).collect();
    let faults_per_page = (!counts.contains(&FAILED))
        .then(|| counts.iter().sum::<u64>() as f64 / (pages * cores.max(1)) as f64);
    Ok(Touches {
        cycles_per_page: values.iter().sum::<u64>() / cores.max(1) as u64,
        faults_per_page,
    })
}

/// The unreported first pass [`run`] makes (and Atoll's `memclone` program): 1 MiB per
/// core in one address space, to warm the fault path (and an emulator's translations).
pub fn warm_up<P: Platform + ?Sized>(p: &P) -> Result<(), String> {
    measure(p, Spaces::Shared, p.cores(), 1 << 20).map(|_| ())
}

/// Both configurations on all the platform's cores, `mb` MiB per core, as
/// `"experiment":"memclone"` lines (`config`: `shared-as`, `separate-as`), after
/// [`warm_up`].
pub fn run<P: Platform + ?Sized>(p: &P, mb: usize) -> Result<Vec<String>, String> {
    let cores = p.cores();
    warm_up(p)?;
    let mut lines = Vec::new();
    for spaces in Spaces::ALL {
        let touches = measure(p, spaces, cores, mb << 20)?;
        let extra = format!(",\"config\":\"{}\",\"mb\":{mb}", spaces.name());
        lines.push(result::line(
            p.system(),
            "memclone",
            cores,
            "cycles_per_page",
            touches.cycles_per_page,
            "cycles",
            &extra,
        ));
        if let Some(faults) = touches.faults_per_page {
            let (system, value) = (p.system(), result::Fixed2(faults));
            let unit = "faults";
            lines.push(result::line(
                system,
                "memclone",
                cores,
                "faults_per_page",
                value,
                unit,
                &extra,
            ));
        }
    }
    Ok(lines)
}
