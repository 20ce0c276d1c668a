//! `longcall MIB`: maps a segment of `MIB` MiB (1 to 64; anything else prints the usage
//! and exits 2), writes every page, then copies it with one `segment_copy(PLAIN)`: a
//! single system call whose work grows with its argument. The
//! kernel test `user.long_call_answers_shootdowns` checks that the core answers a TLB
//! shootdown while it is inside that call. Exits 0 (1 if it could not set up).
#![no_std]
#![no_main]

use libatoll::abi::copy_mode;
use libatoll::{args, obj, println, private, ObjRef};

fn main() -> i32 {
    let line = args::arg_string();
    let Some(mib) = args::number(line.split_whitespace().next(), 1..=64) else {
        println!("usage: longcall MIB   (1 to 64: the segment copied in one call)");
        return 2;
    };
    let Ok(m) = private::map_new(mib << 20) else {
        println!("longcall: no room for {mib} MiB");
        return 1;
    };
    let mut va = m.va;
    while va < m.va + m.bytes {
        // SAFETY: a fresh read-write mapping of our own root range.
        unsafe { core::ptr::write_volatile(va as *mut u64, va) };
        va += 4096;
    }
    let Some(seg) = private::named(m.segment) else { return 1 };
    let root = obj::root_share();
    match obj::segment_copy(root, seg, copy_mode::PLAIN) {
        Ok(copy) => {
            let _ = obj::share_delobj(ObjRef::new(root, copy));
            0
        }
        Err(e) => {
            println!("longcall: segment_copy: {e:?}");
            1
        }
    }
}

libatoll::main!(main);
