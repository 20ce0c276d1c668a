//! Physical frames: a free list per core (Corey §4.1: a core allocates from its own list,
//! named by its memid, without a lock or a shared cache line).
//!
//! A frame freed by a core that does not own it goes home by message: the monitor batches
//! it into a `FRAME_RETURN` to the owner, whose monitor puts it back on the owner's list.

use crate::monitor;
use crate::percpu::{self, this_core};
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

/// Frees frame `pa`: into the local list if this core owns it, otherwise home to its owner
/// by message. A double free of a local frame is an error here; one of a foreign frame is
/// caught and rejected by the owner's monitor.
pub fn free(pa: u64) -> Result<(), FrameError> {
    let owner = owner_of(pa).ok_or(FrameError::NotOwned)?;
    if !pa.is_multiple_of(physmem::FRAME_SIZE) {
        return Err(FrameError::Unaligned);
    }
    if owner == this_core().index {
        return take_back(pa);
    }
    monitor::return_frame(owner, pa).map_err(|_| FrameError::NotOwned)
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
