//! Loom models of every lock. Under `cfg(loom)` the protected value sits in a loom
//! `UnsafeCell`, so any two critical sections not ordered by happens-before (mutual
//! exclusion broken, or an ordering too weak to pass the data on) fail the model, and the
//! counts catch lost updates. Run with
//! `RUSTFLAGS="--cfg loom" cargo test -p locks --release --test loom`.
#![cfg(loom)]

use locks::{McsLock, RwLock, TicketLock, TtsLock};
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed, Ordering::SeqCst};
use loom::sync::Arc;
use loom::thread;

/// The three mutual-exclusion locks behind one interface, for the shared models.
trait Mutex: Send + Sync + 'static {
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

fn bump(count: &mut u64) {
    *count += 1;
}

/// Unwraps the lock once every other thread has dropped its `Arc`.
fn finish<L: Mutex>(lock: Arc<L>) -> u64 {
    Arc::try_unwrap(lock).ok().expect("threads joined").into_inner_()
}

/// A spawned thread takes the lock twice while the main thread takes it once: covers the
/// free-lock path, a waiter queued behind a holder, and (MCS) a release racing a waiter that
/// has joined the queue but not yet linked itself in.
fn two_threads<L: Mutex>() {
    let lock = Arc::new(L::make(0));
    let other = {
        let lock = lock.clone();
        thread::spawn(move || {
            lock.with_(bump);
            lock.with_(bump);
        })
    };
    lock.with_(bump);
    other.join().unwrap();
    assert_eq!(finish(lock), 3);
}

/// Three threads, one acquisition each: a queue two deep.
fn three_threads<L: Mutex>() {
    let lock = Arc::new(L::make(0));
    let others: Vec<_> = (0..2)
        .map(|_| {
            let lock = lock.clone();
            thread::spawn(move || lock.with_(bump))
        })
        .collect();
    lock.with_(bump);
    for t in others {
        t.join().unwrap();
    }
    assert_eq!(finish(lock), 3);
}

/// `try_with` racing `with`: it may fail, but when it succeeds it is exclusive and ordered.
fn try_races_with<L: Mutex>() {
    let lock = Arc::new(L::make(0));
    let other = {
        let lock = lock.clone();
        thread::spawn(move || {
            lock.with_(bump);
            lock.try_with_(bump).is_some()
        })
    };
    let mine = lock.try_with_(bump).is_some();
    let theirs = other.join().unwrap();
    assert_eq!(finish(lock), 1 + u64::from(mine) + u64::from(theirs));
}

/// `try_with` after another thread's `with` has finished, learnt through a Relaxed flag that
/// orders nothing: if it gets in, the lock alone must order it after that `with`. (Without
/// the flag loom does not reach this schedule, and `try_races_with` misses a Relaxed load in
/// `TicketLock::try_with`.)
fn try_after_with<L: Mutex>() {
    let lock = Arc::new(L::make(0));
    let done = Arc::new(AtomicBool::new(false));
    let other = {
        let (lock, done) = (lock.clone(), done.clone());
        thread::spawn(move || {
            lock.with_(bump);
            done.store(true, Relaxed);
        })
    };
    while !done.load(Relaxed) {
        thread::yield_now();
    }
    // It may still fail: nothing forces this thread to see the release yet.
    let mine = lock.try_with_(bump).is_some();
    other.join().unwrap();
    assert_eq!(finish(lock), 1 + u64::from(mine));
}

fn bounded(preemptions: usize) -> loom::model::Builder {
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(preemptions);
    model
}

macro_rules! mutex_models {
    ($($name:ident: $lock:ty),*) => {$(
        mod $name {
            use super::*;

            #[test]
            fn two_threads_exhaustive() {
                loom::model(two_threads::<$lock>);
            }

            #[test]
            fn try_races_with_exhaustive() {
                loom::model(try_races_with::<$lock>);
            }

            #[test]
            fn try_after_with_exhaustive() {
                loom::model(try_after_with::<$lock>);
            }

            /// Bounded to 4 preemptions to finish in seconds.
            #[test]
            fn three_threads_bounded() {
                bounded(4).check(three_threads::<$lock>);
            }
        }
    )*};
}
mutex_models!(tts: TtsLock<u64>, ticket: TicketLock<u64>, mcs: McsLock<u64>);

