//! Spin locks that guard data, for the per-core kernel and the McRT user runtime. Every lock
//! owns the value it protects and hands it out only inside a closure, so the critical section
//! is a visible block and a lock cannot be left held by a forgotten guard.
//!
//! | lock | acquire costs | under contention | use it for |
//! | --- | --- | --- | --- |
//! | [`TtsLock`] | one CAS | every waiter rereads one line; each release starts a stampede | short, rarely contended sections (Linux-style spin lock) |
//! | [`TicketLock`] | one fetch-add | FIFO; every waiter still spins on one line | fairness at modest core counts (McRT §3.2.3, Figure 7) |
//! | [`McsLock`] | one swap (+ one CAS to release) | FIFO; each waiter spins on its own node | contended locks on many cores (Corey §2, Figure 3) |
//! | [`RwLock`] | one fetch-add on the reader's own slot | readers never share a written line | read-mostly data: share tables, buffer cache (Corey §4.1, §5.3, §8.4) |
//!
//! Corey §2 (Figure 3) is the reason for more than one lock: uncontended, a spin lock costs
//! 3 instructions and an MCS lock 15, but the spin lock's cost grows with every core that
//! contends because each one adds cache-coherence traffic on the single lock line, while MCS
//! waiters each spin on their own line. Corey §4.1 lists the same set: Linux spin and
//! read-write locks, its own MCS lock, and "a scalable read-write lock implementation inspired
//! by the MCS lock". McRT's §3.2.3 (Figure 7) runs its scheduling queue under a TTS and a
//! ticket lock and shows the queued ticket lock starting to win at 64 hardware threads.
//!
//! Also cited: W. C. Hsieh and W. E. Weihl, "Scalable reader-writer locks for parallel
//! systems", IPPS 1992 (per-processor reader state, see [`rwlock`]); D. P. Reed and R. K.
//! Kanodia, "Synchronization with eventcounts and sequencers", CACM 22(2), 1979 (tickets).
//!
//! References: J. M. Mellor-Crummey and M. L. Scott, "Algorithms for scalable synchronization
//! on shared-memory multiprocessors", ACM TOCS 9(1), 1991 (TTS, ticket and MCS locks);
//! Mellor-Crummey and Scott, "Scalable reader-writer synchronization for shared-memory
//! multiprocessors", PPoPP 1991 (the fair reader-writer queue lock, discussed in [`rwlock`]);
//! T. E. Anderson, "The performance of spin lock alternatives for shared-memory
//! multiprocessors", IEEE TPDS 1(1), 1990 (why test-and-test-and-set).
//!
//! Rules common to all four locks:
//! - No nesting: taking a lock again inside its own closure (including a `read` inside a
//!   `read`, when a writer may be waiting) deadlocks.
//! - If the closure panics, the lock is released during unwinding (there is no poisoning;
//!   Atoll builds with `panic = "abort"`, so this only matters in host tests).
//! - Spinning calls [`core::hint::spin_loop`] (loom's yield under `cfg(loom)`). Nothing here
//!   sleeps or allocates; keeping interrupts off around a lock that an interrupt handler also
//!   takes is the caller's job.
//! - Every memory ordering is the weakest that is correct, and the comment beside it says
//!   what it pairs with. The loom models fail if any Acquire or Release is weakened to
//!   Relaxed (checked by hand for each one).
//!
//! `unsafe` is confined to what a data-owning lock cannot avoid: entering the `UnsafeCell`
//! once the lock is held (through the crate-private `cell::LockCell`), following MCS queue
//! links to a neighbour's stack node, and the `Sync` impls. Each block carries a
//! `// SAFETY:` comment.
//!
//! Under loom a single wait stops the model from branching after a couple of rounds (see
//! `sync::Spin`): with two threads waiting on one held lock, loom would otherwise explore
//! schedules in which the waiters yield to each other forever.
//!
//! Tests: `cargo test -p locks` (unit tests and std stress tests); the loom models run with
//! `RUSTFLAGS="--cfg loom" cargo test -p locks --release --test loom`.
#![no_std]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs, clippy::undocumented_unsafe_blocks)]

#[cfg(test)]
extern crate std;

mod cell;
pub mod mcs;
pub mod rwlock;
mod sync;
pub mod ticket;
pub mod tts;

pub use mcs::McsLock;
pub use rwlock::RwLock;
pub use ticket::TicketLock;
pub use tts::TtsLock;

/// The unit tests every mutex (`TtsLock`, `TicketLock`, `McsLock`) must pass, written once.
#[cfg(all(test, not(loom)))]
#[macro_export]
#[doc(hidden)]
macro_rules! mutex_tests {
    ($lock:ident) => {
        #[test]
        fn with_mutates_and_returns() {
            let lock = $lock::new(1);
            assert_eq!(lock.with(|v| core::mem::replace(v, 7)), 1);
            assert_eq!(lock.into_inner(), 7);
        }

        #[test]
        fn try_with_fails_while_held_and_succeeds_after() {
            let lock = $lock::new(0);
            lock.with(|v| {
                *v += 1;
                assert_eq!(lock.try_with(|_| ()), None);
            });
            assert_eq!(lock.try_with(|v| *v), Some(1));
        }

        #[test]
        fn static_lock() {
            static LOCK: $lock<u64> = $lock::new(0);
            LOCK.with(|v| *v += 2);
            assert_eq!(LOCK.with(|v| *v), 2);
        }

        #[test]
        fn panic_inside_releases_the_lock() {
            let lock = $lock::new(std::vec::Vec::<u8>::new());
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                lock.with(|_| panic!("boom"))
            }));
            assert!(result.is_err());
            assert_eq!(lock.try_with(|v| v.len()), Some(0));
        }

        #[test]
        fn is_send_and_sync() {
            fn check<L: Send + Sync>() {}
            check::<$lock<std::vec::Vec<u8>>>();
        }
    };
}
