//! Scalable reader-writer lock, for read-mostly shared kernel data. Corey locks object
//! metadata with "a scalable read-write lock implementation inspired by the MCS lock" (§4.1),
//! and uses one to keep buffer-cache blocks alive during reads (§5.3) and around a shared
//! share's hashtable (§8.4).
//!
//! **The algorithm: per-slot reader indicators, writers queued on an MCS lock.** The lock
//! holds `SLOTS` reader counters, each alone on its cache line. A reader names a slot (its
//! core number, say) and its whole fast path is one atomic add on that slot to enter and one
//! subtract to leave: it writes no line that readers on other slots write, and reads no
//! other line of the lock at all. The top bit of every slot is a writer bit. A writer first
//! queues on an MCS lock (`mcs::RawMcs`, FIFO among writers, each spinning on its own node),
//! then sets the writer bit in every slot and waits for each slot's count to drain to zero.
//! A reader whose add finds the bit set takes its add back and spins, on its own slot, until
//! the writer clears the bit. Because reader and writer meet with atomic RMWs on the *same*
//! word, the order of those RMWs alone decides who goes first: either the reader's add comes
//! first and the writer sees the count, or the writer's bit comes first and the reader sees
//! it. No store-then-load (Dekker) ordering, and hence no `SeqCst`, is needed.
//!
//! This is the per-processor scheme of Hsieh & Weihl ("Scalable reader-writer locks for
//! parallel systems", IPPS 1992) and of Linux's old big-reader lock, with counters in place
//! of per-slot spin locks so any number of readers may share a slot.
//!
//! **Why not the MCS fair reader-writer queue lock** (Mellor-Crummey & Scott, PPoPP 1991)?
//! It is fair and every waiter spins locally, but every reader still swaps the one shared
//! `tail` pointer and updates the one shared reader count to enter, so readers on different
//! cores all write the same lines on the fast path: for read-mostly data the cost Corey
//! Figure 1 shows for the shared file-descriptor table. Here readers on different slots never
//! contend; the price moves to writers, who touch every slot in use (two RMWs and a read
//! each; all `SLOTS` by default, fewer with `RwLock::with_readers`), and to memory (`SLOTS`
//! × 64 bytes per lock, 1 KiB with the default 16 slots).
//!
//! Properties and rules:
//! - Correct for any slot index (it is taken modulo the slots in use); readers that share a
//!   slot only share its line. Use the core number; with more reading cores than slots,
//!   cores a slot-count apart share one, which costs only contention.
//! - Writers go FIFO among themselves and are preferred over readers: once a writer has set
//!   the bits, new readers wait. Back-to-back writers can starve readers, so this is for data
//!   that is written rarely.
//! - Reads do not nest: a read inside a read can deadlock against a waiting writer.

use crate::cell::LockCell;
use crate::mcs::RawMcs;
use crate::sync::{AtomicUsize, Spin};
use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};

/// The number of reader slots of an [`RwLock<T>`]; choose another with
/// [`RwLock::with_slots`].
pub const READER_SLOTS: usize = 16;

/// A slot's writer bit; the bits below count the readers inside or backing out.
const WRITER: usize = 1 << (usize::BITS - 1);

/// One reader indicator, alone on a 64-byte cache line so readers on other slots never
/// invalidate it.
#[repr(align(64))]
struct Slot {
    /// `WRITER` while a writer holds or is draining the lock, plus the count of readers.
    state: AtomicUsize,
}

impl Slot {
    #[cfg(not(loom))]
    const fn new() -> Self {
        Slot { state: AtomicUsize::new(0) }
    }

    #[cfg(loom)]
    fn new() -> Self {
        Slot { state: AtomicUsize::new(0) }
    }
}

/// A reader-writer lock protecting a `T`, with `SLOTS` per-core reader slots.
///
/// ```
/// let table = locks::RwLock::new([0u32; 4]);
/// table.write(|t| t[1] = 7);
/// let core = 3; // the reading core's number
/// assert_eq!(table.read(core, |t| t[1]), 7);
/// ```
///
/// Readers share `&T` across threads, so the lock is `Sync` only for `T: Sync`:
/// ```compile_fail,E0277
/// fn check<L: Sync>() {}
/// check::<locks::RwLock<core::cell::Cell<u32>>>();
/// ```
pub struct RwLock<T, const SLOTS: usize = READER_SLOTS> {
    slots: [Slot; SLOTS],
    /// How many of the slots are used (1..=SLOTS, fixed at creation): readers take slot
    /// `reader_slot % used`, writers close only these. A lock sized to the machine's
    /// readers (its cores) costs a writer that many lines, not `SLOTS`.
    used: usize,
    /// Orders writers; readers never touch it.
    writers: RawMcs,
    data: LockCell<T>,
}

// SAFETY: writers get `&mut T` one at a time and never while a reader is inside, readers get
// only `&T`, and Acquire/Release order every writer against every reader (see `read` and
// `write`). Readers on several threads share `&T` (so `T: Sync`), and writers mutate the `T`
// from any thread (so `T: Send`), as for std's RwLock.
unsafe impl<T: Send + Sync, const SLOTS: usize> Sync for RwLock<T, SLOTS> {}

