//! McRT's experiments as Atoll and the Linux guest run them (issue M8): the same McRT code
//! (`crates/mcrt`) over each system's host adaptor (Atoll: kernel threads parking in
//! `wait`; Linux: pinned threads parking on a futex), beside each system's native threads
//! (Atoll's kernel threads, Linux's pthreads) through the [`Platform`]. Costs are in TSC
//! cycles (under TCG only ratios measured side by side mean anything).
//!
//! - `mcrt_micro` (McRT Table 1): create + join (255 in a row), an uncontended mutex
//!   lock/release (1000), a switch between two threads on one processor (1000).
//! - `mcrt_create` (Figure 2): the cost of a create while N threads are live.
//! - `mcrt_futures` (Figure 3): batches of empty futures against empty threads.
//! - `mcrt_policies` (Figures 7–8): motion estimation ([`crate::motion`]), a thread per
//!   block, under each scheduler configuration; speedup over the serial loop.
//! - `mcrt_stm` (Figure 12): the AVL tree ([`crate::avl`]), 80 % lookups, one McRT thread
//!   per core: one coarse lock against McRT's STM over the same atomic blocks.
//! - `mcrt_larson` (Figure 11): Larson ([`crate::larson`]) with McRT's allocator, locked
//!   and non-blocking, against the program's own heap (Atoll: `libatoll`'s; Linux:
//!   glibc's), on McRT threads and on native threads, as software threads outnumber cores.

use crate::avl::{self, InTx, Plain, StmNodes};
use crate::motion::Frames;
use crate::result::{line, median};
use crate::Platform;
use alloc::format;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use mcrt::stm::{self, Granularity, TCell};
use mcrt::sync::{Mutex, MutexKind};
use mcrt::{Config, Host, Policy, QueueLock};

/// The experiments, by name.
pub const EXPERIMENTS: [&str; 6] =
    ["mcrt_micro", "mcrt_create", "mcrt_futures", "mcrt_policies", "mcrt_stm", "mcrt_larson"];

