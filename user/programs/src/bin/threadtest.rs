//! `threadtest`: checks kernel threads and the per-core schedulers (issue M7).
//!
//! - `oversubscribe`: three threads per core, each a CPU-bound loop; all finish with the
//!   right sum, and each was switched in (each got CPU).
//! - `starve`: a thread spinning on a flag and a worker that sets it, both on one core:
//!   the spinner's slices end at the tick, so the worker runs and both finish.
//! - `registers`: threads run a long loop in integer and SSE registers (inline assembly)
//!   while another moves them between cores; every result matches the sum computed in
//!   ordinary code, so preemption and migration kept every register and the FPU state.
//! - `waitwake`: a ping-pong of wake-ups across threads (no wake-up lost: every wait has
//!   a timeout, and one that passes fails the test); a wake on one word wakes no waiter of
//!   another; `wake(n)` wakes n; `wait` returns Changed and TimedOut when it should.
//! - `errors`: bad arguments to every thread call are refused with the right error.
//! - `many`: 200 threads created and joined.
//! - `tls` (issue M15): FS bases outside the user half are refused and change nothing;
//!   threads on one core, then threads moving between two cores, each set a base of their
//!   own and find it loaded (`fs:[0]`) after every switch and move, and keep their own
//!   `thread_local!` values; each thread's destructors run when it ends; and McRT-Malloc
//!   gives each kernel thread a heap of its own (two threads allocating at once share no
//!   block; their blocks go to the pool when they end).
//! - `dedicated` (2 cores or more): a `pcore_run` context has its core to itself (Corey
//!   §4.4): threads already there move off, a thread created on that core is refused
//!   (`Busy`), placed threads never run there, the context is never switched out; once
//!   it ends, the core takes threads again.
//!
//! - `peerdeath` (not in the default set: a thread of it faults on purpose; issue M14):
//!   3 threads meet at a barrier (`workloads::amps::Barrier` over the Atoll platform's
//!   `wait_word`), then one faults and the other two wait at the barrier for it again, the
//!   last one 200 ms late (after the main thread joined the first and the faulted one).
//!   The library's wait must see the dead peer: the two give up and `run_threads` fails
//!   (before, they waited until the program's time limit).
//! - `placement` (not in the default set: it needs slow cores, `asym=`): the SKB measures
//!   the slowed cores slower (under 0.7 of the fastest), and a new thread the scheduler
//!   places (AMPS) starts on the fastest core.
//! - `numa-small`, `numa-big` (not in the default set: they need core 1 on a node of its
//!   own and slower than core 0, and report rather than judge; AMPS §2.4.3, Table 4): a
//!   thread started on core 1 touches 1 MiB (`numa-small`) or twice the last-level cache
//!   the SKB reports (`numa-big`, at least 2 MiB) of memory of its own, charged to core 1's
//!   node, then runs without allocating for 1.5 s while the main thread sleeps on core 0,
//!   which AMPS then asks for it; the line `threadtest: numa: N KiB resident, moved to core
//!   C` or `..., stayed on core 1` says what the NUMA policy in force decided. The kernel
//!   test sets the policy and judges the line (`user.rss_moves_what_same_node_keeps`).
//!
//! `threadtest [TEST...] [-TEST...]` runs the named tests (all but `placement` by default),
//! less those named with a `-`; prints `threadtest: ok` or `threadtest: FAIL <why>` and
//! exits 0 or 1. A chosen test that cannot run on this machine (`dedicated` on one core)
//! says `skipped`, and the program then exits `EXIT_SKIPPED` (77) instead of 0, so the
//! kernel test that ran it reports a skip, not a pass.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::cell::Cell;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use libatoll::abi::{nr, Error, ThreadCreate, EXIT_SKIPPED, USER_END};
use libatoll::thread::{self, Builder, Woken};
use libatoll::{cores_online, pcore_current, println, syscall3, tls, Status};

