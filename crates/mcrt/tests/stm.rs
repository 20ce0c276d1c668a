//! Hosted tests of the STM (McRT §2.4, McRT-STM): serializability against a sequential
//! model, bank invariants seen by read-only audits, nested partial rollback, the allocator
//! and scheduler integrations, at both conflict granularities.

use mcrt::hosted::LinuxHost;
use mcrt::stm::{self, atomic, Abort, Granularity, TCell};
use mcrt::{Config, Policy};
use proptest::prelude::*;
use std::alloc::Layout;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// The counters are global: tests run one at a time.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

const GRANULARITIES: [Granularity; 2] = [Granularity::Object, Granularity::CacheLine];

fn cells(n: usize, value: i64, g: Granularity) -> &'static [TCell<i64>] {
    Vec::leak((0..n).map(|_| TCell::with_granularity(value, g)).collect())
}

/// One random transaction: move up to `amount` from `from` to `to` if `from` has it.
#[derive(Clone, Copy, Debug)]
struct Transfer {
    from: usize,
    to: usize,
    amount: i64,
    yield_inside: bool,
}

fn transfers(accounts: usize) -> impl Strategy<Value = Vec<Transfer>> {
    prop::collection::vec(
        (0..accounts, 0..accounts, 1i64..40, any::<bool>()).prop_map(
            |(from, to, amount, yield_inside)| Transfer { from, to, amount, yield_inside },
        ),
        1..120,
    )
}

/// Runs `t` in a transaction that also takes the next number of `seq` (so the numbers
/// give the serial order); returns (number, whether it moved money).
fn run_transfer(
    accounts: &'static [TCell<i64>],
    seq: &'static TCell<u64>,
    t: Transfer,
) -> (u64, bool) {
    atomic(|tx| {
        let a = tx.read(&accounts[t.from])?;
        if t.yield_inside && mcrt::in_runtime() {
            mcrt::yield_now();
        }
        let moved = a >= t.amount;
        if moved {
            tx.write(&accounts[t.from], a - t.amount)?;
            let b = tx.read(&accounts[t.to])?;
            tx.write(&accounts[t.to], b + t.amount)?;
        }
        // Taken last (and held to the commit): the numbers are the commit order.
        let n = tx.read(seq)?;
        tx.write(seq, n + 1)?;
        Ok((n, moved))
    })
}

/// Runs `ops` dealt over `threads` McRT threads on `processors`; checks the outcome
/// against the sequential model replayed in the transactions' serial order.
fn check_serializable(ops: &[Transfer], threads: usize, processors: usize, g: Granularity) {
    const ACCOUNTS: usize = 6;
    const START: i64 = 50;
    let accounts = cells(ACCOUNTS, START, g);
    let seq: &'static TCell<u64> = Box::leak(Box::new(TCell::with_granularity(0, g)));
    let ops: Arc<Vec<Transfer>> = Arc::new(ops.to_vec());
    let work = ops.clone();
    let outcomes =
        mcrt::run(Config::new(Policy::Stealing, processors), &LinuxHost::unpinned(), move || {
            let hs: Vec<_> = (0..threads)
                .map(|k| {
                    let work = work.clone();
                    mcrt::spawn(move || {
                        (k..work.len())
                            .step_by(threads)
                            .map(|i| (i, run_transfer(accounts, seq, work[i])))
                            .collect::<Vec<_>>()
                    })
                    .unwrap()
                })
                .collect();
            hs.into_iter().flat_map(|h| h.join().unwrap()).collect::<Vec<_>>()
        })
        .unwrap();
    // The sequential model, in the order the transactions numbered themselves.
    let mut order = outcomes.clone();
    order.sort_by_key(|&(_, (n, _))| n);
    let numbers: Vec<u64> = order.iter().map(|&(_, (n, _))| n).collect();
    assert_eq!(numbers, (0..ops.len() as u64).collect::<Vec<_>>(), "each took one number");
    let mut model = [START; ACCOUNTS];
    for &(i, (_, moved)) in &order {
        let t = ops[i];
        let ok = model[t.from] >= t.amount;
        assert_eq!(ok, moved, "transfer {i} saw a state no serial order gives");
        if ok {
            model[t.from] -= t.amount;
            model[t.to] += t.amount;
        }
    }
    let state: Vec<i64> = accounts.iter().map(|c| c.load()).collect();
    assert_eq!(state, model.to_vec());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn random_transfers_are_serializable(
        ops in transfers(6),
        threads in 2usize..6,
        processors in 2usize..4,
        cache_line in any::<bool>(),
    ) {
        let _s = serial();
        let g = if cache_line { Granularity::CacheLine } else { Granularity::Object };
        check_serializable(&ops, threads, processors, g);
    }
}

