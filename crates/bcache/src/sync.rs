//! The atomics the cache is built from: `core`'s normally, loom's under `cfg(loom)` so the
//! model checker sees every access to the tree, the buffers and the per-core counters.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize};

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize};
