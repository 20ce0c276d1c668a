//! A lock-free "return stack": any core may push a freed node, only the owner core takes
//! them, all at once. Atoll uses it to send memory home: a frame freed on a foreign core goes
//! back to the core whose free list owns it, and a heap block freed on a foreign core goes
//! back to the owning core's heap. Each core keeps its own free lists (Corey §4.1, "memid":
//! per-core free page lists), so the only shared write on a free is one CAS on the owner's
//! stack head; the owner drains the stack when it next allocates, Corey-style deferred
//! reclamation on a per-core queue.
//!
//! Why it is simple and ABA-free: producers only *push* (a Treiber push with CAS), and the
//! single consumer never pops one node; it swaps the head to empty and walks the detached
//! chain privately ([`ReturnStack::take_all`]). A node can only be pushed again after the
//! owner has taken it, so no pusher can see a stale head come back.
//!
//! Nodes are nonzero `u64`s (a physical or virtual address). The link word lives in the
//! node's own memory (the node is free, so its first 8 bytes are spare) and is reached
//! through the [`Links`] trait, which keeps this crate free of `unsafe` and of allocation.
//!
//! Tests: `cargo test -p return-stack`; the loom model of two pushers racing the owner runs
//! with `RUSTFLAGS="--cfg loom" cargo test -p return-stack --release --test loom`.
#![no_std]
#![forbid(unsafe_code)]

#[cfg(test)]
extern crate std;

mod sync {
    #[cfg(loom)]
    pub use loom::sync::atomic::AtomicU64;

    #[cfg(not(loom))]
    pub use core::sync::atomic::AtomicU64;
}

use core::ops::Deref;
use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};

/// The atomic type of link words (loom's under `cfg(loom)`), so [`Links`] impls use the
/// same type the stack does.
pub use sync::AtomicU64;

/// Size of a cache line on the x86-64 cores Atoll targets.
pub const CACHE_LINE: usize = 64;

/// Maps a node to its link word: the first 8 bytes of the node's own (free) memory.
pub trait Links {
    /// The link word stored in `node`'s memory. Called only for nodes that were pushed, while
    /// they are on a stack or in a [`Taken`] chain.
    fn link(&self, node: u64) -> &AtomicU64;
}

/// A value alone on its own 64-byte cache line, so that writers of it never invalidate the
/// line holding a neighbour (false sharing).
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct CachePadded<T> {
    value: T,
}

impl<T> CachePadded<T> {
    /// Wraps `value` in its own cache line.
    pub const fn new(value: T) -> Self {
        CachePadded { value }
    }

    /// Unwraps the value.
    pub fn into_inner(self) -> T {
        self.value
    }
}

impl<T> Deref for CachePadded<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.value
    }
}

/// A many-producer, single-consumer stack of nodes being returned to their owner core.
///
/// Any core may [`push`](ReturnStack::push); only the owner may
/// [`take_all`](ReturnStack::take_all) (that is a usage rule, not a safety rule: two takers
/// would simply each get a disjoint part of the nodes).
#[derive(Debug)]
pub struct ReturnStack {
    /// The most recently pushed node, 0 when empty. On its own cache line: pushers on other
    /// cores write it, and nothing else of the owner's should bounce along with it.
    head: CachePadded<AtomicU64>,
}

impl ReturnStack {
    /// An empty stack (usable in a `static`).
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        ReturnStack { head: CachePadded::new(AtomicU64::new(0)) }
    }

    /// An empty stack (loom's atomics cannot be built in a `const fn`).
    #[cfg(loom)]
    pub fn new() -> Self {
        ReturnStack { head: CachePadded::new(AtomicU64::new(0)) }
    }

    /// Pushes `node` (from any core). The caller gives up the node's memory: its first word
    /// becomes the link until the owner takes the node.
    ///
    /// # Panics
    /// If `node` is 0, which means "empty" and would lose the whole stack (a kernel bug,
    /// never user input).
    pub fn push(&self, node: u64, links: &impl Links) {
        assert_ne!(node, 0, "return-stack: node 0 is the empty marker");
        let link = links.link(node);
        // The head is only stored as a value, never followed, so a Relaxed read is enough.
        let mut head = self.head.load(Relaxed);
        loop {
            link.store(head, Relaxed);
            // Release: the owner's Acquire swap must see this link (and everything the freeing
            // core wrote to the node) before it follows the chain. Later pushers' CASes are
            // read-modify-writes, so they continue this release sequence and the owner also
            // synchronises with every earlier pusher in the chain.
            match self.head.compare_exchange_weak(head, node, Release, Relaxed) {
                Ok(_) => return,
                Err(now) => head = now,
            }
        }
    }

    /// Detaches every node pushed so far (owner only). The chain is walked with
    /// [`Taken::next`], newest first.
    pub fn take_all(&self) -> Taken {
        // Acquire pairs with the pushers' Release CASes (see `push`).
        Taken { next: self.head.swap(0, Acquire) }
    }

    /// Whether the stack looks empty: one Relaxed load, for the owner's fast path. A node
    /// pushed concurrently may be missed; the owner sees it on a later check.
    pub fn is_empty(&self) -> bool {
        self.head.load(Relaxed) == 0
    }
}