/// Runs `experiment` on `p` with McRT over `host`; its `RESULT` lines.
pub fn run<P: Platform + ?Sized>(
    p: &P,
    host: &dyn Host,
    experiment: &str,
) -> Result<Vec<String>, String> {
    let (sys, cores) = (p.system(), p.cores());
    let put = |imp: &str, config: &str, metric: &str, value: u64, unit: &str| {
        let extra = format!(",\"impl\":\"{imp}\",\"config\":\"{config}\"");
        line(sys, experiment, cores, metric, value, unit, &extra)
    };
    let mut out = Vec::new();
    match experiment {
        "mcrt_micro" => {
            out.push(put(
                "mcrt",
                "create",
                "cycles_per_op",
                mcrt_create_join(host, 255)?,
                "cycles",
            ));
            out.push(put(
                "native",
                "create",
                "cycles_per_op",
                crate::amps::thread_create(p, 255)?,
                "cycles",
            ));
            for kind in MutexKind::ALL {
                let imp = format!("mcrt-{}", kind.name());
                out.push(put(
                    &imp,
                    "mutex",
                    "cycles_per_op",
                    mcrt_mutex(host, kind, 1000)?,
                    "cycles",
                ));
            }
            out.push(put("native", "mutex", "cycles_per_op", futex_mutex(p, 1000), "cycles"));
            out.push(put("mcrt", "switch", "cycles_per_op", mcrt_switch(host, 1000)?, "cycles"));
            out.push(put(
                "native",
                "switch",
                "cycles_per_op",
                crate::amps::thread_switch(p, 500, 3)?,
                "cycles",
            ));
        }
        "mcrt_create" => {
            for n in [100, 1000, 3000, 10_000] {
                let config = format!("live{n}");
                out.push(put(
                    "mcrt",
                    &config,
                    "cycles_per_create",
                    mcrt_live_create(host, n)?,
                    "cycles",
                ));
                if n <= 1000 {
                    out.push(put(
                        "native",
                        &config,
                        "cycles_per_create",
                        native_live_create(p, n)?,
                        "cycles",
                    ));
                }
            }
        }
        "mcrt_futures" => {
            for batch in [10, 100, 1000] {
                let config = format!("batch{batch}");
                let (fut, thr) = futures_vs_threads(p, host, batch)?;
                out.push(put("mcrt-future", &config, "cycles_per_op", fut, "cycles"));
                out.push(put("mcrt-thread", &config, "cycles_per_op", thr, "cycles"));
                out.push(put(
                    "mcrt",
                    &config,
                    "thread_over_future_x100",
                    thr * 100 / fut.max(1),
                    "ratio_x100",
                ));
            }
        }
        "mcrt_policies" => {
            let frames = Arc::new(Frames::new(20, 15));
            let expected = frames.checksum_serial();
            let start = p.cycles();
            if frames.checksum_serial() != expected {
                return Err("mcrt_policies: the serial answer changed".into());
            }
            let serial = p.cycles() - start;
            out.push(put("serial", "serial", "kcycles_per_frame", serial / 1000, "kcycles"));
            for (name, config) in policy_configs(cores) {
                let t = motion(host, config, &frames, expected)?;
                out.push(put("mcrt", name, "kcycles_per_frame", t / 1000, "kcycles"));
                out.push(put(
                    "mcrt",
                    name,
                    "speedup_x100",
                    serial * 100 / t.max(1),
                    "speedup_x100",
                ));
            }
        }
        "mcrt_stm" => {
            for (imp, config, g) in [
                ("mcrt-lock", "coarse", None),
                ("mcrt-stm", "object", Some(Granularity::Object)),
                ("mcrt-stm", "cacheline", Some(Granularity::CacheLine)),
            ] {
                let rate = tree_ops_per_kcycle(host, cores, g, STM_OPS)?;
                out.push(put(imp, config, "ops_per_kcycle_x100", rate, "ops/kcycle_x100"));
            }
        }
        "mcrt_larson" => {
            for n in [cores, 4 * cores] {
                for (imp, heap) in [
                    ("mcrt-malloc-locked", Heap::Locked),
                    ("mcrt-malloc-nonblocking", Heap::NonBlocking),
                    ("program-heap", Heap::Program),
                ] {
                    let config = format!("mcrt-threads/{n}");
                    let rate = larson_rate(p, host, heap, n, true)?;
                    out.push(put(imp, &config, "ops_per_kcycle_x100", rate, "ops/kcycle_x100"));
                    let config = format!("native-threads/{n}");
                    let rate = larson_rate(p, host, heap, n, false)?;
                    out.push(put(imp, &config, "ops_per_kcycle_x100", rate, "ops/kcycle_x100"));
                }
            }
        }
        other => return Err(format!("no McRT experiment {other}")),
    }
    Ok(out)
}

/// The configurations `mcrt_policies` compares (Figures 7–8).
pub fn policy_configs(p: usize) -> Vec<(&'static str, Config)> {
    alloc::vec![
        ("single-tts", Config::new(Policy::Single, p)),
        ("single-ticket", Config::new(Policy::Single, p).with_lock(QueueLock::Ticket)),
        ("sharing", Config::new(Policy::Sharing, p)),
        ("stealing", Config::new(Policy::Stealing, p)),
        ("neighbour", Config::new(Policy::Neighbour, p)),
    ]
}

/// Runs `f` as McRT's main thread on one processor (the mechanism's cost alone).
fn on_one<R: Send + 'static>(
    host: &dyn Host,
    f: impl FnOnce() -> R + Send + 'static,
) -> Result<R, String> {
    mcrt::run(Config::new(Policy::Local, 1), host, f).map_err(|e| format!("mcrt: {e:?}"))
}

/// Cycles per McRT thread created and joined, `n` in a row (median).
fn mcrt_create_join(host: &dyn Host, n: usize) -> Result<u64, String> {
    let t = on_one(host, move || {
        let start = read_tsc();
        for _ in 0..n {
            let _ = mcrt::spawn(|| ()).map(|h| h.join());
        }
        read_tsc() - start
    })?;
    Ok(t / n as u64)
}

