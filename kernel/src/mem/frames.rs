//! Physical frames: a free list per core (Corey §4.1: a core allocates from its own list,
//! named by its memid, without a lock or a shared cache line).
//!
//! A frame freed by a core that does not own it goes home by message: it waits here, in
//! the freeing core's queue for its owner, until the monitor (the layer above, the only
//! one that talks to other cores) sends it in a `FRAME_RETURN`; the owner's monitor puts
//! it back on the owner's list. The queue is a chain through the frames themselves (each
//! one's first word links the next: a freed frame is the freeing core's to write until it
//! is sent), so queueing never allocates and never fails: no frame is dropped.

use crate::arch::paging::phys_to_virt;
use crate::percpu::{self, this_core, PerCoreState};
use physmem::{FrameError, FrameOwners};

/// Most (range, owner) entries in the owner table.
pub const MAX_OWNER_RANGES: usize = percpu::MAX_CORES * physmem::MAX_RANGES_PER_CORE;

/// Which core owns each frame; written once at boot, read-only afterwards.
static OWNERS: spin::Once<FrameOwners<MAX_OWNER_RANGES>> = spin::Once::new();

/// Records the frame ownership table (boot core, once, before other cores start).
pub fn set_owners(owners: FrameOwners<MAX_OWNER_RANGES>) {
    OWNERS.call_once(|| owners);
}

/// The core that owns frame `pa`.
pub fn owner_of(pa: u64) -> Option<usize> {
    OWNERS.get()?.owner_of(pa)
}

/// Allocates a frame from the calling core's own list. Returns its physical address.
pub fn alloc() -> Option<u64> {
    let core = this_core();
    core.frames.with(|frames| {
        let pa = frames.alloc();
        core.set_free_frames(frames.free_count());
        pa
    })
}

/// Frees frame `pa`: into the local list if this core owns it, otherwise into this core's
/// queue for its owner (see the module doc). A double free of a local frame is an error
/// here; one of a foreign frame is caught and rejected by the owner's monitor.
pub fn free(pa: u64) -> Result<(), FrameError> {
    let owner = owner_of(pa).ok_or(FrameError::NotOwned)?;
    if !pa.is_multiple_of(physmem::FRAME_SIZE) {
        return Err(FrameError::Unaligned);
    }
    if owner == this_core().index {
        return take_back(pa);
    }
    OUTGOING.with(|q| {
        q.chains[owner].push(pa);
        q.total += 1;
    });
    Ok(())
}

/// Frames nobody else uses, chained through their own first words (each holds the next
/// one's address): a list of frames that needs no memory of its own, so building it never
/// allocates and never fails. Used for freed frames waiting to go home, a heap trim's
/// frames waiting for TLB flushes, and frames a test holds back.
pub struct FrameChain {
    head: u64,
    len: usize,
}

impl FrameChain {
    /// An empty chain.
    pub const fn new() -> Self {
        FrameChain { head: 0, len: 0 }
    }

    /// How many frames it holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds frame `pa`, which must be the caller's alone: no mapping, no other holder.
    pub fn push(&mut self, pa: u64) {
        // SAFETY: the caller gives us a frame nobody else uses; the direct map reaches it.
        unsafe { *(phys_to_virt(pa) as *mut u64) = self.head };
        self.head = pa;
        self.len += 1;
    }

    /// Takes a frame out.
    pub fn pop(&mut self) -> Option<u64> {
        if self.head == 0 {
            return None;
        }
        let pa = self.head;
        // SAFETY: a frame of the chain (see `push`): its first word links the next.
        self.head = unsafe { *(phys_to_virt(pa) as *const u64) };
        self.len -= 1;
        Some(pa)
    }

    /// Frees every frame of the chain (to this core's list, or queued for its owner).
    pub fn free_all(&mut self) {
        while let Some(pa) = self.pop() {
            let _ = free(pa);
        }
    }
}

/// Frames freed on this core that belong to others, one chain per owner.
struct Outgoing {
    chains: [FrameChain; percpu::MAX_CORES],
    /// All chains together.
    total: usize,
}

static OUTGOING: PerCoreState<Outgoing> = crate::per_core_state!(Outgoing {
    chains: [const { FrameChain::new() }; percpu::MAX_CORES],
    total: 0,
});

/// Takes up to `out.len()` of the frames queued for `owner` into `out` — only if there are
/// at least `at_least` — and returns how many it took. The monitor sends them home, or
/// queues them again with [`queue_for_home`] if the send fails.
pub fn take_for_home(owner: usize, out: &mut [u64], at_least: usize) -> usize {
    OUTGOING.with(|q| {
        let Some(chain) = q.chains.get_mut(owner).filter(|c| !c.is_empty() && c.len() >= at_least)
        else {
            return 0;
        };
        let mut n = 0;
        while n < out.len() {
            let Some(pa) = chain.pop() else { break };
            out[n] = pa;
            n += 1;
        }
        q.total -= n;
        n
    })
}

/// Queues frames for `owner` again (a send that failed).
pub fn queue_for_home(owner: usize, frames: &[u64]) {
    OUTGOING.with(|q| {
        for &pa in frames {
            q.chains[owner].push(pa);
        }
        q.total += frames.len();
    })
}

/// Frames queued on this core for their owners.
pub fn queued_for_home() -> usize {
    OUTGOING.with(|q| q.total)
}

/// Puts a frame this core owns back on its list (the monitor calls this for frames that
/// came home).
pub fn take_back(pa: u64) -> Result<(), FrameError> {
    let core = this_core();
    core.frames.with(|frames| {
        let r = frames.free(pa);
        core.set_free_frames(frames.free_count());
        r
    })
}

/// Total free frames over all cores (each core's last published count).
pub fn total_free() -> u64 {
    percpu::all_cores().map(|c| c.free_frames()).sum()
}
