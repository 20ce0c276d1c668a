//! Model checking of the STM's commit/validate protocol (`src/stm/protocol.rs`, included
//! by path over loom's atomics): write-lock acquisition, the version bump at commit, and
//! optimistic readers' validation. Run with
//! `RUSTFLAGS="--cfg loom" cargo test -p mcrt --release --test loom_stm`.
#![cfg(loom)]

/// The atomics `protocol.rs` uses: loom's.
mod atomic {
    pub(crate) use loom::sync::atomic::{fence, AtomicU64, AtomicUsize, Ordering};
}
#[path = "../src/stm/protocol.rs"]
#[allow(dead_code)]
mod protocol;

use loom::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use loom::sync::Arc;
use protocol::Check;

/// Two cells (lock word, data word) and the clock.
struct World {
    clock: AtomicU64,
    locks: [AtomicUsize; 2],
    data: [AtomicUsize; 2],
}

fn world(a: usize, b: usize) -> Arc<World> {
    Arc::new(World {
        clock: AtomicU64::new(0),
        locks: [AtomicUsize::new(0), AtomicUsize::new(0)],
        data: [AtomicUsize::new(a), AtomicUsize::new(b)],
    })
}

/// A transaction over both cells as the STM runs it: optimistic reads (extending the
/// snapshot is left out: a read newer than the snapshot aborts), encounter-time locks,
/// in-place writes with undo, commit-time validation. Moves 1 from cell 0 to cell 1 if
/// `update`; returns the values read if it committed.
fn transaction(w: &World, me: usize, update: bool) -> Option<(usize, usize)> {
    let snapshot = protocol::now(&w.clock);
    let mut reads = Vec::new();
    let mut vals = [0; 2];
    for i in 0..2 {
        let mut x = 0;
        let v = protocol::read(&w.locks[i], || x = w.data[i].load(Ordering::Relaxed)).ok()?;
        if v > snapshot {
            return None;
        }
        reads.push((i, v));
        vals[i] = x;
    }
    if !update {
        return Some((vals[0], vals[1])); // read-only: consistent at its snapshot
    }
    let mut owned = Vec::new();
    let mut undo = Vec::new();
    let abort = |owned: &[(usize, u64)], undo: &[(usize, usize)]| {
        for &(i, old) in undo.iter().rev() {
            w.data[i].store(old, Ordering::Relaxed);
        }
        let v = protocol::tick(&w.clock);
        for &(i, _) in owned {
            protocol::release(&w.locks[i], v);
        }
        None
    };
    for (i, new) in [(0, vals[0] - 1), (1, vals[1] + 1)] {
        let seen = w.locks[i].load(Ordering::Acquire);
        if protocol::is_owned(seen) || protocol::version_of(seen) > snapshot {
            return abort(&owned, &undo);
        }
        if !protocol::try_acquire(&w.locks[i], seen, me) {
            return abort(&owned, &undo);
        }
        owned.push((i, protocol::version_of(seen)));
        undo.push((i, w.data[i].load(Ordering::Relaxed)));
        w.data[i].store(new, Ordering::Relaxed);
    }
    let ts = protocol::tick(&w.clock);
    let valid = reads.iter().all(|&(i, v)| match protocol::check(&w.locks[i], v, me) {
        Check::Same => true,
        Check::Mine => owned.iter().any(|&(j, old)| j == i && old == v),
        Check::Changed => false,
    });
    if ts != snapshot + 1 && !valid {
        return abort(&owned, &undo);
    }
    for &(i, _) in &owned {
        protocol::release(&w.locks[i], ts);
    }
    Some((vals[0], vals[1]))
}

/// A read-only transaction never sees a transfer half done, and what it sees is the state
/// before or after the transfer.
#[test]
fn readers_see_whole_commits() {
    loom::model(|| {
        let w = world(10, 0);
        let w2 = w.clone();
        let t = loom::thread::spawn(move || transaction(&w2, 0x100, true));
        if let Some((a, b)) = transaction(&w, 0x200, false) {
            assert_eq!(a + b, 10, "a reader saw a torn transfer");
        }
        let committed = t.join().unwrap().is_some();
        let (a, b) = (w.data[0].load(Ordering::Relaxed), w.data[1].load(Ordering::Relaxed));
        assert_eq!((a, b), if committed { (9, 1) } else { (10, 0) });
    });
}

/// Two concurrent transfers: each commits or rolls back whole; the sum is kept, every
/// commit is counted once, and all words end released with distinct, later versions.
#[test]
fn concurrent_updates_commit_or_roll_back_whole() {
    loom::model(|| {
        let w = world(10, 0);
        let w2 = w.clone();
        let t = loom::thread::spawn(move || transaction(&w2, 0x100, true).is_some());
        let mine = transaction(&w, 0x200, true).is_some();
        let theirs = t.join().unwrap();
        let commits = usize::from(mine) + usize::from(theirs);
        assert!(commits >= 1 || w.clock.load(Ordering::Relaxed) > 0);
        let (a, b) = (w.data[0].load(Ordering::Relaxed), w.data[1].load(Ordering::Relaxed));
        assert_eq!((a, b), (10 - commits, commits));
        for l in &w.locks {
            assert!(!protocol::is_owned(l.load(Ordering::Relaxed)), "a word left owned");
        }
    });
}