/// The time-stamp counter (user mode may read it on Atoll and on Linux; inside the
/// runtime no `Platform` is at hand).
fn read_tsc() -> u64 {
    // SAFETY: reads the time-stamp counter (allowed in user mode on Atoll and Linux).
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Cycles per uncontended lock + release of a McRT mutex of `kind`.
fn mcrt_mutex(host: &dyn Host, kind: MutexKind, n: u64) -> Result<u64, String> {
    let t = on_one(host, move || {
        let m = Mutex::new(kind, 0u64);
        let start = read_tsc();
        for _ in 0..n {
            *core::hint::black_box(&m).lock() += 1;
        }
        read_tsc() - start
    })?;
    Ok(t / n)
}

/// Cycles per uncontended lock + release of a futex mutex (what a pthread mutex is): a
/// compare-and-swap in, a swap out, the kernel only under contention (Drepper, "Futexes
/// are tricky", mutex 2).
fn futex_mutex<P: Platform + ?Sized>(p: &P, n: u64) -> u64 {
    let word = AtomicU32::new(0);
    let start = p.cycles();
    for _ in 0..n {
        // Drepper's futex mutex: 0 free, 1 held, 2 held with waiters.
        if core::hint::black_box(&word)
            .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            while word.swap(2, Ordering::Acquire) != 0 {
                p.wait_word(&word, 2);
            }
        }
        if word.swap(0, Ordering::Release) == 2 {
            p.wake_word(&word, 1);
        }
    }
    (p.cycles() - start) / n
}

/// Cycles per switch: two McRT threads on one processor yield to each other, `n` in all.
fn mcrt_switch(host: &dyn Host, n: u64) -> Result<u64, String> {
    let t = on_one(host, move || {
        let go = Arc::new(AtomicU32::new(0));
        let g = go.clone();
        let other = mcrt::spawn(move || {
            g.store(1, Ordering::Release);
            for _ in 0..n / 2 {
                mcrt::yield_now();
            }
        });
        mcrt::yield_until(&go, mcrt::Op::Eq, 1);
        let start = read_tsc();
        for _ in 0..n / 2 {
            mcrt::yield_now();
        }
        let t = read_tsc() - start;
        if let Ok(h) = other {
            h.join();
        }
        t
    })?;
    Ok(t / n)
}

/// Cycles per McRT create while `n` threads are live (none joined until all exist).
fn mcrt_live_create(host: &dyn Host, n: usize) -> Result<u64, String> {
    let (t, made) = on_one(host, move || {
        let start = read_tsc();
        let hs: Vec<_> = (0..n).map_while(|_| mcrt::spawn(|| ()).ok()).collect();
        let t = read_tsc() - start;
        let made = hs.len();
        for h in hs {
            h.join();
        }
        (t, made)
    })?;
    if made < n {
        return Err(format!("mcrt_create: {made} of {n} live threads, then a spawn failed"));
    }
    Ok(t / n as u64)
}

/// Cycles per native thread created while `n` are live: each waits until all exist.
fn native_live_create<P: Platform + ?Sized>(p: &P, n: usize) -> Result<u64, String> {
    let arrived = AtomicU32::new(0);
    let start = p.cycles();
    p.run_threads(n, Some(0), &|_| {
        if arrived.fetch_add(1, Ordering::AcqRel) + 1 == n as u32 {
            p.wake_word(&arrived, u32::MAX);
        }
        loop {
            let now = arrived.load(Ordering::Acquire);
            if now >= n as u32 {
                break;
            }
            p.wait_word(&arrived, now);
        }
    })?;
    Ok((p.cycles() - start) / n as u64)
}

