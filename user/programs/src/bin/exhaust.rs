//! `exhaust [memory]`: asks for more than the kernel can give, and checks each refusal is
//! an error code.
//!
//! Without an argument: shares until creation is refused, then a segment larger than
//! memory. Exits 0; the kernel then frees everything it made.
//!
//! `exhaust memory`: maps segments as large as the kernel allows and writes every page
//! until memory runs out. The kernel must stop the program with a page fault (reported as
//! out of memory) and stay up; it never returns normally (exit 1 if it does).
#![no_std]
#![no_main]

use libatoll::abi::Error;
use libatoll::println;
use libatoll::{args, obj, private};

fn main() -> i32 {
    match args::arg_string().trim() {
        "" => objects(),
        "memory" => memory(),
        _ => {
            println!("usage: exhaust [memory]");
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
