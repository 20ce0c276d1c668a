//! `dedicated`: a `pcore_run` context has its core to itself (Corey §4.4).

use super::scheduling::chain;
use super::{joined_ok, Check};
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use libatoll::abi::Error;
use libatoll::thread::{self, Builder};
use libatoll::{cores_online, pcore_current};

/// What the caller's part of `dedicated` may fail with (a context cannot return a
/// string across cores, but an index).
const DEDICATED_FAILS: [&str; 9] = [
    "a thread allowed only on the dedicated core was not refused",
    "an affinity of only the dedicated core was not refused",
    "the pcore_run context never started",
    "threads on a dedicated core did not move off it",
    "thread_create failed oddly",
    "thread_create on a dedicated core was not refused",
    "spawn failed",
    "a placed thread ran on the dedicated core",
    "a thread failed",
];

/// Polls `done` every millisecond for up to two seconds; true once it holds.
fn within_2s(done: impl Fn() -> bool) -> bool {
    for _ in 0..2000 {
        if done() {
            return true;
        }
        let _ = thread::sleep_us(1000);
    }
    done()
}

/// A thread created on `core` by number: `Ok`, or the call's error. It spins until
/// `stop` is set, counting in `left` if it ever sees itself on another core.
fn spinner_on(
    core: usize,
    stop: &Arc<AtomicBool>,
    left: &Arc<AtomicU64>,
) -> Result<thread::Thread, Error> {
    let (stop, left) = (stop.clone(), left.clone());
    Builder::new().core(core).spawn(move || {
        let mut counted = false;
        while !stop.load(Ordering::Acquire) {
            if !counted && pcore_current() != core {
                left.fetch_add(1, Ordering::AcqRel);
                counted = true;
            }
            core::hint::spin_loop();
        }
        0
    })
}

pub(crate) fn dedicated() -> Check {
    if cores_online() < 2 {
        return Err("needs 2 cores");
    }
    let me = pcore_current();
    let target = if me == 0 { 1 } else { 0 };
    // Two movable threads on the target core before the context comes.
    let stop = Arc::new(AtomicBool::new(false));
    let left = Arc::new(AtomicU64::new(0));
    let early: Vec<thread::Thread> = (0..2)
        .map(|_| spinner_on(target, &stop, &left))
        .collect::<Result<_, _>>()
        .map_err(|_| "spawn on the target core failed")?;
    let started = AtomicBool::new(false);
    let finished = AtomicBool::new(false);
    let context_switches = AtomicU64::new(u64::MAX);
    // The caller's part's verdict: 0 for passed, else 1 + an index into `DEDICATED_FAILS`.
    let verdict = AtomicU64::new(0);
    let work = |i: usize| {
        if i == 1 {
            context_part(&started, &finished, &context_switches);
            return;
        }
        let check = callers_part(target, &started, &stop, &left);
        finished.store(true, Ordering::Release);
        if let Err(why) = check {
            let at =
                DEDICATED_FAILS.iter().position(|&w| w == why).unwrap_or(DEDICATED_FAILS.len() - 1);
            verdict.store(at as u64 + 1, Ordering::Release);
        }
    };
    let ran = libatoll::threads::run(&[me, target], &work);
    stop.store(true, Ordering::Release);
    for t in early {
        joined_ok(t)?;
    }
    ran.map_err(|_| "threads::run failed")?;
    if let Some(i) = verdict.load(Ordering::Acquire).checked_sub(1) {
        return Err(DEDICATED_FAILS[i as usize]);
    }
    if context_switches.load(Ordering::Acquire) != 0 {
        return Err("the dedicated context was switched out for other threads");
    }
    core_takes_threads_again(target, &left)
}

/// The context on the target core: counts its switch-ins while the caller's part runs.
fn context_part(started: &AtomicBool, finished: &AtomicBool, context_switches: &AtomicU64) {
    let before = thread::my_stat().map_or(0, |s| s.switches);
    started.store(true, Ordering::Release);
    while !finished.load(Ordering::Acquire) {
        core::hint::spin_loop();
    }
    let after = thread::my_stat().map_or(u64::MAX, |s| s.switches);
    context_switches.store(after.wrapping_sub(before), Ordering::Release);
}

/// The caller's part, once the context runs on `target`: the threads there moved off,
/// new ones are refused there, and placed ones run elsewhere. Fails with one of
/// [`DEDICATED_FAILS`].
fn callers_part(
    target: usize,
    started: &AtomicBool,
    stop: &Arc<AtomicBool>,
    left: &Arc<AtomicU64>,
) -> Check {
    if !within_2s(|| started.load(Ordering::Acquire)) {
        return Err("the pcore_run context never started");
    }
    if !within_2s(|| left.load(Ordering::Acquire) == 2) {
        return Err("threads on a dedicated core did not move off it");
    }
    creation_there_refused(target, stop, left)?;
    placed_threads_run_elsewhere(target)
}

/// A thread created on the dedicated core `target`, or allowed only there, is refused
/// (`Busy`), and so is an affinity of only that core.
fn creation_there_refused(target: usize, stop: &Arc<AtomicBool>, left: &Arc<AtomicU64>) -> Check {
    // The caller's replica hears of the dedication by message: wait for it.
    let mut refused = false;
    for _ in 0..2000 {
        match spinner_on(target, stop, left) {
            Err(Error::Busy) => {
                refused = true;
                break;
            }
            Ok(t) => {
                stop.store(true, Ordering::Release);
                let _ = t.join();
                stop.store(false, Ordering::Release);
            }
            Err(_) => return Err("thread_create failed oddly"),
        }
        let _ = thread::sleep_us(1000);
    }
    if !refused {
        return Err("thread_create on a dedicated core was not refused");
    }
    // Issue M14: allowed on the dedicated core alone, placed anywhere, a thread has
    // nowhere to run: refused (it once sat misplaced on this core, retried at every turn
    // of its scheduler).
    match Builder::new().affinity(1 << target).spawn(|| 0) {
        Err(Error::Busy) => {}
        Ok(t) => {
            let _ = t.join();
            return Err("a thread allowed only on the dedicated core was not refused");
        }
        Err(_) => return Err("thread_create failed oddly"),
    }
    if thread::set_my_affinity(1 << target) != Err(Error::Busy) {
        return Err("an affinity of only the dedicated core was not refused");
    }
    Ok(())
}

/// Placed threads run anywhere but the dedicated core `target`.
fn placed_threads_run_elsewhere(target: usize) -> Check {
    let seen = Arc::new(AtomicU64::new(0));
    let mut placed = Vec::new();
    for _ in 0..4 {
        let seen = seen.clone();
        let t = thread::spawn(move || {
            for _ in 0..2000 {
                if pcore_current() == target {
                    seen.fetch_add(1, Ordering::AcqRel);
                }
                chain(1, 100);
            }
            0
        })
        .map_err(|_| "spawn failed")?;
        placed.push(t);
    }
    for t in placed {
        joined_ok(t)?;
    }
    if seen.load(Ordering::Acquire) != 0 {
        return Err("a placed thread ran on the dedicated core");
    }
    Ok(())
}

/// The context ended: the core `target` takes threads again.
fn core_takes_threads_again(target: usize, left: &Arc<AtomicU64>) -> Check {
    let again = Arc::new(AtomicBool::new(false));
    if !within_2s(|| match spinner_on(target, &again, left) {
        Ok(t) => {
            again.store(true, Ordering::Release);
            let _ = t.join();
            true
        }
        Err(_) => false,
    }) {
        return Err("the core took no threads after its context ended");
    }
    Ok(())
}
