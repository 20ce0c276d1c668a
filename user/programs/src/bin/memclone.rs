//! `memclone [--mb N] [--cores LIST] [--config shared-as|separate-as|shared-ranges|all]`
//! (Corey §8.2, Figure 7a): each core allocates its own N MiB (default 100) and writes
//! each page once, so each page costs one soft fault that fills it with zeroes; prints
//! the average cycles per page over the cores. The configurations differ only in where
//! the arrays are mapped:
//! - `shared-as`: all arrays in one window of SLOT ranges spliced into every core's root
//!   range (one shared address space: the cores' faults contend on the same ranges);
//! - `separate-as`: each core maps its array in its own root range (private);
//! - `shared-ranges`: each core's array in SLOT ranges of its own, spliced into every root
//!   range (Corey's configuration, Figure 4c).
//!
//! Default cores: all (the caller's core runs its share itself, `cfork` the others).
//! Checks each core took exactly one fault per page.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering::*};
use libatoll::abi::{map, ArSetSeg};
use libatoll::bench::{barrier, Ratio, Record};
use libatoll::cores::{all_cores, spread};
use libatoll::obj::{self, page_faults, root_share, segment_alloc, share_delobj};
use libatoll::shared::{self, SharedStatic, ZeroInit, SLOT_BYTES};
use libatoll::{args, println, rdtsc, CforkOptions, ObjRef};

const PAGE: u64 = 4096;
/// Where `separate-as` maps each core's array in its own root range (256 GiB).
const PRIVATE_VA: u64 = 0x40_0000_0000;
/// Most cores and slots the control block has room for.
const MAX_CORES: usize = 256;
const MAX_SLOTS: usize = 1024;
const HELP: &str = "usage: memclone [--mb N] [--cores LIST] [--config shared-as|separate-as|shared-ranges|all]\n  N MiB per core (default 100); default cores: all; default config: all";

/// Where the arrays are mapped (see the module comment).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Config {
    SharedAs = 1,
    SeparateAs = 2,
    SharedRanges = 3,
}

impl Config {
    fn name(self) -> &'static str {
        match self {
            Config::SharedAs => "shared-as",
            Config::SeparateAs => "separate-as",
            Config::SharedRanges => "shared-ranges",
        }
    }

    fn from_code(code: u64) -> Config {
        match code {
            1 => Config::SharedAs,
            3 => Config::SharedRanges,
            _ => Config::SeparateAs,
        }
    }
}

