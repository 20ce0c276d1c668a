//! `exhaust`: asks for more than the kernel can give — shares until creation is refused,
//! a segment larger than memory — and checks each refusal is an error code. Exits 0; the
//! kernel then frees everything it made.
#![no_std]
#![no_main]

use libatoll::abi::Error;
use libatoll::obj;
use libatoll::println;

fn main() -> i32 {
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

libatoll::main!(main);
