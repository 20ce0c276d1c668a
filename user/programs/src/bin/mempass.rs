//! `mempass [--mb N] [--cores LIST] [--config shared-as|separate-as|shared-ranges|all]`
//! (Corey §8.2, Figure 7b): one N MiB buffer (default 100), reserved by the caller, is
//! passed from core to core in list order; each core writes every page, then hands the
//! baton to the next. Prints the total cycles (first core's start to last core's end) and
//! cycles per page (total / (pages * cores)).
//!
//! `shared-as` and `separate-as` run the workload written once, `workloads::mempass` (the
//! code the Linux guest runs), on libatoll's platform (`libatoll::platform`):
//! - `shared-as`: one address space, a thread per core (contexts on one root range); the
//!   buffer is `Shared` memory, in SLOT ranges whose page tables all threads include, so
//!   only the first core faults;
//! - `separate-as`: an address space per core (`cfork`); each child maps the buffer's
//!   segment through slot ranges of its own, so every core faults every page (as Linux's
//!   processes do with `MAP_SHARED` memory).
//!
//! `shared-ranges` is Atoll's own (the workload's platform calls cannot express it): the
//! buffer in SLOT ranges every core's separate address space splices, so only the first
//! core faults; it checks and prints the faults each core took.
//!
//! A first pass with a 1 MiB buffer in one address space is not reported (the workload's
//! warm-up). Default cores: all.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;
use core::sync::atomic::{AtomicU64, Ordering::*};
use libatoll::bench::{Ratio, Record};
use libatoll::cores::spread;
use libatoll::obj::{page_faults, root_share, segment_alloc, share_delobj};
use libatoll::platform::{options, Atoll};
use libatoll::shared::{self, SharedStatic, ZeroInit, SLOT_BYTES};
use libatoll::{println, rdtsc, CforkOptions, ObjRef};
use workloads::result::Fixed2;

const PAGE: u64 = 4096;
const MAX_CORES: usize = 256;
const HELP: &str = "usage: mempass [--mb N] [--cores LIST] [--config shared-as|separate-as|shared-ranges|all]\n  N MiB buffer (default 100); default cores: all; default config: all";

/// `shared-ranges`' baton and results, in memory shared by every core.
#[repr(C)]
struct Ctl {
    pages: AtomicU64,
    cores: AtomicU64,
    buffer: AtomicU64,
    /// Index (in the list) of the core whose turn it is.
    baton: AtomicU64,
    start: AtomicU64,
    end: AtomicU64,
    faults: [AtomicU64; MAX_CORES],
}

// SAFETY: atomics only; all-zero is a valid value.
unsafe impl ZeroInit for Ctl {}

static CTL: SharedStatic<Ctl> = SharedStatic::new();

fn main() -> i32 {
    let o = match options("mempass", HELP, MAX_CORES) {
        Ok(o) => o,
        Err(code) => return code,
    };
    let p = Atoll::new(o.cores.clone());
    let n = o.cores.len();
    if let Err(why) = workloads::mempass::warm_up(&p) {
        println!("mempass: warm-up: {why}");
        return 1;
    }
    let pages = o.mb * (1 << 20) / PAGE;
    let mut code = 0;
    for &config in &o.configs {
        // (total cycles, soft faults of all cores per page of the buffer)
        let measured = match config.spaces() {
            Some(spaces) => workloads::mempass::measure(&p, spaces, n, (o.mb as usize) << 20)
                .map(|pass| (pass.total_cycles, pass.faults_per_page)),
            // Only the first core faults, each page once (checked).
            None => shared_ranges(&o.cores, pages)
                .map(|total| (total, Some(1.0)))
                .map_err(alloc::string::String::from),
        };
        let (total, faults) = match measured {
            Ok(measured) => measured,
            Err(why) => {
                println!("mempass: {}: {why}", config.name());
                code = 1;
                continue;
            }
        };
        let extra = alloc::format!(",\"mb\":{}", o.mb);
        let mut record = Record {
            experiment: "mempass",
            config: config.name(),
            active_cores: n,
            metric: "total_cycles",
            unit: "cycles",
            extra: &extra,
        };
        record.print(total);
        record.metric = "cycles_per_page";
        record.print(Ratio::new(total, pages * n as u64));
        if let Some(faults) = faults {
            (record.metric, record.unit) = ("faults_per_page", "faults");
            record.print(Fixed2(faults));
        }
    }
    code
}

