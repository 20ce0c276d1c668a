//! A core's own share of the cache (Corey §5.3: "per-core block allocators"): its buffers'
//! free list, the buffers it has published in the shared tree (oldest first, for eviction),
//! the buffers retired from the tree and waiting for readers to leave, and its private
//! cache (after Corey §9). Only the owning core takes its pool lock (and `sync`, for private
//! blocks), so that lock is uncontended and its line stays in the owner's cache. A core that
//! replaces another core's buffer in the tree hands it back through the owner's separate
//! `retired` lock, which the owner can wait on while holding its pool lock.

use crate::sync::{AtomicU64, AtomicUsize};
use crate::Stats;
use alloc::collections::{BTreeMap, VecDeque};
use alloc::vec::Vec;
use core::sync::atomic::Ordering::Relaxed;
use locks::TtsLock;

/// A buffer id: core `c`'s buffers are `c * per_core .. (c + 1) * per_core`.
pub(crate) type BufId = u32;

/// A buffer this core published in the shared tree.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Resident {
    pub(crate) buf: BufId,
    pub(crate) block: u64,
}

/// A block of this core's private cache.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PrivateBuf {
    pub(crate) buf: BufId,
    /// Written since last written back.
    pub(crate) dirty: bool,
}

/// The state behind a core's pool lock.
pub(crate) struct Pool {
    /// Buffers ready to fill: nobody can reach them.
    pub(crate) free: Vec<BufId>,
    /// An empty list with capacity, swapped with `PerCore::retired` to take its contents.
    pub(crate) spare: Vec<BufId>,
    /// Buffers this core linked into the tree, oldest first. An entry whose buffer another
    /// core has since replaced stays until the buffer is reclaimed (eviction skips it), so
    /// each buffer has at most one entry.
    pub(crate) resident: VecDeque<Resident>,
    /// The blocks declared private to this core (Corey §9), with their buffer if cached.
    pub(crate) private: BTreeMap<u64, Option<PrivateBuf>>,
    /// A block-sized byte buffer for device reads (taken out while in use).
    pub(crate) scratch: Vec<u8>,
}

/// One core's pool and counters, alone on its cache lines.
#[repr(align(64))]
pub(crate) struct PerCore {
    pub(crate) pool: TtsLock<Pool>,
    /// This core's buffers unlinked from the tree that a reader may still be copying:
    /// reusable once the read-write lock has been taken for writing (Corey §5.3).
    pub(crate) retired: TtsLock<Vec<BufId>>,
    /// How many blocks are private to this core; zero lets lookups skip `pool` entirely.
    /// Only the owner changes it, under `pool`.
    pub(crate) private_blocks: AtomicUsize,
    pub(crate) hits: AtomicU64,
    pub(crate) misses: AtomicU64,
    pub(crate) evictions: AtomicU64,
    pub(crate) writebacks: AtomicU64,
}

impl PerCore {
    /// Core `core`'s pool of buffers `core * per_core ..`, all free.
    pub(crate) fn new(core: usize, per_core: usize) -> Self {
        let first = core * per_core;
        // Handed out from the end of `free`, so reversed: the lowest id goes first.
        let free = (first..first + per_core).rev().map(|b| b as BufId).collect();
        PerCore {
            pool: TtsLock::new(Pool {
                free,
                spare: Vec::new(),
                resident: VecDeque::new(),
                private: BTreeMap::new(),
                scratch: Vec::new(),
            }),
            retired: TtsLock::new(Vec::new()),
            private_blocks: AtomicUsize::new(0),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            writebacks: AtomicU64::new(0),
        }
    }

    /// Adds `n` to one of this core's counters. Relaxed: counters order nothing.
    pub(crate) fn count(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Relaxed);
    }

    /// The counters so far.
    pub(crate) fn stats(&self) -> Stats {
        Stats {
            hits: self.hits.load(Relaxed),
            misses: self.misses.load(Relaxed),
            evictions: self.evictions.load(Relaxed),
            writebacks: self.writebacks.load(Relaxed),
        }
    }
}
