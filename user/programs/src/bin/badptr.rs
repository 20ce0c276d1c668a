//! `badptr`: passes wild pointers and lengths to system calls. Every one must come back as
//! an error code (`BadAddress`/`NoSuchCall`), never a kernel fault. Prints `badptr: ok`.
#![no_std]
#![no_main]

use libatoll::abi::{nr, Error};
use libatoll::{println, syscall3};

fn main() -> i32 {
    let cases: [(u64, u64, u64, Error); 7] = [
        (nr::WRITE, 0, 10, Error::BadAddress), // null
        (nr::WRITE, 0xffff_8000_0000_0000, 8, Error::BadAddress), // kernel half
        (nr::WRITE, 0x7fff_ffff_fff0, 0x100, Error::BadAddress), // crosses the user end
        (nr::WRITE, 0x1000, u64::MAX, Error::BadAddress), // length overflows
        (nr::WRITE, 0x3000_0000, 16, Error::BadAddress), // unmapped user memory
        (nr::ARGS, 0x40_0000, 16, Error::BadAddress), // read-only code page
        (9999, 0, 0, Error::NoSuchCall),       // no such call
    ];
    for (i, &(number, a, b, expected)) in cases.iter().enumerate() {
        let got = syscall3(number, a, b, 0);
        if got != Err(expected) {
            println!("badptr: case {i}: expected {expected:?}, got {got:?}");
            return 1;
        }
    }
    println!("badptr: ok");
    0
}

libatoll::main!(main);
