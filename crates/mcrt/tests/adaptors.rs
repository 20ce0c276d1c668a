//! Hosted tests of the client adaptors (McRT §2.5): the pthread-like one (threads, mutex,
//! condition variable, barrier, keys, once) and the OpenMP-like one (regions, schedules,
//! reductions, single, master, barrier, nested teams), under every scheduler policy.

use mcrt::hosted::LinuxHost;
use mcrt::omp::{self, Schedule};
use mcrt::pthread::{self, Attr, BarrierWait, Cond, DetachState, Errno, MutexAttr, MutexType};
use mcrt::sync::MutexKind;
use mcrt::{Config, Policy};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;

/// Runs `f` inside a runtime of 3 processors under every policy.
fn under_every_policy<R: Send + 'static>(f: impl Fn() -> R + Send + Sync + Clone + 'static) {
    let host = LinuxHost::unpinned();
    for policy in Policy::ALL {
        let f = f.clone();
        if let Err(e) = mcrt::run(Config::new(policy, 3), &host, move || {
            f();
        }) {
            panic!("policy {}: the runtime failed: {e:?}", policy.name());
        }
    }
}

// ---------------------------------------------------------------------------------------
// pthread

#[test]
fn pthread_create_join_returns_values_and_exit_values() {
    under_every_policy(|| {
        let ts: Vec<_> = (0..20usize)
            .map(|i| pthread::create(&Attr::default(), move || i * 3).unwrap())
            .collect();
        for (i, t) in ts.iter().enumerate() {
            assert_eq!(pthread::join(t), Ok(i * 3));
        }
        // Joined once: a second join is refused.
        assert_eq!(pthread::join(&ts[0]), Err(Errno::Invalid));
        // A thread that leaves by `exit` gives its value to its joiner.
        let t = pthread::create(&Attr::default(), || {
            pthread::exit(77);
        })
        .unwrap();
        assert_eq!(pthread::join(&t), Ok(77));
    });
}

#[test]
fn pthread_self_detach_and_errors() {
    under_every_policy(|| {
        // Joining oneself is a deadlock.
        assert_eq!(pthread::join(&pthread::current()), Err(Errno::Deadlock));
        // `current` inside a thread is the handle its creator got.
        let seen = Arc::new(std::sync::Mutex::new(None));
        let s = seen.clone();
        let t = pthread::create(&Attr::default(), move || {
            *s.lock().unwrap() = Some(pthread::current());
            0
        })
        .unwrap();
        pthread::join(&t).unwrap();
        assert!(pthread::equal(seen.lock().unwrap().as_ref().unwrap(), &t));
        // Detached threads run and cannot be joined; a thread may detach itself.
        let ran = Arc::new(AtomicU32::new(0));
        let mut ts = Vec::new();
        for i in 0..10 {
            let ran = ran.clone();
            let attr = Attr {
                detach_state: if i % 2 == 0 {
                    DetachState::Detached
                } else {
                    DetachState::Joinable
                },
            };
            ts.push(
                pthread::create(&attr, move || {
                    if i % 2 == 1 {
                        pthread::detach(&pthread::current()).unwrap();
                    }
                    ran.fetch_add(1, Ordering::AcqRel);
                    mcrt::notify();
                    0
                })
                .unwrap(),
            );
        }
        mcrt::yield_until(&ran, mcrt::Op::Eq, 10);
        for t in &ts {
            assert_eq!(pthread::join(t), Err(Errno::Invalid));
            assert_eq!(pthread::detach(t), Err(Errno::Invalid));
        }
    });
}

