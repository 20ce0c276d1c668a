//! `memclone [--mb N]` (Corey §8.2, Figure 7): allocate N MiB (default 100) and touch every
//! page, so each page costs one soft fault that fills it with zeroes; prints cycles per page.
//! Run on several cores with `run -c LIST memclone`: each copy has its own address space
//! and its own segment — Figure 7's "separate address spaces" configuration. (The shared
//! address-range configurations need ranges shared across cores, which come with cfork.)
#![no_std]
#![no_main]

use libatoll::abi::{map, ArSetSeg};
use libatoll::{obj, println, ObjRef};

const PAGE: u64 = 4096;
/// Where the memory is mapped (1 GiB, clear of the program and its stack).
const AT: u64 = 0x4000_0000;
const HELP: &str =
    "usage: memclone [--mb N]   (N MiB per core, default 100; run -c LIST for more cores)";

fn main() -> i32 {
    let mut buf = [0u8; 64];
    let mut mb = 100u64;
    let mut words = libatoll::args(&mut buf).split_whitespace();
    while let Some(word) = words.next() {
        match (word, words.next().and_then(|v| v.parse().ok())) {
            ("--mb", Some(v)) if (1..=1024).contains(&v) => mb = v,
            _ => {
                println!("{HELP}");
                return if word == "--help" { 0 } else { 2 };
            }
        }
    }
    let pages = mb * (1 << 20) / PAGE;
    let root = obj::root_share();
    let seg = match obj::segment_alloc(root, pages * PAGE) {
        Ok(id) => id,
        Err(e) => {
            println!("memclone: cannot get {mb} MiB on this core: {e:?}");
            return 1;
        }
    };
    let set = ArSetSeg {
        ar: [root, obj::root_ar()],
        va: AT,
        seg: [root, seg],
        first_page: 0,
        pages,
        flags: map::WRITE,
    };
    if obj::ar_set_seg(&set).is_err() {
        println!("memclone: ar_set_seg failed");
        return 1;
    }
    let faults = obj::page_faults();
    let start = tsc();
    for page in 0..pages {
        // SAFETY: the root range maps [AT, AT + pages * PAGE) read-write.
        unsafe { ((AT + page * PAGE) as *mut u64).write_volatile(page) };
    }
    let cycles = tsc() - start;
    if obj::page_faults() - faults != pages {
        println!("memclone: {} faults for {pages} pages", obj::page_faults() - faults);
        return 1;
    }
    let _ = obj::share_delobj(ObjRef { share: root, object: seg });
    println!(
        "RESULT {{\"experiment\":\"memclone\",\"system\":\"atoll\",\"config\":\"separate\",\"core\":{},\"mb\":{mb},\"metric\":\"cycles_per_page\",\"value\":{},\"unit\":\"cycles\"}}",
        libatoll::pcore_current(),
        cycles / pages
    );
    0
}

fn tsc() -> u64 {
    // SAFETY: RDTSC has no side effects.
    unsafe { core::arch::x86_64::_rdtsc() }
}

libatoll::main!(main);
