//! `hello [args]`: says which core it runs on and echoes its arguments.
#![no_std]
#![no_main]

use libatoll::println;

fn main() -> i32 {
    let mut buf = [0u8; 128];
    let args = libatoll::args(&mut buf);
    println!("hello from core {} (args: \"{}\")", libatoll::pcore_current(), args);
    0
}

libatoll::main!(main);