impl Default for ReturnStack {
    fn default() -> Self {
        Self::new()
    }
}

/// A chain of nodes detached by [`ReturnStack::take_all`], private to the owner.
#[derive(Debug)]
#[must_use = "dropping a Taken chain loses its nodes"]
pub struct Taken {
    /// The next node to hand out, 0 at the end of the chain.
    next: u64,
}

impl Taken {
    /// Hands out the next node, or `None` at the end of the chain. The node's link is read
    /// *before* it is returned, so the caller may reuse the node's memory at once.
    pub fn next(&mut self, links: &impl Links) -> Option<u64> {
        if self.next == 0 {
            return None;
        }
        let node = self.next;
        // Relaxed: the take_all Acquire already ordered every link write before us.
        self.next = links.link(node).load(Relaxed);
        Some(node)
    }

    /// Whether the chain has been walked to its end (or was empty).
    pub fn is_empty(&self) -> bool {
        self.next == 0
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::vec::Vec;

    /// Link words for nodes `1..len`, standing in for node memory.
    struct Arena(Vec<AtomicU64>);

    impl Arena {
        fn new(len: usize) -> Self {
            Arena((0..len).map(|_| AtomicU64::new(0)).collect())
        }
    }

    impl Links for Arena {
        fn link(&self, node: u64) -> &AtomicU64 {
            &self.0[node as usize]
        }
    }

    fn drain(stack: &ReturnStack, links: &Arena) -> Vec<u64> {
        let mut taken = stack.take_all();
        let mut out = Vec::new();
        while let Some(node) = taken.next(links) {
            out.push(node);
        }
        assert!(taken.is_empty());
        out
    }

    #[test]
    fn head_has_its_own_cache_line() {
        assert_eq!(core::mem::align_of::<ReturnStack>(), CACHE_LINE);
        assert_eq!(core::mem::size_of::<ReturnStack>(), CACHE_LINE);
    }

    #[test]
    fn empty_stack_takes_nothing() {
        let arena = Arena::new(1);
        let stack = ReturnStack::new();
        assert!(stack.is_empty());
        assert_eq!(drain(&stack, &arena), Vec::<u64>::new());
    }

    #[test]
    fn take_all_is_newest_first_and_empties() {
        let arena = Arena::new(8);
        let stack = ReturnStack::default();
        for node in [3, 1, 7] {
            stack.push(node, &arena);
        }
        assert!(!stack.is_empty());
        assert_eq!(drain(&stack, &arena), [7, 1, 3]);
        assert!(stack.is_empty());
        assert_eq!(drain(&stack, &arena), Vec::<u64>::new());
    }

    #[test]
    fn nodes_can_be_pushed_again_after_take() {
        let arena = Arena::new(4);
        let stack = ReturnStack::new();
        stack.push(1, &arena);
        stack.push(2, &arena);
        let mut taken = stack.take_all();
        assert_eq!(taken.next(&arena), Some(2));
        // Node 2 is the caller's again: reuse it while the rest of the chain is still out.
        stack.push(2, &arena);
        assert_eq!(taken.next(&arena), Some(1));
        assert_eq!(taken.next(&arena), None);
        assert_eq!(drain(&stack, &arena), [2]);
    }

    #[test]
    #[should_panic(expected = "node 0")]
    fn node_zero_is_refused() {
        let arena = Arena::new(1);
        ReturnStack::new().push(0, &arena);
    }

    #[test]
    fn static_stack() {
        static STACK: ReturnStack = ReturnStack::new();
        let arena = Arena::new(2);
        STACK.push(1, &arena);
        assert_eq!(drain(&STACK, &arena), [1]);
    }

    #[test]
    fn cache_padded_derefs() {
        let padded = CachePadded::new(5u32);
        assert_eq!(*padded, 5);
        assert_eq!(core::mem::align_of_val(&padded), CACHE_LINE);
        assert_eq!(padded.into_inner(), 5);
    }
}
