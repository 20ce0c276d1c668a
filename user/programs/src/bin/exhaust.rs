//! `exhaust [memory]`: asks for more than the kernel can give, and checks each refusal is
//! an error code.
//!
//! Without an argument: shares until creation is refused, then a segment larger than
//! memory. Exits 0; the kernel then frees everything it made.
//!
//! `exhaust kernel`: grows the kernel's own memory (issue M14) until refused, at its
//! quota or its core's reserve (with `kquota=off` on the kernel command line, the
//! reserve): mappings of one page at every page of fresh 1 GiB slot ranges (each range to its cap of 16,384
//! mappings), until `ar_alloc` or `ar_set_seg` says `NoResources` short of a cap. Then
//! `ar_mappings` with room for none counts them without collecting them, and everything
//! goes. Exits 0; a kernel that ran its heap dry would have stopped the core instead.
//!
//! `exhaust quota`: fills its kernel-memory quota so, then runs `exhaust some` (a share,
//! a segment, a range and 2,000 mappings) on its own core while it holds it all: the
//! second program must get them (one program's quota leaves its core room for others).
//! It needs its core's pcore object, so it runs as the kernel test starts it
//! (`make test TEST_FILTER=quota2`); from the shell, which holds that pcore, it says so
//! and exits 2.
//!
//! `exhaust memory`: maps segments as large as the kernel allows and writes every page
//! until memory runs out. The kernel must stop the program with a page fault (reported as
//! out of memory) and stay up; it never returns normally (exit 1 if it does).
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec::Vec;
use libatoll::abi::{ar_kind, ArSetSeg, Error, MappingInfo};
use libatoll::{args, obj, private};
use libatoll::{println, ObjRef};

fn main() -> i32 {
    match args::arg_string().trim() {
        "" => objects(),
        "memory" => memory(),
        "kernel" => kernel(),
        "quota" => quota(),
        "some" => some(),
        _ => {
            println!("usage: exhaust [memory|kernel|quota|some]");
            2
        }
    }
}

/// Shares until `NoResources`, then a 1 TiB segment.
fn objects() -> i32 {
    let root = obj::root_share();
    let mut shares = 0u64;
    let refusal = loop {
        match obj::share_alloc(root) {
            Ok(_) => shares += 1,
            Err(e) => break e,
        }
        if shares > 1_000_000 {
            println!("exhaust: a million shares and no refusal");
            return 1;
        }
    };
    if refusal != Error::NoResources {
        println!("exhaust: share_alloc refused with {refusal:?}, expected NoResources");
        return 1;
    }
    if obj::segment_alloc(root, 1 << 40) != Err(Error::NoResources) {
        println!("exhaust: a 1 TiB segment was not refused");
        return 1;
    }
    println!("exhaust: ok ({shares} shares before NoResources)");
    0
}

/// Most mappings one address range holds (the kernel's `corey::MAX_MAPPINGS`).
const MAX_MAPPINGS: u64 = 16_384;

/// Mappings in fresh slot ranges until the kernel refuses one short of a range's cap.
fn kernel() -> i32 {
    let root = obj::root_share();
    // Room for a whole range's mappings, in user memory taken now (libatoll's buffer for
    // the kernel's words too: this first call leaves it in the heap), so the call after
    // the fill asks only the kernel for memory.
    let mut all = alloc::vec![MappingInfo::default(); MAX_MAPPINGS as usize];
    if let Ok(ar) = obj::ar_alloc(root, ar_kind::SLOT) {
        let _ = obj::ar_mappings(ObjRef::new(root, ar), &mut all);
        let _ = obj::share_delobj(ObjRef::new(root, ar));
    }
    let Some(filled) = fill(root) else {
        return 1;
    };
    if let Some(&first) = filled.ranges.first() {
        let want = if filled.capped > 0 { MAX_MAPPINGS as usize } else { filled.mappings as usize };
        let ar = ObjRef::new(root, first);
        // The count comes back without a buffer to collect into.
        if obj::ar_mappings(ar, &mut []) != Ok(want) {
            println!("exhaust: ar_mappings with no room did not count {want}");
            return 1;
        }
        // And the whole list, with the core at its reserve: the list, or NoResources (the
        // kernel once built three copies of it, infallibly, on its last frames).
        match obj::ar_mappings(ar, &mut all) {
            Ok(n) if n == want => {}
            Err(Error::NoResources) => println!("exhaust: the whole list: NoResources"),
            other => {
                println!("exhaust: ar_mappings of {want} mappings at the reserve: {other:?}");
                return 1;
            }
        }
    }
    let (mappings, capped) = (filled.mappings, filled.capped);
    filled.free(root);
    println!("exhaust: ok ({mappings} mappings, {capped} ranges at the cap, before NoResources)");
    0
}

