//! `oversubscribe`, `starve` and `many`: threads share cores, each gets CPU, and many
//! threads are created and joined.

use super::{joined_ok, Check};
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use libatoll::thread::{self, Builder};
use libatoll::{cores_online, pcore_current};

/// The integer work of `oversubscribe`: an xorshift chain.
pub(crate) fn chain(seed: u64, steps: u64) -> u64 {
    let mut x = seed | 1;
    for _ in 0..steps {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    x
}

pub(crate) fn oversubscribe() -> Check {
    let n = 3 * cores_online();
    let steps = 300_000;
    let mut threads = Vec::new();
    let results: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(0)).collect());
    for i in 0..n {
        let results = results.clone();
        let t = thread::spawn(move || {
            results[i].store(chain(i as u64 + 7, steps), Ordering::Release);
            0
        })
        .map_err(|_| "spawn failed")?;
        threads.push(t);
    }
    for t in threads {
        joined_ok(t)?;
    }
    for i in 0..n {
        if results[i].load(Ordering::Acquire) != chain(i as u64 + 7, steps) {
            return Err("a thread's result is wrong");
        }
    }
    Ok(())
}

pub(crate) fn starve() -> Check {
    let here = pcore_current();
    let flag = Arc::new(AtomicBool::new(false));
    let spinner = {
        let flag = flag.clone();
        Builder::new().core(here).affinity(1 << here).spawn(move || {
            while !flag.load(Ordering::Acquire) {
                core::hint::spin_loop();
            }
            0
        })
    }
    .map_err(|_| "spawn failed")?;
    let worker = {
        let flag = flag.clone();
        Builder::new().core(here).affinity(1 << here).spawn(move || {
            let sum = chain(3, 50_000);
            flag.store(true, Ordering::Release);
            if sum == 0 {
                1
            } else {
                0
            }
        })
    }
    .map_err(|_| "spawn failed")?;
    joined_ok(worker)?;
    joined_ok(spinner)
}

pub(crate) fn many() -> Check {
    let count = Arc::new(AtomicU64::new(0));
    let mut threads = Vec::new();
    for _ in 0..200 {
        let count = count.clone();
        threads.push(
            thread::spawn(move || {
                count.fetch_add(1, Ordering::AcqRel);
                0
            })
            .map_err(|_| "spawn failed")?,
        );
        if threads.len() == 50 {
            for t in threads.drain(..) {
                joined_ok(t)?;
            }
        }
    }
    for t in threads {
        joined_ok(t)?;
    }
    if count.load(Ordering::Acquire) != 200 {
        return Err("not every thread ran");
    }
    Ok(())
}
