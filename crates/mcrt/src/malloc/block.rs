//! Allocation blocks (McRT-Malloc [38]): [`BLOCK_BYTES`] of memory aligned to their size,
//! with this header at the start, so an object's block is its address with the low bits
//! cleared. A block holds objects of one size class and belongs to one thread at a time,
//! which allocates from it and frees into it without atomics; other threads free into it
//! through its remote list (in batches, [`Block::push_remote`]).
//!
//! Blocks are never given back to the system: a thread's blocks go to the recycling pool
//! when it ends (McRT §2.3) and other threads take them from there.

use super::class::{first_offset, SIZES};
use super::raw::{self, set_next, Forever};
use super::Version;
use core::cell::Cell;
use core::sync::atomic::{AtomicUsize, Ordering};
use locks::TtsLock;

/// log2 of [`BLOCK_BYTES`].
pub(super) const BLOCK_SHIFT: u32 = 15;
/// A block's size and alignment: 32 KiB.
pub(super) const BLOCK_BYTES: usize = 1 << BLOCK_SHIFT;

/// A block's header. Three cache lines: the owner's, the rarely written shared fields, and
/// the remote list (written once per batch by other threads).
#[repr(C)]
pub(super) struct Block {
    /// The owner's private state.
    pub(super) local: Local,
    /// Who owns it.
    pub(super) shared: Shared,
    /// Objects freed by other threads, waiting for the owner.
    remote: Remote,
}

/// The owner's fields: touched only by the thread that owns the block (or, while it sits in
/// the pool, by nobody; the pool's push and pop order the hand-over).
#[repr(C, align(64))]
pub(super) struct Local {
    /// Freed objects, linked through their first word (0 ends the list).
    pub(super) free: Cell<usize>,
    /// The next object never handed out.
    pub(super) bump: Cell<usize>,
    /// The last address an object may start at.
    pub(super) limit: usize,
    /// The class's object size.
    pub(super) size: usize,
    /// The size class.
    pub(super) class: usize,
    /// Which protocol its remote list and pool use.
    pub(super) version: Version,
    /// True while on its owner's `full` list (else on its `avail` list).
    pub(super) full: Cell<bool>,
    /// The owner's list links.
    pub(super) prev: Cell<*mut Block>,
    pub(super) next: Cell<*mut Block>,
}

/// Fields other threads read.
#[repr(C, align(64))]
pub(super) struct Shared {
    /// The owning heap (a `*const Heap`), 0 while in the pool.
    pub(super) owner: AtomicUsize,
    /// The link in the recycling pool (atomic: a non-blocking pop may read it from a block
    /// that another thread has just taken).
    pub(super) pool_next: AtomicUsize,
}

/// The remote-free list, in the form its version uses.
#[repr(C, align(64))]
struct Remote {
    /// Non-blocking: the head, pushed with a CAS, taken with a swap.
    head: AtomicUsize,
    /// Lock-based: the head under a TTS lock.
    locked: TtsLock<usize>,
}

/// The header's size: objects start past it.
pub(super) const HEADER: usize = core::mem::size_of::<Block>();

/// The block holding `obj`, an object of this allocator (blocks are never freed).
#[inline]
pub(super) fn block_of(obj: usize) -> *mut Block {
    (obj & !(BLOCK_BYTES - 1)) as *mut Block
}

// Blocks are made by `raw::new_block` and never freed (`raw`'s invariant 1).
impl Forever for Block {}

impl Block {
    /// The block at `addr` (non-zero), an address the allocator holds (`raw`'s invariant
    /// 1: made by [`raw::new_block`], never freed).
    #[inline(always)]
    pub(super) fn at(addr: usize) -> &'static Block {
        debug_assert!(addr.is_multiple_of(BLOCK_BYTES));
        raw::forever(addr)
    }

    /// A new block of class `class` from the system, owned by `owner`; null when memory is
    /// short (or, on a machine with more than 48 address bits, when the pool's tagged word
    /// could not hold its address).
    pub(super) fn new(class: usize, version: Version, owner: usize) -> *mut Block {
        let size = SIZES[class];
        let made = raw::new_block(BLOCK_BYTES, |base| Block {
            local: Local {
                free: Cell::new(0),
                bump: Cell::new(base + first_offset(size, HEADER)),
                limit: base + BLOCK_BYTES - size,
                size,
                class,
                version,
                full: Cell::new(false),
                prev: Cell::new(core::ptr::null_mut()),
                next: Cell::new(core::ptr::null_mut()),
            },
            shared: Shared { owner: AtomicUsize::new(owner), pool_next: AtomicUsize::new(0) },
            remote: Remote { head: AtomicUsize::new(0), locked: TtsLock::new(0) },
        });
        made.map_or(core::ptr::null_mut(), |b| b as *const Block as *mut Block)
    }

    /// An object from the private free list or the untouched space; 0 when both are
    /// empty. Owner only.
    #[inline]
    pub(super) fn take_local(&self) -> usize {
        let l = &self.local;
        let obj = l.free.get();
        if obj != 0 {
            // Objects on the free list are free and ours.
            l.free.set(raw::next_of(obj));
            return obj;
        }
        let bump = l.bump.get();
        if bump <= l.limit {
            l.bump.set(bump + l.size);
            return bump;
        }
        0
    }

    /// Moves the remote list onto the (empty) private free list, with one atomic (or one
    /// lock); true if it held anything. Owner only.
    pub(super) fn take_remote(&self) -> bool {
        debug_assert_eq!(self.local.free.get(), 0);
        let chain = match self.local.version {
            // Acquire: the pushers' links (and everything they wrote before freeing) are
            // visible to us.
            Version::NonBlocking => {
                if self.remote.head.load(Ordering::Relaxed) == 0 {
                    return false;
                }
                self.remote.head.swap(0, Ordering::Acquire)
            }
            Version::Locked => self.remote.locked.with(core::mem::take),
        };
        self.local.free.set(chain);
        chain != 0
    }

    /// Pushes the chain `head ..= tail` of this block's objects (linked through their first
    /// words) onto its remote list: one CAS (or one lock) for the whole batch. The chain's
    /// objects belong to this block and are free; nobody else links them (the caller's,
    /// `raw`'s invariant 3).
    pub(super) fn push_remote(&self, head: usize, tail: usize) {
        match self.local.version {
            Version::NonBlocking => {
                let mut old = self.remote.head.load(Ordering::Relaxed);
                loop {
                    // The caller gave us the chain.
                    set_next(tail, old);
                    // Release: our link (and the objects' last contents) go with the push.
                    match self.remote.head.compare_exchange_weak(
                        old,
                        head,
                        Ordering::Release,
                        Ordering::Relaxed,
                    ) {
                        Ok(_) => return,
                        Err(now) => old = now,
                    }
                }
            }
            Version::Locked => self.remote.locked.with(|h| {
                // The caller gave us the chain.
                set_next(tail, *h);
                *h = head;
            }),
        }
    }
}

const _: () = assert!(HEADER <= 256 && HEADER.is_multiple_of(64));
