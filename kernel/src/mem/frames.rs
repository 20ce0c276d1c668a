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
    OUTGOING.with(|q| q.push(owner, pa));
    Ok(())
}

/// Frames freed on this core that belong to others, one chain per owner.
struct Outgoing {
    /// The first frame of each owner's chain (0: empty).
    heads: [u64; percpu::MAX_CORES],
    /// How many frames each chain holds.
    counts: [usize; percpu::MAX_CORES],
    /// All chains together.
    total: usize,
}

impl Outgoing {
    fn push(&mut self, owner: usize, pa: u64) {
        // SAFETY: a frame no one maps any more (its last holder freed it), this core's to
        // write until it is sent home; the direct map reaches it.
        unsafe { *(phys_to_virt(pa) as *mut u64) = self.heads[owner] };
        self.heads[owner] = pa;
        self.counts[owner] += 1;
        self.total += 1;
    }

    fn pop(&mut self, owner: usize) -> Option<u64> {
        let pa = self.heads[owner];
        if pa == 0 {
            return None;
        }
        // SAFETY: a frame of the chain (see `push`).
        self.heads[owner] = unsafe { *(phys_to_virt(pa) as *const u64) };
        self.counts[owner] -= 1;
        self.total -= 1;
        Some(pa)
    }
}

static OUTGOING: PerCoreState<Outgoing> = crate::per_core_state!(Outgoing {
    heads: [0; percpu::MAX_CORES],
    counts: [0; percpu::MAX_CORES],
    total: 0,
});

/// Takes up to `out.len()` of the frames queued for `owner` into `out` — only if there are
/// at least `at_least` — and returns how many it took. The monitor sends them home, or
/// queues them again with [`queue_for_home`] if the send fails.
pub fn take_for_home(owner: usize, out: &mut [u64], at_least: usize) -> usize {
    OUTGOING.with(|q| {
        if owner >= percpu::MAX_CORES || q.counts[owner] < at_least.max(1) {
            return 0;
        }
        let mut n = 0;
        while n < out.len() {
            let Some(pa) = q.pop(owner) else { break };
            out[n] = pa;
            n += 1;
        }
        n
    })
}

/// Queues frames for `owner` again (a send that failed).
pub fn queue_for_home(owner: usize, frames: &[u64]) {
    OUTGOING.with(|q| {
        for &pa in frames {
            q.push(owner, pa);
        }
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
