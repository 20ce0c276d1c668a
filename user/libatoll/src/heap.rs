//! The program's heap (`#[global_allocator]`, so `alloc::vec::Vec` and `String` work):
//! segments in the root share, mapped one after another in the root address range from
//! [`HEAP_BASE`]. Blocks come in power-of-two sizes, each size with its own free list;
//! new blocks are carved from the end of the mapped memory, which grows by a new segment
//! when it runs out (pages cost memory only once touched).
//!
//! Threads ([`crate::threads`]) share the heap and its state like everything else in the
//! root range; the state sits behind a spin lock. A thread may allocate from a per-core
//! arena instead ([`crate::arena`]); its blocks go back there when freed.
//!
//! After `cfork` the child has a copy-on-write copy of the heap and of this allocator's
//! state, so it goes on from the same point; its new segments go into its own root share.

use crate::obj::{ar_set_seg, home_share, root_ar_ref, segment_alloc};
use abi::{map, ArSetSeg};
use core::alloc::{GlobalAlloc, Layout};
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, Ordering};

/// Where the heap starts (16 TiB: far from the image, the stack and the shared slots).
pub const HEAP_BASE: u64 = 0x1000_0000_0000;
/// Most bytes the heap can reach (1 TiB of address space).
const HEAP_LIMIT: u64 = 1 << 40;
/// The smallest block (two words: room for the free-list link, 16-byte aligned).
pub(crate) const MIN_SHIFT: u32 = 4;
/// The largest block class (1 GiB).
pub(crate) const MAX_SHIFT: u32 = 30;
/// Number of block sizes.
pub(crate) const CLASSES: usize = (MAX_SHIFT - MIN_SHIFT + 1) as usize;
/// First segment size; each later one doubles the heap, up to [`GROW_MAX`] at a time.
pub(crate) const GROW_MIN: u64 = 1 << 20;
/// Largest segment added in one step (one step may be bigger for one big block).
pub(crate) const GROW_MAX: u64 = 64 << 20;
pub(crate) const PAGE: u64 = 4096;
/// The largest alignment the heap gives (a block's class is at least its alignment).
pub(crate) const ALIGN_MAX: u64 = 64 * 1024;
/// Spins on a busy heap lock before the waiter yields its core.
const SPINS_BEFORE_YIELD: u32 = 256;

/// A free list per block size: a free block's first word links the next (0: the end).
pub(crate) struct FreeLists([u64; CLASSES]);

impl FreeLists {
    /// Every list empty.
    pub(crate) const fn new() -> FreeLists {
        FreeLists([0; CLASSES])
    }

    /// A free block of `class`, if the list has one.
    pub(crate) fn pop(&mut self, class: usize) -> Option<u64> {
        let head = self.0[class];
        if head == 0 {
            return None;
        }
        // SAFETY: `head` is a free block of this class: its first word is the link.
        self.0[class] = unsafe { (head as *const u64).read() };
        Some(head)
    }

    /// Puts block `at` of `class`, given back by the program, on its list.
    pub(crate) fn push(&mut self, at: u64, class: usize) {
        // SAFETY: `at` is a block of this class the program gave back: we own its bytes.
        unsafe { (at as *mut u64).write(self.0[class]) };
        self.0[class] = at;
    }
}

/// The allocator's state: free lists and the carving point.
struct State {
    free: FreeLists,
    /// Next address to carve a block from.
    next: u64,
    /// End of the mapped heap.
    end: u64,
}

/// A value behind a spin lock that yields the core after a while (the holder may be a
/// thread preempted on this very core). Heaps keep their state in one.
pub(crate) struct Locked<T> {
    busy: AtomicBool,
    state: UnsafeCell<T>,
}

// SAFETY: `state` is only reached while `busy` is held (see `with`), by one thread at a
// time; the state is plain addresses and counters.
unsafe impl<T: Send> Sync for Locked<T> {}

impl<T> Locked<T> {
    /// `value`, unlocked.
    pub(crate) const fn new(value: T) -> Locked<T> {
        Locked { busy: AtomicBool::new(false), state: UnsafeCell::new(value) }
    }

    /// Runs `f` on the value with the lock held.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        let mut spins = 0u32;
        while self.busy.swap(true, Ordering::Acquire) {
            spins += 1;
            if spins.is_multiple_of(SPINS_BEFORE_YIELD) {
                let _ = crate::sys::syscall3(abi::nr::YIELD, 0, 0, 0);
            }
            core::hint::spin_loop();
        }
        // SAFETY: `busy` is held: nobody else reaches `state` until we release it.
        let r = f(unsafe { &mut *self.state.get() });
        self.busy.store(false, Ordering::Release);
        r
    }
}

/// The heap: its state behind a spin lock (threads, [`crate::threads`], share it: several
/// cores may allocate at once). `cfork` copies it while no thread runs, so never with the
/// lock held. A thread that chose an arena ([`crate::arena`]) allocates there instead.
pub struct Heap {
    state: Locked<State>,
}

