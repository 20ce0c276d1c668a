//! `sysfuzz [--seed S] [--calls N]`: random system calls — random numbers, ids, lengths and
//! pointers (null, own stack, own code, unmapped, kernel half, non-canonical, huge) — then
//! `sysfuzz: N calls, kernel alive`. Every call must come back with a result; none may
//! take the kernel down. `exit` is the one call it never makes.
#![no_std]
#![no_main]

use libatoll::abi::nr;
use libatoll::{println, syscall3};

const HELP: &str = "usage: sysfuzz [--seed S] [--calls N]   (calls on this core; default 10000)";

/// xorshift64*: small, fast, reproducible from the seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// An argument drawn from the values that break kernels.
    fn argument(&mut self, scratch: u64) -> u64 {
        match self.next() % 10 {
            0 => 0,
            1 => self.next() % 64,
            2 => scratch + self.next() % 1024,
            3 => 0x40_0000 + self.next() % 0x4000,
            4 => 0x3000_0000 + self.next() % 0x10_0000,
            5 => 0xffff_8000_0000_0000 + self.next() % (1 << 40),
            6 => 0x0000_8000_0000_0000 - self.next() % 0x2000,
            7 => 0x8000_0000_0000_0000 | self.next(),
            8 => u64::MAX - self.next() % 16,
            _ => self.next(),
        }
    }
}

fn main() -> i32 {
    let mut buf = [0u8; 128];
    let args = libatoll::args(&mut buf);
    let (mut seed, mut calls) = (0x5eed_u64 + libatoll::pcore_current() as u64, 10_000u64);
    let mut words = args.split_whitespace();
    while let Some(word) = words.next() {
        match (word, words.next().and_then(|v| v.parse().ok())) {
            ("--seed", Some(v)) => seed = v,
            ("--calls", Some(v)) => calls = v,
            _ => {
                println!("{HELP}");
                return if word == "--help" { 0 } else { 2 };
            }
        }
    }
    println!("sysfuzz: core {} seed {seed} calls {calls}", libatoll::pcore_current());
    let mut rng = Rng(seed.wrapping_mul(2).wrapping_add(1)); // odd: never the all-zero state
                                                             // Writable pointers point into this buffer (the kernel may write up to 256 bytes of
                                                             // arguments there), never at live variables.
    let scratch = [b'.'; 2048];
    let scratch_at = scratch.as_ptr() as u64;
    let mut errors = 0u64;
    for _ in 0..calls {
        let number = match rng.next() % 8 {
            0 => rng.next(),
            n => n % 6,
        };
        if number == nr::EXIT {
            continue;
        }
        let (a, b, c) =
            (rng.argument(scratch_at), rng.argument(scratch_at), rng.argument(scratch_at));
        // Keep console writes short so the log stays readable.
        let b = if number == nr::WRITE { b % 8 } else { b };
        if syscall3(number, a, b, c).is_err() {
            errors += 1;
        }
    }
    core::hint::black_box(&scratch);
    println!("sysfuzz: {calls} calls, kernel alive ({errors} returned errors)");
    0
}

libatoll::main!(main);