#[test]
fn pthread_mutex_types_and_errors() {
    under_every_policy(|| {
        for algorithm in MutexKind::ALL {
            let m = pthread::Mutex::new(MutexAttr { kind: MutexType::ErrorCheck, algorithm });
            assert_eq!(m.unlock(), Err(Errno::Perm));
            m.lock().unwrap();
            assert_eq!(m.lock(), Err(Errno::Deadlock));
            assert_eq!(m.trylock(), Err(Errno::Busy));
            assert_eq!(m.destroy(), Err(Errno::Busy));
            m.unlock().unwrap();
            m.destroy().unwrap();
            assert_eq!(m.lock(), Err(Errno::Invalid));

            let r = pthread::Mutex::new(MutexAttr { kind: MutexType::Recursive, algorithm });
            r.lock().unwrap();
            r.lock().unwrap();
            r.trylock().unwrap();
            // Another thread cannot take it until the third unlock.
            let r = Arc::new(r);
            for _ in 0..2 {
                r.unlock().unwrap();
                let r2 = r.clone();
                let t = pthread::create(&Attr::default(), move || r2.trylock().is_ok() as usize)
                    .unwrap();
                assert_eq!(pthread::join(&t), Ok(0));
            }
            r.unlock().unwrap();
            assert_eq!(r.unlock(), Err(Errno::Perm));
            let r2 = r.clone();
            let t = pthread::create(&Attr::default(), move || {
                r2.lock().unwrap();
                r2.unlock().unwrap();
                1
            })
            .unwrap();
            assert_eq!(pthread::join(&t), Ok(1));
        }
    });
}

#[test]
fn pthread_mutex_excludes() {
    under_every_policy(|| {
        for algorithm in MutexKind::ALL {
            let m = Arc::new(pthread::Mutex::new(MutexAttr { kind: MutexType::Normal, algorithm }));
            // A counter updated non-atomically (load, yield, store): only exclusion keeps it.
            let counter = Arc::new(AtomicUsize::new(0));
            let ts: Vec<_> = (0..6)
                .map(|_| {
                    let (m, counter) = (m.clone(), counter.clone());
                    pthread::create(&Attr::default(), move || {
                        for _ in 0..200 {
                            m.lock().unwrap();
                            let v = counter.load(Ordering::Relaxed);
                            pthread::yield_now();
                            counter.store(v + 1, Ordering::Relaxed);
                            m.unlock().unwrap();
                        }
                        0
                    })
                    .unwrap()
                })
                .collect();
            ts.iter().for_each(|t| assert_eq!(pthread::join(t), Ok(0)));
            assert_eq!(counter.load(Ordering::Relaxed), 6 * 200, "{algorithm:?}");
        }
    });
}

/// A bounded queue guarded by a pthread mutex, with "not empty" and "not full" conditions.
struct BoundedQueue {
    m: pthread::Mutex,
    not_empty: Cond,
    not_full: Cond,
    items: std::sync::Mutex<std::collections::VecDeque<usize>>,
}

const CAPACITY: usize = 2;

impl BoundedQueue {
    fn put(&self, v: usize) {
        self.m.lock().unwrap();
        while self.items.lock().unwrap().len() == CAPACITY {
            self.not_full.wait(&self.m).unwrap();
        }
        self.items.lock().unwrap().push_back(v);
        self.not_empty.signal().unwrap();
        self.m.unlock().unwrap();
    }

    fn take(&self) -> usize {
        self.m.lock().unwrap();
        let v = loop {
            if let Some(v) = self.items.lock().unwrap().pop_front() {
                break v;
            }
            self.not_empty.wait(&self.m).unwrap();
        };
        self.not_full.signal().unwrap();
        self.m.unlock().unwrap();
        v
    }
}

#[test]
fn pthread_condvar_producer_consumer_loses_no_wakeup() {
    under_every_policy(|| {
        for algorithm in MutexKind::ALL {
            let q = Arc::new(BoundedQueue {
                m: pthread::Mutex::new(MutexAttr { kind: MutexType::ErrorCheck, algorithm }),
                not_empty: Cond::new(),
                not_full: Cond::new(),
                items: std::sync::Mutex::new(Default::default()),
            });
            const PER: usize = 300;
            let producers: Vec<_> = (0..3)
                .map(|p| {
                    let q = q.clone();
                    pthread::create(&Attr::default(), move || {
                        (0..PER).for_each(|i| q.put(p * PER + i + 1));
                        0
                    })
                    .unwrap()
                })
                .collect();
            let consumers: Vec<_> = (0..3)
                .map(|_| {
                    let q = q.clone();
                    pthread::create(&Attr::default(), move || (0..PER).map(|_| q.take()).sum())
                        .unwrap()
                })
                .collect();
            producers.iter().for_each(|t| assert_eq!(pthread::join(t), Ok(0)));
            let total: usize = consumers.iter().map(|t| pthread::join(t).unwrap()).sum();
            let n = 3 * PER;
            assert_eq!(total, n * (n + 1) / 2, "{algorithm:?}");
            // Waiting without holding the mutex is refused; broadcast and destroy work.
            assert_eq!(q.not_empty.wait(&q.m), Err(Errno::Perm));
            q.not_empty.broadcast().unwrap();
            q.not_empty.destroy().unwrap();
            assert_eq!(q.not_empty.signal(), Err(Errno::Invalid));
        }
    });
}

