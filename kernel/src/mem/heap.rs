//! The kernel heap: one per core, each in its own 1 GiB virtual window built from that
//! core's own frames. Allocation never leaves the core. A block freed on another core is
//! pushed onto its owner's return stack (its first 16 bytes carry the link and the
//! layout) and put back into the owner's heap on the owner's next allocation.

use crate::arch::paging::{self, HEAP_BASE, HEAP_WINDOW};
use crate::mem::frames::{self, FrameChain};
use crate::param::{HEAP_GROW_MARGIN_FRAMES, HEAP_GROW_STEP, HEAP_TRIM_MIN};
use crate::percpu::{self, this_core, PerCoreState};
use crate::tlb;
use core::alloc::{GlobalAlloc, Layout};
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use return_stack::Links;
use talc::{ErrOnOom, Span, Talc};
use x86_64::structures::paging::PageTableFlags as F;

/// Set once the boot core has its `PerCore` block; before that nothing may allocate.
static READY: AtomicBool = AtomicBool::new(false);
/// Physical address of the kernel PML4, for mapping heap pages.
static KERNEL_PML4: AtomicU64 = AtomicU64::new(0);

/// One core's heap: a `talc` allocator (segregated free lists, constant-time in the number
/// of free blocks) over the mapped part of the core's window.
pub struct CoreHeap {
    heap: Talc<ErrOnOom>,
    /// The part of the window `heap` manages.
    span: Span,
    base: u64,
    mapped: u64,
    /// Frames taken from the core's list for heap pages and their page tables (trimmed
    /// ones included until they are given back).
    frames_taken: u64,
    /// The last trim's frames, until every core has flushed them.
    trimmed: Option<Trimmed>,
}

impl CoreHeap {
    /// An empty heap, not yet placed (see [`init_this_core`]).
    pub const fn empty() -> Self {
        CoreHeap {
            heap: Talc::new(ErrOnOom),
            span: Span::empty(),
            base: 0,
            mapped: 0,
            frames_taken: 0,
            trimmed: None,
        }
    }

    /// Bytes mapped and in use.
    pub fn stats(&self) -> (u64, u64) {
        (self.mapped, self.heap.get_counters().allocated_bytes as u64)
    }

    /// Frames the heap has taken from the core's list (pages and page tables); the heap
    /// never gives frames back, so frame accounting counts these as in use.
    pub fn frames_taken(&self) -> u64 {
        self.frames_taken
    }

    /// Maps at least `bytes` more of the window with frames of this core's own: a
    /// [`HEAP_GROW_STEP`] while memory is plentiful, just what is asked when it is short (the
    /// last frames serve small kernel allocations one page at a time).
    fn grow(&mut self, bytes: u64) -> Option<()> {
        // The addresses a trim unmapped are mapped again to other frames only after every
        // core flushed them (another core could otherwise reach the old frame through a
        // stale entry). A trim whose flush is still out is undone instead: its own frames go
        // back at their own addresses, which is what any stale entry says. (Waiting here
        // would mean reading messages inside the allocator, which the handlers re-enter.)
        if self.release_trimmed() == 0 {
            self.restore_trimmed();
        }
        let needed = bytes.next_multiple_of(4096);
        // Pages plus, at worst, a new page table, directory and pointer table.
        let plenty = HEAP_GROW_STEP / 4096 + 3 + HEAP_GROW_MARGIN_FRAMES;
        let bytes =
            if this_core().free_frames() >= plenty { needed.max(HEAP_GROW_STEP) } else { needed };
        if self.mapped + bytes > HEAP_WINDOW || this_core().free_frames() < bytes / 4096 + 3 {
            return None;
        }
        let pml4 = KERNEL_PML4.load(Ordering::Relaxed);
        let start = self.base + self.mapped;
        let mut va = start;
        let mut taken = 0;
        let mut alloc_counted = || {
            taken += 1;
            frames::alloc()
        };
        while va < start + bytes {
            let pa = alloc_counted()?;
            // SAFETY: this core alone maps inside its own heap window (see `paging`).
            unsafe {
                paging::map_page(
                    pml4,
                    va,
                    pa,
                    F::WRITABLE | F::NO_EXECUTE | F::GLOBAL,
                    &mut alloc_counted,
                )?
            };
            va += 4096;
        }
        self.frames_taken += taken;
        let mapped = Span::from_base_size(self.base as *mut u8, (self.mapped + bytes) as usize);
        self.span = if self.mapped == 0 {
            // SAFETY: [start, start + bytes) was just mapped and is used by nothing else.
            unsafe { self.heap.claim(mapped) }.ok()?
        } else {
            // SAFETY: the pages right after the heap's top were just mapped; the new span
            // contains the old one.
            unsafe { self.heap.extend(self.span, mapped) }
        };
        self.mapped += bytes;
        Some(())
    }
}

