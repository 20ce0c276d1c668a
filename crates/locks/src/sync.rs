//! The primitives the locks are built from: `core`'s atomics and spin hint normally, loom's
//! under `cfg(loom)` so the model checker sees every atomic access and every spin.

#[cfg(loom)]
pub(crate) use loom::{
    cell::UnsafeCell,
    sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicUsize},
};

#[cfg(not(loom))]
pub(crate) use core::{
    cell::UnsafeCell,
    sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicUsize},
};

/// One busy-wait loop: call [`Spin::wait`] each time round.
pub(crate) struct Spin {
    /// Rounds waited so far (only loom needs to know).
    #[cfg(loom)]
    rounds: u32,
}

/// Under loom, the rounds a single wait may spin before the model stops branching.
#[cfg(loom)]
const LOOM_ROUNDS: u32 = 2;

impl Spin {
    /// A new wait.
    pub(crate) fn new() -> Self {
        Spin {
            #[cfg(loom)]
            rounds: 0,
        }
    }

    /// Waits a moment: the CPU's spin-loop hint (`pause` on x86, which also yields the
    /// core's pipeline to its hyperthread sibling).
    #[cfg(not(loom))]
    pub(crate) fn wait(&mut self) {
        core::hint::spin_loop();
    }

    /// Waits a moment: loom's yield, which lets the other threads run. With two or more
    /// threads waiting on a held lock, loom would otherwise also explore schedules where the
    /// waiters take turns yielding to each other forever and never run the holder (a yield
    /// from one waiter to another is not a preemption, so a preemption bound does not cut
    /// them off). So after `LOOM_ROUNDS` rounds of one wait, the rest of that execution
    /// follows loom's default schedule (`skip_branch`) instead of branching. A further round
    /// only rereads the word it waits on; the schedules where the awaited thread moves
    /// sooner are explored from the earlier branch points. The price: interleavings that
    /// arise only after some wait's third round are checked along one schedule, not all.
    #[cfg(loom)]
    pub(crate) fn wait(&mut self) {
        self.rounds += 1;
        if self.rounds > LOOM_ROUNDS {
            loom::skip_branch();
        }
        loom::thread::yield_now();
    }
}