#[test]
fn pthread_broadcast_wakes_every_waiter() {
    under_every_policy(|| {
        let m = Arc::new(pthread::Mutex::default());
        let cv = Arc::new(Cond::new());
        let go = Arc::new(AtomicU32::new(0));
        let waiting = Arc::new(AtomicU32::new(0));
        let ts: Vec<_> = (0..5)
            .map(|_| {
                let (m, cv, go, waiting) = (m.clone(), cv.clone(), go.clone(), waiting.clone());
                pthread::create(&Attr::default(), move || {
                    m.lock().unwrap();
                    waiting.fetch_add(1, Ordering::AcqRel);
                    while go.load(Ordering::Acquire) == 0 {
                        cv.wait(&m).unwrap();
                    }
                    m.unlock().unwrap();
                    1
                })
                .unwrap()
            })
            .collect();
        mcrt::yield_until(&waiting, mcrt::Op::Eq, 5);
        m.lock().unwrap();
        go.store(1, Ordering::Release);
        cv.broadcast().unwrap();
        m.unlock().unwrap();
        let woke: usize = ts.iter().map(|t| pthread::join(t).unwrap()).sum();
        assert_eq!(woke, 5);
    });
}

#[test]
fn pthread_barrier_holds_every_round() {
    under_every_policy(|| {
        const N: usize = 4;
        const ROUNDS: usize = 20;
        assert!(pthread::Barrier::new(0).is_err());
        let b = Arc::new(pthread::Barrier::new(N as u32).unwrap());
        let arrived = Arc::new(AtomicUsize::new(0));
        let serials = Arc::new(AtomicUsize::new(0));
        let ts: Vec<_> = (0..N)
            .map(|_| {
                let (b, arrived, serials) = (b.clone(), arrived.clone(), serials.clone());
                pthread::create(&Attr::default(), move || {
                    for round in 0..ROUNDS {
                        arrived.fetch_add(1, Ordering::AcqRel);
                        if b.wait().unwrap() == BarrierWait::Serial {
                            serials.fetch_add(1, Ordering::AcqRel);
                        }
                        // Nobody passes before all of this round have arrived.
                        assert!(arrived.load(Ordering::Acquire) >= (round + 1) * N);
                        b.wait().unwrap();
                    }
                    0
                })
                .unwrap()
            })
            .collect();
        ts.iter().for_each(|t| assert_eq!(pthread::join(t), Ok(0)));
        assert_eq!(serials.load(Ordering::Acquire), ROUNDS);
        b.destroy().unwrap();
        assert_eq!(b.wait(), Err(Errno::Invalid));
    });
}

static DESTROYED: AtomicUsize = AtomicUsize::new(0);
static DESTROYED_SUM: AtomicUsize = AtomicUsize::new(0);
static NEVER: AtomicUsize = AtomicUsize::new(0);

fn count_destroyed(v: usize) {
    DESTROYED.fetch_add(1, Ordering::AcqRel);
    DESTROYED_SUM.fetch_add(v, Ordering::AcqRel);
}

fn never(_: usize) {
    NEVER.fetch_add(1, Ordering::AcqRel);
}