impl CoreHeap {
    /// Cuts the heap's free top down to its highest allocation (keeping [`HEAP_GROW_STEP`] and
    /// [`HEAP_TRIM_MIN`] of slack); returns the window `[start, end)` it no longer uses, still
    /// mapped. Talc shrinks a heap from its ends only: free space below the highest live
    /// block stays mapped.
    fn trim(&mut self) -> Option<(u64, u64)> {
        if self.mapped <= HEAP_GROW_STEP + HEAP_TRIM_MIN || self.trimmed.is_some() {
            return None;
        }
        // SAFETY: `span` is this allocator's own heap (from `claim`/`extend`/`truncate`).
        let used = unsafe { self.heap.get_allocated_span(self.span) };
        let used_top = used.get_base_acme().map_or(self.base, |(_, acme)| acme as u64);
        let keep = (used_top.max(self.base) - self.base + HEAP_TRIM_MIN)
            .next_multiple_of(4096)
            .max(HEAP_GROW_STEP);
        if keep + HEAP_TRIM_MIN > self.mapped {
            return None;
        }
        let request = Span::from_base_size(self.base as *mut u8, keep as usize);
        // SAFETY: as above; `request` holds every allocation (it reaches past `used_top`).
        self.span = unsafe { self.heap.truncate(self.span, request) };
        let cut = (self.base + keep, self.base + self.mapped);
        self.mapped = keep;
        Some(cut)
    }

    /// Gives the frames of the last trim back to the core's list once every core has
    /// flushed them from its TLB (never waits). Returns the frames given back.
    fn release_trimmed(&mut self) -> u64 {
        let Some(t) = self.trimmed.take() else { return 0 };
        match t.flush.as_ref().and_then(tlb::Shootdown::outcome) {
            Some(Ok(())) => {}
            Some(Err(_)) => {
                // A core never flushed: it may still reach these pages through its stale
                // entries, so they go back at their own addresses (what those entries
                // say), never to other frames.
                self.trimmed = Some(Trimmed { flush: None, ..t });
                self.restore_trimmed();
                return 0;
            }
            None => {
                self.trimmed = Some(t); // still out (or not yet sent)
                return 0;
            }
        }
        let mut frames = t.frames;
        let count = frames.len() as u64;
        frames.free_all();
        self.frames_taken -= count;
        count
    }

    /// Undoes a trim whose flush is still out: maps its frames again at the addresses they
    /// had (the chain holds them in ascending address order, so they pop highest first)
    /// and gives the space back to the allocator. The shootdown is dropped: an
    /// acknowledgement that comes later is ignored.
    fn restore_trimmed(&mut self) {
        let Some(mut t) = self.trimmed.take() else { return };
        let pml4 = KERNEL_PML4.load(Ordering::Relaxed);
        let mut va = t.end;
        while va > t.start {
            va -= 4096;
            let Some(pa) = t.frames.pop() else { break };
            let mut no_tables = || None;
            let flags = F::WRITABLE | F::NO_EXECUTE | F::GLOBAL;
            // SAFETY: this core's own heap window; the page's tables were kept by the trim
            // (`unmap_page` clears the leaf only), so nothing is allocated.
            let _ = unsafe { paging::map_page(pml4, va, pa, flags, &mut no_tables) };
        }
        let mapped = Span::from_base_size(self.base as *mut u8, (t.end - self.base) as usize);
        // SAFETY: the pages right after the heap's top are mapped again, to the frames the
        // heap had there; the new span contains the old one.
        self.span = unsafe { self.heap.extend(self.span, mapped) };
        self.mapped = t.end - self.base;
    }
}

