//! `sharedrange [--pages N]`: checks that a SLOT address range shares page tables between
//! cores (Corey §3.1, §4.3). The parent maps N pages (default 64) in a slot range spliced
//! into its root range and a segment of N pages privately in its root range, writes
//! every page of both (faulting them in), then cforks a child on another core (sharing
//! the slot range, and the private segment as a segment). The child reads them all: the
//! slot range's pages must cost it no fault (the parent's faults filled the shared page
//! tables), the private mapping's must cost one each (its own page tables). Prints
//! `sharedrange: ok child_faults=0 private_faults=N`, `sharedrange: FAIL <why>`, or
//! `sharedrange: skipped (1 core)` (exit 77, `EXIT_SKIPPED`).
#![no_std]
#![no_main]

use core::sync::atomic::{AtomicU64, Ordering::*};
use libatoll::abi::{map, ArSetSeg};
use libatoll::obj::{self, page_faults, root_share, segment_alloc};
use libatoll::shared::{SharedMem, SharedStatic, ZeroInit};
use libatoll::{args, cfork, cores_online, pcore_current, println, CforkOptions, Child, Status};

const PAGE: u64 = 4096;
/// Where the private segment is mapped (256 GiB).
const PRIVATE_VA: u64 = 0x40_0000_0000;
/// Added to each page's index to make the value written there.
const MAGIC: u64 = 0x5a5a_0000;
const HELP: &str = "usage: sharedrange [--pages N]   (pages of each mapping; default 64)";

/// Where parent and child meet, and what the child measured.
#[repr(C)]
struct Meet {
    pages: AtomicU64,
    data: AtomicU64,
    /// 1: the parent wrote every page; 2: the child read them.
    step: AtomicU64,
    child_faults: AtomicU64,
    private_faults: AtomicU64,
    /// 1 if the child read a wrong value.
    wrong: AtomicU64,
}

// SAFETY: atomics only; all-zero is a valid value.
unsafe impl ZeroInit for Meet {}

static MEET: SharedStatic<Meet> = SharedStatic::new();

fn main() -> i32 {
    let line = args::arg_string();
    let mut words = line.split_whitespace();
    let mut pages = 64u64;
    while let Some(word) = words.next() {
        match (word, args::number(words.next(), 1..=65536)) {
            ("--pages", Some(n)) => pages = n,
            _ => {
                println!("{HELP}");
                return if word == "--help" { 0 } else { 2 };
            }
        }
    }
    if cores_online() < 2 {
        println!("sharedrange: skipped (1 core)");
        return libatoll::abi::EXIT_SKIPPED;
    }
    match test(pages) {
        Ok((child, private)) => {
            println!("sharedrange: ok child_faults={child} private_faults={private}");
            0
        }
        Err(why) => {
            println!("sharedrange: FAIL {why}");
            1
        }
    }
}

/// Runs the test; returns the child's fault counts (slot range, private mapping).
fn test(pages: u64) -> Result<(u64, u64), &'static str> {
    let meet = MEET.init().map_err(|_| "no shared memory")?;
    let data = SharedMem::new(pages * PAGE).map_err(|_| "no slot range")?;
    let root = root_share();
    let private = segment_alloc(root, pages * PAGE).map_err(|_| "segment_alloc failed")?;
    let ar = obj::root_ar_ref();
    let set = ArSetSeg {
        ar: [ar.share, ar.object],
        va: PRIVATE_VA,
        seg: [root, private],
        first_page: 0,
        pages,
        flags: map::WRITE,
    };
    obj::ar_set_seg(&set).map_err(|_| "ar_set_seg failed")?;
    meet.pages.store(pages, Relaxed);
    meet.data.store(data.va, Relaxed);
    let before = page_faults();
    for va in [data.va, PRIVATE_VA] {
        for page in 0..pages {
            // SAFETY: both mappings are [va, va + pages * PAGE), read-write.
            unsafe { ((va + page * PAGE) as *mut u64).write_volatile(page + MAGIC) };
        }
    }
    let faults = page_faults() - before;
    meet.step.store(1, Release);
    // The child comes after the writes: after a cfork the parent's own stack and data are
    // copy-on-write, and their faults would blur its count.
    let me = pcore_current();
    let core = (0..cores_online()).find(|&c| c != me).ok_or("no other core")?;
    let opts = CforkOptions { share_segments: &[private], shares: &[], stack: 0 };
    let child = cfork(core, &opts, child_main, 0).map_err(|_| "cfork failed")?;
    wait_for_child(meet, &child)?;
    if child.join() != Status::Exited(0) {
        return Err("the child did not exit 0");
    }
    if faults < 2 * pages {
        return Err("the parent took fewer faults than the pages it wrote");
    }
    if meet.wrong.load(Acquire) != 0 {
        return Err("the child read values the parent did not write");
    }
    let (shared, private) = (meet.child_faults.load(Acquire), meet.private_faults.load(Acquire));
    if shared != 0 {
        println!("sharedrange: child took {shared} faults in the shared range");
        return Err("pages faulted in by the parent faulted again on the child");
    }
    if private != pages {
        println!("sharedrange: child took {private} faults for {pages} private pages");
        return Err("the private mapping did not fault once per page on the child");
    }
    Ok((shared, private))
}

/// Waits for the child's step 2, or fails if it ended first.
fn wait_for_child(meet: &Meet, child: &Child) -> Result<(), &'static str> {
    let mut spins = 0u64;
    while meet.step.load(Acquire) < 2 {
        spins += 1;
        if spins.is_multiple_of(4096) && !matches!(child.status(), Ok(Status::Running)) {
            return Err("the child ended early");
        }
        core::hint::spin_loop();
    }
    Ok(())
}

/// Reads the first word of `pages` pages from `va`; returns their sum and the faults the
/// reads took. Not inlined: the warm-up call brings its code and stack pages in.
#[inline(never)]
fn read_pages(va: u64, pages: u64) -> (u64, u64) {
    let before = page_faults();
    let mut sum = 0u64;
    for page in 0..pages {
        // SAFETY: the caller passes a mapping of at least `pages` readable pages.
        sum = sum.wrapping_add(unsafe { ((va + page * PAGE) as *const u64).read_volatile() });
    }
    (sum, page_faults() - before)
}

/// The child: wait for the parent's writes, then read both mappings, counting faults.
fn child_main(_: u64) -> i32 {
    let meet = MEET.get();
    while meet.step.load(Acquire) < 1 {
        core::hint::spin_loop();
    }
    let (pages, data) = (meet.pages.load(Acquire), meet.data.load(Acquire));
    // Warm up on the meeting page (already present here) so the measured calls fault on
    // nothing but the pages they read.
    read_pages(meet as *const Meet as u64, 1);
    let (data_sum, data_faults) = read_pages(data, pages);
    let (private_sum, private_faults) = read_pages(PRIVATE_VA, pages);
    let want = (0..pages).fold(0u64, |s, p| s.wrapping_add(p + MAGIC));
    if data_sum != want || private_sum != want {
        meet.wrong.store(1, Release);
    }
    meet.child_faults.store(data_faults, Release);
    meet.private_faults.store(private_faults, Release);
    meet.step.store(2, Release);
    0
}

libatoll::main!(main);