impl Heap {
    /// An empty heap; the first allocation maps its first segment.
    pub const fn new() -> Heap {
        Heap {
            state: Locked::new(State { free: FreeLists::new(), next: HEAP_BASE, end: HEAP_BASE }),
        }
    }
}

impl Default for Heap {
    fn default() -> Self {
        Heap::new()
    }
}

/// The size class of a layout (its block is `1 << (class + MIN_SHIFT)` bytes), if any.
pub(crate) fn class_of(layout: Layout) -> Option<usize> {
    let size = layout.size().max(layout.align()).max(1 << MIN_SHIFT);
    let shift = size.checked_next_power_of_two()?.trailing_zeros();
    (shift <= MAX_SHIFT).then(|| (shift - MIN_SHIFT) as usize)
}

impl State {
    fn alloc(&mut self, class: usize) -> u64 {
        if let Some(at) = self.free.pop(class) {
            return at;
        }
        let size = 1u64 << (class as u32 + MIN_SHIFT);
        // Blocks up to 64 KiB are aligned to their size (McRT's stacks need theirs), bigger
        // ones to 64 KiB (larger alignments are refused in `alloc`).
        let at = self.next.next_multiple_of(size.min(ALIGN_MAX));
        let Some(block_end) = at.checked_add(size) else { return 0 };
        if block_end > self.end && !self.grow(block_end) {
            return 0;
        }
        self.next = block_end;
        at
    }

    /// Maps a new segment at the end of the heap so it reaches at least `need`: the usual
    /// doubling step, or, if the calling core cannot back that much (a segment may not
    /// exceed its core's free memory), just what is needed.
    fn grow(&mut self, need: u64) -> bool {
        let used = self.end - HEAP_BASE;
        let least = (need - self.end).next_multiple_of(PAGE);
        let step = used.clamp(GROW_MIN, GROW_MAX).max(least);
        if self.end + step > HEAP_BASE + HEAP_LIMIT {
            return false;
        }
        let ar = root_ar_ref();
        let Some(step) = map_segment([ar.share, ar.object], self.end, step, least) else {
            return false;
        };
        // The segment stays in the root share (or, while threads run, in the share they
        // hold, from which it is moved to the root share when they end): everything the
        // root range maps is named there, which is how `cfork` finds it.
        self.end += step;
        true
    }

    fn free(&mut self, at: u64, class: usize) {
        self.free.push(at, class);
    }
}

/// Maps a new segment of heap at `va` in address range `ar` (its share and object): of
/// `step` bytes, or, if the calling core cannot back that much (a segment may not exceed
/// its core's free memory), of less, down to `least`. The bytes mapped, or `None`. The
/// segment is named in the caller's home share.
pub(crate) fn map_segment(ar: [u64; 2], va: u64, step: u64, least: u64) -> Option<u64> {
    let home = home_share();
    let mut got = None;
    for size in [step, least.max(GROW_MIN).min(step), least] {
        if let Ok(seg) = segment_alloc(home, size) {
            got = Some((size, seg));
            break;
        }
    }
    let (bytes, seg) = got?;
    let set = ArSetSeg {
        ar,
        va,
        seg: [home, seg],
        first_page: 0,
        pages: bytes / PAGE,
        flags: map::WRITE,
    };
    if ar_set_seg(&set).is_err() {
        let _ = crate::obj::share_delobj(crate::ObjRef::new(home, seg));
        return None;
    }
    Some(bytes)
}

// SAFETY: blocks never overlap (each is carved once from `next` and only reused after
// `dealloc`), are at least `layout.size()` bytes and aligned to the layout (class sizes
// are powers of two at least the alignment; see `State::alloc`).
unsafe impl GlobalAlloc for Heap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.align() as u64 > ALIGN_MAX {
            return core::ptr::null_mut();
        }
        let Some(class) = class_of(layout) else { return core::ptr::null_mut() };
        // The calling thread's arena, if it chose one and it has room.
        if let Some(at) = crate::arena::alloc(class) {
            return at as *mut u8;
        }
        self.state.with(|s| s.alloc(class)) as *mut u8
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let Some(class) = class_of(layout) else { return };
        // A block goes back to the arena it came from, whichever thread frees it.
        if !crate::arena::free(ptr as u64, class) {
            self.state.with(|s| s.free(ptr as u64, class));
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // Same block size: the block already fits.
        let Ok(new_layout) = Layout::from_size_align(new_size, layout.align()) else {
            return core::ptr::null_mut();
        };
        if class_of(layout) == class_of(new_layout) {
            return ptr;
        }
        // SAFETY: the caller's contract for `realloc`, passed on.
        unsafe {
            let new = self.alloc(new_layout);
            if !new.is_null() {
                core::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
            new
        }
    }
}