/// Bank transfers between random accounts on several threads keep the sum, and a
/// read-only audit running alongside always sees it (no transaction sees a torn state).
#[test]
fn transfers_keep_the_sum_and_audits_always_see_it() {
    let _s = serial();
    for g in GRANULARITIES {
        for processors in [2, 3] {
            const N: usize = 16;
            const START: i64 = 100;
            let accounts = cells(N, START, g);
            let stop = Arc::new(AtomicBool::new(false));
            let config = Config::new(Policy::Stealing, processors);
            let audits = mcrt::run(config, &LinuxHost::unpinned(), move || {
                let stop2 = stop.clone();
                let auditor = mcrt::spawn(move || {
                    let mut audits = 0u64;
                    while !stop2.load(Ordering::Relaxed) {
                        let sum =
                            atomic(|tx| (0..N).try_fold(0, |s, i| Ok(s + tx.read(&accounts[i])?)));
                        assert_eq!(sum, START * N as i64, "an audit saw money made or lost");
                        audits += 1;
                        mcrt::yield_now();
                    }
                    audits
                })
                .unwrap();
                let workers: Vec<_> = (0..4u64)
                    .map(|k| {
                        mcrt::spawn(move || {
                            let mut x = k.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
                            for _ in 0..3000 {
                                x ^= x << 13;
                                x ^= x >> 7;
                                x ^= x << 17;
                                let (a, b, amt) = (
                                    (x % N as u64) as usize,
                                    ((x >> 8) % N as u64) as usize,
                                    (x >> 16) % 7,
                                );
                                atomic(|tx| {
                                    let va = tx.read(&accounts[a])?;
                                    tx.write(&accounts[a], va - amt as i64)?;
                                    let vb = tx.read(&accounts[b])?;
                                    tx.write(&accounts[b], vb + amt as i64)
                                });
                                if x % 5 == 0 {
                                    mcrt::yield_now();
                                }
                            }
                        })
                        .unwrap()
                    })
                    .collect();
                for w in workers {
                    w.join().unwrap();
                }
                stop.store(true, Ordering::Relaxed);
                auditor.join().unwrap()
            })
            .unwrap();
            assert!(audits > 0);
            let sum: i64 = accounts.iter().map(|c| c.load()).sum();
            assert_eq!(sum, START * N as i64, "{g:?} at {processors} processors");
        }
    }
}

/// The same on plain OS threads (no runtime): waiting spins and yields to the OS.
#[test]
fn transfers_on_os_threads_keep_the_sum() {
    let _s = serial();
    let accounts = cells(8, 10, Granularity::Object);
    std::thread::scope(|s| {
        for k in 0..3usize {
            s.spawn(move || {
                for i in 0..5000usize {
                    let (a, b) = ((i + k) % 8, (i * 3 + k * 5 + 1) % 8);
                    atomic(|tx| {
                        let va = tx.read(&accounts[a])?;
                        tx.write(&accounts[a], va - 1)?;
                        let vb = tx.read(&accounts[b])?;
                        tx.write(&accounts[b], vb + 1)
                    });
                }
            });
        }
    });
    assert_eq!(accounts.iter().map(|c| c.load()).sum::<i64>(), 80);
}