/// Pages a trim unmapped: chained through their frames' first words until every core has
/// flushed them from its TLB.
pub struct Trimmed {
    /// The window it unmapped, `[start, end)`, every page of which was mapped.
    start: u64,
    end: u64,
    frames: FrameChain,
    /// The shootdown of those pages (`None` until it is sent: the trim is recorded first,
    /// so a grow in between undoes it rather than mapping other frames there).
    flush: Option<tlb::Shootdown>,
}

/// Gives the free top of this core's heap back to its frame list (Corey §4.1: a core's
/// memory is its own; a burst of kernel objects should not lower it for good). Never
/// waits: the first call unmaps the top and asks every core to flush its TLB (global
/// entries too: the heap's mappings are global); the frames go back on a later call, once
/// all have. Returns the frames given back by this call. Nothing here allocates.
pub fn trim_this_core() -> u64 {
    let core = this_core();
    let released = HEAPS.with(|h| h.release_trimmed());
    if released > 0 {
        return released;
    }
    // The trim is cut, unmapped and recorded in one hold of the heap: sending the
    // shootdown below may allocate or serve messages, and a grow then must find it.
    let Some(start) = HEAPS.with(|h| {
        take_returns(core, h);
        let (start, end) = h.trim()?;
        let pml4 = KERNEL_PML4.load(Ordering::Relaxed);
        let mut frames = FrameChain::new();
        let mut va = start;
        while va < end {
            // Every page below the heap's top is mapped (`grow` maps whole steps), so the
            // chain holds one frame per page, in address order (`restore_trimmed` relies
            // on it).
            if let Some((pa, _)) = paging::translate(pml4, va) {
                paging::unmap_page(pml4, va);
                frames.push(pa); // no longer used by the heap
            }
            va += 4096;
        }
        h.trimmed = Some(Trimmed { start, end, frames, flush: None });
        Some(start)
    }) else {
        return 0;
    };
    let flush = tlb::Shootdown::start(tlb::all_online(), true);
    HEAPS.with(|h| match h.trimmed.as_mut() {
        Some(t) if t.start == start && t.flush.is_none() => t.flush = Some(flush),
        // A grow undid the trim meanwhile: nothing to flush for.
        _ => drop(flush),
    });
    0
}

/// Trims this core's heap and waits (up to `timeout_us`) until every core has flushed and
/// the frames are back on the core's list; returns the frames given back. For a caller that
/// needs the core's memory as frames now (a test starting from a clean slate), not for the
/// idle loop, which must never wait.
pub fn give_back_this_core(timeout_us: u64) -> u64 {
    trim_this_core();
    let start = crate::arch::cpu::rdtsc();
    let mut patience = crate::transport::PollThenBlock::new();
    loop {
        // The other cores' acknowledgements of the flush come as messages: poll, look,
        // then block (polled after the look, one would be in hand when the core halts).
        tlb::poll_messages();
        let given = trim_this_core();
        let waiting = trim_pending_this_core();
        if given > 0 || !waiting || crate::arch::timer::us_since(start) > timeout_us {
            return given;
        }
        patience.pause(&tlb::broadcast_pending);
    }
}

/// Records the kernel page tables and opens the heaps (boot core, once).
pub fn set_ready(kernel_pml4: u64) {
    KERNEL_PML4.store(kernel_pml4, Ordering::Relaxed);
    READY.store(true, Ordering::Release);
}

/// Physical address of the kernel PML4.
pub fn kernel_pml4() -> u64 {
    KERNEL_PML4.load(Ordering::Relaxed)
}

/// The calling core's heap: bytes in use (after taking back the blocks other cores
/// freed) and the frames it holds.
pub fn usage_this_core() -> (u64, u64) {
    let core = this_core();
    HEAPS.with(|h| {
        take_returns(core, h);
        (h.stats().1, h.frames_taken())
    })
}

/// Every core's heap (touched only by its own core).
static HEAPS: PerCoreState<CoreHeap> = crate::per_core_state!(CoreHeap::empty());