#[test]
fn pthread_keys_are_per_thread_with_destructors() {
    let host = LinuxHost::unpinned();
    for policy in Policy::ALL {
        DESTROYED.store(0, Ordering::Release);
        DESTROYED_SUM.store(0, Ordering::Release);
        mcrt::run(Config::new(policy, 3), &host, || {
            let key = pthread::key_create(Some(count_destroyed)).unwrap();
            assert_eq!(pthread::getspecific(key), 0);
            pthread::setspecific(key, 1000).unwrap();
            let ts: Vec<_> = (1..=8usize)
                .map(|i| {
                    pthread::create(&Attr::default(), move || {
                        assert_eq!(pthread::getspecific(key), 0, "a new thread's value is 0");
                        pthread::setspecific(key, i).unwrap();
                        pthread::yield_now();
                        assert_eq!(pthread::getspecific(key), i);
                        if i == 8 {
                            pthread::setspecific(key, 0).unwrap(); // 0: no destructor
                        }
                        if i % 2 == 0 {
                            pthread::exit(0); // destructors run on exit too
                        }
                        0
                    })
                    .unwrap()
                })
                .collect();
            ts.iter().for_each(|t| {
                pthread::join(t).unwrap();
            });
            assert_eq!(pthread::getspecific(key), 1000);
            pthread::key_delete(key).unwrap();
            assert_eq!(pthread::key_delete(key), Err(Errno::Invalid));
            assert_eq!(pthread::setspecific(key, 1), Err(Errno::Invalid));
            assert_eq!(pthread::getspecific(key), 0);
        })
        .unwrap();
        // Threads 1..=7 had non-zero values at their end (the main thread's key was
        // deleted before it ended).
        assert_eq!(DESTROYED.load(Ordering::Acquire), 7, "{}", policy.name());
        assert_eq!(DESTROYED_SUM.load(Ordering::Acquire), (1..=7).sum::<usize>());
    }
}

#[test]
fn pthread_key_deleted_before_thread_ends_runs_no_destructor() {
    let host = LinuxHost::unpinned();
    mcrt::run(Config::new(Policy::Stealing, 2), &host, || {
        let before = NEVER.load(Ordering::Acquire);
        let key = pthread::key_create(Some(never)).unwrap();
        let set = Arc::new(AtomicU32::new(0));
        let release = Arc::new(AtomicU32::new(0));
        let (s, r) = (set.clone(), release.clone());
        let t = pthread::create(&Attr::default(), move || {
            pthread::setspecific(key, 5).unwrap();
            s.store(1, Ordering::Release);
            mcrt::notify();
            mcrt::yield_until(&r, mcrt::Op::Eq, 1);
            0
        })
        .unwrap();
        mcrt::yield_until(&set, mcrt::Op::Eq, 1);
        pthread::key_delete(key).unwrap();
        // A new key may reuse the slot: the old value must not show through.
        let fresh = pthread::key_create(None).unwrap();
        release.store(1, Ordering::Release);
        mcrt::notify();
        pthread::join(&t).unwrap();
        assert_eq!(NEVER.load(Ordering::Acquire), before);
        assert_eq!(pthread::getspecific(fresh), 0);
        pthread::key_delete(fresh).unwrap();
    })
    .unwrap();
}

#[test]
fn pthread_once_runs_once() {
    static ONCE: pthread::Once = pthread::Once::new();
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    let host = LinuxHost::unpinned();
    mcrt::run(Config::new(Policy::Sharing, 3), &host, || {
        let ts: Vec<_> = (0..8)
            .map(|_| {
                pthread::create(&Attr::default(), || {
                    ONCE.call(|| {
                        pthread::yield_now();
                        RUNS.fetch_add(1, Ordering::AcqRel);
                    });
                    // Everyone returns only after the initializer has run.
                    RUNS.load(Ordering::Acquire)
                })
                .unwrap()
            })
            .collect();
        ts.iter().for_each(|t| assert_eq!(pthread::join(t), Ok(1)));
    })
    .unwrap();
    assert_eq!(RUNS.load(Ordering::Acquire), 1);
}

// ---------------------------------------------------------------------------------------
// OpenMP

const SCHEDULES: [Schedule; 7] = [
    Schedule::Static,
    Schedule::StaticChunk(1),
    Schedule::StaticChunk(7),
    Schedule::Dynamic(1),
    Schedule::Dynamic(5),
    Schedule::Guided(1),
    Schedule::Guided(4),
];