/// A nested part that retries undoes only its own writes and allocations; the parent's
/// writes and a sibling nested part's stay.
#[test]
fn nested_retry_rolls_back_only_the_nested_part() {
    let _s = serial();
    for g in GRANULARITIES {
        let (a, b, c) = (
            TCell::with_granularity(0u32, g),
            TCell::with_granularity(0u32, g),
            TCell::with_granularity(0u32, g),
        );
        let before = stm::stats().undone_allocs;
        let (first, second) = atomic(|tx| {
            tx.write(&a, 1)?;
            let first = tx.nested(|tx| {
                tx.write(&b, 2)?;
                tx.write(&a, 7)?;
                let p = tx.alloc(Layout::new::<u64>());
                assert!(!p.is_null());
                assert_eq!(tx.read(&b)?, 2);
                tx.retry::<()>()
            })?;
            // Partial rollback: the parent sees its own write again, not the nested one.
            assert_eq!(tx.read(&a)?, 1);
            assert_eq!(tx.read(&b)?, 0);
            let second = tx.nested(|tx| {
                tx.write(&c, 3)?;
                Ok(tx.read(&a)? + 10)
            })?;
            Ok((first, second))
        });
        assert_eq!((first, second), (None, Some(11)));
        assert_eq!((a.load(), b.load(), c.load()), (1, 0, 3));
        assert_eq!(stm::stats().undone_allocs - before, 1, "the nested allocation was freed");
    }
}

/// Every allocation of an aborted run is freed; the committed run's are kept.
#[test]
fn an_abort_frees_what_the_transaction_allocated() {
    let _s = serial();
    let cell = TCell::new(0usize);
    let before = stm::stats();
    let mut runs = 0;
    let p = atomic(|tx| {
        runs += 1;
        let blocks: Vec<*mut u64> = (0..3).map(|i| tx.alloc_value(i as u64)).collect();
        tx.write(&cell, blocks[0] as usize)?;
        if runs < 3 {
            return tx.retry();
        }
        Ok(blocks[0])
    });
    let after = stm::stats();
    assert_eq!(runs, 3);
    assert_eq!(after.undone_allocs - before.undone_allocs, 6, "two aborted runs of three blocks");
    assert_eq!(after.aborts - before.aborts, 2);
    assert_eq!(cell.load(), p as usize);
    // SAFETY: committed, reachable only through `cell`, which we read outside transactions.
    assert_eq!(unsafe { *p }, 0);
}

/// Memory a committed transaction frees waits in limbo while a transaction that started
/// before the free is still running (it may hold a pointer to it), and is reclaimed after.
#[test]
fn freed_memory_waits_for_older_readers() {
    let _s = serial();
    let _ = stm::collect();
    let head: &'static TCell<usize> = Box::leak(Box::new(TCell::new(0usize)));
    let node = atomic(|tx| {
        let p = tx.alloc_value(42u64);
        tx.write(head, p as usize)?;
        Ok(p)
    });
    let (reader_in, freed) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let (ri, fr) = (reader_in.clone(), freed.clone());
    let reader = std::thread::spawn(move || {
        atomic(|tx| {
            let p = tx.read(head)? as *const u64;
            ri.store(1, Ordering::SeqCst);
            while fr.load(Ordering::SeqCst) == 0 {
                std::hint::spin_loop();
            }
            // SAFETY: the block is in limbo, not freed, while this transaction runs.
            Ok(if p.is_null() { 0 } else { unsafe { *p } })
        })
    });
    while reader_in.load(Ordering::SeqCst) == 0 {
        std::hint::spin_loop();
    }
    let before = stm::stats();
    atomic(|tx| {
        tx.write(head, 0)?;
        // SAFETY: unlinked by this transaction; came from `alloc_value`.
        unsafe { tx.free_value(node) };
        Ok(())
    });
    stm::collect();
    let mid = stm::stats();
    assert_eq!(mid.reclaimed, before.reclaimed, "reclaimed under an older reader");
    assert!(mid.limbo >= 1);
    freed.store(1, Ordering::SeqCst);
    // Read-only, it serializes before the free and still reads the block, safely.
    assert_eq!(reader.join().unwrap(), 42);
    stm::collect();
    let after = stm::stats();
    assert!(after.reclaimed > before.reclaimed, "not reclaimed once the readers ended");
}