impl<T> RwLock<T> {
    /// An unlocked lock around `value` with [`READER_SLOTS`] slots (usable in a `static`).
    #[cfg(not(loom))]
    pub const fn new(value: T) -> Self {
        Self::with_slots(value)
    }

    /// An unlocked lock around `value` with [`READER_SLOTS`] slots (loom's atomics cannot be
    /// built in a `const fn`).
    #[cfg(loom)]
    pub fn new(value: T) -> Self {
        Self::with_slots(value)
    }
}

impl<T, const SLOTS: usize> RwLock<T, SLOTS> {
    /// An unlocked lock around `value` with `SLOTS` reader slots (at least 1), e.g.
    /// `RwLock::<_, 64>::with_slots(value)` on a 64-core machine.
    #[cfg(not(loom))]
    pub const fn with_slots(value: T) -> Self {
        const { assert!(SLOTS > 0, "an RwLock needs at least one reader slot") };
        RwLock {
            slots: [const { Slot::new() }; SLOTS],
            used: SLOTS,
            writers: RawMcs::new(),
            data: LockCell::new(value),
        }
    }

    /// An unlocked lock around `value` with `SLOTS` reader slots (at least 1).
    #[cfg(loom)]
    pub fn with_slots(value: T) -> Self {
        const { assert!(SLOTS > 0, "an RwLock needs at least one reader slot") };
        RwLock {
            slots: core::array::from_fn(|_| Slot::new()),
            used: SLOTS,
            writers: RawMcs::new(),
            data: LockCell::new(value),
        }
    }

    /// The lock with only the first `readers` slots in use (at least 1, at most `SLOTS`):
    /// for a machine with `readers` cores, a writer then closes `readers` lines, not
    /// `SLOTS`. Readers on cores `c` and `c + readers` share a slot (still correct).
    pub fn with_readers(value: T, readers: usize) -> Self {
        let mut lock = Self::with_slots(value);
        lock.used = readers.clamp(1, SLOTS);
        lock
    }

    /// Runs `f` on the value shared with other readers, registered in slot `reader_slot %
    /// used` (see [`RwLock::with_readers`]; all `SLOTS` by default); waits while a writer holds or is draining the lock. Pass the core number so
    /// readers on different cores write different cache lines.
    pub fn read<R>(&self, reader_slot: usize, f: impl FnOnce(&T) -> R) -> R {
        let slot = &self.slots[reader_slot % self.used].state;
        let mut spin = Spin::new();
        loop {
            // Announce ourselves. Acquire: when the writer bit is clear we read the value, so
            // the last writer's Release `fetch_and` on this slot (or a later RMW continuing its
            // release sequence) must happen-before us. The RMW also fixes our place in this
            // slot's modification order relative to any writer's `fetch_or`.
            if slot.fetch_add(1, Acquire) & WRITER == 0 {
                break;
            }
            // A writer came first: take the announcement back so its drain can finish.
            // Relaxed: we read nothing protected, so there is nothing to publish.
            slot.fetch_sub(1, Relaxed);
            // Wait on our own slot's line. Relaxed: only decides when to retry the Acquire add.
            while slot.load(Relaxed) & WRITER != 0 {
                spin.wait();
            }
        }
        let _leave = Leave(slot);
        // SAFETY: our add preceded any writer's `fetch_or` on this slot, so a writer that
        // comes now waits in `write` until `Leave` takes the count back to zero; the
        // Acquire add ordered us after every earlier writer. Readers may overlap: shared.
        unsafe { self.data.with(f) }
    }

    /// Runs `f` on the value with the lock held exclusively, after earlier writers (FIFO) and
    /// after every reader already inside has left.
    pub fn write<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        self.writers.with_locked(|| {
            // Close every slot. Relaxed: the bit publishes nothing; readers who see it do not
            // touch the value. Only the writer holding `writers` sets or clears the bit.
            let slots = &self.slots[..self.used];
            for slot in slots {
                slot.state.fetch_or(WRITER, Relaxed);
            }
            let _reopen = Reopen(slots);
            // Wait until each slot holds only our bit. Acquire: pairs with the Release
            // subtracts of the readers who were inside (through the slot's release sequence),
            // so their reads of the value happen-before our writes.
            let mut spin = Spin::new();
            for slot in slots {
                while slot.state.load(Acquire) != WRITER {
                    spin.wait();
                }
            }
            // SAFETY: every slot carries our bit and a zero count, so no reader is inside and
            // none can enter until `Reopen` clears the bits; `writers` excludes other writers,
            // and its Acquire handoff orders us after the previous one.
            unsafe { self.data.with_mut(f) }
        })
    }

    /// Unwraps the value.
    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }
}

/// Takes a reader's count back out of its slot when dropped (also during unwinding).
struct Leave<'a>(&'a AtomicUsize);

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        // Release: our reads of the value happen-before the Acquire load of a writer that
        // sees the slot drained.
        self.0.fetch_sub(1, Release);
    }
}

