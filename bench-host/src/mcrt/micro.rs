//! `mcrt_micro`, McRT Table 1: thread create (255), mutex lock/release (1000), and a
//! context switch between two threads (1000: `mcrt` is a yield through the scheduler under
//! the default `FpuControl::Auto`, no thread having called the setter, so the sharing
//! switch; `mcrt-auto-set` the same after a thread called `mcrt::fpu::set_control`, so the
//! saving switch; `-saved-fpu` and `-shared-fpu` the same under `FpuControl::Saved` and
//! `Shared`; `mcrt-context` the bare saving switch under it, which keeps each thread's
//! MXCSR and x87 control word, `mcrt-context-shared-fpu` the bare sharing switch, which
//! does not), in µs for those iterations as the paper reports them; McRT against `std::thread` (Linux's native threads), `corosensei` and
//! `generator` coroutines, and `parking_lot`/`std` mutexes, in one run on one CPU.

use super::line;
use crate::median_of;
use mcrt::hosted::LinuxHost;
use mcrt::sync::{Mutex, MutexKind};
use mcrt::{Config, FpuControl, Policy};
use std::hint::black_box;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Instant;

const EXPERIMENT: &str = "mcrt_micro";
const CREATES: usize = 255;
const LOCKS: usize = 1000;
const SWITCHES: usize = 1000;

fn us(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1e6
}

/// One processor, pinned: the cost of the mechanism, not of parallelism.
fn on_mcrt<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    mcrt::run(Config::new(Policy::Local, 1), &LinuxHost::pinned(), f).expect("mcrt runs")
}

/// McRT: 255 threads created (and run, and joined).
pub fn mcrt_create() -> f64 {
    on_mcrt(|| {
        let start = Instant::now();
        let hs: Vec<_> = (0..CREATES).map(|_| mcrt::spawn(|| ()).expect("spawn")).collect();
        for h in hs {
            h.join();
        }
        us(start)
    })
}

fn std_create() -> f64 {
    let start = Instant::now();
    let hs: Vec<_> = (0..CREATES).map(|_| std::thread::spawn(|| ())).collect();
    for h in hs {
        h.join().expect("thread");
    }
    us(start)
}

fn corosensei_create() -> f64 {
    let start = Instant::now();
    for _ in 0..CREATES {
        let mut c = corosensei::Coroutine::new(|_: &corosensei::Yielder<(), ()>, ()| ());
        black_box(c.resume(()));
    }
    us(start)
}

fn generator_create() -> f64 {
    let start = Instant::now();
    for _ in 0..CREATES {
        let mut g = generator::Gn::<()>::new_scoped(|_| ());
        black_box(g.next());
    }
    us(start)
}

/// McRT: 1000 lock/release pairs of an uncontended mutex of `kind`.
fn mcrt_mutex(kind: MutexKind) -> f64 {
    on_mcrt(move || {
        let m = Mutex::new(kind, 0u64);
        let start = Instant::now();
        for _ in 0..LOCKS {
            *black_box(&m).lock() += 1;
        }
        us(start)
    })
}

fn parking_lot_mutex() -> f64 {
    let m = parking_lot::Mutex::new(0u64);
    let start = Instant::now();
    for _ in 0..LOCKS {
        *black_box(&m).lock() += 1;
    }
    us(start)
}

fn std_mutex() -> f64 {
    let m = std::sync::Mutex::new(0u64);
    let start = Instant::now();
    for _ in 0..LOCKS {
        *black_box(&m).lock().expect("lock") += 1;
    }
    us(start)
}

/// Whether a thread calls the FPU setter before the switches are timed.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Setter {
    /// Nobody does (under `Auto`, the sharing switch).
    NotCalled,
    /// The main thread sets the initial words (under `Auto`, the saving switch from then).
    Called,
}

/// McRT: two threads on one processor yield to each other 1000 times in all, with switches
/// keeping the FPU control state as `fpu` says (and, under `Auto`, as `setter` makes it).
pub fn mcrt_switch(fpu: FpuControl, setter: Setter) -> f64 {
    let config = Config::new(Policy::Local, 1).with_fpu(fpu);
    mcrt::run(config, &LinuxHost::pinned(), move || {
        if setter == Setter::Called {
            mcrt::fpu::set_control(mcrt::fpu::INITIAL).expect("valid words");
        }
        let go = Arc::new(AtomicU32::new(0));
        let g = go.clone();
        let other = mcrt::spawn(move || {
            g.store(1, Ordering::Release);
            for _ in 0..SWITCHES / 2 {
                mcrt::yield_now();
            }
        })
        .expect("spawn");
        mcrt::yield_until(&go, mcrt::Op::Eq, 1);
        let start = Instant::now();
        for _ in 0..SWITCHES / 2 {
            mcrt::yield_now();
        }
        let t = us(start);
        other.join();
        t
    })
    .expect("mcrt runs")
}

/// The two stack pointers of a bare context switch.
struct SwitchPair {
    main_sp: usize,
    other_sp: usize,
}

/// McRT's switch (`FpuControl::Shared` if `SHARED`) from the context saved in `*save` to
/// `next`, inlined into the loops that time it.
///
/// # Safety
/// As `mcrt::context::switch`.
#[inline(always)]
unsafe fn bare_switch<const SHARED: bool>(save: *mut usize, next: usize) {
    // SAFETY: as the caller promised.
    unsafe {
        if SHARED {
            mcrt::context::switch_sharing_fpu(save, next)
        } else {
            mcrt::context::switch(save, next)
        }
    }
}