/// McRT §2.4: a transaction whose thread yields while owning a word is aborted by an older
/// one that needs the word, rolls back, and runs again correctly.
#[test]
fn a_yielded_owner_is_aborted_and_retries() {
    let _s = serial();
    for g in GRANULARITIES {
        let x: &'static TCell<u64> = Box::leak(Box::new(TCell::with_granularity(0, g)));
        let y: &'static TCell<u64> = Box::leak(Box::new(TCell::with_granularity(0, g)));
        let z: &'static TCell<u64> = Box::leak(Box::new(TCell::new(0)));
        let before = stm::stats().killed;
        let (runs, other_runs) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
        let (r, o) = (runs.clone(), other_runs.clone());
        let owns_x = Arc::new(AtomicBool::new(false));
        let owns_x2 = owns_x.clone();
        // One processor: the owner runs only when it is scheduled back in.
        mcrt::run(Config::new(Policy::Stealing, 1), &LinuxHost::unpinned(), move || {
            // The older transaction: begins first, then waits (yielding) for the owner.
            let other = mcrt::spawn(move || {
                atomic(|tx| {
                    o.fetch_add(1, Ordering::Relaxed);
                    while !owns_x2.load(Ordering::Relaxed) {
                        mcrt::yield_now();
                    }
                    let v = tx.read(x)?;
                    tx.write(x, v + 10)
                })
            })
            .unwrap();
            let owner = mcrt::spawn(move || {
                // A commit first: this transaction's birth is strictly later.
                atomic(|tx| tx.write(z, 1));
                atomic(|tx| {
                    r.fetch_add(1, Ordering::Relaxed);
                    let v = tx.read(x)?;
                    tx.write(x, v + 1)?;
                    owns_x.store(true, Ordering::Relaxed);
                    mcrt::yield_now();
                    let w = tx.read(y)?;
                    tx.write(y, w + 1)
                })
            })
            .unwrap();
            owner.join().unwrap();
            other.join().unwrap();
        })
        .unwrap();
        assert_eq!((x.load(), y.load()), (11, 1), "{g:?}");
        assert_eq!(other_runs.load(Ordering::Relaxed), 1, "the older transaction aborted");
        assert!(runs.load(Ordering::Relaxed) >= 2, "the yielded owner was not aborted");
        assert!(stm::stats().killed > before, "no abort was counted as a kill");
    }
}

/// A transaction that returns `Abort::Conflict` itself is rolled back and run again.
#[test]
fn an_explicit_abort_rolls_back_and_reruns() {
    let _s = serial();
    let c = TCell::new((1u64, 2u32, 3u32));
    let mut runs = 0;
    atomic(|tx| {
        runs += 1;
        let (a, b, d) = tx.read(&c)?;
        tx.write(&c, (a + 1, b + 1, d + 1))?;
        if runs == 1 {
            return Err(Abort::Conflict);
        }
        Ok(())
    });
    assert_eq!(c.load(), (2, 3, 4));
}