/// What [`fill`] made.
struct Filled {
    /// The slot ranges, each holding mappings.
    ranges: Vec<u64>,
    /// Mappings made in all.
    mappings: u64,
    /// Ranges that reached their cap of [`MAX_MAPPINGS`].
    capped: u64,
}

impl Filled {
    fn free(self, root: u64) {
        for ar in self.ranges {
            let _ = obj::share_delobj(ObjRef::new(root, ar));
        }
    }
}

/// Grows the kernel's memory for this program: mappings of one page at every page of fresh
/// slot ranges, until `ar_alloc` or `ar_set_seg` says `NoResources` short of a range's cap
/// (its quota, or its core's reserve). `None` (having said why) on any other answer.
fn fill(root: u64) -> Option<Filled> {
    let Ok(seg) = obj::segment_alloc(root, 4096) else {
        println!("exhaust: no segment");
        return None;
    };
    let mut filled = Filled { ranges: Vec::new(), mappings: 0, capped: 0 };
    let refusal = 'more: loop {
        let ar = match obj::ar_alloc(root, ar_kind::SLOT) {
            Ok(ar) => ar,
            Err(e) => break e,
        };
        filled.ranges.push(ar);
        for page in 0..=MAX_MAPPINGS {
            match map_page(root, ar, seg, page) {
                Ok(_) => filled.mappings += 1,
                Err(Error::NoResources) if page == MAX_MAPPINGS => {
                    filled.capped += 1;
                    break;
                }
                Err(e) if page == MAX_MAPPINGS => {
                    println!("exhaust: a range's mapping {} refused with {e:?}", page + 1);
                    return None;
                }
                Err(e) => break 'more e,
            }
            if page == MAX_MAPPINGS {
                println!("exhaust: a range took {} mappings, past its cap", page + 1);
                return None;
            }
        }
        if filled.ranges.len() > 100_000 {
            println!("exhaust: 100,000 ranges and no refusal");
            return None;
        }
    };
    let _ = obj::share_delobj(ObjRef::new(root, seg));
    if refusal != Error::NoResources {
        println!("exhaust: refused with {refusal:?}, expected NoResources");
        return None;
    }
    Some(filled)
}

/// Maps the first page of segment `seg` at page `page` of range `ar` (both in `root`).
fn map_page(root: u64, ar: u64, seg: u64, page: u64) -> Result<u64, Error> {
    let args = ArSetSeg {
        ar: [root, ar],
        va: page * 4096,
        seg: [root, seg],
        first_page: 0,
        pages: 1,
        flags: 0,
    };
    obj::ar_set_seg(&args)
}

/// Mappings this core must still grant another program while one sits at its quota.
const SOME_MAPPINGS: u64 = 2_000;

