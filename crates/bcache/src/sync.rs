//! The atomics the cache is built from: `core`'s normally, loom's under `cfg(loom)` so the
//! model checker sees every access to the tree, the buffers and the per-core counters.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize};

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize};

/// One busy-wait loop: call [`Spin::wait`] each time round (as in `locks`' own shim).
pub(crate) struct Spin {
    /// Rounds waited so far (only loom needs to know).
    #[cfg(loom)]
    rounds: u32,
}

impl Spin {
    /// A new wait.
    pub(crate) fn new() -> Self {
        Spin {
            #[cfg(loom)]
            rounds: 0,
        }
    }

    /// Waits a moment: the CPU's spin-loop hint.
    #[cfg(not(loom))]
    pub(crate) fn wait(&mut self) {
        core::hint::spin_loop();
    }

    /// Waits a moment: loom's yield, so the thread we wait for runs; after two rounds the
    /// model stops branching here (see `locks::sync::Spin` for why).
    #[cfg(loom)]
    pub(crate) fn wait(&mut self) {
        self.rounds += 1;
        if self.rounds > 2 {
            loom::skip_branch();
        }
        loom::thread::yield_now();
    }
}
