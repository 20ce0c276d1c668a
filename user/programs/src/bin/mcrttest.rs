//! `mcrttest`: McRT (issue M8) on Atoll, on kernel threads (M7) as its processors, one per
//! core. Runs every check under every scheduler policy (or those named):
//!
//! - `spawn`: 200 threads return their values through join;
//! - `yield`: two threads on one processor alternate at each yield;
//! - `pingpong`: 2000 rounds of predicate yield between two threads lose no wake-up;
//! - `barrier`: 8 threads pass 50 barrier rounds, none early;
//! - `mutex`: 6 threads increment under each mutex kind (TTS, ticket, MCS), holding it
//!   across yields; no increment is lost;
//! - `futures`: 1000 futures and a nested-future Fibonacci give the serial answers;
//! - `keys`: thread-local values are per thread, and their destructors run at exit;
//! - `many`: 10,000 threads created and joined;
//! - `domains` (2 cores or more): a thread moved to another scheduling domain runs on
//!   that domain's processors.
//!
//! `mcrttest [--processors N] [POLICY...]` (single, local, sharing, stealing, neighbour;
//! all by default; one processor per core, at most N); prints each policy's checks' times
//! (`start` is the runtime's start and stop alone), then `mcrttest: ok` or
//! `mcrttest: FAIL <policy> <check>`, and exits 0, 1, or 2 on bad arguments.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use libatoll::mcrt_host::AtollHost;
use libatoll::{cores_online, println};
use mcrt::sync::{Barrier, Mutex, MutexKind};
use mcrt::{Config, Op, Policy};

type Check = Result<(), &'static str>;

/// A check and its name.
type NamedCheck = (&'static str, fn() -> Check);

fn main() -> i32 {
    let mut buf = [0u8; 256];
    let args = libatoll::args(&mut buf);
    let mut policies = Vec::new();
    let mut most = usize::MAX;
    let mut words = args.split_whitespace();
    while let Some(word) = words.next() {
        if word == "--processors" {
            let n = words.next().and_then(|n| n.parse::<usize>().ok());
            match n.filter(|n| (1..=1024).contains(n)) {
                Some(n) => most = n,
                None => {
                    println!("mcrttest: --processors wants a number from 1 to 1024");
                    return 2;
                }
            }
            continue;
        }
        match Policy::parse(word) {
            Some(p) => policies.push(p),
            None => {
                println!(
                    "mcrttest: unknown policy {word} (single, local, sharing, stealing, neighbour)"
                );
                return 2;
            }
        }
    }
    if policies.is_empty() {
        policies = Policy::ALL.to_vec();
    }
    let p = cores_online().min(most);
    for policy in policies {
        let checks: [NamedCheck; 9] = [
            ("start", || Ok(())),
            ("spawn", spawn),
            ("yield", yields),
            ("pingpong", pingpong),
            ("barrier", barrier),
            ("mutex", mutex),
            ("futures", futures),
            ("keys", keys),
            ("many", many),
        ];
        let mut times = alloc::string::String::new();
        for (name, check) in checks {
            let start = libatoll::cycles();
            // The yield check needs its two threads on one processor.
            let config = if name == "yield" {
                Config::new(Policy::Local, 1)
            } else {
                Config::new(policy, p)
            };
            match mcrt::run(config, &AtollHost, check) {
                Ok(Ok(())) => {}
                Ok(Err(why)) => {
                    println!("mcrttest: FAIL {} {name}: {why}", policy.name());
                    return 1;
                }
                Err(e) => {
                    println!("mcrttest: FAIL {} {name}: the runtime: {e:?}", policy.name());
                    return 1;
                }
            }
            let mcycles = (libatoll::cycles() - start) / 1_000_000;
            times.push_str(&alloc::format!(" {name} {mcycles}"));
        }
        println!("mcrttest: {} passed on {p} processors (Mcycles:{times})", policy.name());
    }
    if p >= 2 {
        match mcrt::run(Config::domains(&[1, p - 1]), &AtollHost, domains) {
            Ok(Ok(())) => println!("mcrttest: domains passed"),
            other => {
                println!("mcrttest: FAIL domains: {other:?}");
                return 1;
            }
        }
    }
    println!("mcrttest: ok");
    0
}

libatoll::main!(main);

fn spawn() -> Check {
    let hs: Vec<_> = (0..200u64)
        .map(|i| mcrt::spawn(move || i * i).map_err(|_| "spawn failed"))
        .collect::<Result<_, _>>()?;
    let sum: u64 = hs.into_iter().map(|h| h.join().unwrap_or(0)).sum();
    (sum == (0..200u64).map(|i| i * i).sum()).then_some(()).ok_or("a joined value is wrong")
}

fn yields() -> Check {
    let log = Arc::new(Mutex::new(MutexKind::Tts, Vec::new()));
    let hs: Vec<_> = (0..2u32)
        .map(|id| {
            let log = log.clone();
            mcrt::spawn(move || {
                for step in 0..3u32 {
                    log.lock().push((id, step));
                    mcrt::yield_now();
                }
            })
            .map_err(|_| "spawn failed")
        })
        .collect::<Result<_, _>>()?;
    for h in hs {
        h.join();
    }
    let got = log.lock().clone();
    (got == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)])
        .then_some(())
        .ok_or("yield did not alternate")
}