#[test]
fn omp_region_numbers_its_threads_and_thread_0_is_the_caller() {
    under_every_policy(|| {
        for n in [1, 2, 3, 5] {
            let me = mcrt::thread::current_id();
            let seen: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
            omp::parallel(n, |ctx| {
                assert_eq!(ctx.num_threads(), n);
                assert_eq!(ctx.level(), 1);
                seen[ctx.thread_num()].fetch_add(1, Ordering::AcqRel);
                assert_eq!(ctx.thread_num() == 0, mcrt::thread::current_id() == me);
            });
            assert!(seen.iter().all(|s| s.load(Ordering::Acquire) == 1));
        }
        // 0: one thread per logical processor.
        omp::parallel(0, |ctx| assert_eq!(ctx.num_threads(), mcrt::processors()));
    });
}

#[test]
fn omp_every_schedule_covers_every_iteration_once() {
    under_every_policy(|| {
        for schedule in SCHEDULES {
            for (n, len) in [(1, 10), (3, 0), (3, 1), (3, 100), (4, 1001)] {
                let hits: Vec<AtomicU32> = (0..len).map(|_| AtomicU32::new(0)).collect();
                let start = 17;
                omp::parallel(n, |ctx| {
                    // Two loops back to back (one nowait), on the same counters.
                    ctx.for_each_nowait(start..start + len, schedule, |i| {
                        hits[i - start].fetch_add(1, Ordering::Relaxed);
                    });
                    ctx.for_each(start..start + len, schedule, |i| {
                        hits[i - start].fetch_add(1, Ordering::Relaxed);
                    });
                    // After the loop's barrier, every iteration of both loops is done.
                    assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 2));
                });
                omp::parallel_for(n, 0..len, schedule, |i| {
                    hits[i].fetch_add(1, Ordering::Relaxed);
                });
                for (i, h) in hits.iter().enumerate() {
                    assert_eq!(h.load(Ordering::Relaxed), 3, "{schedule:?} n={n} i={i}");
                }
            }
        }
    });
}

#[test]
fn omp_static_schedules_deal_as_openmp_says() {
    let host = LinuxHost::unpinned();
    mcrt::run(Config::new(Policy::Stealing, 3), &host, || {
        let owner: Vec<AtomicUsize> = (0..10).map(|_| AtomicUsize::new(usize::MAX)).collect();
        omp::parallel(3, |ctx| {
            ctx.for_each(0..10, Schedule::Static, |i| {
                owner[i].store(ctx.thread_num(), Ordering::Relaxed)
            });
        });
        let got: Vec<usize> = owner.iter().map(|o| o.load(Ordering::Relaxed)).collect();
        assert_eq!(got, [0, 0, 0, 0, 1, 1, 1, 2, 2, 2]);
        omp::parallel(3, |ctx| {
            ctx.for_each(0..10, Schedule::StaticChunk(2), |i| {
                owner[i].store(ctx.thread_num(), Ordering::Relaxed)
            });
        });
        let got: Vec<usize> = owner.iter().map(|o| o.load(Ordering::Relaxed)).collect();
        assert_eq!(got, [0, 0, 1, 1, 2, 2, 0, 0, 1, 1]);
    })
    .unwrap();
}

#[test]
fn omp_reductions_are_right() {
    under_every_policy(|| {
        for schedule in SCHEDULES {
            let sum = omp::parallel_for_reduce(
                3,
                0..1000,
                schedule,
                0u64,
                |a, i| a + i as u64,
                |a, b| a + b,
            );
            assert_eq!(sum, 999 * 1000 / 2, "{schedule:?}");
            let max = omp::parallel_for_reduce(
                4,
                0..777,
                schedule,
                0usize,
                |a, i| a.max((i * 38) % 777),
                usize::max,
            );
            assert_eq!(max, 776);
        }
        // Every thread gets the result; thread-number order; non-numeric types.
        omp::parallel(4, |ctx| {
            let total = ctx.reduce(ctx.thread_num() + 1, |a, b| a + b);
            assert_eq!(total, 10);
            let order = ctx.reduce(vec![ctx.thread_num()], |mut a, b| {
                a.extend(b);
                a
            });
            assert_eq!(order, [0, 1, 2, 3]);
            // Many in a row (more than the team's slots): each is right.
            for k in 0..40usize {
                assert_eq!(ctx.reduce(k * ctx.thread_num(), |a, b| a + b), k * 6);
            }
        });
    });
}