/// Writers keep `a == b`, breaking it in the middle of each write.
#[derive(Default)]
struct Pair {
    a: u64,
    b: u64,
}

fn write_pair(p: &mut Pair) {
    p.a += 1;
    p.b += 1;
}

/// Reads the pair; a half-done write would show as `a != b`.
fn read_pair(lock: &RwLock<Pair, 2>, slot: usize) -> u64 {
    lock.read(slot, |p| {
        assert_eq!(p.a, p.b, "reader saw a half-done write");
        p.a
    })
}

fn rw_lock() -> Arc<RwLock<Pair, 2>> {
    Arc::new(RwLock::with_slots(Pair::default()))
}

/// One writer writes twice while a reader reads twice: the reader sees 0, 1 or 2, in order.
#[test]
fn rw_reader_and_writer_exhaustive() {
    loom::model(|| {
        let lock = rw_lock();
        let writer = {
            let lock = lock.clone();
            thread::spawn(move || {
                lock.write(write_pair);
                lock.write(write_pair);
            })
        };
        let first = read_pair(&lock, 0);
        let second = read_pair(&lock, 0);
        assert!(first <= second && second <= 2);
        writer.join().unwrap();
        assert_eq!(read_pair(&lock, 1), 2);
    });
}

/// Two writers and a reader: writers exclude each other (no lost update) and the reader.
#[test]
fn rw_two_writers_and_a_reader_bounded() {
    bounded(4).check(|| {
        let lock = rw_lock();
        let writers: Vec<_> = (0..2)
            .map(|_| {
                let lock = lock.clone();
                thread::spawn(move || lock.write(write_pair))
            })
            .collect();
        assert!(read_pair(&lock, 1) <= 2);
        for w in writers {
            w.join().unwrap();
        }
        assert_eq!(read_pair(&lock, 0), 2);
    });
}

/// Two readers, on different slots or on the same one, against a writer.
fn two_readers_and_a_writer(slots: [usize; 2]) {
    let lock = rw_lock();
    let readers: Vec<_> = slots
        .into_iter()
        .map(|slot| {
            let lock = lock.clone();
            thread::spawn(move || read_pair(&lock, slot))
        })
        .collect();
    lock.write(write_pair);
    for r in readers {
        assert!(r.join().unwrap() <= 1);
    }
    assert_eq!(read_pair(&lock, 0), 1);
}

#[test]
fn rw_two_readers_different_slots_and_a_writer_bounded() {
    bounded(4).check(|| two_readers_and_a_writer([0, 1]));
}

/// Bounded to 3 preemptions: two readers retrying on one slot make this the largest model
/// (about 25 s at 4 preemptions).
#[test]
fn rw_two_readers_same_slot_and_a_writer_bounded() {
    bounded(3).check(|| two_readers_and_a_writer([1, 3]));
}

/// Readers overlap: each waits inside its read until the other is inside too. If readers
/// excluded each other this would spin forever and loom would fail the model.
#[test]
fn rw_readers_overlap_exhaustive() {
    for slots in [[0, 1], [1, 1]] {
        loom::model(move || {
            let lock = rw_lock();
            let inside = Arc::new(AtomicUsize::new(0));
            let readers: Vec<_> = slots
                .into_iter()
                .map(|slot| {
                    let (lock, inside) = (lock.clone(), inside.clone());
                    thread::spawn(move || {
                        lock.read(slot, |_| {
                            inside.fetch_add(1, SeqCst);
                            while inside.load(SeqCst) < 2 {
                                thread::yield_now();
                            }
                        })
                    })
                })
                .collect();
            for r in readers {
                r.join().unwrap();
            }
        });
    }
}
