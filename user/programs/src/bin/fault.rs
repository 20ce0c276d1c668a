//! `fault`: writes to an unmapped address. The kernel must stop this program, report the
//! fault, and keep the core (and every other core) going.
#![no_std]
#![no_main]

fn main() -> i32 {
    libatoll::println!("fault: writing to address 0x10");
    // SAFETY: deliberately not: the point is the page fault.
    unsafe { core::ptr::write_volatile(0x10 as *mut u64, 1) };
    libatoll::println!("fault: still alive (the write did not fault)");
    1
}

libatoll::main!(main);