fn pingpong() -> Check {
    let word = Arc::new(AtomicU32::new(0));
    let w = word.clone();
    let pong = mcrt::spawn(move || {
        for i in 0..2000 {
            mcrt::yield_until(&w, Op::Eq, 2 * i + 1);
            w.store(2 * i + 2, Ordering::Release);
            mcrt::notify();
        }
    })
    .map_err(|_| "spawn failed")?;
    for i in 0..2000 {
        word.store(2 * i + 1, Ordering::Release);
        mcrt::notify();
        mcrt::yield_until(&word, Op::Eq, 2 * i + 2);
    }
    pong.join();
    (word.load(Ordering::Acquire) == 4000).then_some(()).ok_or("a round was lost")
}

fn barrier() -> Check {
    let n = 8;
    let b = Arc::new(Barrier::new(n));
    let phase = Arc::new(AtomicUsize::new(0));
    let hs: Vec<_> = (0..n)
        .map(|_| {
            let (b, phase) = (b.clone(), phase.clone());
            mcrt::spawn(move || {
                let mut ok = true;
                for round in 0..50 {
                    phase.fetch_add(1, Ordering::AcqRel);
                    b.wait();
                    ok &= phase.load(Ordering::Acquire) >= (round + 1) * n as usize;
                    b.wait();
                }
                ok
            })
            .map_err(|_| "spawn failed")
        })
        .collect::<Result<_, _>>()?;
    let ok = hs.into_iter().all(|h| h.join() == Some(true));
    ok.then_some(()).ok_or("a thread passed the barrier early")
}

fn mutex() -> Check {
    for kind in MutexKind::ALL {
        let m = Arc::new(Mutex::new(kind, 0u64));
        let hs: Vec<_> = (0..6)
            .map(|_| {
                let m = m.clone();
                mcrt::spawn(move || {
                    for i in 0..500 {
                        let mut g = m.lock();
                        let v = *g;
                        if i % 7 == 0 {
                            mcrt::yield_now();
                        }
                        *g = v + 1;
                    }
                })
                .map_err(|_| "spawn failed")
            })
            .collect::<Result<_, _>>()?;
        for h in hs {
            h.join();
        }
        if *m.lock() != 3000 {
            return Err("an increment under a mutex was lost");
        }
    }
    Ok(())
}

fn fib(n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let a = mcrt::future::spawn(fib, n - 1);
    let b = fib(n - 2);
    a.read() + b
}

fn futures() -> Check {
    let fs: Vec<_> = (0..1000u64).map(|i| mcrt::future::spawn(|x: u64| x * 3, i)).collect();
    let sum: u64 = fs.into_iter().map(|f| f.read()).sum();
    if sum != 3 * (0..1000u64).sum::<u64>() {
        return Err("futures gave a wrong sum");
    }
    (fib(18) == 2584).then_some(()).ok_or("nested futures gave a wrong Fibonacci number")
}

static FREED: AtomicUsize = AtomicUsize::new(0);

fn count_freed(v: usize) {
    FREED.fetch_add(v, Ordering::AcqRel);
}

fn keys() -> Check {
    let key = mcrt::Key::new(Some(count_freed)).map_err(|_| "no key")?;
    let before = FREED.load(Ordering::Acquire);
    key.set(0); // the main thread's value stays 0: no destructor for it
    let hs: Vec<_> = (0..10)
        .map(|i| {
            mcrt::spawn(move || {
                let fresh = key.get() == 0;
                key.set(100 + i);
                mcrt::yield_now();
                fresh && key.get() == 100 + i
            })
            .map_err(|_| "spawn failed")
        })
        .collect::<Result<_, _>>()?;
    if !hs.into_iter().all(|h| h.join() == Some(true)) {
        return Err("a thread-local value leaked between threads");
    }
    let freed = FREED.load(Ordering::Acquire) - before;
    (freed == (100..110).sum::<usize>())
        .then_some(())
        .ok_or("thread-local destructors did not run once each")
}

fn many() -> Check {
    let mut done = 0u64;
    for batch in 0..100 {
        let hs: Vec<_> = (0..100)
            .map(|i| {
                mcrt::spawn(|| 1u64).map_err(|e| {
                    println!("mcrttest: batch {batch} thread {i}: {e:?}; {:?}", mcrt::stats());
                    "spawn failed"
                })
            })
            .collect::<Result<_, _>>()?;
        done += hs.into_iter().map(|h| h.join().unwrap_or(0)).sum::<u64>();
    }
    (done == 10_000).then_some(()).ok_or("not every one of 10,000 threads ran")
}

fn domains() -> Check {
    if mcrt::processor() != 0 {
        return Err("main did not start in domain 0");
    }
    mcrt::switch_to_queue(1).map_err(|_| "switch_to_queue refused")?;
    if mcrt::processor() == 0 {
        return Err("a thread in domain 1 ran on processor 0");
    }
    let h = mcrt::spawn(mcrt::processor).map_err(|_| "spawn failed")?;
    if h.join().unwrap_or(0) == 0 {
        return Err("a thread made in domain 1 ran in domain 0");
    }
    mcrt::switch_to_queue(0).map_err(|_| "switch_to_queue refused")?;
    (mcrt::processor() == 0).then_some(()).ok_or("back in domain 0, not on processor 0")
}
