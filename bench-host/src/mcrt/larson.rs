//! mcrt_larson (McRT Figure 11, §3.2.4): the Larson benchmark (Larson & Krishnan, ISMM
//! 1998) on McRT-Malloc, lock-based against non-blocking, on McRT threads against OS
//! threads as the software threads outnumber the CPUs, with the system allocator and
//! mimalloc as peers.
//!
//! Each thread owns [`SLOTS`] slots of random-size objects (16 to 1024 bytes) and
//! repeatedly frees a random slot's object and allocates a new one (one op = one free plus
//! one allocation, each object touched). After every round of [`ROUND`] ops it hands
//! [`HANDOFF`] of its objects to the next thread and takes over those the previous thread
//! handed it, so a share of the frees are remote. A fixed total of ops is split among the
//! threads; ops/s is that total over the wall-clock time, the median of three runs.
//!
//! - McRT threads: `cpus()` pinned processors, N McRT threads (work stealing), each
//!   yielding every [`YIELD_EVERY`] ops (cooperative scheduling: never inside the
//!   allocator's critical sections).
//! - OS threads: N `std::thread`s, preempted by Linux wherever they are.
//! - Allocators: McRT-Malloc `locked` and `nonblocking` (`mcrt::malloc::McrtMalloc`,
//!   version set before the threads start), `system` (`std::alloc::System`), `mimalloc`
//!   (`mimalloc::MiMalloc`), each called directly as a `GlobalAlloc`.

use super::{cpus, line, median_of};
use mcrt::hosted::LinuxHost;
use mcrt::malloc::{McrtMalloc, Version};
use std::alloc::{GlobalAlloc, Layout, System};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Objects each thread holds.
const SLOTS: usize = 1000;
/// Ops between hand-overs.
const ROUND: usize = 1000;
/// Objects handed to the next thread each round.
const HANDOFF: usize = SLOTS / 8;
/// Ops between yields of a McRT thread.
const YIELD_EVERY: usize = 100;
/// Smallest and largest object.
const MIN_SIZE: usize = 16;
const MAX_SIZE: usize = 1024;
/// Software thread counts.
const THREADS: [usize; 5] = [1, 2, 4, 8, 16];

/// An object: its address and size (0: an empty slot).
type Obj = (usize, usize);

/// The allocators compared.
#[derive(Clone, Copy, PartialEq)]
enum Allocator {
    Locked,
    NonBlocking,
    System,
    Mimalloc,
}

impl Allocator {
    const ALL: [Allocator; 4] =
        [Allocator::Locked, Allocator::NonBlocking, Allocator::System, Allocator::Mimalloc];

    fn name(self) -> &'static str {
        match self {
            Allocator::Locked => "mcrt-malloc-locked",
            Allocator::NonBlocking => "mcrt-malloc-nonblocking",
            Allocator::System => "system",
            Allocator::Mimalloc => "mimalloc",
        }
    }
}

/// Who runs the software threads.
#[derive(Clone, Copy, PartialEq)]
enum Threads {
    Mcrt,
    Os,
}

impl Threads {
    fn name(self) -> &'static str {
        match self {
            Threads::Mcrt => "mcrt-threads",
            Threads::Os => "os-threads",
        }
    }
}

static MCRT: McrtMalloc = McrtMalloc;
static SYSTEM: System = System;
static MIMALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The experiment's RESULT lines.
pub fn run(quick: bool) -> Vec<String> {
    let total_ops = if quick { 20_000 } else { 4_000_000 };
    let trials = if quick { 1 } else { 3 };
    let cores = cpus();
    let mut out = Vec::new();
    for threads in [Threads::Mcrt, Threads::Os] {
        for n in THREADS {
            let config = format!("{}/{n}", threads.name());
            let mut rate = [0.0; 4];
            for (k, a) in Allocator::ALL.into_iter().enumerate() {
                rate[k] = median_of(trials, || ops_per_s(threads, a, n, total_ops, cores));
                out.push(line(
                    "mcrt_larson",
                    a.name(),
                    Some(&config),
                    cores,
                    "ops_per_s",
                    rate[k],
                    "ops/s",
                ));
            }
            for k in 0..2 {
                let name = Allocator::ALL[k].name();
                for (peer, r) in [("system", rate[2]), ("mimalloc", rate[3])] {
                    let metric = format!("ratio_to_{peer}");
                    out.push(line(
                        "mcrt_larson",
                        name,
                        Some(&config),
                        cores,
                        &metric,
                        rate[k] / r,
                        "x",
                    ));
                }
            }
        }
    }
    out
}

/// One run: `n` software threads of kind `threads` on allocator `a`; ops per second.
fn ops_per_s(threads: Threads, a: Allocator, n: usize, total_ops: usize, cores: usize) -> f64 {
    match a {
        Allocator::Locked => mcrt::malloc::set_version(Version::Locked),
        Allocator::NonBlocking => mcrt::malloc::set_version(Version::NonBlocking),
        _ => {}
    }
    let per_thread = total_ops / n;
    let secs = match a {
        Allocator::Locked | Allocator::NonBlocking => timed(threads, &MCRT, n, per_thread, cores),
        Allocator::System => timed(threads, &SYSTEM, n, per_thread, cores),
        Allocator::Mimalloc => timed(threads, &MIMALLOC, n, per_thread, cores),
    };
    (per_thread * n) as f64 / secs
}

