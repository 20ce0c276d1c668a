//! `sysfuzz [--seed S] [--calls N] [--cores LIST]`: random system calls — random numbers
//! (0..64, so past the last call too), object ids (its own and random ones), lengths and
//! pointers (null, own stack, own code, unmapped, kernel half, non-canonical, huge) — N
//! per core (default 10000), then `sysfuzz: N calls, kernel alive`. Every call must come
//! back with a result; none may take the kernel down. It never makes the calls that
//! would stop it or the machine: `exit`, `poweroff`, `kernel_command`, `program_run`,
//! `pcore_halt`, `pcore_run`. Without `--cores` it runs on this core only (the kernel's
//! test runs one copy per core); each core's seed is S plus its index in the list.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};
use libatoll::abi::nr;
use libatoll::cores::spread;
use libatoll::obj::{self, root_share, share_delobj};
use libatoll::{args, println, syscall5, CforkOptions, ObjRef};

const HELP: &str =
    "usage: sysfuzz [--seed S] [--calls N] [--cores LIST]   (N calls per core; default 10000, this core)";

/// The plan, set before any cfork so every core reads it from its copy.
static SEED: AtomicU64 = AtomicU64::new(0);
static CALLS: AtomicU64 = AtomicU64::new(10_000);

/// Calls never made: they end the fuzzer, the machine, or start other programs.
const NEVER: [u64; 6] =
    [nr::EXIT, nr::POWEROFF, nr::KERNEL_COMMAND, nr::PROGRAM_RUN, nr::PCORE_HALT, nr::PCORE_RUN];
/// Calls that make an object: their results join the pool of ids.
const MAKERS: [u64; 7] = [
    nr::SHARE_ALLOC,
    nr::SEGMENT_ALLOC,
    nr::SEGMENT_COPY,
    nr::AR_ALLOC,
    nr::FILE_OPEN,
    nr::DEVICE_ALLOC,
    nr::PCORE_ALLOC,
];
/// (call, argument) of the buffers the kernel writes into.
const OUT_BUFFERS: [(u64, usize); 8] = [
    (nr::ARGS, 0),
    (nr::FILE_LIST, 0),
    (nr::CONSOLE_READ, 0),
    (nr::DEVICE_LIST, 0),
    (nr::LOCALITY_GET, 1),
    (nr::AR_MAPPINGS, 2),
    (nr::DEVICE_STAT, 2),
    (nr::SEGMENT_READ, 3),
];
/// Ids the fuzzer made and may pass back (the oldest is deleted when it is full).
const POOL: usize = 16;

/// xorshift64*: small, fast, reproducible from the seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// One core's fuzzer: its generator, scratch memory and pool of ids.
struct Fuzzer {
    rng: Rng,
    /// Where writable pointers point: the kernel may write here, never into live data.
    scratch: u64,
    root: u64,
    /// The root range and everything it maps (image, stack, heap): never passed as an
    /// id, so no call can unmap or shrink the fuzzer under its own feet.
    protected: Vec<u64>,
    pool: [u64; POOL],
    pooled: usize,
}

impl Fuzzer {
    /// An argument drawn from the values that break kernels.
    fn argument(&mut self) -> u64 {
        let r = &mut self.rng;
        match r.next() % 12 {
            0 => 0,
            1 => r.next() % 64,
            2 => self.scratch + r.next() % 1024,
            3 => 0x40_0000 + r.next() % 0x4000,
            4 => 0x3000_0000 + r.next() % 0x10_0000,
            5 => 0xffff_8000_0000_0000 + r.next() % (1 << 40),
            6 => 0x0000_8000_0000_0000 - r.next() % 0x2000,
            7 => 0x8000_0000_0000_0000 | r.next(),
            8 => u64::MAX - r.next() % 16,
            9 => self.root,
            10 if self.pooled > 0 => self.pool[(r.next() % self.pooled as u64) as usize],
            _ => r.next(),
        }
    }

    /// Remembers an id the kernel made for us; deletes the oldest when the pool is full.
    fn keep(&mut self, id: u64) {
        if self.pooled == POOL {
            let _ = share_delobj(ObjRef::new(self.root, self.pool[0]));
            self.pool.copy_within(1.., 0);
            self.pooled -= 1;
        }
        self.pool[self.pooled] = id;
        self.pooled += 1;
    }