/// `shared-ranges` on every listed core: the buffer in SLOT ranges spliced here, before
/// the cforks, so every core's address space includes the same page tables. Checks that
/// only the first core faulted; returns the total cycles.
fn shared_ranges(cores: &[usize], pages: u64) -> Result<u64, &'static str> {
    let ctl = CTL.init().map_err(|_| "no shared memory")?;
    let n = cores.len() as u64;
    let root = root_share();
    let seg = segment_alloc(root, pages * PAGE).map_err(|_| "segment_alloc failed")?;
    let mut slots = Vec::new();
    let count = (pages * PAGE).div_ceil(SLOT_BYTES);
    let window = shared::slot_vas(count).map_err(|_| "no slot addresses")?;
    let mapped = (|| {
        for j in 0..count {
            let range = shared::slot_alloc().map_err(|_| "ar_alloc(SLOT) failed")?;
            slots.push(range);
            shared::splice(window + j * SLOT_BYTES, range).map_err(|_| "ar_set_ar failed")?;
        }
        shared::map_in_slots(&slots, 0, seg, pages).map_err(|_| "ar_set_seg failed")
    })();
    let statuses = mapped.and_then(|()| {
        ctl.pages.store(pages, Relaxed);
        ctl.cores.store(n, Relaxed);
        ctl.buffer.store(window, Relaxed);
        ctl.baton.store(0, Relaxed);
        for f in ctl.faults.iter().take(cores.len()) {
            f.store(0, Relaxed);
        }
        spread(cores, &CforkOptions::default(), worker).map_err(|_| "cfork failed")
    });
    for j in 0..slots.len() {
        let _ = shared::unsplice(window + j as u64 * SLOT_BYTES);
    }
    for &range in &slots {
        let _ = share_delobj(ObjRef::root(range));
    }
    let _ = share_delobj(ObjRef::root(seg));
    let statuses = statuses?;
    if statuses.iter().any(|s| !s.ok()) {
        for (core, status) in cores.iter().zip(&statuses) {
            println!("mempass: core {core}: {status:?}");
        }
        return Err("a core failed");
    }
    // Faults: the first core fills every page; in a shared range no other core faults.
    let mut line = String::new();
    let mut wrong = false;
    for i in 0..cores.len() {
        let faults = ctl.faults[i].load(Acquire);
        let _ = write!(line, " {faults}");
        wrong |= faults != if i == 0 { pages } else { 0 };
    }
    println!("mempass: shared-ranges faults per core:{line}");
    if wrong {
        return Err("unexpected fault counts");
    }
    Ok(ctl.end.load(Acquire).saturating_sub(ctl.start.load(Acquire)))
}

/// One core's turn: wait for the baton, write every page, pass the baton on.
fn worker(i: u64) -> i32 {
    let ctl = CTL.get();
    let (pages, n, va) =
        (ctl.pages.load(Acquire), ctl.cores.load(Acquire), ctl.buffer.load(Acquire));
    while ctl.baton.load(Acquire) != i {
        core::hint::spin_loop();
    }
    if i == 0 {
        ctl.start.store(rdtsc(), Release);
    }
    let faults = page_faults();
    for page in 0..pages {
        // A write, not a read first: one fault per page, never a read fault then a write.
        // SAFETY: the buffer is mapped read-write at [va, va + pages * PAGE) on every core.
        unsafe { ((va + page * PAGE) as *mut u64).write_volatile(i + 1) };
    }
    ctl.faults[i as usize].store(page_faults() - faults, Release);
    if i + 1 == n {
        ctl.end.store(rdtsc(), Release);
    }
    ctl.baton.store(i + 1, Release);
    0
}

libatoll::main!(main);