/// The run's plan and results, in memory shared by every core.
#[repr(C)]
struct Ctl {
    config: AtomicU64,
    pages: AtomicU64,
    cores: AtomicU64,
    /// First address of the slot window (shared configurations).
    window: AtomicU64,
    /// Slots per core (`shared-ranges`), or 0.
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

struct Options {
    mb: u64,
    cores: Vec<usize>,
    configs: Vec<Config>,
}

fn options() -> Result<Options, i32> {
    let line = args::arg_string();
    let mut words = line.split_whitespace();
    let mut o = Options {
        mb: 100,
        cores: all_cores(),
        configs: alloc::vec![Config::SharedAs, Config::SharedRanges, Config::SeparateAs],
    };
    while let Some(word) = words.next() {
        let ok = match word {
            "--mb" => args::number(words.next(), 1..=4096).map(|v| o.mb = v).is_some(),
            "--cores" => args::cores_value(words.next()).map(|c| o.cores = c).is_some(),
            "--config" => match words.next() {
                Some("shared-as") => Some(alloc::vec![Config::SharedAs]),
                Some("separate-as") => Some(alloc::vec![Config::SeparateAs]),
                Some("shared-ranges") => Some(alloc::vec![Config::SharedRanges]),
                Some("all") => Some(o.configs.clone()),
                _ => None,
            }
            .map(|c| o.configs = c)
            .is_some(),
            _ => false,
        };
        if !ok {
            println!("{HELP}");
            return Err(if word == "--help" { 0 } else { 2 });
        }
    }
    if o.cores.len() > MAX_CORES {
        println!("memclone: at most {MAX_CORES} cores");
        return Err(2);
    }
    Ok(o)
}

fn main() -> i32 {
    let o = match options() {
        Ok(o) => o,
        Err(code) => return code,
    };
    let ctl = match CTL.init() {
        Ok(c) => c,
        Err(e) => {
            println!("memclone: no shared memory: {e:?}");
            return 1;
        }
    };
    let pages = o.mb * (1 << 20) / PAGE;
    let mut code = 0;
    for &config in &o.configs {
        if let Err(why) = run(ctl, config, &o.cores, pages, o.mb) {
            println!("memclone: {}: {why}", config.name());
            code = 1;
        }
    }
    code
}

/// Runs one configuration on every listed core and prints its result.
fn run(
    ctl: &Ctl,
    config: Config,
    cores: &[usize],
    pages: u64,
    mb: u64,
) -> Result<(), &'static str> {
    let n = cores.len() as u64;
    // Each array has a spare page (see `worker`).
    let bytes = (pages + 1) * PAGE;
    let per_core = bytes.div_ceil(SLOT_BYTES);
    let slots = match config {
        Config::SharedAs => (n * bytes).div_ceil(SLOT_BYTES),
        Config::SharedRanges => n * per_core,
        Config::SeparateAs => 0,
    };
    if slots as usize > MAX_SLOTS {
        return Err("too many slots for the control block");
    }
    ctl.config.store(config as u64, Relaxed);
    ctl.pages.store(pages, Relaxed);
    ctl.cores.store(n, Relaxed);
    ctl.per_core.store(if config == Config::SharedRanges { per_core } else { 0 }, Relaxed);
    ctl.arrived.store(0, Relaxed);
    for i in 0..cores.len() {
        ctl.cycles[i].store(0, Relaxed);
        ctl.faults[i].store(0, Relaxed);
        ctl.failed[i].store(0, Relaxed);
    }
    // The shared configurations' slot ranges, spliced here before the cforks so every
    // child's root range splices the same ones (Corey §3.1).
    let window =
        if slots > 0 { shared::slot_vas(slots).map_err(|_| "no slot addresses")? } else { 0 };
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
    }
    if bad {
        return Err("a core failed");
    }
    let extra = alloc::format!(",\"mb\":{mb}");
    let record = Record {
        experiment: "memclone",
        config: config.name(),
        active_cores: cores.len(),
        metric: "cycles_per_page",
        unit: "cycles",
        extra: &extra,
    };
    record.print(Ratio::new(total, pages * n));
    Ok(())
}

/// One core's part: allocate its array, map it where the configuration says, wait for
/// the others, then write each page once (timed).
fn worker(i: u64) -> i32 {
    let ctl = CTL.get();
    let i = i as usize;
    let (pages, n) = (ctl.pages.load(Acquire), ctl.cores.load(Acquire));
    let config = Config::from_code(ctl.config.load(Acquire));
    let va = map_array(ctl, config, i, pages);
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
/// for the warm-up, and maps it; returns its address.
fn map_array(ctl: &Ctl, config: Config, i: usize, pages: u64) -> Option<u64> {
    let root = root_share();
    let pages = pages + 1;
    let seg = segment_alloc(root, pages * PAGE).ok()?;
    let bytes = pages * PAGE;
    let window = ctl.window.load(Acquire);
    let slot_ids = |from: usize, count: usize| -> Vec<u64> {
        (from..from + count).map(|j| ctl.slots[j].load(Acquire)).collect()
    };
    let va = match config {
        Config::SeparateAs => {
            let ar = obj::root_ar_ref();
            let set = ArSetSeg {
                ar: [ar.share, ar.object],
                va: PRIVATE_VA,
                seg: [root, seg],
                first_page: 0,
                pages,
                flags: map::WRITE,
            };
            obj::ar_set_seg(&set).ok()?;
            PRIVATE_VA
        }
        Config::SharedAs => {
            let n = ctl.cores.load(Acquire);
            let slots = slot_ids(0, (n * bytes).div_ceil(SLOT_BYTES) as usize);
            shared::map_in_slots(&slots, i as u64 * bytes, seg, pages).ok()?;
            window + i as u64 * bytes
        }
        Config::SharedRanges => {
            let per = ctl.per_core.load(Acquire) as usize;
            shared::map_in_slots(&slot_ids(i * per, per), 0, seg, pages).ok()?;
            window + (i * per) as u64 * SLOT_BYTES
        }
    };
    if config != Config::SeparateAs {
        // The slot range holds the array now; it goes when the parent gives the window
        // back.
        let _ = share_delobj(ObjRef::new(root, seg));
    }
    Some(va)
}

libatoll::main!(main);