/// The mailboxes: thread `i` takes from box `i` and gives to box `i + 1`.
struct Mail(Vec<AtomicPtr<Vec<Obj>>>);

impl Mail {
    /// Frees whatever is left in the boxes.
    fn drain<A: GlobalAlloc>(&self, a: &A) {
        for b in &self.0 {
            let p = b.swap(null_mut(), Ordering::Acquire);
            if !p.is_null() {
                // SAFETY: boxes hold `Box<Vec<Obj>>`s put there by `larson`.
                let objs = unsafe { Box::from_raw(p) };
                free_all(a, &objs);
            }
        }
    }
}

/// Runs `n` threads of Larson on `a`, each doing `ops` ops; seconds taken.
fn timed<A: GlobalAlloc + Sync>(
    threads: Threads,
    a: &'static A,
    n: usize,
    ops: usize,
    cores: usize,
) -> f64 {
    let mail = Arc::new(Mail((0..n).map(|_| AtomicPtr::new(null_mut())).collect()));
    match threads {
        Threads::Os => {
            let start = Instant::now();
            let hs: Vec<_> = (0..n)
                .map(|i| {
                    let mail = mail.clone();
                    std::thread::spawn(move || larson(a, &mail, i, ops, None))
                })
                .collect();
            for h in hs {
                h.join().expect("larson thread");
            }
            let secs = start.elapsed().as_secs_f64();
            mail.drain(a);
            secs
        }
        Threads::Mcrt => {
            let config = mcrt::Config::new(mcrt::Policy::Stealing, cores);
            mcrt::run(config, &LinuxHost::pinned(), move || {
                let start = Instant::now();
                let hs: Vec<_> = (0..n)
                    .map(|i| {
                        let mail = mail.clone();
                        let body = move || larson(a, &mail, i, ops, Some(YIELD_EVERY));
                        mcrt::spawn(body).expect("mcrt spawn")
                    })
                    .collect();
                for h in hs {
                    h.join().expect("larson thread");
                }
                let secs = start.elapsed().as_secs_f64();
                mail.drain(a);
                secs
            })
            .expect("mcrt run")
        }
    }
}

/// One Larson thread, number `me`: fill the slots, then `ops` ops in rounds with
/// hand-overs; yields every `yield_every` ops on McRT threads.
fn larson<A: GlobalAlloc>(a: &A, mail: &Mail, me: usize, ops: usize, yield_every: Option<usize>) {
    let n = mail.0.len();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (me as u64 + 1).wrapping_mul(0x2545_f491_4f6c_dd1d));
    let mut slots: Vec<Obj> = (0..SLOTS).map(|_| new_obj(a, &mut rng)).collect();
    for op in 1..=ops {
        let k = rng.below(SLOTS);
        free_obj(a, slots[k]);
        slots[k] = new_obj(a, &mut rng);
        if yield_every.is_some_and(|y| op.is_multiple_of(y)) {
            mcrt::yield_now();
        }
        if op.is_multiple_of(ROUND) && n > 1 {
            // Give the first HANDOFF objects to the next thread, take the previous one's.
            let give: Vec<Obj> = slots[..HANDOFF].to_vec();
            let old = mail.0[(me + 1) % n].swap(Box::into_raw(Box::new(give)), Ordering::AcqRel);
            let got = mail.0[me].swap(null_mut(), Ordering::AcqRel);
            for s in &mut slots[..HANDOFF] {
                *s = (0, 0);
            }
            for p in [old, got] {
                if p.is_null() {
                    continue;
                }
                // SAFETY: boxes hold `Box<Vec<Obj>>`s put there by this function.
                let objs = unsafe { Box::from_raw(p) };
                let mut empty = slots[..HANDOFF].iter_mut().filter(|s| s.0 == 0);
                for &o in objs.iter() {
                    match empty.next() {
                        Some(s) => *s = o,
                        None => free_obj(a, o),
                    }
                }
            }
        }
    }
    free_all(a, &slots);
}

fn new_obj<A: GlobalAlloc>(a: &A, rng: &mut Rng) -> Obj {
    let size = MIN_SIZE + rng.below(MAX_SIZE - MIN_SIZE + 1);
    // SAFETY: a non-zero size.
    let p = unsafe { a.alloc(Layout::from_size_align_unchecked(size, 8)) };
    assert!(!p.is_null(), "larson: out of memory");
    // SAFETY: fresh, `size` bytes: touch its first and last byte as a program would.
    unsafe {
        p.write(size as u8);
        p.add(size - 1).write(size as u8);
    }
    (p as usize, size)
}

fn free_obj<A: GlobalAlloc>(a: &A, (p, size): Obj) {
    if p != 0 {
        // SAFETY: allocated by `new_obj` on `a` with this layout, not used again.
        unsafe { a.dealloc(p as *mut u8, Layout::from_size_align_unchecked(size, 8)) };
    }
}

fn free_all<A: GlobalAlloc>(a: &A, objs: &[Obj]) {
    for &o in objs {
        free_obj(a, o);
    }
}

/// xorshift64*.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n
    }
}
