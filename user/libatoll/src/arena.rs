//! Heap arenas per core, in address ranges of their own (Corey §3.1, Figure 4(c); issue
//! 24). The program's heap ([`crate::heap`]) lives in the root address range: one range,
//! one lock in the kernel for its mappings, one lock here for its free lists, whichever
//! core allocates (Figure 4(a)). A thread may instead point its allocations at arena `i`
//! ([`select`]): memory mapped in SLOT ranges that only arena `i` maps into, spliced into
//! the root range, so every core of the program sees the arena's pages through the same
//! page tables (no soft fault when another core reads them) while only the arena's own
//! core adds mappings to them (no contention on a shared range's lock, §3.1: "if only one
//! core manipulates the mappings in a shared address range, there will be no contention").
//! Metis's `corey` layout points each worker's allocations at its core's arena for the
//! phases whose output other cores read (`workloads::metis`).
//!
//! An arena is a heap like the program's (power-of-two blocks, a free list per size, new
//! blocks carved from the end of its mapped memory, which grows by a segment at a time),
//! in a window of [`ARENA_SLOTS`] slots of its own. A block goes back to the arena that
//! made it, whichever thread frees it (its address says which). Nothing is given back to
//! the kernel before the program ends. A thread without a choice, a block bigger than a
//! slot, or an arena out of room, falls back to the program's heap.
//!
//! Arenas are off until [`enable`]: until then the allocator never reads a thread's
//! choice (a context started without a thread block has none to read). Once on, they
//! stay on, and `cfork` is refused ([`enabled`]).

use crate::heap::{map_segment, FreeLists, Locked, ALIGN_MAX, GROW_MAX, GROW_MIN, MIN_SHIFT, PAGE};
use crate::obj::{home_share, obj_get_name, root_share, share_delobj};
use crate::shared::{slot_alloc, slot_vas, splice, SLOT_BYTES};
use crate::ObjRef;
use abi::Error;
use core::sync::atomic::{AtomicU64, Ordering};

/// Arenas: one per core, cores `0..MAX_ARENAS` (a core past them uses the heap).
pub const MAX_ARENAS: usize = 64;
/// Slots (1 GiB each) of address space in one arena's window.
pub const ARENA_SLOTS: u64 = 16;
/// Bytes of one arena's window.
const ARENA_SPAN: u64 = ARENA_SLOTS * SLOT_BYTES;

/// The first arena's window (0: arenas are off).
static BASE: AtomicU64 = AtomicU64::new(0);

/// One arena's state (a cache line of its own and more: arenas' locks never share one).
#[repr(align(64))]
struct Arena {
    free: FreeLists,
    /// Next address to carve from, and the end of the mapped memory (0 until first use).
    next: u64,
    end: u64,
    /// The slot range being filled, and the end of its slot (0: none yet).
    slot: ObjRef,
    slot_end: u64,
}

static ARENAS: [Locked<Arena>; MAX_ARENAS] = [const {
    Locked::new(Arena {
        free: FreeLists::new(),
        next: 0,
        end: 0,
        slot: ObjRef { share: 0, object: 0 },
        slot_end: 0,
    })
}; MAX_ARENAS];

/// Turns arenas on: reserves their windows of slot addresses (no memory until used).
/// Once; later calls do nothing.
pub fn enable() -> Result<(), Error> {
    if BASE.load(Ordering::Acquire) != 0 {
        return Ok(());
    }
    let base = slot_vas(MAX_ARENAS as u64 * ARENA_SLOTS)?;
    BASE.store(base, Ordering::Release);
    Ok(())
}

/// Whether arenas are on ([`enable`]): then `cfork` is refused (`NotPermitted`), as the
/// child would splice the arenas' slot ranges, shared, under its own copy of their free
/// lists.
pub fn enabled() -> bool {
    BASE.load(Ordering::Acquire) != 0
}

/// Points the calling thread's allocations at arena `core` (`None`: the program's heap
/// again). A core past [`MAX_ARENAS`], or arenas off, leaves the heap in use. The thread
/// must have a thread block (every thread libatoll starts has one).
pub fn select(core: Option<usize>) {
    if BASE.load(Ordering::Acquire) == 0 {
        return;
    }
    let choice = match core {
        Some(c) if c < MAX_ARENAS => c + 1,
        _ => 0,
    };
    crate::tls::set_arena_choice(choice);
}

