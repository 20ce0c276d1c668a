//! A thread's heap (McRT-Malloc [38]): per size class, the blocks it owns, on two lists,
//! `avail` (may have free objects; the first is the one allocated from) and `full` (ran
//! dry); and its buffer of remote frees not yet handed over. Used only by its thread, so
//! no atomics on the local paths; the one shared word per class is `dirty`, set by a thread
//! that handed a batch of remote frees to one of our full blocks.

use super::block::{self, block_of, Block, BLOCK_SHIFT};
use super::class::NCLASSES;
use super::raw::{self, set_next, Forever};
use super::{pool, Version, COUNTERS};
use core::cell::Cell;
use core::ptr::null_mut;
use core::sync::atomic::{AtomicBool, Ordering};
use locks::TtsLock;

/// Blocks with remote frees buffered at once (direct-mapped by block address).
const BATCHES: usize = 8;
/// Remote frees buffered for one block before they are handed over in one push.
const BATCH: u32 = 32;

/// One block's buffered remote frees.
struct Pending {
    block: Cell<usize>,
    head: Cell<usize>,
    tail: Cell<usize>,
    count: Cell<u32>,
}

/// A thread's heap.
pub(super) struct Heap {
    version: Cell<Version>,
    avail: [Cell<*mut Block>; NCLASSES],
    full: [Cell<*mut Block>; NCLASSES],
    /// Set (Release) after a remote batch went to one of our blocks of that class.
    dirty: [AtomicBool; NCLASSES],
    pending: [Pending; BATCHES],
    batches: Cell<u64>,
    /// The link in the list of unused heaps.
    next_unused: Cell<usize>,
}

/// Heaps of ended threads, for the next ones (never freed: a thread handing over a batch
/// may still read a stale owner and set its `dirty` flag, which is harmless).
static UNUSED: TtsLock<usize> = TtsLock::new(0);

// Heaps are made by `raw::leak` and never freed (`raw`'s invariant 2): a released heap
// waits on the unused list for the next thread.
impl Forever for Heap {}

