//! Std stress tests: threads hammer each lock and the protected, non-atomic data must come out
//! exact (mutual locks: no lost increment; RwLock: no reader sees a half-done write).
#![cfg(not(loom))]

use locks::{McsLock, RwLock, TicketLock, TtsLock};
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Barrier;
use std::thread;

/// More threads than the host may have cores would only measure the scheduler: a FIFO spin
/// lock handed to a descheduled waiter stalls everyone behind it for a time slice.
fn threads() -> usize {
    thread::available_parallelism().map_or(2, |n| n.get()).clamp(2, 8)
}

const PER_THREAD: u64 = 100_000;

/// The three mutual-exclusion locks behind one interface, for the shared test body.
trait Mutex: Sync {
    fn make(value: u64) -> Self;
    fn with_<R>(&self, f: impl FnOnce(&mut u64) -> R) -> R;
    fn try_with_<R>(&self, f: impl FnOnce(&mut u64) -> R) -> Option<R>;
    fn into_inner_(self) -> u64;
}

macro_rules! impl_mutex {
    ($($lock:ident),*) => {$(
        impl Mutex for $lock<u64> {
            fn make(value: u64) -> Self {
                $lock::new(value)
            }
            fn with_<R>(&self, f: impl FnOnce(&mut u64) -> R) -> R {
                self.with(f)
            }
            fn try_with_<R>(&self, f: impl FnOnce(&mut u64) -> R) -> Option<R> {
                self.try_with(f)
            }
            fn into_inner_(self) -> u64 {
                self.into_inner()
            }
        }
    )*};
}
impl_mutex!(TtsLock, TicketLock, McsLock);

/// A read-then-write increment with a gap, so any overlap of two critical sections loses an
/// update.
fn bump(count: &mut u64) {
    let seen = black_box(*count);
    *count = black_box(seen + 1);
}

/// Every thread adds `PER_THREAD`, half through `with` and half through `try_with` retried
/// until it gets in; the total must be exact.
fn counts_exactly<L: Mutex>() {
    let lock = L::make(0);
    let n = threads();
    // Start together, or the first thread may finish before the last one is spawned.
    let start = Barrier::new(n);
    thread::scope(|s| {
        for _ in 0..n {
            s.spawn(|| {
                start.wait();
                for i in 0..PER_THREAD {
                    if i % 2 == 0 {
                        lock.with_(bump);
                    } else {
                        while lock.try_with_(bump).is_none() {
                            std::hint::spin_loop();
                        }
                    }
                }
            });
        }
    });
    assert_eq!(lock.into_inner_(), n as u64 * PER_THREAD);
}

#[test]
fn tts_counts_exactly() {
    counts_exactly::<TtsLock<u64>>();
}

#[test]
fn ticket_counts_exactly() {
    counts_exactly::<TicketLock<u64>>();
}

#[test]
fn mcs_counts_exactly() {
    counts_exactly::<McsLock<u64>>();
}

/// Writers keep `a == b` (breaking it in the middle of each write); readers must never see
/// them differ, nor see either go backwards.
#[derive(Default)]
struct Pair {
    a: u64,
    b: u64,
}

const WRITES_PER_WRITER: u64 = 20_000;

fn readers_never_see_torn_writes<const SLOTS: usize>(lock: &RwLock<Pair, SLOTS>) {
    let n = threads();
    let writers = (n / 2).max(1);
    let writers_left = AtomicUsize::new(writers);
    let reads = AtomicUsize::new(0);
    let done = AtomicBool::new(false);
    let start = Barrier::new(writers + n);
    thread::scope(|s| {
        for _ in 0..writers {
            s.spawn(|| {
                start.wait();
                for _ in 0..WRITES_PER_WRITER {
                    lock.write(|p| {
                        p.a += 1;
                        black_box(&mut *p);
                        p.b = black_box(p.b) + 1;
                    });
                }
                if writers_left.fetch_sub(1, SeqCst) == 1 {
                    done.store(true, SeqCst);
                }
            });
        }
        for core in 0..n {
            let (done, reads, start) = (&done, &reads, &start);
            s.spawn(move || {
                start.wait();
                let mut last = 0;
                // Read until the writers finish, and at least a few times in any case.
                let mut mine = 0;
                while !done.load(SeqCst) || mine < 100 {
                    let a = lock.read(core, |p| {
                        assert_eq!(p.a, p.b, "reader saw a half-done write");
                        p.a
                    });
                    assert!(a >= last, "went backwards: {a} after {last}");
                    last = a;
                    mine += 1;
                }
                reads.fetch_add(mine, SeqCst);
            });
        }
    });
    let total = writers as u64 * WRITES_PER_WRITER;
    assert_eq!(lock.read(0, |p| (p.a, p.b)), (total, total));
    assert!(reads.load(SeqCst) >= 100 * n);
}

#[test]
fn rwlock_readers_never_see_torn_writes() {
    readers_never_see_torn_writes(&RwLock::new(Pair::default()));
}

/// Two slots for more readers than that: readers share slots, and indices wrap.
#[test]
fn rwlock_shared_slots() {
    readers_never_see_torn_writes(&RwLock::<_, 2>::with_slots(Pair::default()));
}