/// A block of `class` from the calling thread's arena, if it chose one and the arena has
/// room (the allocator's fast path when arenas are off: one load).
#[inline]
pub(crate) fn alloc(class: usize) -> Option<u64> {
    let base = BASE.load(Ordering::Relaxed);
    if base == 0 {
        return None;
    }
    let index = crate::tls::arena_choice().checked_sub(1)?;
    let window = base + index as u64 * ARENA_SPAN;
    let at = ARENAS.get(index)?.with(|a| a.alloc(window, class));
    (at != 0).then_some(at)
}

/// Gives block `at` of `class` back to its arena; false if no arena made it.
#[inline]
pub(crate) fn free(at: u64, class: usize) -> bool {
    let base = BASE.load(Ordering::Relaxed);
    if base == 0 || at < base || at >= base + MAX_ARENAS as u64 * ARENA_SPAN {
        return false;
    }
    let index = ((at - base) / ARENA_SPAN) as usize;
    ARENAS[index].with(|a| a.free.push(at, class));
    true
}

impl Arena {
    /// A block of `class` in the arena whose window starts at `window`; 0 if it has no
    /// room (its window is used up, or memory is short).
    fn alloc(&mut self, window: u64, class: usize) -> u64 {
        if let Some(at) = self.free.pop(class) {
            return at;
        }
        let size = 1u64 << (class as u32 + MIN_SHIFT);
        if size > SLOT_BYTES {
            return 0;
        }
        if self.end == 0 {
            (self.next, self.end) = (window, window);
        }
        // Each turn carves, maps more of the slot, or starts the next slot.
        for _ in 0..ARENA_SLOTS * 2 {
            let at = self.next.next_multiple_of(size.min(ALIGN_MAX));
            let block_end = at + size;
            if block_end <= self.end {
                self.next = block_end;
                return at;
            }
            let in_slot = self.slot_end != 0 && block_end <= self.slot_end && self.named();
            let grown = if in_slot { self.map_more(block_end) } else { self.next_slot(window) };
            if !grown {
                return 0;
            }
        }
        0
    }

    /// Whether the current slot range can still be named: it was made in the home share
    /// of an earlier run of threads, which is gone (its objects went to the main thread's
    /// root share, which another thread cannot name); then the arena goes on in a new slot.
    fn named(&mut self) -> bool {
        if self.slot.share == home_share() {
            return true;
        }
        for share in [home_share(), root_share()] {
            let slot = ObjRef::new(share, self.slot.object);
            if obj_get_name(slot).is_ok() {
                self.slot = slot;
                return true;
            }
        }
        false
    }

    /// Starts a new slot range at the next slot of the window (the rest of the current
    /// slot's address space is left unused: nothing was touched there).
    fn next_slot(&mut self, window: u64) -> bool {
        let va = if self.slot_end == 0 { window } else { self.slot_end };
        if va + SLOT_BYTES > window + ARENA_SPAN {
            return false;
        }
        let Ok(range) = slot_alloc() else { return false };
        let slot = ObjRef::new(home_share(), range);
        if splice(va, range).is_err() {
            let _ = share_delobj(slot);
            return false;
        }
        (self.slot, self.slot_end, self.next, self.end) = (slot, va + SLOT_BYTES, va, va);
        true
    }

    /// Maps a new segment at the end of the arena's memory in its slot, so that it reaches
    /// at least `need` (inside the slot): the usual doubling step, or just what is needed
    /// when the calling core cannot back more (a segment may not exceed its core's free
    /// memory, which is how running short shows here, before any page is touched).
    fn map_more(&mut self, need: u64) -> bool {
        let slot_start = self.slot_end - SLOT_BYTES;
        let least = (need - self.end).next_multiple_of(PAGE);
        let room = self.slot_end - self.end;
        let step = (self.end - slot_start).clamp(GROW_MIN, GROW_MAX).max(least).min(room);
        // The slot range holds the segment from here on, as long as it lives.
        let ar = [self.slot.share, self.slot.object];
        let Some(bytes) = map_segment(ar, self.end - slot_start, step, least) else {
            return false;
        };
        self.end += bytes;
        true
    }
}
