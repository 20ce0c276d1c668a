//! Hosted tests of the threads, the scheduler's policies, predicate yield and futures.

use mcrt::hosted::LinuxHost;
use mcrt::sync::{Barrier, Mutex, MutexKind};
use mcrt::{Config, Policy, QueueLock};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;

fn configs(p: usize) -> Vec<Config> {
    let mut v: Vec<Config> = Policy::ALL.iter().map(|&pol| Config::new(pol, p)).collect();
    v.push(Config::new(Policy::Single, p).with_lock(QueueLock::Ticket));
    v
}

#[test]
fn main_result_comes_back() {
    let host = LinuxHost::unpinned();
    assert_eq!(mcrt::run(Config::new(Policy::Stealing, 2), &host, || 42), Ok(42));
}

#[test]
fn spawn_join_returns_values_at_every_policy() {
    let host = LinuxHost::unpinned();
    for config in configs(3) {
        let sum = mcrt::run(config, &host, || {
            let hs: Vec<_> = (0..100u64).map(|i| mcrt::spawn(move || i * i).unwrap()).collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
        });
        assert_eq!(sum, Ok((0..100u64).map(|i| i * i).sum()));
    }
}

#[test]
fn a_hundred_thousand_threads_are_created_and_joined() {
    let host = LinuxHost::unpinned();
    let n = mcrt::run(Config::new(Policy::Stealing, 2), &host, || {
        let mut done = 0u64;
        for _ in 0..1000 {
            let hs: Vec<_> = (0..100).map(|_| mcrt::spawn(|| 1u64).unwrap()).collect();
            done += hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>();
        }
        done
    });
    assert_eq!(n, Ok(100_000));
}

#[test]
fn detached_threads_run_and_free_themselves() {
    let host = LinuxHost::unpinned();
    let count = Arc::new(AtomicU32::new(0));
    let c = count.clone();
    mcrt::run(Config::new(Policy::Sharing, 2), &host, move || {
        for _ in 0..1000 {
            let c = c.clone();
            drop(mcrt::spawn(move || {
                c.fetch_add(1, Ordering::AcqRel);
                mcrt::notify();
            }));
        }
        mcrt::yield_until(&c, mcrt::Op::Eq, 1000);
    })
    .unwrap();
    assert_eq!(count.load(Ordering::Acquire), 1000);
}

#[test]
fn yield_interleaves_threads_on_one_processor() {
    let host = LinuxHost::unpinned();
    let order = mcrt::run(Config::new(Policy::Local, 1), &host, || {
        let log = Arc::new(std::sync::Mutex::new(Vec::new()));
        let hs: Vec<_> = (0..2)
            .map(|id| {
                let log = log.clone();
                mcrt::spawn(move || {
                    for step in 0..3 {
                        log.lock().unwrap().push((id, step));
                        mcrt::yield_now();
                    }
                })
                .unwrap()
            })
            .collect();
        for h in hs {
            h.join();
        }
        Arc::try_unwrap(log).unwrap().into_inner().unwrap()
    })
    .unwrap();
    assert_eq!(order, [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)]);
}

#[test]
fn exit_ends_a_thread_and_join_sees_none() {
    let host = LinuxHost::unpinned();
    let r = mcrt::run(Config::new(Policy::Stealing, 2), &host, || {
        let h = mcrt::spawn(|| -> u32 { mcrt::exit() }).unwrap();
        h.join()
    });
    assert_eq!(r, Ok(None));
}

#[test]
fn predicate_yield_loses_no_wake_up() {
    let host = LinuxHost::unpinned();
    for config in configs(2) {
        let rounds = mcrt::run(config, &host, || {
            let word = Arc::new(AtomicU32::new(0));
            let w = word.clone();
            let pong = mcrt::spawn(move || {
                for i in 0..2000 {
                    mcrt::yield_until(&w, mcrt::Op::Eq, 2 * i + 1);
                    w.store(2 * i + 2, Ordering::Release);
                    mcrt::notify();
                }
            })
            .unwrap();
            for i in 0..2000 {
                word.store(2 * i + 1, Ordering::Release);
                mcrt::notify();
                mcrt::yield_until(&word, mcrt::Op::Eq, 2 * i + 2);
            }
            pong.join();
            word.load(Ordering::Acquire)
        });
        assert_eq!(rounds, Ok(4000));
    }
}

#[test]
fn barriers_hold_at_every_policy() {
    let host = LinuxHost::unpinned();
    for config in configs(4) {
        let ok = mcrt::run(config, &host, || {
            let n = 8;
            let barrier = Arc::new(Barrier::new(n));
            let phase = Arc::new(AtomicUsize::new(0));
            let hs: Vec<_> = (0..n)
                .map(|_| {
                    let (b, phase) = (barrier.clone(), phase.clone());
                    mcrt::spawn(move || {
                        let mut ok = true;
                        for round in 0..50 {
                            // Nobody passes round r's barrier before all n arrived.
                            phase.fetch_add(1, Ordering::AcqRel);
                            b.wait();
                            ok &= phase.load(Ordering::Acquire) >= (round + 1) * n as usize;
                            b.wait();
                        }
                        ok
                    })
                    .unwrap()
                })
                .collect();
            hs.into_iter().all(|h| h.join().unwrap())
        });
        assert_eq!(ok, Ok(true));
    }
}

