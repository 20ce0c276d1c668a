//! `waitwake`: wake-ups across threads, none lost, none to the wrong word.

use super::{joined_ok, Check};
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use libatoll::pcore_current;
use libatoll::thread::{self, Builder, Woken};

pub(crate) fn waitwake() -> Check {
    changed_and_timed_out()?;
    ping_pong()?;
    the_right_waiters()
}

/// Wait returns Changed when the word differs, TimedOut when nobody wakes.
fn changed_and_timed_out() -> Check {
    let word = AtomicU32::new(5);
    if thread::wait(&word, 4, 0) != Ok(Woken::Changed) {
        return Err("wait on a changed word did not return Changed");
    }
    if thread::wait(&word, 5, 2_000) != Ok(Woken::TimedOut) {
        return Err("wait with a timeout did not time out");
    }
    Ok(())
}

/// Ping-pong: two threads take turns through one word, 300 rounds; a lost wake-up shows
/// as a timeout (a second).
fn ping_pong() -> Check {
    let turn = Arc::new(AtomicU32::new(0));
    let lost = Arc::new(AtomicU64::new(0));
    let rounds = 300u32;
    let mut players = Vec::new();
    for me in 0..2u32 {
        let (turn, lost) = (turn.clone(), lost.clone());
        players.push(
            thread::spawn(move || {
                for r in 0..rounds {
                    let mine = 2 * r + me;
                    loop {
                        let now = turn.load(Ordering::Acquire);
                        if now == mine {
                            break;
                        }
                        if thread::wait(&turn, now, 1_000_000) == Ok(Woken::TimedOut) {
                            lost.fetch_add(1, Ordering::AcqRel);
                        }
                    }
                    turn.store(mine + 1, Ordering::Release);
                    let _ = thread::wake(&turn, 1);
                }
                0
            })
            .map_err(|_| "spawn failed")?,
        );
    }
    for t in players {
        joined_ok(t)?;
    }
    if turn.load(Ordering::Acquire) != 2 * rounds {
        return Err("the ping-pong did not finish");
    }
    if lost.load(Ordering::Acquire) != 0 {
        return Err("a wake-up was lost (a wait timed out)");
    }
    Ok(())
}

/// The right waiter: three wait on `a`, one on `b`, all on this core; wake(b) wakes only
/// b's; wake(a, 1) wakes exactly one of a's.
fn the_right_waiters() -> Check {
    let here = pcore_current();
    let a = Arc::new(AtomicU32::new(0));
    let b = Arc::new(AtomicU32::new(0));
    let woke = Arc::new(AtomicU64::new(0));
    let mut waiters = Vec::new();
    for i in 0..4u64 {
        let word = if i < 3 { a.clone() } else { b.clone() };
        let woke = woke.clone();
        waiters.push(
            Builder::new()
                .core(here)
                .affinity(1 << here)
                .spawn(move || {
                    while word.load(Ordering::Acquire) == 0 {
                        let _ = thread::wait(&word, 0, 5_000_000);
                    }
                    woke.fetch_add(1 << (16 * (i / 3)), Ordering::AcqRel);
                    0
                })
                .map_err(|_| "spawn failed")?,
        );
    }
    // Let all four park (they run on this core: yielding hands it to them).
    for _ in 0..20 {
        thread::yield_now();
        let _ = thread::sleep_us(1_000);
    }
    b.store(1, Ordering::Release);
    if thread::wake(&b, 1) != Ok(1) {
        return Err("wake on b did not wake its one waiter");
    }
    let _ = thread::sleep_us(20_000);
    if woke.load(Ordering::Acquire) != 1 << 16 {
        return Err("wake on b woke the wrong waiters");
    }
    // a stays 0 for the waiters that are not woken: a wake of one must wake one.
    if thread::wake(&a, 1) != Ok(1) {
        return Err("wake(a, 1) did not wake exactly one");
    }
    a.store(1, Ordering::Release);
    let _ = thread::wake(&a, u64::MAX);
    for t in waiters {
        joined_ok(t)?;
    }
    // The one woken by wake(a, 1) saw a = 0 and waited again until the final wake.
    if woke.load(Ordering::Acquire) != (1 << 16) + 3 {
        return Err("the waiters on a did not all end");
    }
    Ok(())
}
