//! The host adaptor interface (McRT §2.5, Figure 1): what the runtime needs from the system
//! beneath it. Two hosts implement it: Linux ([`crate::hosted::LinuxHost`], pinned OS
//! threads parking on a futex) and Atoll (`libatoll::mcrt_host`, kernel threads parking in
//! M7's `wait`).

use core::sync::atomic::AtomicU32;

/// What McRT asks of the system that carries it.
pub trait Host: Sync {
    /// Runs `body(i)` for every logical processor `i` in `0..count` at once, each on a
    /// system thread of its own (`body(0)` may run on the caller's), pinned to a core where
    /// the host can; returns when all have returned. Fails if a processor cannot start.
    fn run_processors(
        &self,
        count: usize,
        body: &(dyn Fn(usize) + Sync),
    ) -> Result<(), &'static str>;

    /// Sleeps while `word` holds `expected`, for at most `timeout_us` µs (it may return
    /// early; callers check again).
    fn wait(&self, word: &AtomicU32, expected: u32, timeout_us: u64);

    /// Wakes up to `n` system threads sleeping in [`Host::wait`] on `word`.
    fn wake(&self, word: &AtomicU32, n: u32);

    /// A cycle count or nanosecond clock, for the runtime's statistics and benchmarks.
    fn now(&self) -> u64;

    /// Memory for more thread stacks, when the host carves them itself: `(base, count)`,
    /// `count` stacks of [`crate::context::STACK_BYTES`] at `base` (aligned to that size),
    /// writable, the runtime's for the rest of the process (it keeps them in its pool and
    /// never gives them back). `None` (the default, and when the host has none left): the
    /// runtime takes stacks from the global allocator. Atoll's host makes each batch a
    /// segment on a core with memory to spare (issue M15: one core's memory bounds a
    /// segment, and the stacks of 10,000 live threads need more).
    fn stack_memory(&self) -> Option<(usize, usize)> {
        None
    }
}
