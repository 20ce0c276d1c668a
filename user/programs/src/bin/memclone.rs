//! `memclone [--mb N] [--cores LIST] [--config shared-as|separate-as|shared-ranges|all]`
//! (Corey §8.2, Figure 7a): each core reserves its own N MiB (default 100) and writes each
//! page once, so each page costs one soft fault that fills it with zeroes; prints the
//! average cycles per page over the cores.
//!
//! `shared-as` and `separate-as` run the workload written once, `workloads::memclone` (the
//! code the Linux guest runs), on libatoll's platform (`libatoll::platform`):
//! - `shared-as`: one address space: a thread per core (contexts on one root range), each
//!   mapping its array in that range, so their mapping calls and faults meet in it;
//! - `separate-as`: an address space per core (`cfork`), each array in its own root range.
//!
//! `shared-ranges` is Atoll's own (the workload's platform calls cannot express it): each
//! core's array in SLOT ranges of its own, spliced into every core's root range (Corey's
//! configuration, Figure 4c); it checks each core took exactly one fault per page.
//!
//! A first pass of 1 MiB per core in one address space is not reported (the workload's
//! warm-up). Default cores: all (the caller's core runs its share itself).
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering::*};
use libatoll::bench::{barrier, Ratio, Record};
use libatoll::cores::spread;
use libatoll::obj::{page_faults, root_share, segment_alloc, share_delobj};
use libatoll::platform::{options, Atoll};
use libatoll::shared::{self, SharedStatic, ZeroInit, SLOT_BYTES};
use libatoll::{println, rdtsc, CforkOptions, ObjRef};
use workloads::result::Fixed2;

const PAGE: u64 = 4096;
/// Most cores and slots the control block has room for.
const MAX_CORES: usize = 256;
const MAX_SLOTS: usize = 1024;
const HELP: &str = "usage: memclone [--mb N] [--cores LIST] [--config shared-as|separate-as|shared-ranges|all]\n  N MiB per core (default 100); default cores: all; default config: all";

/// `shared-ranges`' plan and results, in memory shared by every core.
#[repr(C)]
struct Ctl {
    pages: AtomicU64,
    cores: AtomicU64,
    /// First address of the slot window.
    window: AtomicU64,
    /// Slots per core.
    per_core: AtomicU64,
    arrived: AtomicU64,
    slots: [AtomicU64; MAX_SLOTS],
    cycles: [AtomicU64; MAX_CORES],
    faults: [AtomicU64; MAX_CORES],
    failed: [AtomicU64; MAX_CORES],
}

// SAFETY: atomics only; all-zero is a valid value.
unsafe impl ZeroInit for Ctl {}

static CTL: SharedStatic<Ctl> = SharedStatic::new();

fn main() -> i32 {
    let o = match options("memclone", HELP, MAX_CORES) {
        Ok(o) => o,
        Err(code) => return code,
    };
    let p = Atoll::new(o.cores.clone());
    let n = o.cores.len();
    if let Err(why) = workloads::memclone::warm_up(&p) {
        println!("memclone: warm-up: {why}");
        return 1;
    }
    let mut code = 0;
    for &config in &o.configs {
        // (cycles per page, soft faults per page touched)
        let value = match config.spaces() {
            Some(spaces) => workloads::memclone::measure(&p, spaces, n, (o.mb as usize) << 20)
                .map(|t| (alloc::format!("{}", t.cycles_per_page), t.faults_per_page)),
            None => shared_ranges(&o.cores, o.mb * (1 << 20) / PAGE)
                .map(|(ratio, faults)| (alloc::format!("{ratio}"), Some(faults)))
                .map_err(alloc::string::String::from),
        };
        match value {
            Ok((cycles, faults)) => {
                let extra = alloc::format!(",\"mb\":{}", o.mb);
                let mut record = Record {
                    experiment: "memclone",
                    config: config.name(),
                    active_cores: n,
                    metric: "cycles_per_page",
                    unit: "cycles",
                    extra: &extra,
                };
                record.print(cycles);
                if let Some(faults) = faults {
                    (record.metric, record.unit) = ("faults_per_page", "faults");
                    record.print(Fixed2(faults));
                }
            }
            Err(why) => {
                println!("memclone: {}: {why}", config.name());
                code = 1;
            }
        }
    }
    code
}

