//! The runtime's self-checks (issue M8): each runs as the main thread of a runtime and
//! says what went wrong. The same checks run hosted (`tests/threads.rs`, on Linux threads)
//! and on Atoll (`mcrttest`, on kernel threads), under every scheduler policy, so both
//! hosts are held to one set of behaviours:
//!
//! - `start`: nothing (the runtime's start and stop alone);
//! - `spawn`: 200 threads return their values through join;
//! - `yield`: two threads on one processor alternate at each yield (run it on one
//!   processor: [`SelfCheck::one_processor`]);
//! - `fpu` (one processor; issue M15): a thread sets rounding toward zero through
//!   [`crate::fpu::set_control`] and keeps it across its yields, while a thread the
//!   sharing switch suspended before that call, and the main thread, resume with the
//!   initial words; the runtime then keeps each thread's words;
//! - `pingpong`: 2000 rounds of predicate yield between two threads lose no wake-up;
//! - `barrier`: 8 threads pass 50 barrier rounds, none early;
//! - `mutex`: 6 threads increment under each mutex kind (TTS, ticket, MCS), holding it
//!   across yields; no increment is lost;
//! - `futures`: 1000 futures and a nested-future Fibonacci give the serial answers;
//! - `keys`: thread-local values are per thread, and their destructors run at exit;
//! - `many`: 10,000 threads created and joined, 100 live at a time;
//! - `malloc`: 8 threads allocate tagged objects through the allocator and free each
//!   other's (remote frees); every object comes back once, intact;
//! - `stm`: 6 threads make 300 transfers each between 8 transactional accounts while
//!   auditing them: the total never changes;
//! - `pthread`: a bounded buffer under a pthread mutex and two condition variables, 3
//!   producers and 3 consumers: every item arrives once;
//! - `omp`: a parallel for (static, dynamic, guided) with a sum reduction, and a nested
//!   region (2 × 2 teams) each computing its own part;
//! - [`live`] (on its own, with a count): that many threads live at once;
//! - [`domains`] (with [`Config::domains`]`(&[1, n])`, n ≥ 1): a thread moved to another
//!   scheduling domain runs on that domain's processors.
//!
//! [`Config::domains`]: crate::Config::domains

use crate::malloc::raw;
use crate::predicate::Op;
use crate::sync::{Barrier, Mutex, MutexKind};
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

/// A check's verdict: what went wrong, if anything.
pub type Check = Result<(), &'static str>;

/// One self-check.
#[derive(Clone, Copy, Debug)]
pub struct SelfCheck {
    /// Its name.
    pub name: &'static str,
    /// The check, to run as a runtime's main thread.
    pub run: fn() -> Check,
    /// True when it must run on a runtime of one processor.
    pub one_processor: bool,
}

const fn check(name: &'static str, run: fn() -> Check) -> SelfCheck {
    SelfCheck { name, run, one_processor: false }
}

/// Every check but [`domains`], in the order they run.
pub const CHECKS: [SelfCheck; 14] = [
    check("start", start),
    check("spawn", spawn),
    SelfCheck { name: "yield", run: yields, one_processor: true },
    SelfCheck { name: "fpu", run: fpu, one_processor: true },
    check("pingpong", pingpong),
    check("barrier", barrier),
    check("mutex", mutex),
    check("futures", futures),
    check("keys", keys),
    check("many", many),
    check("malloc", malloc),
    check("stm", stm),
    check("pthread", pthread),
    check("omp", omp),
];

fn start() -> Check {
    Ok(())
}

fn spawn() -> Check {
    let hs: Vec<_> = (0..200u64)
        .map(|i| crate::spawn(move || i * i).map_err(|_| "spawn failed"))
        .collect::<Result<_, _>>()?;
    let sum: u64 = hs.into_iter().map(|h| h.join().unwrap_or(0)).sum();
    (sum == (0..200u64).map(|i| i * i).sum()).then_some(()).ok_or("a joined value is wrong")
}

