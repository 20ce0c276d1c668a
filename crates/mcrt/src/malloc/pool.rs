//! The recycling pool (McRT §2.3): blocks of threads that ended, by size class, waiting for
//! new threads, which take blocks here before asking the system. Two versions:
//! - **lock-based**: one list per class, all under one TTS lock;
//! - **non-blocking**: a Treiber stack per class whose top word carries a tag bumped by
//!   every push and pop, so a pop that read a stale `next` fails its CAS (the ABA
//!   problem: the top block may be taken and put back between our read and our CAS).
//!
//! A block's link is its `pool_next` word; blocks are never freed, so a racing pop may
//! always read it.

use super::block::{Block, BLOCK_SHIFT};
use super::class::NCLASSES;
use super::Version;
use core::sync::atomic::{AtomicU64, Ordering};
use locks::TtsLock;

/// Bits of the tagged word that hold the block address (`addr >> BLOCK_SHIFT`, for
/// addresses under 2^48); the rest hold the tag.
const ADDR_BITS: u32 = 48 - BLOCK_SHIFT;
const ADDR_MASK: u64 = (1 << ADDR_BITS) - 1;

/// The non-blocking pool: tagged tops.
static STACKS: [AtomicU64; NCLASSES] = [const { AtomicU64::new(0) }; NCLASSES];
/// The lock-based pool: list heads.
static LISTS: TtsLock<[usize; NCLASSES]> = TtsLock::new([0; NCLASSES]);

fn pack(block: usize, tag: u64) -> u64 {
    ((block >> BLOCK_SHIFT) as u64) | (tag << ADDR_BITS)
}

fn unpack(word: u64) -> (usize, u64) {
    (((word & ADDR_MASK) as usize) << BLOCK_SHIFT, word >> ADDR_BITS)
}

/// Puts the chain `head ..= tail` of blocks of class `class` (linked by `pool_next`; their
/// owners already cleared) into `version`'s pool: one CAS (or one lock) for the chain.
/// The caller's chain: its blocks belong to nobody else, and are of that class and
/// version.
pub(super) fn push_chain(version: Version, class: usize, head: *mut Block, tail: *mut Block) {
    // The caller gave us the chain; blocks are never freed.
    let tail = Block::at(tail as usize);
    match version {
        Version::NonBlocking => {
            let top = &STACKS[class];
            let mut old = top.load(Ordering::Relaxed);
            loop {
                let (first, tag) = unpack(old);
                tail.shared.pool_next.store(first, Ordering::Relaxed);
                // Release: the blocks' headers (and the link) are visible to whoever pops.
                match top.compare_exchange_weak(
                    old,
                    pack(head as usize, tag.wrapping_add(1)),
                    Ordering::Release,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return,
                    Err(now) => old = now,
                }
            }
        }
        Version::Locked => LISTS.with(|lists| {
            tail.shared.pool_next.store(lists[class], Ordering::Relaxed);
            lists[class] = head as usize;
        }),
    }
}

/// Takes a block of class `class` from `version`'s pool, null if it has none.
pub(super) fn pop(version: Version, class: usize) -> *mut Block {
    match version {
        Version::NonBlocking => {
            let top = &STACKS[class];
            // Acquire: the header of the block we read the link from was published by the
            // push that put it there.
            let mut old = top.load(Ordering::Acquire);
            loop {
                let (first, tag) = unpack(old);
                if first == 0 {
                    return core::ptr::null_mut();
                }
                // Blocks are never freed; if `first` was taken meanwhile, the tag has moved
                // and the CAS below fails.
                let next = Block::at(first).shared.pool_next.load(Ordering::Relaxed);
                match top.compare_exchange_weak(
                    old,
                    pack(next, tag.wrapping_add(1)),
                    Ordering::Acquire,
                    Ordering::Acquire,
                ) {
                    Ok(_) => return first as *mut Block,
                    Err(now) => old = now,
                }
            }
        }
        Version::Locked => LISTS.with(|lists| {
            let first = lists[class];
            if first != 0 {
                // Blocks in the pool are live headers; we hold the lock.
                lists[class] = Block::at(first).shared.pool_next.load(Ordering::Relaxed);
            }
            first as *mut Block
        }),
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;
    use std::vec::Vec;

    /// Many threads pop and push blocks of one class as fast as they can: no block is ever
    /// held by two threads at once (each marks its blocks while it holds them), none lost.
    fn stress(version: Version, class: usize) {
        const BLOCKS: usize = 16;
        const ROUNDS: usize = 200_000;
        let mut made = Vec::new();
        for _ in 0..BLOCKS {
            let b = Block::new(class, version, 0);
            assert!(!b.is_null());
            made.push(b as usize);
            // A fresh block, ours.
            push_chain(version, class, b, b);
        }
        let threads: Vec<_> = (0..8)
            .map(|id| {
                std::thread::spawn(move || {
                    let mut held = Vec::new();
                    // Take two, give back the first: the classic ABA pattern (a popper that
                    // read top A and next B meets top A again with B gone).
                    for _ in 0..ROUNDS {
                        for _ in 0..2 {
                            let b = pop(version, class);
                            if !b.is_null() {
                                // Popped, so ours alone.
                                let owner = &Block::at(b as usize).shared.owner;
                                assert_eq!(owner.swap(id + 1, Ordering::Relaxed), 0, "held twice");
                                held.push(b);
                            }
                        }
                        while held.len() > 1 {
                            let b = held.remove(0);
                            // Ours until pushed.
                            Block::at(b as usize).shared.owner.store(0, Ordering::Relaxed);
                            push_chain(version, class, b, b);
                        }
                    }
                    for b in held {
                        // Ours until pushed.
                        Block::at(b as usize).shared.owner.store(0, Ordering::Relaxed);
                        push_chain(version, class, b, b);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let mut back = Vec::new();
        loop {
            let b = pop(version, class);
            if b.is_null() {
                break;
            }
            back.push(b as usize);
        }
        back.sort_unstable();
        made.sort_unstable();
        assert_eq!(back, made, "blocks lost or duplicated");
    }

    // Classes no other unit test uses, so the pools start empty.
    #[test]
    fn the_non_blocking_pool_survives_many_threads() {
        stress(Version::NonBlocking, 22);
    }

    #[test]
    fn the_locked_pool_survives_many_threads() {
        stress(Version::Locked, 23);
    }
}