/// Write skew (two transactions each read both halves of a joint balance and each debit
/// a different half) is impossible: commit-time validation catches the stale read.
#[test]
fn no_write_skew_on_a_joint_balance() {
    let _s = serial();
    for g in GRANULARITIES {
        let pair: &'static [TCell<i64>] = cells(2, 0, g);
        let overdrawn =
            mcrt::run(Config::new(Policy::Stealing, 2), &LinuxHost::unpinned(), move || {
                let hs: Vec<_> = (0..4usize)
                    .map(|k| {
                        mcrt::spawn(move || {
                            let mut overdrawn = 0;
                            for round in 0..2000 {
                                // Refill, then both halves race to spend the joint balance.
                                if k == 0 && round % 2 == 0 {
                                    atomic(|tx| {
                                        let v = tx.read(&pair[0])?;
                                        tx.write(&pair[0], v + 3)
                                    });
                                }
                                let mine = &pair[k % 2];
                                atomic(|tx| {
                                    let (a, b) = (tx.read(&pair[0])?, tx.read(&pair[1])?);
                                    mcrt::yield_now(); // widens the window
                                    if a + b >= 2 {
                                        let m = tx.read(mine)?;
                                        tx.write(mine, m - 2)?;
                                    }
                                    Ok(())
                                });
                                if atomic(|tx| Ok(tx.read(&pair[0])? + tx.read(&pair[1])?)) < 0 {
                                    overdrawn += 1;
                                }
                            }
                            overdrawn
                        })
                        .unwrap()
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).sum::<u32>()
            })
            .unwrap();
        assert_eq!(overdrawn, 0, "{g:?}: write skew overdrew the joint balance");
        assert!(pair[0].load() + pair[1].load() >= 0);
    }
}

/// Wait-die: two writers that each go on to read a word the other holds do not wait for
/// each other until one gives up (whichever began to wait first, usually the older): the
/// younger aborts at once and the older runs once. Ten trials on two OS threads.
#[test]
fn the_younger_of_two_deadlocked_writers_gives_way() {
    let _s = serial();
    for trial in 0..10 {
        let [x, y, z] = [0; 3].map(|_| &*Box::leak(Box::new(TCell::new(0u64))));
        let a_holds_x: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
        let b_holds_y: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
        let a_runs: &'static AtomicU32 = Box::leak(Box::new(AtomicU32::new(0)));
        let a_done: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
        let b_runs: &'static AtomicU32 = Box::leak(Box::new(AtomicU32::new(0)));
        let a = std::thread::spawn(move || {
            let r = atomic(|tx| {
                a_runs.fetch_add(1, Ordering::Relaxed);
                tx.write(x, 1)?;
                a_holds_x.store(true, Ordering::Release);
                while !b_holds_y.load(Ordering::Acquire) {
                    std::hint::spin_loop();
                }
                tx.read(y)
            });
            a_done.store(true, Ordering::Release);
            r
        });
        let b = std::thread::spawn(move || {
            while !a_holds_x.load(Ordering::Acquire) {
                std::hint::spin_loop();
            }
            // A commit in between: the clock moves, so this thread's transaction is younger.
            atomic(|tx| tx.write(z, 1));
            atomic(|tx| {
                // Run again only after the older one is done (an invisible read of y,
                // which a rerun writing y at once would make stale, is not the point).
                if b_runs.fetch_add(1, Ordering::Relaxed) > 0 {
                    while !a_done.load(Ordering::Acquire) {
                        std::hint::spin_loop();
                    }
                }
                tx.write(y, 2)?;
                b_holds_y.store(true, Ordering::Release);
                // Let the older one find y held first.
                let t = std::time::Instant::now();
                while t.elapsed() < std::time::Duration::from_micros(1) {
                    std::hint::spin_loop();
                }
                tx.read(x)
            })
        });
        let (ra, rb) = (a.join().unwrap(), b.join().unwrap());
        assert_eq!(a_runs.load(Ordering::Relaxed), 1, "trial {trial}: the older writer ran again");
        // Both committed: one order or the other.
        assert!((ra, rb) == (0, 1) || (ra, rb) == (2, 0), "trial {trial}: {ra}, {rb}");
        assert_eq!((x.load(), y.load()), (1, 2));
    }
}