fn yields() -> Check {
    let log = Arc::new(Mutex::new(MutexKind::Tts, Vec::new()));
    let hs: Vec<_> = (0..2u32)
        .map(|id| {
            let log = log.clone();
            crate::spawn(move || {
                for step in 0..3u32 {
                    log.lock().push((id, step));
                    crate::yield_now();
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

fn fpu() -> Check {
    use crate::fpu::{self, FpuWords, INITIAL};
    const TRUNC: FpuWords = FpuWords { mxcsr: 0x1F80 | 0x6000, x87: 0x037F | 0x0C00 };
    // Queue order: b, then a; b yields (to a) before a calls the setter.
    let b = crate::spawn(|| {
        crate::yield_now();
        fpu::control() == INITIAL
    })
    .map_err(|_| "spawn failed")?;
    let a = crate::spawn(|| {
        if fpu::set_control(TRUNC).is_err() {
            return false;
        }
        crate::yield_now();
        crate::yield_now();
        let held = fpu::control() == TRUNC;
        held && fpu::set_control(INITIAL).is_ok()
    })
    .map_err(|_| "spawn failed")?;
    let (b_ok, a_ok) = (b.join() == Some(true), a.join() == Some(true));
    if !b_ok || fpu::control() != INITIAL {
        return Err("a thread resumed with another thread's FPU control words");
    }
    if !a_ok {
        return Err("the FPU setter's words were not kept across yields");
    }
    fpu::kept_per_thread().then_some(()).ok_or("the FPU setter did not turn on keeping the words")
}

fn pingpong() -> Check {
    let word = Arc::new(AtomicU32::new(0));
    let w = word.clone();
    let pong = crate::spawn(move || {
        for i in 0..2000 {
            crate::yield_until(&w, Op::Eq, 2 * i + 1);
            w.store(2 * i + 2, Ordering::Release);
            crate::notify();
        }
    })
    .map_err(|_| "spawn failed")?;
    for i in 0..2000 {
        word.store(2 * i + 1, Ordering::Release);
        crate::notify();
        crate::yield_until(&word, Op::Eq, 2 * i + 2);
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
            crate::spawn(move || {
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
                crate::spawn(move || {
                    for i in 0..500 {
                        let mut g = m.lock();
                        let v = *g;
                        if i % 7 == 0 {
                            crate::yield_now();
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
    let a = crate::future::spawn(fib, n - 1);
    let b = fib(n - 2);
    a.read() + b
}

fn futures() -> Check {
    let fs: Vec<_> = (0..1000u64).map(|i| crate::future::spawn(|x: u64| x * 3, i)).collect();
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
    let key = crate::Key::new(Some(count_freed)).map_err(|_| "no key")?;
    let before = FREED.load(Ordering::Acquire);
    key.set(0); // the main thread's value stays 0: no destructor for it
    let hs: Vec<_> = (0..10)
        .map(|i| {
            crate::spawn(move || {
                let fresh = key.get() == 0;
                key.set(100 + i);
                crate::yield_now();
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
    for _ in 0..100 {
        let hs: Vec<_> = (0..100)
            .map(|_| crate::spawn(|| 1u64).map_err(|_| "spawn failed"))
            .collect::<Result<_, _>>()?;
        done += hs.into_iter().map(|h| h.join().unwrap_or(0)).sum::<u64>();
    }
    (done == 10_000).then_some(()).ok_or("not every one of 10,000 threads ran")
}

/// `n` threads live at once (McRT §3.1, Figure 2's measure; issue M15): each is created
/// and waits at one gate until all exist, then the gate opens and all are joined. The
/// error is how many had been created when a spawn failed (or `n` if one did not run).
pub fn live(n: usize) -> Result<(), usize> {
    let gate = Arc::new(AtomicU32::new(0));
    let mut hs = Vec::with_capacity(n);
    for made in 0..n {
        let g = gate.clone();
        match crate::spawn(move || {
            crate::yield_until(&g, Op::Eq, 1);
            1u64
        }) {
            Ok(h) => hs.push(h),
            Err(_) => {
                gate.store(1, Ordering::Release);
                crate::notify_all();
                for h in hs {
                    let _ = h.join();
                }
                return Err(made);
            }
        }
    }
    gate.store(1, Ordering::Release);
    crate::notify_all();
    let ran: u64 = hs.into_iter().map(|h| h.join().unwrap_or(0)).sum();
    (ran == n as u64).then_some(()).ok_or(n)
}

fn malloc() -> Check {
    let n = 8usize;
    let per = 500usize;
    // Each thread allocates its objects (48 bytes each) and publishes them; the next
    // thread frees them.
    let slots: Arc<Vec<AtomicUsize>> =
        Arc::new((0..n * per).map(|_| AtomicUsize::new(0)).collect());
    let ready = Arc::new(Barrier::new(n as u32));
    let hs: Vec<_> = (0..n)
        .map(|t| {
            let (slots, ready) = (slots.clone(), ready.clone());
            crate::spawn(move || {
                for i in 0..per {
                    // A 48-byte object.
                    let p = raw::alloc_value([(t * per + i) as u64 ^ 0x5a5a, 0, 0, 0, 0, 0]);
                    if p.is_null() {
                        return false;
                    }
                    slots[t * per + i].store(p as usize, Ordering::Release);
                }
                ready.wait();
                let mut ok = true;
                let next = (t + 1) % n;
                for i in 0..per {
                    let p = slots[next * per + i].swap(0, Ordering::AcqRel) as *mut [u64; 6];
                    // Published above by its allocator; taken once (swap), so ours alone.
                    ok &= !p.is_null() && raw::take_value(p)[0] == (next * per + i) as u64 ^ 0x5a5a;
                }
                ok
            })
            .map_err(|_| "spawn failed")
        })
        .collect::<Result<_, _>>()?;
    let ok = hs.into_iter().all(|h| h.join() == Some(true));
    let left = slots.iter().filter(|s| s.load(Ordering::Acquire) != 0).count();
    (ok && left == 0).then_some(()).ok_or("an object was lost, doubled or overwritten")
}

fn stm() -> Check {
    use crate::stm::{self, TCell};
    let accounts: Arc<Vec<TCell<u64>>> = Arc::new((0..8).map(|_| TCell::new(1000)).collect());
    let hs: Vec<_> = (0..6u64)
        .map(|t| {
            let a = accounts.clone();
            crate::spawn(move || {
                let mut x = t + 1;
                let mut audits_ok = true;
                for i in 0..300 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let (from, to) = ((x % 8) as usize, ((x >> 8) % 8) as usize);
                    stm::atomic(|tx| {
                        let f = tx.read(&a[from])?;
                        let amount = f.min(x % 50);
                        tx.write(&a[from], f - amount)?;
                        let g = tx.read(&a[to])?;
                        tx.write(&a[to], g + amount)
                    });
                    if i % 10 == 0 {
                        let total = stm::atomic(|tx| {
                            let mut s = 0;
                            for c in a.iter() {
                                s += tx.read(c)?;
                            }
                            Ok(s)
                        });
                        audits_ok &= total == 8000;
                        crate::yield_now();
                    }
                }
                audits_ok
            })
            .map_err(|_| "spawn failed")
        })
        .collect::<Result<_, _>>()?;
    let audits = hs.into_iter().all(|h| h.join() == Some(true));
    let total: u64 = accounts.iter().map(|c| c.load()).sum();
    (audits && total == 8000).then_some(()).ok_or("a transfer was torn: the total changed")
}

fn pthread() -> Check {
    use crate::pthread::{self, Attr, Cond, Mutex as PMutex, MutexAttr};
    struct Buffer {
        lock: PMutex,
        not_full: Cond,
        not_empty: Cond,
        /// Touched only with `lock` held (the inner spin lock is then always free: it only
        /// makes the sharing safe, the pthread mutex under test does the excluding).
        items: locks::TtsLock<Vec<usize>>,
    }
    let b = Arc::new(Buffer {
        lock: PMutex::new(MutexAttr::default()),
        not_full: Cond::new(),
        not_empty: Cond::new(),
        items: locks::TtsLock::new(Vec::new()),
    });
    let per = 200usize;
    let seen = Arc::new((0..3 * per).map(|_| AtomicU32::new(0)).collect::<Vec<_>>());
    let mut threads = Vec::new();
    for p in 0..3 {
        let b = b.clone();
        threads.push(
            pthread::create(&Attr::default(), move || {
                for i in 0..per {
                    let _ = b.lock.lock();
                    while b.items.with(|items| items.len()) >= 2 {
                        let _ = b.not_full.wait(&b.lock);
                    }
                    b.items.with(|items| items.push(p * per + i));
                    let _ = b.not_empty.signal();
                    let _ = b.lock.unlock();
                }
                0
            })
            .map_err(|_| "pthread_create failed")?,
        );
    }
    for _ in 0..3 {
        let (b, seen) = (b.clone(), seen.clone());
        threads.push(
            pthread::create(&Attr::default(), move || {
                for _ in 0..per {
                    let _ = b.lock.lock();
                    while b.items.with(|items| items.is_empty()) {
                        let _ = b.not_empty.wait(&b.lock);
                    }
                    let item = b.items.with(|items| items.remove(0));
                    let _ = b.not_full.signal();
                    let _ = b.lock.unlock();
                    seen[item].fetch_add(1, Ordering::AcqRel);
                }
                0
            })
            .map_err(|_| "pthread_create failed")?,
        );
    }
    for t in &threads {
        pthread::join(t).map_err(|_| "pthread_join failed")?;
    }
    seen.iter()
        .all(|s| s.load(Ordering::Acquire) == 1)
        .then_some(())
        .ok_or("an item was lost or doubled")
}

fn omp() -> Check {
    use crate::omp::{self, Schedule};
    let n = 1000usize;
    let want = n * (n - 1) / 2;
    for schedule in [Schedule::Static, Schedule::Dynamic(7), Schedule::Guided(4)] {
        let sum =
            omp::parallel_for_reduce(3, 0..n, schedule, 0usize, |acc, i| acc + i, |a, b| a + b);
        if sum != want {
            return Err("a parallel for's reduction is wrong");
        }
    }
    // Nested: two outer threads, each with a team of two summing its half.
    let parts = Mutex::new(MutexKind::Tts, Vec::new());
    omp::parallel(2, |outer| {
        let half = outer.thread_num();
        let range = half * n / 2..(half + 1) * n / 2;
        let s = omp::parallel_for_reduce(
            2,
            range,
            Schedule::Static,
            0usize,
            |acc, i| acc + i,
            |a, b| a + b,
        );
        parts.lock().push(s);
    });
    let parts = parts.into_inner();
    (parts.len() == 2 && parts.iter().sum::<usize>() == want)
        .then_some(())
        .ok_or("a nested region's sum is wrong")
}

/// Run on `Config::domains(&[1, n])`: main starts in domain 0 on processor 0, moves to
/// domain 1 and back, and a thread it makes in domain 1 runs there.
pub fn domains() -> Check {
    if crate::processor() != 0 {
        return Err("main did not start in domain 0");
    }
    crate::switch_to_queue(1).map_err(|_| "switch_to_queue refused")?;
    if crate::processor() == 0 {
        return Err("a thread in domain 1 ran on processor 0");
    }
    let h = crate::spawn(crate::processor).map_err(|_| "spawn failed")?;
    if h.join().unwrap_or(0) == 0 {
        return Err("a thread made in domain 1 ran in domain 0");
    }
    crate::switch_to_queue(0).map_err(|_| "switch_to_queue refused")?;
    (crate::processor() == 0).then_some(()).ok_or("back in domain 0, not on processor 0")
}
