//! A reader-writer lock: many readers or one writer. A waiting writer keeps new readers
//! out (so a stream of readers cannot starve it); waiters yield on the state word.

use crate::cells::ReadShared;
use crate::predicate::Op;
use crate::thread::yield_until;
use core::sync::atomic::{AtomicU32, Ordering};

const WRITER: u32 = 1 << 31;
const WRITER_WAITING: u32 = 1 << 30;
const READERS: u32 = WRITER_WAITING - 1;

/// A reader-writer lock guarding a `T`.
pub struct RwLock<T> {
    /// Readers in the low bits, then `WRITER_WAITING`, then `WRITER`.
    state: AtomicU32,
    /// Readers share it (so the lock is `Sync` only for `T: Sync`), a writer has it alone.
    value: ReadShared<T>,
}

impl<T> RwLock<T> {
    /// An unlocked lock around `value`.
    pub const fn new(value: T) -> RwLock<T> {
        RwLock { state: AtomicU32::new(0), value: ReadShared::new(value) }
    }

    /// Runs `f` on the value shared with other readers.
    pub fn read<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        loop {
            let s = self.state.load(Ordering::Relaxed);
            if s & (WRITER | WRITER_WAITING) == 0 && s & READERS != READERS {
                if self
                    .state
                    .compare_exchange_weak(s, s + 1, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    break;
                }
                continue;
            }
            yield_until(&self.state, Op::NoneSet, WRITER | WRITER_WAITING);
        }
        // A reader's share: no writer holds the lock.
        let r = f(self.value.read());
        self.state.fetch_sub(1, Ordering::Release);
        crate::notify();
        r
    }

    /// Runs `f` on the value with the lock held alone.
    pub fn write<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        loop {
            let s = self.state.load(Ordering::Relaxed);
            if s & !WRITER_WAITING == 0 {
                if self
                    .state
                    .compare_exchange_weak(s, WRITER, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    break;
                }
                continue;
            }
            self.state.fetch_or(WRITER_WAITING, Ordering::Relaxed);
            yield_until(&self.state, Op::Le, WRITER_WAITING);
        }
        // The writer's hold: nobody else is in.
        let r = f(self.value.write());
        self.state.fetch_and(!WRITER, Ordering::Release);
        crate::notify_all();
        r
    }
}