    /// Makes one random call; returns whether it came back as an error.
    fn call(&mut self) -> bool {
        let number = match self.rng.next() % 8 {
            0 => self.rng.next(),
            _ => self.rng.next() % 64,
        };
        if NEVER.contains(&number) {
            return false;
        }
        let mut a = [0u64; 5];
        for x in a.iter_mut() {
            *x = self.argument();
        }
        // Lengths of buffers the kernel writes into stay inside the scratch area, and
        // console writes stay short so the log stays readable.
        match number {
            nr::WRITE => a[1] %= 8,
            nr::ARGS | nr::FILE_LIST | nr::CONSOLE_READ => a[1] %= 2048,
            nr::AR_MAPPINGS => a[3] %= 32,
            nr::DEVICE_LIST => a[1] %= 32,
            nr::SEGMENT_READ => a[4] %= 2048,
            _ => {}
        }
        for x in a.iter_mut() {
            if self.protected.contains(x) {
                *x = 0;
            }
        }
        // An object id is a number that may happen to be one of our own addresses: never
        // let the kernel write through one.
        for &(call, arg) in &OUT_BUFFERS {
            if call == number && (a[arg] == self.root || self.pool[..self.pooled].contains(&a[arg]))
            {
                a[arg] = self.scratch;
            }
        }
        let result = syscall5(number, a[0], a[1], a[2], a[3], a[4]);
        if let Ok(id) = result {
            // Only ids made in the root share: those are ours to delete later.
            if MAKERS.contains(&number) && a[0] == self.root && id != 0 {
                self.keep(id);
            }
        }
        result.is_err()
    }
}

fn main() -> i32 {
    let line = args::arg_string();
    let mut words = line.split_whitespace();
    let mut cores = alloc::vec![libatoll::pcore_current()];
    SEED.store(0x5eed + libatoll::pcore_current() as u64, Ordering::Relaxed);
    while let Some(word) = words.next() {
        let ok = match word {
            "--seed" => args::number(words.next(), 0..=u64::MAX)
                .map(|v| SEED.store(v, Ordering::Relaxed))
                .is_some(),
            "--calls" => args::number(words.next(), 0..=u64::MAX)
                .map(|v| CALLS.store(v, Ordering::Relaxed))
                .is_some(),
            "--cores" => args::cores_value(words.next()).map(|c| cores = c).is_some(),
            _ => false,
        };
        if !ok {
            println!("{HELP}");
            return if word == "--help" { 0 } else { 2 };
        }
    }
    let statuses = match spread(&cores, &CforkOptions::default(), fuzz) {
        Ok(s) => s,
        Err(e) => {
            println!("sysfuzz: cfork failed: {e:?}");
            return 1;
        }
    };
    if let Some((core, status)) = cores.iter().zip(&statuses).find(|(_, s)| !s.ok()) {
        println!("sysfuzz: the fuzzer on core {core} ended {status:?}");
        return 1;
    }
    let total = CALLS.load(Ordering::Relaxed) * cores.len() as u64;
    println!("sysfuzz: {total} calls, kernel alive");
    0
}

/// Fuzzes on this core (`i`: its index in the list, added to the seed).
fn fuzz(i: u64) -> i32 {
    let seed = SEED.load(Ordering::Relaxed).wrapping_add(i);
    let calls = CALLS.load(Ordering::Relaxed);
    println!("sysfuzz: core {} seed {seed} calls {calls}", libatoll::pcore_current());
    // Writable pointers point into this buffer (pointer offsets < 1024, lengths < 2048
    // for calls that write, at most 64 devices or mappings of 48 bytes), never at live
    // variables.
    let scratch = [b'.'; 4096];
    let mut f = Fuzzer {
        // Odd: never the all-zero state.
        rng: Rng(seed.wrapping_mul(2).wrapping_add(1)),
        scratch: scratch.as_ptr() as u64,
        root: root_share(),
        protected: own_objects(),
        pool: [0; POOL],
        pooled: 0,
    };
    let mut errors = 0u64;
    for _ in 0..calls {
        if f.call() {
            errors += 1;
        }
    }
    core::hint::black_box(&scratch);
    for &id in &f.pool[..f.pooled] {
        let _ = share_delobj(ObjRef::new(f.root, id));
    }
    println!(
        "sysfuzz: core {}: {calls} calls ({errors} returned errors)",
        libatoll::pcore_current()
    );
    0
}

/// The ids of the root range and of everything it maps.
fn own_objects() -> Vec<u64> {
    let ar = obj::root_ar_ref();
    let mut ids: Vec<u64> =
        obj::ar_mappings_all(ar).unwrap_or_default().iter().map(|m| m.target).collect();
    ids.push(ar.object);
    ids
}

libatoll::main!(main);