fn main() -> i32 {
    let mut buf = [0u8; 256];
    let args = libatoll::args(&mut buf);
    let all = [
        "oversubscribe",
        "starve",
        "registers",
        "waitwake",
        "errors",
        "resident",
        "many",
        "tls",
        "dedicated",
    ];
    let (left_out, chosen): (Vec<&str>, Vec<&str>) =
        args.split_whitespace().partition(|word| word.starts_with('-'));
    let left_out: Vec<&str> = left_out.iter().map(|word| &word[1..]).collect();
    let on_request = ["placement", "peerdeath", "numa-small", "numa-big"];
    for name in chosen.iter().chain(&left_out) {
        if !all.contains(name) && !on_request.contains(name) {
            println!(
                "threadtest: unknown test {name}; tests: {all:?}, and when named: {on_request:?}"
            );
            return 2;
        }
    }
    let run: Vec<&str> = if chosen.is_empty() { all.to_vec() } else { chosen };
    let mut skipped = 0;
    for name in run.into_iter().filter(|name| !left_out.contains(name)) {
        if name == "dedicated" && cores_online() < 2 {
            println!("threadtest: dedicated needs 2 cores; skipped");
            skipped += 1;
            continue;
        }
        let result = match name {
            "oversubscribe" => oversubscribe(),
            "starve" => starve(),
            "registers" => registers(),
            "waitwake" => waitwake(),
            "errors" => errors(),
            "placement" => placement(),
            "numa-small" => numa_move(1 << 20),
            "numa-big" => {
                let llc = libatoll::locality_get(1).map_or(0, |l| l.llc_bytes);
                numa_move((2 * llc).max(2 << 20))
            }
            "peerdeath" => peer_death(),
            "resident" => resident(),
            "dedicated" => dedicated(),
            "tls" => tls(),
            _ => many(),
        };
        if let Err(why) = result {
            println!("threadtest: FAIL {name}: {why}");
            return 1;
        }
        println!("threadtest: {name} passed");
    }
    if skipped > 0 {
        println!("threadtest: ok, {skipped} skipped");
        return EXIT_SKIPPED;
    }
    println!("threadtest: ok");
    0
}

type Check = Result<(), &'static str>;

fn joined_ok(t: thread::Thread) -> Check {
    match t.join() {
        Status::Exited(0) => Ok(()),
        _ => Err("a thread did not exit 0"),
    }
}

