//! The atomics the lock-free parts use: loom's under `cfg(loom)` (so the models check the
//! real code), core's otherwise.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicU32, AtomicUsize, Ordering};

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{fence, AtomicU32, AtomicUsize, Ordering};