/// Cycles per empty future (spawn + read) and per empty thread (spawn + join), in
/// batches of `batch`, on every core (medians of 3 runs, each timing its second batch).
fn futures_vs_threads<P: Platform + ?Sized>(
    p: &P,
    host: &dyn Host,
    batch: usize,
) -> Result<(u64, u64), String> {
    let cores = p.cores();
    let mut fut = Vec::new();
    let mut thr = Vec::new();
    for _ in 0..3 {
        let (f, t) = mcrt::run(Config::new(Policy::Stealing, cores), host, move || {
            // Each kind's batch runs twice and the second is timed: the paper timed
            // batches in a running program, and a runtime's first batch pays for its start.
            // The handles go in one vector made beforehand, as in an array: the batch
            // times the futures, not the allocator.
            let mut fs = Vec::with_capacity(batch);
            let mut futures = || {
                let start = read_tsc();
                fs.extend((0..batch).map(|i| mcrt::future::spawn(|x: usize| x, i)));
                let sum: usize = fs.drain(..).map(|f| f.read()).sum();
                core::hint::black_box(sum);
                read_tsc() - start
            };
            let mut hs = Vec::with_capacity(batch);
            let mut threads = || {
                let start = read_tsc();
                hs.extend((0..batch).filter_map(|i| mcrt::spawn(move || i).ok()));
                let sum: usize = hs.drain(..).filter_map(|h| h.join()).sum();
                core::hint::black_box(sum);
                read_tsc() - start
            };
            futures();
            let f = futures();
            threads();
            (f, threads())
        })
        .map_err(|e| format!("mcrt: {e:?}"))?;
        fut.push(f / batch as u64);
        thr.push(t / batch as u64);
    }
    Ok((median(&mut fut).unwrap_or(0), median(&mut thr).unwrap_or(0)))
}

/// Cycles for one frame of motion estimation, a McRT thread per block, under `config`
/// (timed inside the runtime: its start and stop are not counted); fails if the answer
/// differs from the serial one.
fn motion(
    host: &dyn Host,
    config: Config,
    frames: &Arc<Frames>,
    expected: u64,
) -> Result<u64, String> {
    let f = frames.clone();
    let counted = Arc::new(AtomicU64::new(0));
    let c = counted.clone();
    let (sum, t) = mcrt::run(config, host, move || {
        let start = read_tsc();
        let hs: Vec<_> = (0..f.blocks())
            .filter_map(|b| {
                let f = f.clone();
                mcrt::spawn(move || f.estimate(b).wrapping_mul(b as u64 + 1)).ok()
            })
            .collect();
        c.store(hs.len() as u64, Ordering::Relaxed);
        let sum = hs.into_iter().fold(0u64, |acc, h| acc.wrapping_add(h.join().unwrap_or(0)));
        (sum, read_tsc() - start)
    })
    .map_err(|e| format!("mcrt: {e:?}"))?;
    if sum != expected || counted.load(Ordering::Relaxed) != frames.blocks() as u64 {
        return Err("mcrt_policies: a parallel frame's answer differs from the serial one".into());
    }
    Ok(t)
}

/// Tree operations per McRT thread in `mcrt_stm` (about a second of TCG per variant).
const STM_OPS: u64 = 20_000;

/// `mcrt_stm`: `threads` McRT threads (one per processor) each run `ops` tree operations,
/// under one coarse lock (`g` = `None`) or each in one STM transaction; the total rate in
/// hundredths of an operation per kcycle.
fn tree_ops_per_kcycle(
    host: &dyn Host,
    threads: usize,
    g: Option<Granularity>,
    ops: u64,
) -> Result<u64, String> {
    let config = Config::new(Policy::Stealing, threads);
    let cycles = mcrt::run(config, host, move || {
        let lock = Arc::new(Mutex::new(
            MutexKind::Tts,
            Plain(alloc::vec![[avl::NIL, avl::NIL, 0]; avl::KEYS as usize + 1]),
        ));
        let cells: &'static StmNodes = alloc::boxed::Box::leak(alloc::boxed::Box::new(StmNodes(
            (0..=avl::KEYS)
                .map(|_| {
                    [0; 3].map(|v| TCell::with_granularity(v, g.unwrap_or(Granularity::Object)))
                })
                .collect(),
        )));
        let Ok(()) = avl::prefill(&mut *lock.lock());
        stm::atomic(|tx| avl::prefill(&mut InTx { tx, nodes: cells }));
        let start = read_tsc();
        let hs: Vec<_> = (0..threads as u64)
            .filter_map(|t| {
                let lock = lock.clone();
                mcrt::spawn(move || {
                    let mut x = 0x9e37_79b9_7f4a_7c15 ^ (t + 1);
                    for _ in 0..ops {
                        let r = avl::xorshift(&mut x);
                        if g.is_some() {
                            stm::atomic(|tx| avl::operate(&mut InTx { tx, nodes: cells }, r));
                        } else {
                            let Ok(_) = avl::operate(&mut *lock.lock(), r);
                        }
                    }
                })
                .ok()
            })
            .collect();
        let started = hs.len();
        for h in hs {
            h.join();
        }
        (read_tsc() - start, started)
    })
    .map_err(|e| format!("mcrt: {e:?}"))?;
    let (cycles, started) = cycles;
    if started != threads {
        return Err("mcrt_stm: a thread could not start".into());
    }
    Ok(ops * threads as u64 * 100_000 / cycles.max(1))
}