#[test]
fn omp_single_runs_once_per_encounter_and_master_is_thread_0() {
    under_every_policy(|| {
        const ENCOUNTERS: usize = 25;
        let runs: Vec<AtomicUsize> = (0..ENCOUNTERS).map(|_| AtomicUsize::new(0)).collect();
        let nowait_runs: Vec<AtomicUsize> = (0..ENCOUNTERS).map(|_| AtomicUsize::new(0)).collect();
        let masters = AtomicUsize::new(0);
        omp::parallel(4, |ctx| {
            for (e, r) in runs.iter().enumerate() {
                let got = ctx.single(|| r.fetch_add(1, Ordering::AcqRel));
                // After single's barrier, it has run exactly once.
                assert_eq!(r.load(Ordering::Acquire), 1, "encounter {e}");
                let _ = got;
                ctx.single_nowait(|| nowait_runs[e].fetch_add(1, Ordering::AcqRel));
            }
            if let Some(num) = ctx.master(|| ctx.thread_num()) {
                assert_eq!(num, 0);
                masters.fetch_add(1, Ordering::AcqRel);
            }
        });
        assert!(runs.iter().all(|r| r.load(Ordering::Acquire) == 1));
        assert!(nowait_runs.iter().all(|r| r.load(Ordering::Acquire) == 1));
        assert_eq!(masters.load(Ordering::Acquire), 1);
    });
}

#[test]
fn omp_barrier_holds() {
    under_every_policy(|| {
        const N: usize = 4;
        let arrived = AtomicUsize::new(0);
        omp::parallel(N, |ctx| {
            for round in 0..30 {
                if ctx.thread_num() == round % N {
                    mcrt::yield_now(); // a late arrival
                }
                arrived.fetch_add(1, Ordering::AcqRel);
                ctx.barrier();
                assert!(arrived.load(Ordering::Acquire) >= (round + 1) * N);
                ctx.barrier();
            }
        });
        assert_eq!(arrived.load(Ordering::Acquire), 30 * N);
    });
}

#[test]
fn omp_nested_teams_are_their_own() {
    under_every_policy(|| {
        // 2 outer × 3 inner: each inner thread sees its own team's numbers.
        let seen: Vec<AtomicUsize> = (0..6).map(|_| AtomicUsize::new(0)).collect();
        let threads = std::sync::Mutex::new(std::collections::HashSet::new());
        omp::parallel(2, |outer| {
            let o = outer.thread_num();
            let outer_id = mcrt::thread::current_id();
            outer.parallel(3, |inner| {
                assert_eq!(inner.num_threads(), 3);
                assert_eq!(inner.level(), 2);
                assert_eq!(inner.thread_num() == 0, mcrt::thread::current_id() == outer_id);
                seen[o * 3 + inner.thread_num()].fetch_add(1, Ordering::AcqRel);
                threads.lock().unwrap().insert(mcrt::thread::current_id());
                // Constructs of the inner team are the inner team's.
                let s = inner.reduce(inner.thread_num(), |a, b| a + b);
                assert_eq!(s, 3);
                inner.barrier();
            });
            // The outer team's constructs still work after the inner region.
            assert_eq!(outer.reduce(1usize, |a, b| a + b), 2);
        });
        assert!(seen.iter().all(|s| s.load(Ordering::Acquire) == 1));
        // Six McRT threads ran the inner regions (true nesting, not serialized).
        assert_eq!(threads.lock().unwrap().len(), 6);

        // A nested parallel sum: the outer loop over rows, an inner reduction per row.
        const ROWS: usize = 6;
        const COLS: usize = 50;
        let total = omp::parallel_for_reduce(
            2,
            0..ROWS,
            Schedule::Dynamic(1),
            0usize,
            |acc, r| {
                acc + omp::parallel_for_reduce(
                    3,
                    0..COLS,
                    Schedule::Guided(2),
                    0usize,
                    |a, c| a + r * COLS + c,
                    |a, b| a + b,
                )
            },
            |a, b| a + b,
        );
        let n = ROWS * COLS;
        assert_eq!(total, n * (n - 1) / 2);
    });
}