#[test]
fn mutexes_of_every_kind_exclude() {
    let host = LinuxHost::unpinned();
    for kind in MutexKind::ALL {
        let total = mcrt::run(Config::new(Policy::Stealing, 3), &host, move || {
            let m = Arc::new(Mutex::new(kind, 0u64));
            let hs: Vec<_> = (0..6)
                .map(|_| {
                    let m = m.clone();
                    mcrt::spawn(move || {
                        for i in 0..2000 {
                            let mut g = m.lock();
                            let v = *g;
                            if i % 7 == 0 {
                                mcrt::yield_now(); // held across a switch
                            }
                            *g = v + 1;
                        }
                    })
                    .unwrap()
                })
                .collect();
            for h in hs {
                h.join();
            }
            let v = *m.lock();
            v
        });
        assert_eq!(total, Ok(12_000), "{kind:?}");
    }
}

#[test]
fn futures_give_serial_results() {
    let host = LinuxHost::unpinned();
    for p in [1, 2, 4] {
        let sum = mcrt::run(Config::new(Policy::Stealing, p), &host, || {
            let fs: Vec<_> = (0..1000u64).map(|i| mcrt::future::spawn(|x: u64| x * 3, i)).collect();
            fs.into_iter().map(|f| f.read()).sum::<u64>()
        });
        assert_eq!(sum, Ok(3 * (0..1000u64).sum::<u64>()));
    }
}

#[test]
fn nested_futures_fib() {
    fn fib(n: u64) -> u64 {
        if n < 2 {
            return n;
        }
        let a = mcrt::future::spawn(fib, n - 1);
        let b = fib(n - 2);
        a.read() + b
    }
    let host = LinuxHost::unpinned();
    assert_eq!(mcrt::run(Config::new(Policy::Stealing, 2), &host, || fib(20)), Ok(6765));
}

#[test]
fn domains_keep_threads_on_their_processors() {
    let host = LinuxHost::unpinned();
    let ok = mcrt::run(Config::domains(&[1, 2]), &host, || {
        let mut ok = mcrt::processor() == 0;
        // Move to domain 1 (processors 1 and 2) and back.
        mcrt::switch_to_queue(1).unwrap();
        ok &= mcrt::processor() >= 1;
        let h = mcrt::spawn(mcrt::processor).unwrap(); // spawned into domain 1
        ok &= h.join().unwrap() >= 1;
        mcrt::switch_to_queue(0).unwrap();
        ok &= mcrt::processor() == 0;
        ok &= mcrt::switch_to_queue(2) == Err(mcrt::Error::InvalidArgument);
        ok
    });
    assert_eq!(ok, Ok(true));
}

#[test]
fn thread_local_keys_are_per_thread_and_destructed() {
    static FREED: AtomicUsize = AtomicUsize::new(0);
    fn dtor(v: usize) {
        FREED.fetch_add(v, Ordering::AcqRel);
    }
    let host = LinuxHost::unpinned();
    let r = mcrt::run(Config::new(Policy::Stealing, 2), &host, || {
        let key = mcrt::Key::new(Some(dtor)).unwrap();
        key.set(1);
        let hs: Vec<_> = (0..10)
            .map(|i| {
                mcrt::spawn(move || {
                    let before = key.get();
                    key.set(100 + i);
                    mcrt::yield_now();
                    before == 0 && key.get() == 100 + i
                })
                .unwrap()
            })
            .collect();
        let all = hs.into_iter().all(|h| h.join().unwrap());
        all && key.get() == 1
    });
    assert_eq!(r, Ok(true));
    // The ten threads' values, and the main thread's 1 when it ended.
    assert_eq!(FREED.load(Ordering::Acquire), (100..110).sum::<usize>() + 1);
}

#[test]
fn fpu_control_state_is_per_thread() {
    fn mxcsr() -> u32 {
        let mut v: u32 = 0;
        unsafe { std::arch::asm!("stmxcsr [{}]", in(reg) &mut v) };
        v
    }
    fn set_mxcsr(v: u32) {
        unsafe { std::arch::asm!("ldmxcsr [{}]", in(reg) &v) };
    }
    let host = LinuxHost::unpinned();
    let ok = mcrt::run(Config::new(Policy::Local, 1), &host, || {
        // Thread a rounds toward zero; thread b keeps the default; both yield between.
        let a = mcrt::spawn(|| {
            set_mxcsr(0x1F80 | 0x6000);
            mcrt::yield_now();
            mcrt::yield_now();
            mxcsr() & 0x6000 == 0x6000
        })
        .unwrap();
        let b = mcrt::spawn(|| {
            mcrt::yield_now();
            mxcsr() & 0x6000 == 0
        })
        .unwrap();
        a.join().unwrap() && b.join().unwrap()
    });
    assert_eq!(ok, Ok(true));
}

#[test]
fn bad_arguments_are_errors() {
    let host = LinuxHost::unpinned();
    let mut c = Config::new(Policy::Stealing, 2);
    c.snoop[1] = vec![7];
    assert_eq!(mcrt::run(c, &host, || ()), Err(mcrt::Error::InvalidArgument));
    let r = mcrt::run(Config::new(Policy::Stealing, 1), &host, || {
        let inner = mcrt::run(Config::new(Policy::Single, 1), &LinuxHost::unpinned(), || ());
        let spawn = mcrt::spawn_to(5, || ()).err();
        (inner, spawn)
    });
    assert_eq!(r, Ok((Err(mcrt::Error::InvalidArgument), Some(mcrt::Error::InvalidArgument))));
}
