//! Hosted tests of the threads, the scheduler's policies, predicate yield and futures.

use mcrt::hosted::LinuxHost;
use mcrt::{Config, FpuControl, Policy, QueueLock};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;

fn configs(p: usize) -> Vec<Config> {
    let mut v: Vec<Config> = Policy::ALL.iter().map(|&pol| Config::new(pol, p)).collect();
    v.push(Config::new(Policy::Single, p).with_lock(QueueLock::Ticket));
    v
}

/// The runtime's self-checks (`mcrt::selftest`, which `mcrttest` runs on Atoll) under
/// every policy: spawn, yield, predicate-yield ping-pong, barrier, the three mutexes,
/// futures, keys, 10,000 threads, the allocator, the STM, the pthread and OpenMP adaptors.
#[test]
fn self_checks_pass_under_every_policy() {
    let host = LinuxHost::unpinned();
    for config in configs(3) {
        for c in mcrt::selftest::CHECKS {
            let config =
                if c.one_processor { Config::new(Policy::Local, 1) } else { config.clone() };
            let name = (c.name, config.policy);
            assert_eq!(mcrt::run(config, &host, c.run), Ok(Ok(())), "{name:?}");
        }
    }
}

#[test]
fn self_check_of_domains_passes() {
    let host = LinuxHost::unpinned();
    for n in [1, 2] {
        assert_eq!(mcrt::run(Config::domains(&[1, n]), &host, mcrt::selftest::domains), Ok(Ok(())));
    }
}

#[test]
fn main_result_comes_back() {
    let host = LinuxHost::unpinned();
    assert_eq!(mcrt::run(Config::new(Policy::Stealing, 2), &host, || 42), Ok(42));
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
fn exit_ends_a_thread_and_join_sees_none() {
    let host = LinuxHost::unpinned();
    let r = mcrt::run(Config::new(Policy::Stealing, 2), &host, || {
        let h = mcrt::spawn(|| -> u32 { mcrt::exit() }).unwrap();
        h.join()
    });
    assert_eq!(r, Ok(None));
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

fn mxcsr() -> u32 {
    let mut v: u32 = 0;
    // SAFETY: stores MXCSR into `v`.
    unsafe { std::arch::asm!("stmxcsr [{}]", in(reg) &mut v) };
    v
}

fn set_mxcsr(v: u32) {
    // SAFETY: `v` is a valid MXCSR (reserved bits clear).
    unsafe { std::arch::asm!("ldmxcsr [{}]", in(reg) &v) };
}

fn x87_control() -> u16 {
    let mut v: u16 = 0;
    // SAFETY: stores the x87 control word into `v`.
    unsafe { std::arch::asm!("fnstcw [{}]", in(reg) &mut v) };
    v
}

fn set_x87_control(v: u16) {
    // SAFETY: `v` masks every exception; only rounding and precision change.
    unsafe { std::arch::asm!("fldcw [{}]", in(reg) &v) };
}

/// Rounding toward zero, in MXCSR and in the x87 control word.
const MXCSR_TRUNC: u32 = 0x6000;
const X87_TRUNC: u16 = 0x0C00;

/// Thread a rounds toward zero (both units), thread b keeps the default; both yield in
/// between; what each saw at the end (a's modes held, b's modes at default).
fn rounding_seen(fpu: FpuControl) -> (bool, bool) {
    let host = LinuxHost::unpinned();
    let r = mcrt::run(Config::new(Policy::Local, 1).with_fpu(fpu), &host, || {
        let a = mcrt::spawn(|| {
            set_mxcsr(0x1F80 | MXCSR_TRUNC);
            set_x87_control(0x037F | X87_TRUNC);
            mcrt::yield_now();
            mcrt::yield_now();
            let held =
                mxcsr() & MXCSR_TRUNC == MXCSR_TRUNC && x87_control() & X87_TRUNC == X87_TRUNC;
            set_mxcsr(0x1F80);
            set_x87_control(0x037F);
            held
        })
        .unwrap();
        let b = mcrt::spawn(|| {
            mcrt::yield_now();
            mxcsr() & MXCSR_TRUNC == 0 && x87_control() & X87_TRUNC == 0
        })
        .unwrap();
        (a.join().unwrap(), b.join().unwrap())
    });
    r.unwrap()
}

#[test]
fn fpu_control_state_is_per_thread() {
    assert_eq!(rounding_seen(FpuControl::Saved), (true, true));
}

/// With `FpuControl::Shared` the switch keeps nothing per thread, as documented: b's first
/// run loads the initial words, and a, resumed by a switch that leaves them alone, goes on
/// with b's (which is why `Saved` is the default).
#[test]
fn shared_fpu_control_state_is_not_kept() {
    assert_eq!(rounding_seen(FpuControl::Shared), (false, true));
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

/// §2.1: with every processor busy a future is evaluated eagerly, at `spawn`.
#[test]
fn futures_are_eager_when_no_processor_is_idle() {
    let host = LinuxHost::unpinned();
    let eager = mcrt::run(Config::new(Policy::Local, 1), &host, || {
        (0..100u32).all(|i| {
            let f = mcrt::future::spawn(|x: u32| x + 1, i);
            f.was_eager() && f.is_ready() && f.read() == i + 1
        })
    });
    assert_eq!(eager, Ok(true));
}

/// §2.1, "based on load": an idle processor is offered one future at a time, so a
/// spawner's batch of small futures is mostly evaluated by the spawner itself (each one
/// queued costs cache-line transfers to the processor that takes it), while the idle
/// processor is kept fed. (Queueing every future while a processor was idle made a
/// future cost 200 ns at 2 processors, against 2 at 1.)
#[test]
fn an_idle_processor_is_offered_one_future_at_a_time() {
    let host = LinuxHost::unpinned();
    // Batches of 1000 until one found processor 1 looking for work (a parked processor
    // looks again within a millisecond): the most futures any batch queued.
    let most_queued = mcrt::run(Config::new(Policy::Local, 2), &host, || {
        let start = std::time::Instant::now();
        let mut most = 0;
        while start.elapsed().as_millis() < 300 || (most == 0 && start.elapsed().as_secs() < 20) {
            let fs: Vec<_> = (0..1000u32).map(|i| mcrt::future::spawn(|x: u32| x, i)).collect();
            most = most.max(fs.iter().filter(|f| !f.was_eager()).count());
            let sum: u32 = fs.into_iter().map(|f| f.read()).sum();
            assert_eq!(sum, (0..1000).sum::<u32>());
        }
        most
    })
    .unwrap();
    assert!((1..500).contains(&most_queued), "{most_queued} of 1000 futures queued");
}

/// §2.1: with a processor idle, a future is queued for it, and that processor evaluates
/// it on its own stack while the spawner goes on (the spawner never reads it until then).
#[test]
fn an_idle_processor_evaluates_a_queued_future() {
    let host = LinuxHost::unpinned();
    let ran_on = mcrt::run(Config::new(Policy::Local, 2), &host, || {
        let start = std::time::Instant::now();
        while start.elapsed().as_secs() < 20 {
            let f = mcrt::future::spawn_with(mcrt::processor);
            if f.was_eager() {
                // Processor 1 was not looking for work just then (parked, or not started).
                std::thread::sleep(std::time::Duration::from_micros(50));
                continue;
            }
            while !f.is_ready() {
                std::hint::spin_loop();
            }
            return Some(f.read());
        }
        None
    });
    assert_eq!(ran_on, Ok(Some(1)));
}
