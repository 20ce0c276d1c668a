//! `remaptest`: a page remapped while another core holds its translation (issue M9: the
//! shootdown after `ar_set_seg` invalidates just the pages it unmapped, at the address the
//! range has in each core's address space). For a slot range spliced into the root range,
//! and for the root range itself: a thread on core 1 reads the page in a loop (its TLB
//! holds the translation); core 0 maps another segment's page at that address; every read
//! core 1 starts after the call returned must see the new page. A shootdown that named the
//! wrong address would leave core 1 reading the old frame (QEMU keeps TLB entries until
//! they are invalidated). Prints `remaptest: ok`, `remaptest: FAIL <why>` (exit 1), or
//! `remaptest: skipped (1 core)`.
#![no_std]
#![no_main]

use core::sync::atomic::{AtomicU64, Ordering::*};
use libatoll::abi::{map, ArSetSeg};
use libatoll::obj::{self, root_share, segment_alloc};
use libatoll::thread::Builder;
use libatoll::{println, shared};

const PAGE: u64 = 4096;
/// Where the root-range case maps its page (257 GiB, clear of everything else).
const ROOT_VA: u64 = 0x40_4000_0000;
/// Where a new segment's page is written before it is mapped at the tested address.
const STAGING_VA: u64 = 0x40_8000_0000;
const OLD: u64 = 0x01d0_01d0;
const NEW: u64 = 0x0e70_0e70;
const HELP: &str = "usage: remaptest   (no arguments; needs 2 cores)";

/// The reader's state: the address it reads, the reads it made, what the last one saw.
static TARGET: AtomicU64 = AtomicU64::new(0);
static READS: AtomicU64 = AtomicU64::new(0);
static SEEN: AtomicU64 = AtomicU64::new(0);
static STOP: AtomicU64 = AtomicU64::new(0);

fn main() -> i32 {
    libatoll::cores::two_core_test("remaptest", Some(HELP), || {
        slot_case().and_then(|()| root_case())
    })
}

libatoll::main!(main);

/// Maps page 0 of segment `seg` at `va` of range `ar` (share, object), read-write.
fn map_page(ar: [u64; 2], va: u64, seg: u64) -> Result<(), &'static str> {
    let seg = [root_share(), seg];
    let set = ArSetSeg { ar, va, seg, first_page: 0, pages: 1, flags: map::WRITE };
    obj::ar_set_seg(&set).map(|_| ()).map_err(|_| "ar_set_seg failed")
}

/// The root range, as ⟨share, object⟩.
fn root_ar() -> [u64; 2] {
    let root = obj::root_ar_ref();
    [root.share, root.object]
}

/// A fresh one-page segment holding `value` in its first word (written through a mapping
/// at the staging address, which the next call replaces).
fn segment_holding(value: u64) -> Result<u64, &'static str> {
    let seg = segment_alloc(root_share(), PAGE).map_err(|_| "segment_alloc failed")?;
    map_page(root_ar(), STAGING_VA, seg)?;
    // SAFETY: just mapped read-write.
    unsafe { (STAGING_VA as *mut u64).write_volatile(value) };
    Ok(seg)
}

/// A thread on core 1 reads `va` (which holds `OLD`) until stopped; once it has seen `OLD`,
/// `remap` runs here; then every read core 1 starts afterwards must see `NEW`.
fn check(va: u64, remap: &dyn Fn() -> Result<(), &'static str>) -> Result<(), &'static str> {
    TARGET.store(va, Release);
    READS.store(0, Release);
    SEEN.store(0, Release);
    STOP.store(0, Release);
    let reader = Builder::new()
        .core(1)
        .affinity(1 << 1)
        .spawn(|| {
            while STOP.load(Acquire) == 0 {
                let va = TARGET.load(Acquire);
                // SAFETY: `va` stays mapped (to one page or the other) while this runs.
                let v = unsafe { (va as *const u64).read_volatile() };
                SEEN.store(v, Release);
                READS.fetch_add(1, Release);
            }
            0
        })
        .map_err(|_| "no thread on core 1")?;
    let wait_reads = |n: u64| {
        let start = libatoll::rdtsc();
        while READS.load(Acquire) < n {
            if libatoll::rdtsc() - start > 20_000_000_000 {
                return false;
            }
            core::hint::spin_loop();
        }
        true
    };
    let result = (|| {
        if !wait_reads(1) || SEEN.load(Acquire) != OLD {
            return Err("core 1 did not read the first page");
        }
        remap()?;
        // A read that started after the call returned: two more than were counted then.
        let after = READS.load(Acquire) + 2;
        if !wait_reads(after) {
            return Err("core 1 stopped reading");
        }
        match SEEN.load(Acquire) {
            NEW => Ok(()),
            OLD => Err("core 1 read the old page through a stale TLB entry"),
            _ => Err("core 1 read neither page"),
        }
    })();
    STOP.store(1, Release);
    let _ = reader.join();
    result
}

/// The page in a slot range spliced into the root range (the address the shootdown must
/// name is the splice's plus the page's offset in the slot).
fn slot_case() -> Result<(), &'static str> {
    let old = segment_holding(OLD)?;
    let new = segment_holding(NEW)?;
    let window = shared::slot_vas(1).map_err(|_| "no slot addresses")?;
    let slot = shared::slot_alloc().map_err(|_| "ar_alloc(SLOT) failed")?;
    shared::splice(window, slot).map_err(|_| "ar_set_ar failed")?;
    // Page 3 of the slot: an offset the shootdown must add to the splice address.
    let offset = 3 * PAGE;
    let slot_ar = [root_share(), slot];
    map_page(slot_ar, offset, old)?;
    check(window + offset, &|| map_page(slot_ar, offset, new)).map_err(|e| {
        println!("remaptest: slot range: {e}");
        "slot range"
    })
}

/// The page in the root range itself.
fn root_case() -> Result<(), &'static str> {
    let old = segment_holding(OLD)?;
    let new = segment_holding(NEW)?;
    map_page(root_ar(), ROOT_VA, old)?;
    check(ROOT_VA, &|| map_page(root_ar(), ROOT_VA, new)).map_err(|e| {
        println!("remaptest: root range: {e}");
        "root range"
    })
}