/// `shared-ranges` on every listed core: each core's array in SLOT ranges of its own,
/// spliced (here, before the cforks) into every core's root range. Returns the cycles
/// per page averaged over the cores, and the faults per page (checked to be 1).
fn shared_ranges(cores: &[usize], pages: u64) -> Result<(Ratio, f64), &'static str> {
    let ctl = CTL.init().map_err(|_| "no shared memory")?;
    let n = cores.len() as u64;
    // Each array has a spare page (see `worker`).
    let per_core = ((pages + 1) * PAGE).div_ceil(SLOT_BYTES);
    let slots = n * per_core;
    if slots as usize > MAX_SLOTS {
        return Err("too many slots for the control block");
    }
    ctl.pages.store(pages, Relaxed);
    ctl.cores.store(n, Relaxed);
    ctl.per_core.store(per_core, Relaxed);
    ctl.arrived.store(0, Relaxed);
    for i in 0..cores.len() {
        ctl.cycles[i].store(0, Relaxed);
        ctl.faults[i].store(0, Relaxed);
        ctl.failed[i].store(0, Relaxed);
    }
    let window = shared::slot_vas(slots).map_err(|_| "no slot addresses")?;
    ctl.window.store(window, Relaxed);
    let mut made = Vec::new();
    for j in 0..slots {
        let range = shared::slot_alloc().map_err(|_| "ar_alloc(SLOT) failed")?;
        made.push(range);
        ctl.slots[j as usize].store(range, Relaxed);
        shared::splice(window + j * SLOT_BYTES, range).map_err(|_| "ar_set_ar failed")?;
    }
    let statuses = spread(cores, &CforkOptions::default(), worker);
    // Give the window back: its ranges (and the arrays in them) go with the last holder.
    for (j, &range) in made.iter().enumerate() {
        let _ = shared::unsplice(window + j as u64 * SLOT_BYTES);
        let _ = share_delobj(ObjRef::root(range));
    }
    let statuses = statuses.map_err(|_| "cfork failed")?;
    let mut total = 0u64;
    let mut faulted = 0u64;
    let mut bad = false;
    for (i, status) in statuses.iter().enumerate() {
        let faults = ctl.faults[i].load(Acquire);
        if !status.ok() || ctl.failed[i].load(Acquire) != 0 {
            println!("memclone: core {}: {:?}", cores[i], status);
            bad = true;
        } else if faults != pages {
            println!("memclone: core {}: {faults} faults for {pages} pages", cores[i]);
            bad = true;
        }
        total += ctl.cycles[i].load(Acquire);
        faulted += faults;
    }
    if bad {
        return Err("a core failed");
    }
    Ok((Ratio::new(total, pages * n), faulted as f64 / (pages * n) as f64))
}

/// One core's part: allocate its array, map it where the configuration says, wait for
/// the others, then write each page once (timed).
fn worker(i: u64) -> i32 {
    let ctl = CTL.get();
    let i = i as usize;
    let (pages, n) = (ctl.pages.load(Acquire), ctl.cores.load(Acquire));
    let va = map_array(ctl, i, pages);
    if va.is_none() {
        ctl.failed[i].store(1, Release);
    }
    // Every core arrives, mapped or not, so no core waits for one that gave up.
    let Some(va) = va else {
        barrier(&ctl.arrived, n);
        return 1;
    };
    // Warm up on the spare page past the array: an edit of the root range makes the
    // kernel forget this context's faulted pages, so code and stack pages fault again
    // once; let that happen outside the count.
    touch(va + pages * PAGE, 1);
    barrier(&ctl.arrived, n);
    let (cycles, faults) = touch(va, pages);
    ctl.faults[i].store(faults, Release);
    ctl.cycles[i].store(cycles, Release);
    0
}

/// Writes the first word of each of `pages` pages from `va`; returns the cycles it took
/// and the faults it caused.
#[inline(never)]
fn touch(va: u64, pages: u64) -> (u64, u64) {
    let faults = page_faults();
    let start = rdtsc();
    for page in 0..pages {
        // SAFETY: the caller passes a read-write mapping of at least `pages` pages.
        unsafe { ((va + page * PAGE) as *mut u64).write_volatile(page) };
    }
    let cycles = rdtsc() - start;
    (cycles, page_faults() - faults)
}

/// Allocates this core's array (from its own memory), with one spare page past its end
/// for the warm-up, and maps it in its own slot ranges; returns its address.
fn map_array(ctl: &Ctl, i: usize, pages: u64) -> Option<u64> {
    let root = root_share();
    let pages = pages + 1;
    let seg = segment_alloc(root, pages * PAGE).ok()?;
    let window = ctl.window.load(Acquire);
    let per = ctl.per_core.load(Acquire) as usize;
    let slots: Vec<u64> = (i * per..(i + 1) * per).map(|j| ctl.slots[j].load(Acquire)).collect();
    let mapped = shared::map_in_slots(&slots, 0, seg, pages);
    // The slot range holds the array now; it goes when the parent gives the window back.
    let _ = share_delobj(ObjRef::new(root, seg));
    mapped.ok()?;
    Some(window + (i * per) as u64 * SLOT_BYTES)
}

libatoll::main!(main);
