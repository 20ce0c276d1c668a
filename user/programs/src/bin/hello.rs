//! `hello [args]`: says which core it runs on and echoes its arguments.
#![no_std]
#![no_main]

use libatoll::println;

fn main() -> i32 {
    let mut buf = [0u8; 128];
    let args = libatoll::args(&mut buf);
    let core = libatoll::pcore_current();
    let here = libatoll::locality_get(core).unwrap_or_default();
    println!(
        "hello from core {} (package {}, node {}; args: \"{}\")",
        core, here.package, here.node, args
    );
    // The SKB answers for other cores too; a core that does not exist is an error.
    if libatoll::locality_get(usize::MAX).is_ok() {
        println!("hello: locality_get accepted a core that does not exist");
        return 1;
    }
    0
}

libatoll::main!(main);