impl Heap {
    /// The heap at `addr` (non-zero), an address the allocator holds (`raw`'s invariant
    /// 2: made by [`raw::leak`], never freed). A heap is used by its one thread (or under
    /// the global heap's lock); other threads only set its atomic `dirty` flags.
    #[inline(always)]
    pub(super) fn at(addr: usize) -> &'static Heap {
        raw::forever(addr)
    }

    /// A heap of `version` (a recycled one if there is one); null when memory is short.
    pub(super) fn make(version: Version) -> *const Heap {
        let old = UNUSED.with(|top| {
            let h = *top;
            if h != 0 {
                // Heaps on the list are unused; we hold the lock.
                *top = Heap::at(h).next_unused.get();
            }
            h as *mut Heap
        });
        if !old.is_null() {
            // Taken from the list, so ours; field by field, because a thread handing over
            // a batch may still store to a stale `dirty`.
            let h = Heap::at(old as usize);
            h.version.set(version);
            for d in &h.dirty {
                d.store(false, Ordering::Relaxed);
            }
            h.batches.set(0);
            return old;
        }
        let h = raw::leak(Heap {
            version: Cell::new(version),
            avail: [const { Cell::new(null_mut()) }; NCLASSES],
            full: [const { Cell::new(null_mut()) }; NCLASSES],
            dirty: [const { AtomicBool::new(false) }; NCLASSES],
            pending: [const {
                Pending {
                    block: Cell::new(0),
                    head: Cell::new(0),
                    tail: Cell::new(0),
                    count: Cell::new(0),
                }
            }; BATCHES],
            batches: Cell::new(0),
            next_unused: Cell::new(0),
        });
        h as *const Heap
    }

    fn id(&self) -> usize {
        self as *const Heap as usize
    }

    /// An object of class `class`; null when memory is short.
    #[inline]
    pub(super) fn alloc(&self, class: usize) -> *mut u8 {
        let b = self.avail[class].get();
        if !b.is_null() {
            // Blocks on our lists are ours.
            let obj = Block::at(b as usize).take_local();
            if obj != 0 {
                return obj as *mut u8;
            }
        }
        self.alloc_slow(class)
    }

    /// The first `avail` block ran dry: its remote frees, else the next block, else a
    /// block from the pool, else a new one (McRT §2.3).
    #[cold]
    fn alloc_slow(&self, class: usize) -> *mut u8 {
        loop {
            let mut b = self.avail[class].get();
            if b.is_null() {
                b = self.refill(class);
                if b.is_null() {
                    return null_mut();
                }
            }
            // Blocks on our lists are ours.
            let blk = Block::at(b as usize);
            let obj = blk.take_local();
            if obj != 0 {
                return obj as *mut u8;
            }
            if blk.take_remote() {
                continue;
            }
            self.unlink(b);
            blk.local.full.set(true);
            self.link(b);
        }
    }

    /// Every `avail` block of `class` is dry: full blocks that got remote frees come back;
    /// else a block from the pool; else a new one. Returns the new first `avail` block.
    fn refill(&self, class: usize) -> *mut Block {
        let dirty = &self.dirty[class];
        // Acquire: pairs with the Release store after a push (`flush`), so the pushes
        // before it are seen by `take_remote` below.
        if dirty.load(Ordering::Relaxed) && dirty.swap(false, Ordering::Acquire) {
            let mut b = self.full[class].get();
            while !b.is_null() {
                // Blocks on our lists are ours.
                let blk = Block::at(b as usize);
                let next = blk.local.next.get();
                if blk.take_remote() {
                    self.unlink(b);
                    blk.local.full.set(false);
                    self.link(b);
                }
                b = next;
            }
            if !self.avail[class].get().is_null() {
                return self.avail[class].get();
            }
        }
        let mut b = pool::pop(self.version.get(), class);
        if b.is_null() {
            b = Block::new(class, self.version.get(), self.id());
            if b.is_null() {
                return b;
            }
            COUNTERS.created.fetch_add(1, Ordering::Relaxed);
        } else {
            // Popped from the pool, so ours; Release for threads that read the owner to
            // decide where a free goes (they only compare it).
            let blk = Block::at(b as usize);
            blk.shared.owner.store(self.id(), Ordering::Release);
            blk.local.full.set(false);
            COUNTERS.recycled.fetch_add(1, Ordering::Relaxed);
        }
        self.link(b);
        b
    }

    /// Frees `obj` of class `class`: onto its block's private list if the block is ours,
    /// else into the remote buffer. `obj` is a small object of that class that the program
    /// gave back (`malloc::free`'s contract: it is not used again).
    #[inline]
    pub(super) fn free(&self, obj: usize, class: usize) {
        let b = block_of(obj);
        let blk = Block::at(b as usize);
        debug_assert_eq!(blk.local.class, class);
        // Relaxed: only we store our own id into a block (when we take it), so seeing it
        // means it is ours; any other value sends the object the remote way, which is
        // right whoever owns it.
        if blk.shared.owner.load(Ordering::Relaxed) == self.id() {
            let l = &blk.local;
            // Our block's free object.
            set_next(obj, l.free.get());
            l.free.set(obj);
            if l.full.get() {
                self.unlink(b);
                l.full.set(false);
                self.link(b);
            }
        } else {
            self.remote_free(b, obj);
        }
    }

    /// Buffers a free into another thread's block; hands the buffer over when it fills
    /// (McRT-Malloc's batched remote frees: one atomic per batch, not per object).
    fn remote_free(&self, b: *mut Block, obj: usize) {
        let p = &self.pending[(b as usize >> BLOCK_SHIFT) % BATCHES];
        if p.block.get() != b as usize {
            self.flush(p);
            p.block.set(b as usize);
        }
        // The caller gave us the object; it is free and only we link it.
        set_next(obj, p.head.get());
        if p.head.get() == 0 {
            p.tail.set(obj);
        }
        p.head.set(obj);
        p.count.set(p.count.get() + 1);
        if p.count.get() >= BATCH {
            self.flush(p);
        }
    }

    /// Hands a buffered batch to its block, and tells the block's owner.
    fn flush(&self, p: &Pending) {
        if p.count.get() == 0 {
            return;
        }
        // The buffered objects are free objects of that block, linked by us.
        hand_over(p.block.get() as *const Block, p.head.get(), p.tail.get());
        p.head.set(0);
        p.tail.set(0);
        p.count.set(0);
        self.batches.set(self.batches.get() + 1);
    }

    /// The heap's thread has ended (McRT §2.3, the scheduler's callback): its remote
    /// buffer is handed over, its blocks go to the pool (one push per class), and the heap
    /// to the unused list. The caller passes a heap from [`Heap::make`] that nobody uses
    /// again (else two threads would use one heap).
    pub(super) fn release(heap: *const Heap) {
        let h = Heap::at(heap as usize);
        for p in &h.pending {
            h.flush(p);
        }
        let mut pooled = 0;
        for class in 0..NCLASSES {
            let (mut head, mut tail) = (null_mut::<Block>(), null_mut::<Block>());
            for list in [&h.avail[class], &h.full[class]] {
                let mut b = list.replace(null_mut());
                while !b.is_null() {
                    // Blocks on our lists are ours.
                    let blk = Block::at(b as usize);
                    let next = blk.local.next.get();
                    blk.shared.owner.store(0, Ordering::Relaxed);
                    blk.shared.pool_next.store(head as usize, Ordering::Relaxed);
                    if tail.is_null() {
                        tail = b;
                    }
                    head = b;
                    pooled += 1;
                    b = next;
                }
            }
            if !head.is_null() {
                // The chain is ours, of this class and version; owners cleared.
                pool::push_chain(h.version.get(), class, head, tail);
            }
        }
        COUNTERS.pooled.fetch_add(pooled, Ordering::Relaxed);
        COUNTERS.batches.fetch_add(h.batches.get(), Ordering::Relaxed);
        UNUSED.with(|top| {
            h.next_unused.set(*top);
            *top = heap as usize;
        });
    }

    /// Puts `b` first on the list its `full` flag names.
    fn link(&self, b: *mut Block) {
        // Blocks on our lists are ours.
        let l = &Block::at(b as usize).local;
        let list = if l.full.get() { &self.full[l.class] } else { &self.avail[l.class] };
        let first = list.get();
        l.prev.set(null_mut());
        l.next.set(first);
        if !first.is_null() {
            Block::at(first as usize).local.prev.set(b);
        }
        list.set(b);
    }

    /// Takes `b` off the list its `full` flag names.
    fn unlink(&self, b: *mut Block) {
        // Blocks on our lists are ours.
        let l = &Block::at(b as usize).local;
        let (prev, next) = (l.prev.get(), l.next.get());
        if !next.is_null() {
            Block::at(next as usize).local.prev.set(prev);
        }
        if prev.is_null() {
            let list = if l.full.get() { &self.full[l.class] } else { &self.avail[l.class] };
            list.set(next);
        } else {
            Block::at(prev as usize).local.next.set(next);
        }
    }
}

/// Frees `obj` without a heap (no memory for one): a batch of one. `obj` is a small
/// object the program gave back (`malloc::free`'s contract).
pub(super) fn free_unbatched(obj: usize) {
    hand_over(block_of(obj), obj, obj);
}

/// Pushes the chain `head ..= tail` onto `b`'s remote list and tells its owner (the
/// chain as [`Block::push_remote`] takes it).
fn hand_over(b: *const Block, head: usize, tail: usize) {
    let blk = Block::at(b as usize);
    blk.push_remote(head, tail);
    let owner = blk.shared.owner.load(Ordering::Acquire);
    if owner != 0 {
        // Heaps are never freed; a stale owner only gets a needless scan.
        let owner = Heap::at(owner);
        // Release: after our push, so an owner that sees the flag sees the push.
        owner.dirty[blk.local.class].store(true, Ordering::Release);
    }
}

const _: () = assert!(block::BLOCK_BYTES >= 8 * block::HEADER);