/// The integer work of `oversubscribe`: an xorshift chain.
fn chain(seed: u64, steps: u64) -> u64 {
    let mut x = seed | 1;
    for _ in 0..steps {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    x
}

fn oversubscribe() -> Check {
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

fn starve() -> Check {
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

/// Runs `iterations` rounds of a mix of integer (r12–r15) and SSE (xmm0–xmm7) additions
/// seeded by `seed`, all in registers inside one assembly block (a preemption or
/// migration in the middle must keep them); returns the folded result.
fn register_loop(seed: u64, iterations: u64) -> u64 {
    let out: u64;
    // SAFETY: only registers are used; xmm0–xmm7 are not used by this program's own code
    // (it is built without SSE), r12–r15 are declared clobbered.
    unsafe {
        core::arch::asm!(
            "mov r12, {seed}",
            "lea r13, [r12 + 1]",
            "lea r14, [r12 + 2]",
            "lea r15, [r12 + 3]",
            "movq xmm0, r12", "movq xmm1, r13", "movq xmm2, r14", "movq xmm3, r15",
            "movq xmm4, r12", "movq xmm5, r13", "movq xmm6, r14", "movq xmm7, r15",
            "2:",
            "paddq xmm0, xmm1", "paddq xmm1, xmm2", "paddq xmm2, xmm3", "paddq xmm3, xmm4",
            "paddq xmm4, xmm5", "paddq xmm5, xmm6", "paddq xmm6, xmm7", "paddq xmm7, xmm0",
            "add r12, r13", "add r13, r14", "add r14, r15", "add r15, r12",
            "dec {n}",
            "jnz 2b",
            "movq {out}, xmm0",
            "movq {t}, xmm1", "xor {out}, {t}", "movq {t}, xmm2", "add {out}, {t}",
            "movq {t}, xmm3", "xor {out}, {t}", "movq {t}, xmm4", "add {out}, {t}",
            "movq {t}, xmm5", "xor {out}, {t}", "movq {t}, xmm6", "add {out}, {t}",
            "movq {t}, xmm7", "xor {out}, {t}",
            "add {out}, r12", "xor {out}, r13", "add {out}, r14", "xor {out}, r15",
            seed = in(reg) seed,
            n = inout(reg) iterations.max(1) => _,
            out = out(reg) out,
            t = out(reg) _,
            out("r12") _, out("r13") _, out("r14") _, out("r15") _,
            options(nostack),
        );
    }
    out
}

/// What [`register_loop`] computes, in ordinary code.
fn register_model(seed: u64, iterations: u64) -> u64 {
    let mut r = [seed, seed + 1, seed + 2, seed + 3];
    let mut x = [seed, seed + 1, seed + 2, seed + 3, seed, seed + 1, seed + 2, seed + 3];
    for _ in 0..iterations.max(1) {
        for i in 0..7 {
            x[i] = x[i].wrapping_add(x[i + 1]);
        }
        x[7] = x[7].wrapping_add(x[0]);
        r[0] = r[0].wrapping_add(r[1]);
        r[1] = r[1].wrapping_add(r[2]);
        r[2] = r[2].wrapping_add(r[3]);
        r[3] = r[3].wrapping_add(r[0]);
    }
    let mut out = x[0];
    for (i, v) in x.iter().enumerate().skip(1) {
        out = if i % 2 == 1 { out ^ v } else { out.wrapping_add(*v) };
    }
    out = out.wrapping_add(r[0]) ^ r[1];
    out = out.wrapping_add(r[2]) ^ r[3];
    out
}

fn registers() -> Check {
    let cores = cores_online();
    let n = 2 * cores;
    let iterations = 3_000_000;
    let done = Arc::new(AtomicU64::new(0));
    let ok = Arc::new(AtomicU64::new(0));
    let mut threads = Vec::new();
    for i in 0..n {
        let (done, ok) = (done.clone(), ok.clone());
        let seed = 0x1234_5678 * (i as u64 + 1);
        let t = thread::spawn(move || {
            let mut good = true;
            for _ in 0..4 {
                good &= register_loop(seed, iterations) == register_model(seed, iterations);
            }
            if good {
                ok.fetch_add(1, Ordering::AcqRel);
            }
            done.fetch_add(1, Ordering::AcqRel);
            0
        })
        .map_err(|_| "spawn failed")?;
        threads.push(t);
    }
    // Move them around while they run: each to the next core, again and again.
    let mut moves = 0u64;
    let mut round = 0usize;
    while done.load(Ordering::Acquire) < n as u64 && cores > 1 {
        for (i, t) in threads.iter().enumerate() {
            let core = (i + round) % cores;
            if t.set_affinity(1 << core).is_ok() {
                moves += 1;
            }
        }
        round += 1;
        let _ = thread::sleep_us(5_000);
    }
    let mut migrations = 0;
    for t in threads {
        migrations += t.stat().map(|s| s.migrations).unwrap_or(0);
        joined_ok(t)?;
    }
    if ok.load(Ordering::Acquire) != n as u64 {
        return Err("a register loop's result changed: registers or FPU state lost");
    }
    if cores > 1 && moves > 0 && migrations == 0 {
        return Err("threads were moved but none migrated");
    }
    println!("threadtest: registers: {n} threads, {moves} affinity moves, {migrations} migrations");
    Ok(())
}

fn waitwake() -> Check {
    // Wait returns Changed when the word differs, TimedOut when nobody wakes.
    let word = AtomicU32::new(5);
    if thread::wait(&word, 4, 0) != Ok(Woken::Changed) {
        return Err("wait on a changed word did not return Changed");
    }
    if thread::wait(&word, 5, 2_000) != Ok(Woken::TimedOut) {
        return Err("wait with a timeout did not time out");
    }
    // Ping-pong: two threads take turns through one word, 300 rounds; a lost wake-up
    // shows as a timeout (a second).
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
    // The right waiter: three wait on `a`, one on `b`, all on this core; wake(b) wakes
    // only b's; wake(a, 1) wakes exactly one of a's.
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

fn errors() -> Check {
    let word = AtomicU32::new(0);
    let addr = &word as *const AtomicU32 as u64;
    let err = |r: libatoll::abi::SysResult| r.err();
    if err(syscall3(nr::WAIT, addr + 1, 0, 1)) != Some(Error::InvalidArgument) {
        return Err("wait on an unaligned word was not refused");
    }
    if err(syscall3(nr::WAIT, 0x3000_0000, 0, 1)) != Some(Error::BadAddress) {
        return Err("wait on an unmapped word was not BadAddress");
    }
    if err(syscall3(nr::WAIT, addr, 1 << 40, 1)) != Some(Error::InvalidArgument) {
        return Err("wait for a value past 32 bits was not refused");
    }
    if err(syscall3(nr::SLEEP, 60_000_001, 0, 0)) != Some(Error::InvalidArgument) {
        return Err("a sleep over a minute was not refused");
    }
    if err(syscall3(nr::THREAD_JOIN, 0, 0, 0)) != Some(Error::InvalidArgument) {
        return Err("joining itself was not refused");
    }
    if err(syscall3(nr::THREAD_JOIN, libatoll::obj::root_share(), 12345, 0))
        != Some(Error::NoSuchObject)
    {
        return Err("joining a thread that does not exist was not NoSuchObject");
    }
    if err(syscall3(nr::THREAD_SET_AFFINITY, 0, 0, 0)) != Some(Error::InvalidArgument) {
        return Err("an empty affinity was not refused");
    }
    if err(syscall3(nr::THREAD_STAT, 0, 0, 0x10)) != Some(Error::BadAddress) {
        return Err("thread_stat to a wild pointer was not BadAddress");
    }
    if err(syscall3(nr::THREAD_CREATE, 0x10, 0, 0)) != Some(Error::BadAddress) {
        return Err("thread_create from a wild pointer was not BadAddress");
    }
    let root = libatoll::obj::root_share();
    let ar = libatoll::obj::root_ar();
    let create = |args: ThreadCreate| {
        let words = args.to_words();
        syscall3(nr::THREAD_CREATE, words.as_ptr() as u64, 0, 0)
    };
    let base = ThreadCreate {
        share: root,
        core: libatoll::abi::ANY_CORE,
        entry: 0x40_0000,
        stack: 0,
        ar: [root, ar],
        ..ThreadCreate::default()
    };
    if err(create(ThreadCreate { core: 64, ..base })) != Some(Error::InvalidArgument) {
        return Err("a thread on core 64 was not refused");
    }
    let here = pcore_current() as u64;
    let elsewhere = ThreadCreate { core: here, affinity: !(1 << here), ..base };
    if cores_online() > 1 && err(create(elsewhere)) != Some(Error::InvalidArgument) {
        return Err("a thread started outside its affinity was not refused");
    }
    if err(create(ThreadCreate { ar: [root, 999], ..base })) != Some(Error::NoSuchObject) {
        return Err("a thread on a range that does not exist was not NoSuchObject");
    }
    if err(create(ThreadCreate { entry: 1 << 63, ..base })) != Some(Error::InvalidArgument) {
        return Err("a thread entering the kernel half was not refused");
    }
    if err(create(ThreadCreate { nshares: 9, ..base })) != Some(Error::InvalidArgument) {
        return Err("nine shares were not refused");
    }
    // A thread that faults ends with its fault; the program goes on.
    let bad = thread::spawn(|| {
        // SAFETY: deliberately wild: the thread must fault, and only it.
        unsafe { core::ptr::write_volatile(0x10 as *mut u64, 1) };
        0
    })
    .map_err(|_| "spawn failed")?;
    if bad.join() != Status::Faulted(14) {
        return Err("a faulting thread did not end Faulted(14)");
    }
    Ok(())
}

fn placement() -> Check {
    let cores = cores_online();
    let speeds: Vec<u64> = (0..cores)
        .map(|c| libatoll::locality_get(c).map(|l| l.compute_speed).unwrap_or(0))
        .collect();
    let fastest = (0..cores).max_by_key(|&c| speeds[c]).ok_or("no cores")?;
    let slowest = speeds.iter().copied().min().unwrap_or(0);
    println!("threadtest: placement: speeds {speeds:?}, fastest core {fastest}");
    if slowest * 10 > speeds[fastest] * 7 {
        return Err("the slowed cores do not measure slower (asym= not in force?)");
    }
    let here = pcore_current();
    if here == fastest {
        return Err("run this from a slow core: the fast one is busy with this program");
    }
    let landed = Arc::new(AtomicU64::new(u64::MAX));
    let t = {
        let landed = landed.clone();
        thread::spawn(move || {
            landed.store(pcore_current() as u64, Ordering::Release);
            0
        })
    }
    .map_err(|_| "spawn failed")?;
    joined_ok(t)?;
    let stat_core = landed.load(Ordering::Acquire);
    if stat_core != fastest as u64 {
        println!("threadtest: placement: the thread started on core {stat_core}");
        return Err("AMPS did not place the new thread on the fastest core");
    }
    Ok(())
}

/// AMPS §2.4.3, Table 4: whether a running thread with `bytes` resident on core 1's node
/// moves to core 0 when core 0 is idle and faster (see the module comment). Reports, on
/// one line, what the NUMA policy decided; fails only if the thread could not run its part
/// (no memory, pages not charged to it).
fn numa_move(bytes: u64) -> Check {
    if cores_online() < 2 {
        return Err("needs 2 cores");
    }
    let stop = Arc::new(AtomicBool::new(false));
    let landed = Arc::new(AtomicU64::new(u64::MAX));
    let t = {
        let (stop, landed) = (stop.clone(), landed.clone());
        // Held on core 1 while it faults its pages in, so all are on core 1's node (AMPS's
        // allocation-phase check needs a tick to see the growth: a pull before that one
        // would take it away half-allocated), then free to go anywhere.
        let every_core = (1u64 << cores_online().min(63)) - 1;
        Builder::new().core(1).affinity(1 << 1).spawn(move || {
            let Ok(mapping) = libatoll::private::map_new(bytes) else { return 2 };
            for page in (0..mapping.bytes).step_by(4096) {
                // SAFETY: the page lies in the fresh private mapping, which this thread owns.
                unsafe { core::ptr::write_volatile((mapping.va + page) as *mut u8, 1) };
            }
            let resident = thread::my_stat().map_or(0, |s| s.resident_pages);
            if thread::set_my_affinity(every_core).is_err() {
                return 4;
            }
            let mut core = pcore_current();
            // Running, not allocating (AMPS §2.4.3's allocation phase has ended at the next
            // tick): only the NUMA policy stands between it and the idle, faster core 0.
            while core == 1 && !stop.load(Ordering::Acquire) {
                for _ in 0..1000 {
                    core::hint::spin_loop();
                }
                core = pcore_current();
            }
            libatoll::private::free(mapping.va, mapping.bytes);
            landed.store(core as u64, Ordering::Release);
            if resident < bytes / 4096 {
                return 3;
            }
            0
        })
    }
    .map_err(|_| "spawn on core 1 failed")?;
    // Long enough for core 0 to ask many times (every few ticks) once the pages are in.
    let _ = thread::sleep_us(1_500_000 + bytes / 16);
    stop.store(true, Ordering::Release);
    match t.join() {
        Status::Exited(0) => {}
        Status::Exited(2) => return Err("no memory for the resident set"),
        Status::Exited(3) => return Err("the touched pages were not charged to the thread"),
        Status::Exited(4) => return Err("the thread could not widen its affinity"),
        _ => return Err("the thread did not exit 0"),
    }
    let kib = bytes >> 10;
    match landed.load(Ordering::Acquire) {
        1 => println!("threadtest: numa: {kib} KiB resident, stayed on core 1"),
        core => println!("threadtest: numa: {kib} KiB resident, moved to core {core}"),
    }
    Ok(())
}

/// AMPS §3.3's per-thread resident pages: a thread that touches 64 fresh pages has at
/// least 64 charged to it, and they are uncharged when the memory is freed.
fn resident() -> Check {
    let t = thread::spawn(|| {
        let before = thread::my_stat().map_or(0, |s| s.resident_pages);
        let pages = 64;
        let mapping = match libatoll::private::map_new(pages * 4096) {
            Ok(m) => m,
            Err(_) => return 2,
        };
        for p in 0..pages {
            // SAFETY: the page lies in the fresh private mapping, which this thread owns.
            unsafe { core::ptr::write_volatile((mapping.va + p * 4096) as *mut u8, 1) };
        }
        let touched = thread::my_stat().map_or(0, |s| s.resident_pages);
        libatoll::private::free(mapping.va, mapping.bytes);
        let after = thread::my_stat().map_or(0, |s| s.resident_pages);
        if touched < before + pages {
            return 3;
        }
        if after > touched - pages {
            return 4;
        }
        0
    })
    .map_err(|_| "spawn failed")?;
    match t.join() {
        Status::Exited(0) => Ok(()),
        Status::Exited(3) => Err("touched pages were not charged to the thread"),
        Status::Exited(4) => Err("freed pages stayed charged to the thread"),
        _ => Err("the resident-pages thread failed"),
    }
}

fn many() -> Check {
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

libatoll::main!(main);

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

/// `peerdeath`: a thread faults while its peers will wait for it at a barrier; the
/// peers' waits must end and `run_threads` report the failure.
fn peer_death() -> Check {
    use workloads::Platform;
    let p = libatoll::platform::Atoll::new(libatoll::cores::all_cores());
    let barrier = workloads::amps::Barrier::new(3);
    let result = p.run_threads(3, None, &|i| {
        barrier.wait(&p);
        if i == 1 {
            // SAFETY: deliberately not safe: this write faults, which ends this thread
            // alone (its peers then wait at the barrier for a thread that is gone).
            unsafe { core::ptr::write_volatile(0x10 as *mut u64, 1) };
        }
        if i == 2 {
            // The last waiter comes late, once the first has given up and the main thread
            // has joined it and the faulted one: it must still see the faulted peer.
            let _ = thread::sleep_us(200_000);
        }
        barrier.wait(&p);
    });
    match result {
        Err(why) => {
            println!("threadtest: peerdeath: run_threads failed, as it must: {why}");
            Ok(())
        }
        Ok(()) => Err("every thread passed a barrier a faulted thread never reached"),
    }
}

fn dedicated() -> Check {
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
            // The context on the target core: count its switch-ins while threads run.
            let before = thread::my_stat().map_or(0, |s| s.switches);
            started.store(true, Ordering::Release);
            while !finished.load(Ordering::Acquire) {
                core::hint::spin_loop();
            }
            let after = thread::my_stat().map_or(u64::MAX, |s| s.switches);
            context_switches.store(after.wrapping_sub(before), Ordering::Release);
            return;
        }
        let check = (|| {
            if !within_2s(|| started.load(Ordering::Acquire)) {
                return Err("the pcore_run context never started");
            }
            if !within_2s(|| left.load(Ordering::Acquire) == 2) {
                return Err("threads on a dedicated core did not move off it");
            }
            // The caller's replica hears of the dedication by message: wait for it.
            let mut refused = false;
            for _ in 0..2000 {
                match spinner_on(target, &stop, &left) {
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
            // nowhere to run: refused (it once sat misplaced on this core, retried at
            // every turn of its scheduler).
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
            // Placed threads run anywhere but the dedicated core.
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
        })();
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
    // The context ended: the core takes threads again.
    let again = Arc::new(AtomicBool::new(false));
    if !within_2s(|| match spinner_on(target, &again, &left) {
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

// ---------------------------------------------------------------------------------------
// `tls`: each thread's FS base and thread-locals (issue M15).

libatoll::thread_local! {
    /// How many rounds this thread counted.
    static COUNT: Cell<u64> = Cell::new(0);
    /// Which worker this thread is.
    static WHO: Cell<u64> = Cell::new(u64::MAX);
    /// Counts its drop in `TLS_DROPS` when the thread ends.
    static DROP_GUARD: DropGuard = DropGuard;
}

/// Destructors of `DROP_GUARD` that ran.
static TLS_DROPS: AtomicU64 = AtomicU64::new(0);

struct DropGuard;

impl Drop for DropGuard {
    fn drop(&mut self) {
        TLS_DROPS.fetch_add(1, Ordering::AcqRel);
    }
}

/// The FS base as loaded now (`fs:[0]` of a block whose first word is its address).
fn loaded_base() -> u64 {
    tls::block_address()
}

fn set_fs_base(base: u64) -> Result<(), Error> {
    tls::set_fs_base(base)
}

fn tls() -> Check {
    // Without the call (an older kernel) the thread has no block and FS base 0, and reading
    // it would fault: ask first, with a base any kernel that has the call refuses.
    if set_fs_base(u64::MAX) == Err(Error::NoSuchCall) {
        return Err("no set_fs_base call");
    }
    let block = loaded_base();
    tls_refusals(block)?;
    tls_workers(Some(0))?;
    if cores_online() >= 2 {
        tls_workers(None)?;
    } else {
        println!("threadtest: tls: one core, so no moves between cores");
    }
    tls_heaps()
}

/// Bases outside the user half are `InvalidArgument` and leave the loaded base alone;
/// then the thread's `block` is loaded again.
fn tls_refusals(block: u64) -> Check {
    let own = Box::new([0u64; 2]);
    let own_addr = own.as_ptr() as u64;
    // SAFETY: our box; its first word becomes its own address, as a thread block's.
    unsafe { *(own_addr as *mut u64) = own_addr };
    set_fs_base(own_addr).map_err(|_| "set_fs_base refused a heap address")?;
    let bad = [
        USER_END,
        USER_END + 0x1000,
        0x1234_5678_9abc_def0,
        0xffff_8000_0000_0000,
        0xffff_ffff_8000_0000,
        u64::MAX,
    ];
    for base in bad {
        if set_fs_base(base) != Err(Error::InvalidArgument) {
            println!("threadtest: tls: FS base {base:#x} was not refused");
            return Err("a kernel-half or non-canonical FS base was not refused");
        }
        if loaded_base() != own_addr {
            return Err("a refused FS base changed the loaded one");
        }
    }
    set_fs_base(block).map_err(|_| "set_fs_base refused the thread's block")?;
    drop(own);
    println!("threadtest: tls: {} bad bases refused", bad.len());
    Ok(())
}

/// Workers per run, and rounds each.
const TLS_WORKERS: usize = 4;
const TLS_ROUNDS: u64 = 200;

/// `TLS_WORKERS` threads, all on core `pin` or (None) each moving itself between cores 0
/// and 1 every round; each alternates a base of its own (a private block) with its
/// thread block (its `thread_local!`s), yielding between checks so they switch.
fn tls_workers(pin: Option<usize>) -> Check {
    let before = TLS_DROPS.load(Ordering::Acquire);
    let bad = Arc::new(AtomicU64::new(0));
    let moved = Arc::new(AtomicU64::new(0));
    let mut threads = Vec::new();
    for i in 0..TLS_WORKERS {
        let (bad, moved) = (bad.clone(), moved.clone());
        let builder = match pin {
            Some(core) => Builder::new().core(core).affinity(1 << core),
            None => Builder::new().core(i % 2).affinity(0b11),
        };
        let t = builder
            .spawn(move || {
                if let Err(why) = tls_worker(i as u64, pin.is_none(), &moved) {
                    println!("threadtest: tls: worker {i}: {why}");
                    bad.fetch_add(1, Ordering::AcqRel);
                }
                0
            })
            .map_err(|_| "spawn failed")?;
        threads.push(t);
    }
    let mut migrations = 0;
    for t in threads {
        migrations += t.stat().map(|s| s.migrations).unwrap_or(0);
        joined_ok(t)?;
    }
    if bad.load(Ordering::Acquire) != 0 {
        return Err("a thread found another's FS base or thread-local values");
    }
    if TLS_DROPS.load(Ordering::Acquire) - before != TLS_WORKERS as u64 {
        return Err("a thread's thread-local destructor did not run when it ended");
    }
    let moves = moved.load(Ordering::Acquire);
    if pin.is_none() && (moves == 0 || migrations == 0) {
        return Err("the moving threads never changed cores");
    }
    let place = match pin {
        Some(core) => alloc::format!("on core {core}"),
        None => alloc::format!("moving between cores 0 and 1 ({moves} moves)"),
    };
    println!("threadtest: tls: {TLS_WORKERS} threads {place} kept their FS bases and values");
    Ok(())
}

/// One worker: see [`tls_workers`].
fn tls_worker(me: u64, moving: bool, moved: &AtomicU64) -> Check {
    let block = loaded_base();
    WHO.with(|w| w.set(me));
    DROP_GUARD.with(|_| ());
    let own = Box::new([0u64; 2]);
    let own_addr = own.as_ptr() as u64;
    // SAFETY: our box; its first word becomes its own address, as a thread block's.
    unsafe { *(own_addr as *mut u64) = own_addr };
    let mut core = pcore_current();
    for round in 0..TLS_ROUNDS {
        set_fs_base(own_addr).map_err(|_| "set_fs_base refused a heap address")?;
        for _ in 0..3 {
            thread::yield_now();
            if loaded_base() != own_addr {
                return Err("after a switch its own FS base was not loaded");
            }
        }
        if moving {
            // Move to the other core at once (the affinity excludes this one).
            let to = 1 - (round as usize % 2);
            thread::set_my_affinity(1 << to).map_err(|_| "set_my_affinity failed")?;
            if pcore_current() != core {
                moved.fetch_add(1, Ordering::AcqRel);
                core = pcore_current();
            }
            if loaded_base() != own_addr {
                return Err("after a move its own FS base was not loaded");
            }
        }
        set_fs_base(block).map_err(|_| "set_fs_base refused its block")?;
        COUNT.with(|c| c.set(c.get() + 1));
        thread::yield_now();
        if loaded_base() != block || WHO.with(|w| w.get()) != me {
            return Err("after a switch its thread block was not loaded");
        }
    }
    if COUNT.with(|c| c.get()) != TLS_ROUNDS {
        return Err("its thread-local count took another thread's counts");
    }
    drop(own);
    Ok(())
}

/// McRT-Malloc on kernel threads outside the runtime: two threads allocating at once
/// share no 32 KiB block (each has a heap of its own, found through its thread-local
/// storage); when they end, their heaps' blocks go to the pool.
fn tls_heaps() -> Check {
    const BLOCK: u64 = 32 * 1024;
    let pooled = mcrt::malloc::stats().blocks_pooled;
    let ready = Arc::new(AtomicU64::new(0));
    let blocks: Arc<[AtomicU64; 2]> = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
    let shared = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for i in 0..2usize {
        let (ready, blocks, shared) = (ready.clone(), blocks.clone(), shared.clone());
        let core = i % cores_online();
        let t = Builder::new()
            .core(core)
            .affinity(1 << core)
            .spawn(move || {
                let layout = core::alloc::Layout::from_size_align(64, 8).unwrap();
                ready.fetch_add(1, Ordering::AcqRel);
                while ready.load(Ordering::Acquire) < 2 {
                    thread::yield_now();
                }
                let mut objects = Vec::with_capacity(200);
                for k in 0..200 {
                    let p = mcrt::malloc::alloc(layout) as u64;
                    if p == 0 {
                        return 1;
                    }
                    objects.push(p);
                    if k % 20 == 0 {
                        thread::yield_now();
                    }
                }
                blocks[i].store(objects[0] & !(BLOCK - 1), Ordering::Release);
                ready.fetch_add(1, Ordering::AcqRel);
                while ready.load(Ordering::Acquire) < 4 {
                    thread::yield_now();
                }
                let other = blocks[1 - i].load(Ordering::Acquire);
                if objects.iter().any(|p| p & !(BLOCK - 1) == other) {
                    shared.store(true, Ordering::Release);
                }
                for p in objects {
                    // SAFETY: allocated above with this layout, freed once.
                    unsafe { mcrt::malloc::free(p as *mut u8, layout) };
                }
                0
            })
            .map_err(|_| "spawn failed")?;
        threads.push(t);
    }
    for t in threads {
        joined_ok(t)?;
    }
    if shared.load(Ordering::Acquire) {
        return Err("two kernel threads allocated from one McRT-Malloc block (one shared heap)");
    }
    if mcrt::malloc::stats().blocks_pooled < pooled + 2 {
        return Err("the threads' McRT-Malloc blocks did not go to the pool when they ended");
    }
    println!("threadtest: tls: McRT-Malloc gave each kernel thread its own heap");
    Ok(())
}