/// The other side of a bare switch: switches straight back, forever.
extern "C" fn bounce<const SHARED: bool>(pair: usize) -> ! {
    let pair = pair as *mut SwitchPair;
    loop {
        // SAFETY: `pair` outlives every switch into this context (see `mcrt_context`).
        unsafe { bare_switch::<SHARED>(&raw mut (*pair).other_sp, (*pair).main_sp) }
    }
}

/// McRT's switch alone, no scheduler: 500 switch-and-back pairs (1000 switches), the
/// mechanism corosensei's resume+yield is; with the FPU control words kept (`Saved`) or
/// not (`Shared`, as corosensei).
pub fn mcrt_context(fpu: FpuControl) -> f64 {
    match fpu {
        FpuControl::Saved => bare_switches::<false>(),
        FpuControl::Shared | FpuControl::Auto => bare_switches::<true>(),
    }
}

fn bare_switches<const SHARED: bool>() -> f64 {
    let stack = mcrt::context::Stack::new().expect("stack");
    let top = stack.base() as usize + mcrt::context::STACK_BYTES - mcrt::context::STACK_RESERVED;
    let mut pair = Box::new(SwitchPair { main_sp: 0, other_sp: 0 });
    let p: *mut SwitchPair = &mut *pair;
    // SAFETY: `top` is the 16-aligned top of a stack we own; `pair` and the stack live until
    // after the last switch back, and the suspended context holds nothing that needs
    // dropping, so freeing its stack then is sound.
    unsafe {
        (*p).other_sp = mcrt::context::prepare(top & !15, bounce::<SHARED>, p as usize);
        let start = Instant::now();
        for _ in 0..SWITCHES / 2 {
            bare_switch::<SHARED>(&raw mut (*p).main_sp, (*p).other_sp);
        }
        let t = us(start);
        drop(stack);
        t
    }
}

/// Native threads: two threads pinned to one CPU, each `sched_yield`ing (1000 switches).
fn std_switch() -> f64 {
    let cpu = mcrt::hosted::allowed_cpus()[0];
    let pin = move || {
        // SAFETY: a zeroed cpu_set_t is valid; pins the calling thread.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        }
    };
    let ready = Arc::new(std::sync::Barrier::new(2));
    let r = ready.clone();
    let other = std::thread::spawn(move || {
        pin();
        r.wait();
        for _ in 0..SWITCHES / 2 {
            // SAFETY: no arguments.
            unsafe { libc::sched_yield() };
        }
    });
    let start_t = std::thread::spawn(move || {
        pin();
        ready.wait();
        let start = Instant::now();
        for _ in 0..SWITCHES / 2 {
            // SAFETY: no arguments.
            unsafe { libc::sched_yield() };
        }
        us(start)
    });
    other.join().expect("thread");
    start_t.join().expect("thread")
}

/// corosensei: 500 resume + yield pairs (1000 switches).
pub fn corosensei_switch() -> f64 {
    // It must run to its end: dropping a suspended coroutine unwinds it, and the workspace
    // builds with panic = "abort".
    let mut c = corosensei::Coroutine::new(|y: &corosensei::Yielder<(), ()>, ()| {
        for _ in 0..SWITCHES / 2 {
            y.suspend(());
        }
    });
    let start = Instant::now();
    for _ in 0..SWITCHES / 2 {
        black_box(c.resume(()));
    }
    let t = us(start);
    black_box(c.resume(()));
    t
}

fn generator_switch() -> f64 {
    let mut g = generator::Gn::<()>::new_scoped(|mut s| {
        for _ in 0..SWITCHES / 2 {
            s.yield_(());
        }
    });
    let start = Instant::now();
    for _ in 0..SWITCHES / 2 {
        black_box(g.next());
    }
    let t = us(start);
    black_box(g.next());
    t
}

/// The experiment's lines (medians of `trials`).
pub fn run(quick: bool) -> Vec<String> {
    let trials = if quick { 1 } else { 9 };
    let mut out = Vec::new();
    let mut put = |config: &str, imp: &str, v: f64| {
        out.push(line(EXPERIMENT, imp, Some(config), 1, "time_us", v, "us"));
    };
    put("create255", "mcrt", median_of(trials, mcrt_create));
    put("create255", "std-thread", median_of(trials, std_create));
    put("create255", "corosensei", median_of(trials, corosensei_create));
    put("create255", "generator", median_of(trials, generator_create));
    for kind in MutexKind::ALL {
        put("mutex1000", &format!("mcrt-{}", kind.name()), median_of(trials, || mcrt_mutex(kind)));
    }
    put("mutex1000", "parking_lot", median_of(trials, parking_lot_mutex));
    put("mutex1000", "std-mutex", median_of(trials, std_mutex));
    for (fpu, setter, imp) in [
        (FpuControl::Auto, Setter::NotCalled, "mcrt"),
        (FpuControl::Auto, Setter::Called, "mcrt-auto-set"),
        (FpuControl::Saved, Setter::NotCalled, "mcrt-saved-fpu"),
        (FpuControl::Shared, Setter::NotCalled, "mcrt-shared-fpu"),
    ] {
        put("switch1000", imp, median_of(trials, || mcrt_switch(fpu, setter)));
    }
    for (fpu, suffix) in [(FpuControl::Saved, ""), (FpuControl::Shared, "-shared-fpu")] {
        put(
            "switch1000",
            &format!("mcrt-context{suffix}"),
            median_of(trials, || mcrt_context(fpu)),
        );
    }
    put("switch1000", "std-thread", median_of(trials, std_switch));
    put("switch1000", "corosensei", median_of(trials, corosensei_switch));
    put("switch1000", "generator", median_of(trials, generator_switch));
    out
}