/// `exhaust quota` (issue M14): fills its kernel-memory quota as `exhaust kernel` does,
/// and while it holds all of it runs `exhaust some` on its own core, a new program with a
/// quota of its own, which must be granted its objects and mappings: one program at its
/// quota leaves its core room for the others. (Without per-program quotas the first
/// drained the core to its reserve, and the second was refused.)
fn quota() -> i32 {
    let root = obj::root_share();
    // The pcore object that starts the second program, made first: nothing is given back
    // before the second program runs.
    let me = libatoll::pcore_current();
    let pcore = match obj::pcore_alloc(root, me) {
        Ok(id) => ObjRef::new(root, id),
        Err(Error::NotPermitted) => {
            // One pcore object a core, and whoever started this program holds this core's.
            println!(
                "exhaust quota: core {me}'s pcore is held by the program that started this one \
                 (the shell's `run` holds it), so the second program cannot start here; the \
                 kernel test starts it alone: make test TEST_FILTER=quota2"
            );
            return 2;
        }
        Err(e) => {
            println!("exhaust: pcore_alloc refused with {e:?}");
            return 1;
        }
    };
    let Some(filled) = fill(root) else {
        return 1;
    };
    let status = obj::program_run(pcore, "exhaust some");
    let _ = obj::share_delobj(pcore);
    let mappings = filled.mappings;
    filled.free(root);
    match status {
        Ok(libatoll::Status::Exited(0)) => {
            println!("exhaust: ok (a program at its quota after {mappings} mappings; the next on its core was granted {SOME_MAPPINGS})");
            0
        }
        other => {
            println!("exhaust: with a program at its quota ({mappings} mappings), the next on its core ended {other:?}");
            1
        }
    }
}

/// `exhaust some`: a share, a segment, a slot range and [`SOME_MAPPINGS`] mappings in it;
/// exit 0 if all were granted.
fn some() -> i32 {
    let root = obj::root_share();
    let made = (|| {
        obj::share_alloc(root)?;
        let seg = obj::segment_alloc(root, 4096)?;
        let ar = obj::ar_alloc(root, ar_kind::SLOT)?;
        for page in 0..SOME_MAPPINGS {
            map_page(root, ar, seg, page)?;
        }
        Ok::<(), Error>(())
    })();
    match made {
        Ok(()) => 0,
        Err(e) => {
            println!("exhaust some: refused with {e:?}");
            1
        }
    }
}

/// Segments as large as the kernel grants (it refuses one larger than the free memory,
/// but not two that together are), each page written, until a page cannot be had.
fn memory() -> i32 {
    let mut touched = 0u64;
    for _ in 0..64 {
        // The largest size the kernel grants (a segment may be as large as the core's free
        // memory), found with throw-away segments: halve until one is granted, then search
        // up to the page between it and twice it. Writing all of it then runs the core out
        // of memory, however much is free (a power of two alone could fit with room to
        // spare). Each map takes fresh address space, so only the size that fits is mapped.
        let root = obj::root_share();
        let grants = |bytes: u64| match obj::segment_alloc(root, bytes) {
            Ok(id) => {
                let _ = obj::share_delobj(libatoll::ObjRef::new(root, id));
                Ok(())
            }
            Err(e) => Err(e),
        };
        let mut bytes = 1u64 << 40;
        loop {
            match grants(bytes) {
                Ok(()) => break,
                Err(_) if bytes > 4096 => bytes /= 2,
                Err(e) => {
                    println!("exhaust: no segment of even one page: {e:?}");
                    return 1;
                }
            }
        }
        // Granted: `bytes`; refused: twice it (or never tried, at 1 TiB: also refused).
        let (mut granted, mut refused) = (bytes / 4096, bytes / 4096 * 2);
        while refused - granted > 1 {
            let middle = (granted + refused) / 2;
            match grants(middle * 4096) {
                Ok(()) => granted = middle,
                Err(_) => refused = middle,
            }
        }
        let bytes = granted * 4096;
        let mapping = match private::map_new(bytes) {
            Ok(m) => m,
            Err(e) => {
                println!("exhaust: mapping {bytes} bytes: {e:?}");
                return 1;
            }
        };
        println!("exhaust: writing {} KiB ({touched} pages so far)", mapping.bytes >> 10);
        let mut va = mapping.va;
        while va < mapping.va + mapping.bytes {
            // SAFETY: a fresh read-write mapping of our own root range.
            unsafe { core::ptr::write_volatile(va as *mut u64, va) };
            touched += 1;
            va += 4096;
        }
    }
    println!("exhaust: wrote {touched} pages and memory never ran out");
    1
}

libatoll::main!(main);
