//! The lock-free radix tree that maps a block number to its cache entry (Corey §5.3: "a
//! lock-free tree that allows multiple cores to locate cached blocks without contention").
//!
//! Each level takes `BITS` bits of the key, most significant first; the tree's height is
//! fixed at creation from the number of keys, so a lookup is a fixed number of loads (four
//! for a million blocks) and writes nothing. A missing node is added with one
//! compare-and-swap on its parent's child pointer; a core that loses that race frees its
//! own node and follows the winner's. Nodes are never removed while the tree lives (an
//! emptied leaf keeps its zero entries), so a lookup never meets a freed node and needs no
//! lock, epoch or hazard pointer: memory grows with the set of blocks ever cached, at most
//! one 512-byte leaf per 64 blocks of the device (plus an inner node per 64 leaves).
//!
//! The leaves hold `AtomicU64` entries that the tree does not interpret (zero is "absent"
//! to [`RadixTree::get`]); the cache stores a buffer id, a dirty bit and a version there and
//! changes them with its own compare-and-swaps.
//!
//! The crate's only `unsafe` is here: turning a published node pointer back into a
//! reference, and freeing nodes (a lost race's, and all of them when the tree is dropped).
#![allow(unsafe_code)]

use crate::sync::{AtomicPtr, AtomicU64};
use alloc::boxed::Box;
use core::array;
use core::ptr::null_mut;
use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};

/// Key bits per level: 64-way nodes normally, 4-way under loom to keep the models small.
const BITS: u32 = if cfg!(loom) { 2 } else { 6 };

/// Children (or entries) per node.
const FANOUT: usize = 1 << BITS;

/// An inner node. Its children are inner nodes, or leaves on the level just above the
/// leaves; it has an array for each so that a lookup follows one typed pointer per level
/// (no tag to check, no second indirection). The unused array costs 512 bytes per inner
/// node, and inner nodes are 1/64 of the nodes.
struct Inner {
    inner: [AtomicPtr<Inner>; FANOUT],
    leaves: [AtomicPtr<Leaf>; FANOUT],
}

/// A leaf: the entries of `FANOUT` consecutive keys.
struct Leaf {
    entries: [AtomicU64; FANOUT],
}

impl Inner {
    fn new() -> Self {
        Inner {
            inner: array::from_fn(|_| AtomicPtr::new(null_mut())),
            leaves: array::from_fn(|_| AtomicPtr::new(null_mut())),
        }
    }
}

impl Leaf {
    fn new() -> Self {
        Leaf { entries: array::from_fn(|_| AtomicU64::new(0)) }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Relaxed: `&mut self` means no other thread can touch the tree any more.
        for link in &self.inner {
            free(link.load(Relaxed));
        }
        for link in &self.leaves {
            free(link.load(Relaxed));
        }
    }
}

/// Frees a node published by `child` (null: nothing).
fn free<T>(p: *mut T) {
    if !p.is_null() {
        // SAFETY: a non-null child came from `Box::into_raw` in `child` and was published
        // exactly once; this is the only place that frees it, and the tree is being
        // dropped, so no reference to it survives.
        drop(unsafe { Box::from_raw(p) });
    }
}

/// A map from keys `0..keys` to `AtomicU64` entries, safe to read and grow from any number
/// of cores at once.
pub struct RadixTree {
    /// Always an inner node (a tree of at most 64 keys has one level more than it needs,
    /// so that every lookup takes the same typed path).
    root: Inner,
    /// Levels below the root, the last of them leaves (at least 1).
    below: u32,
    /// Keys `0..keys` are valid.
    keys: u64,
}

impl RadixTree {
    /// An empty tree for keys `0..keys`.
    pub fn new(keys: u64) -> Self {
        let mut below = 1;
        while (below + 1) * BITS < 64 && keys > 1u64 << ((below + 1) * BITS) {
            below += 1;
        }
        RadixTree { root: Inner::new(), below, keys }
    }

    /// The number of keys (`0..keys` are valid).
    pub fn keys(&self) -> u64 {
        self.keys
    }

    /// The value of `key`'s entry, 0 if it has none (or `key` is out of range). Lock-free
    /// and write-free: one Acquire load per level.
    pub fn get(&self, key: u64) -> u64 {
        // Acquire: pairs with the Release that published the value (the cache's buffer).
        self.entry(key).map_or(0, |e| e.load(Acquire))
    }

    /// `key`'s entry if its leaf exists; `None` if it was never created (or out of range).
    pub fn entry(&self, key: u64) -> Option<&AtomicU64> {
        self.leaf(key, Grow::No)
    }

    /// `key`'s entry, creating the nodes on its path if needed; `None` only if `key` is out
    /// of range.
    pub fn entry_or_insert(&self, key: u64) -> Option<&AtomicU64> {
        self.leaf(key, Grow::Yes)
    }

    /// Calls `f(key, entry)` for every entry of every leaf that exists, in key order
    /// (including zero entries). Runs concurrently with growth; leaves added during the
    /// walk may or may not be visited.
    pub fn for_each(&self, mut f: impl FnMut(u64, &AtomicU64)) {
        walk(&self.root, 0, self.below, self.keys, &mut f);
    }