/// Places the calling core's heap in its window and maps its first pages.
pub fn init_this_core() -> Option<()> {
    let index = this_core().index as u64;
    HEAPS.with(|h| {
        h.base = HEAP_BASE + index * HEAP_WINDOW;
        h.grow(HEAP_GROW_STEP)
    })
}

/// Whether the calling core's last trim still waits for other cores' TLB flushes.
pub fn trim_pending_this_core() -> bool {
    HEAPS.with(|h| h.trimmed.is_some())
}

/// The calling core's heap: bytes mapped and in use.
pub fn stats_this_core() -> (u64, u64) {
    HEAPS.with(|h| h.stats())
}

/// A freed block's first two words while it travels back to its owner.
struct BlockLinks;

impl Links for BlockLinks {
    fn link(&self, node: u64) -> &return_stack::AtomicU64 {
        // SAFETY: `node` is a freed heap block of at least 16 bytes, 8-aligned, in a mapped
        // heap window; nobody else uses it while it is on a return stack.
        unsafe { &*(node as *const return_stack::AtomicU64) }
    }
}

fn owner_of(ptr: u64) -> Option<usize> {
    let index = ptr.checked_sub(HEAP_BASE)? / HEAP_WINDOW;
    (index < percpu::MAX_CORES as u64).then_some(index as usize)
}

fn take_returns(core: &percpu::PerCore, h: &mut CoreHeap) {
    if core.heap_returns.is_empty() {
        return;
    }
    let mut taken = core.heap_returns.take_all();
    while let Some(block) = taken.next(&BlockLinks) {
        // SAFETY: the sender stored the layout in the block's second word before pushing.
        let packed = unsafe { *((block + 8) as *const u64) };
        let layout =
            Layout::from_size_align((packed & 0xffff_ffff_ffff) as usize, 1 << (packed >> 48));
        if let (Ok(layout), Some(ptr)) = (layout, NonNull::new(block as *mut u8)) {
            // SAFETY: the block was allocated from this heap with this layout.
            unsafe { h.heap.free(ptr, padded(layout)) };
        }
    }
}

/// Every block is at least 16 bytes, 8-aligned: a block freed on another core carries its
/// return-stack link and its layout in its first 16 bytes.
fn padded(layout: Layout) -> Layout {
    Layout::from_size_align(layout.size().max(16), layout.align().max(8)).unwrap_or(layout)
}

/// The global allocator: every core allocates from its own heap.
pub struct KernelHeap;

// SAFETY: each core touches only its own `CoreHeap` (through `CoreLocal`); foreign frees
// go through the owner's lock-free return stack.
unsafe impl GlobalAlloc for KernelHeap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !READY.load(Ordering::Acquire) {
            return core::ptr::null_mut();
        }
        let core = this_core();
        let layout = padded(layout);
        HEAPS.with(|h| {
            take_returns(core, h);
            // SAFETY: `GlobalAlloc` callers never ask for zero bytes.
            if let Ok(p) = unsafe { h.heap.malloc(layout) } {
                return p.as_ptr();
            }
            if h.grow(layout.size() as u64 + layout.align() as u64).is_none() {
                return core::ptr::null_mut();
            }
            // SAFETY: as above.
            unsafe { h.heap.malloc(layout) }.map_or(core::ptr::null_mut(), |p| p.as_ptr())
        })
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let core = this_core();
        let Some(owner) = owner_of(ptr as u64) else {
            return;
        };
        if owner == core.index {
            // SAFETY: allocated from this heap with this layout (GlobalAlloc contract).
            HEAPS.with(|h| unsafe { h.heap.free(NonNull::new_unchecked(ptr), padded(layout)) });
            return;
        }
        let packed = layout.size() as u64 | (layout.align().trailing_zeros() as u64) << 48;
        // SAFETY: the block is ours to reuse now and has at least 16 bytes, 8-aligned
        // (`padded`).
        unsafe { *(ptr.add(8) as *mut u64) = packed };
        if let Some(owner_core) = percpu::core(owner) {
            owner_core.heap_returns.push(ptr as u64, &BlockLinks);
        }
    }
}

#[global_allocator]
static KERNEL_HEAP: KernelHeap = KernelHeap;