/// Clears the writer bit in every slot when dropped (also during unwinding).
struct Reopen<'a>(&'a [Slot]);

impl Drop for Reopen<'_> {
    fn drop(&mut self) {
        for slot in self.0 {
            // Release: our writes to the value happen-before the Acquire add of every reader
            // that finds the bit clear. An RMW, because readers add and subtract concurrently.
            slot.state.fetch_and(!WRITER, Release);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::sync::atomic::{AtomicBool, AtomicUsize as StdAtomicUsize, Ordering::SeqCst};
    use std::time::{Duration, Instant};
    use std::{thread, vec::Vec};

    fn drained<T, const S: usize>(lock: &RwLock<T, S>) -> bool {
        lock.slots.iter().all(|s| s.state.load(Relaxed) == 0)
    }

    #[test]
    fn read_and_write() {
        let lock = RwLock::new((1, 2));
        assert_eq!(lock.read(0, |&(a, b)| a + b), 3);
        assert_eq!(lock.write(|v| core::mem::replace(v, (5, 6))), (1, 2));
        assert_eq!(lock.read(3, |v| *v), (5, 6));
        assert!(drained(&lock));
        assert_eq!(lock.into_inner(), (5, 6));
    }

    #[test]
    fn slots_are_cache_lines_and_indices_wrap() {
        assert_eq!(core::mem::size_of::<Slot>(), 64);
        let lock = RwLock::<u8, 4>::with_slots(9);
        lock.read(1000, |v| {
            assert_eq!(*v, 9);
            assert_eq!(lock.slots[1000 % 4].state.load(Relaxed), 1);
        });
        assert!(drained(&lock));
    }

    #[test]
    fn a_lock_sized_to_its_readers_uses_only_their_slots() {
        let lock = RwLock::<u8, 16>::with_readers(1, 2);
        lock.read(5, |_| assert_eq!(lock.slots[1].state.load(Relaxed), 1));
        lock.write(|v| {
            *v = 2;
            assert!(lock.slots[..2].iter().all(|s| s.state.load(Relaxed) == WRITER));
            assert!(lock.slots[2..].iter().all(|s| s.state.load(Relaxed) == 0));
        });
        assert_eq!(lock.read(7, |v| *v), 2);
        assert!(drained(&lock));
        assert_eq!(RwLock::<u8, 4>::with_readers(0, 0).used, 1);
        assert_eq!(RwLock::<u8, 4>::with_readers(0, 99).used, 4);
    }

    #[test]
    fn static_locks() {
        static ONE_SLOT: RwLock<u64, 1> = RwLock::with_slots(0);
        static DEFAULT: RwLock<u64> = RwLock::new(0);
        ONE_SLOT.write(|v| *v += 2);
        assert_eq!(ONE_SLOT.read(5, |v| *v), 2);
        DEFAULT.write(|v| *v += 3);
        assert_eq!(DEFAULT.read(5, |v| *v), 3);
        assert_eq!(DEFAULT.slots.len(), READER_SLOTS);
    }

    #[test]
    fn readers_overlap() {
        let lock = RwLock::new(());
        let inside = StdAtomicUsize::new(0);
        thread::scope(|s| {
            for core in 0..2 {
                let (lock, inside) = (&lock, &inside);
                s.spawn(move || {
                    lock.read(core, |()| {
                        inside.fetch_add(1, SeqCst);
                        let start = Instant::now();
                        while inside.load(SeqCst) < 2 {
                            assert!(start.elapsed() < Duration::from_secs(10), "readers excluded");
                            thread::yield_now();
                        }
                    })
                });
            }
        });
    }

    #[test]
    fn writer_waits_for_the_reader_inside() {
        let lock = RwLock::new(0);
        let wrote = AtomicBool::new(false);
        thread::scope(|s| {
            lock.read(0, |v| {
                s.spawn(|| {
                    lock.write(|v| {
                        *v = 1;
                        wrote.store(true, SeqCst);
                    })
                });
                thread::sleep(Duration::from_millis(50));
                assert!(!wrote.load(SeqCst), "writer entered during a read");
                assert_eq!(*v, 0);
            });
        });
        assert!(wrote.load(SeqCst));
        assert_eq!(lock.read(0, |v| *v), 1);
    }

    #[test]
    fn panics_release_the_lock() {
        let lock = RwLock::new(Vec::<u8>::new());
        assert!(catch_unwind(AssertUnwindSafe(|| lock.read(2, |_| panic!("r")))).is_err());
        assert!(catch_unwind(AssertUnwindSafe(|| lock.write(|_| panic!("w")))).is_err());
        assert!(drained(&lock));
        lock.write(|v| v.push(1));
        assert_eq!(lock.read(2, |v| v.len()), 1);
    }

    #[test]
    fn is_send_and_sync() {
        fn check<L: Send + Sync>() {}
        check::<RwLock<Vec<u8>>>();
    }
}