/// The allocators `mcrt_larson` compares.
#[derive(Clone, Copy)]
enum Heap {
    /// McRT-Malloc, lock-based.
    Locked,
    /// McRT-Malloc, non-blocking.
    NonBlocking,
    /// The program's own heap (its `#[global_allocator]`).
    Program,
}

/// The program's own heap as a `GlobalAlloc` value.
struct ProgramHeap;

// SAFETY: forwards to the global allocator, which keeps the contract.
unsafe impl core::alloc::GlobalAlloc for ProgramHeap {
    unsafe fn alloc(&self, layout: core::alloc::Layout) -> *mut u8 {
        // SAFETY: as the caller promised.
        unsafe { alloc::alloc::alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: core::alloc::Layout) {
        // SAFETY: as the caller promised.
        unsafe { alloc::alloc::dealloc(ptr, layout) }
    }
}

/// Total Larson ops across `n` threads (McRT threads on every core, or the system's
/// threads), each thread doing `LARSON_OPS / n`: hundredths of an op per kcycle.
fn larson_rate<P: Platform + ?Sized>(
    p: &P,
    host: &dyn Host,
    heap: Heap,
    n: usize,
    on_mcrt: bool,
) -> Result<u64, String> {
    let ops = LARSON_OPS / n;
    let mail = Arc::new(crate::larson::Mail::new(n));
    let version = match heap {
        Heap::NonBlocking => mcrt::malloc::Version::NonBlocking,
        _ => mcrt::malloc::Version::Locked,
    };
    mcrt::malloc::set_version(version);
    let run = move |i: usize, yield_every: Option<usize>, mail: &crate::larson::Mail| match heap {
        Heap::Program => crate::larson::larson(&ProgramHeap, mail, i, ops, yield_every),
        _ => crate::larson::larson(&mcrt::malloc::McrtMalloc, mail, i, ops, yield_every),
    };
    let cycles = if on_mcrt {
        let m = mail.clone();
        mcrt::run(Config::new(Policy::Stealing, p.cores()), host, move || {
            let start = read_tsc();
            let hs: Vec<_> = (0..n)
                .filter_map(|i| {
                    let m = m.clone();
                    mcrt::spawn(move || run(i, Some(100), &m)).ok()
                })
                .collect();
            let all = hs.len() == n;
            for h in hs {
                h.join();
            }
            all.then(|| read_tsc() - start)
        })
        .map_err(|e| format!("mcrt: {e:?}"))?
        .ok_or("mcrt_larson: a thread could not start")?
    } else {
        let start = p.cycles();
        p.run_threads(n, None, &|i| run(i, None, &mail))?;
        p.cycles() - start
    };
    match heap {
        Heap::Program => mail.drain(&ProgramHeap),
        _ => mail.drain(&mcrt::malloc::McrtMalloc),
    }
    Ok((ops * n) as u64 * 100_000 / cycles.max(1))
}

/// Larson ops per run, split among the threads.
const LARSON_OPS: usize = 200_000;