    /// Walks down to `key`'s entry, adding missing nodes if `grow` says so.
    fn leaf(&self, key: u64, grow: Grow) -> Option<&AtomicU64> {
        if key >= self.keys {
            return None;
        }
        let index = |below: u32| ((key >> (below * BITS)) as usize) & (FANOUT - 1);
        let mut node = &self.root;
        let mut below = self.below;
        while below > 1 {
            node = child(&node.inner[index(below)], grow, Inner::new)?;
            below -= 1;
        }
        let leaf = child(&node.leaves[index(1)], grow, Leaf::new)?;
        Some(&leaf.entries[index(0)])
    }
}

/// Whether a walk adds missing nodes (no boolean arguments).
#[derive(Clone, Copy, PartialEq)]
enum Grow {
    Yes,
    No,
}

/// The node behind `link`, adding a `make()` first if it is missing and `grow` says so.
fn child<T>(link: &AtomicPtr<T>, grow: Grow, make: impl FnOnce() -> T) -> Option<&T> {
    // Acquire: pairs with the Release CAS that published the node, so its initialised
    // (zeroed) contents are visible before we read them.
    let mut p = link.load(Acquire);
    if p.is_null() {
        if grow == Grow::No {
            return None;
        }
        let fresh = Box::into_raw(Box::new(make()));
        // Release on success: publishes the new node's contents. Acquire on failure: we
        // follow the winner's node instead, so we need its contents too.
        p = match link.compare_exchange(null_mut(), fresh, Release, Acquire) {
            Ok(_) => fresh,
            Err(winner) => {
                // SAFETY: `fresh` came from `Box::into_raw` just above and the failed CAS
                // never published it, so nobody else has seen it.
                drop(unsafe { Box::from_raw(fresh) });
                winner
            }
        };
    }
    // SAFETY: `p` is non-null and was published by the CAS above (ours or a winner's) from
    // `Box::into_raw`; nodes are only freed when the tree is dropped, which needs `&mut`,
    // so the node outlives this shared borrow of the tree.
    Some(unsafe { &*p })
}

/// `RadixTree::for_each` below inner node `node` (with `below` levels beneath it, the
/// last of them leaves) whose first key is `base`.
fn walk(node: &Inner, base: u64, below: u32, keys: u64, f: &mut impl FnMut(u64, &AtomicU64)) {
    for i in 0..FANOUT {
        let base = base + ((i as u64) << (below * BITS));
        if below == 1 {
            if let Some(leaf) = child(&node.leaves[i], Grow::No, Leaf::new) {
                walk_leaf(leaf, base, keys, f);
            }
        } else if let Some(next) = child(&node.inner[i], Grow::No, Inner::new) {
            walk(next, base, below - 1, keys, f);
        }
    }
}

/// `RadixTree::for_each` over one leaf whose first key is `base`.
fn walk_leaf(leaf: &Leaf, base: u64, keys: u64, f: &mut impl FnMut(u64, &AtomicU64)) {
    for (i, e) in leaf.entries.iter().enumerate() {
        let key = base + i as u64;
        if key < keys {
            f(key, e);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use alloc::vec::Vec;
    use core::sync::atomic::Ordering::SeqCst;

    #[test]
    fn height_follows_the_key_count() {
        assert_eq!(RadixTree::new(1).below, 1);
        assert_eq!(RadixTree::new(64).below, 1);
        assert_eq!(RadixTree::new(4096).below, 1);
        assert_eq!(RadixTree::new(4097).below, 2);
        assert_eq!(RadixTree::new(1 << 20).below, 3);
        assert_eq!(RadixTree::new(u64::MAX).below, 10);
    }

    #[test]
    fn insert_get_and_walk_in_order() {
        let tree = RadixTree::new(100_000);
        assert_eq!(tree.get(7), 0);
        assert!(tree.entry(7).is_none());
        for key in [99_999u64, 7, 4096, 0, 63, 64] {
            tree.entry_or_insert(key).unwrap().store(key + 1, SeqCst);
        }
        assert_eq!(tree.get(4096), 4097);
        assert_eq!(tree.get(4097), 0);
        assert!(tree.entry_or_insert(100_000).is_none());
        assert_eq!(tree.get(u64::MAX), 0);
        let mut seen = Vec::new();
        tree.for_each(|k, e| {
            if e.load(SeqCst) != 0 {
                seen.push(k)
            }
        });
        assert_eq!(seen, [0, 7, 63, 64, 4096, 99_999]);
    }

    #[test]
    fn threads_grow_the_same_path() {
        let tree = RadixTree::new(1 << 18);
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let tree = &tree;
                s.spawn(move || {
                    for k in (t..1 << 12).step_by(4) {
                        tree.entry_or_insert(k * 61).unwrap().store(k + 1, SeqCst);
                    }
                });
            }
        });
        for k in 0..1u64 << 12 {
            assert_eq!(tree.get(k * 61), k + 1);
        }
    }
}
