//! `spin`: loops forever without a system call. The kernel's time limit must stop it.
#![no_std]
#![no_main]

fn main() -> i32 {
    let mut x = 0u64;
    loop {
        x = core::hint::black_box(x.wrapping_add(1));
    }
}

libatoll::main!(main);
