//! Physical frames: a free list per core (Corey §4.1: a core allocates from its own list,
//! named by its memid, without a lock or a shared cache line).
//!
//! A frame freed by a core that does not own it is pushed onto the owner's return stack
//! (lock-free, `return_stack`); the owner takes the whole stack back the next time it
//! allocates. M2 turns these returns into messages.

use crate::arch::paging::phys_to_virt;
use crate::percpu::{self, this_core};
use core::sync::atomic::{AtomicU64, Ordering};
use physmem::{FrameError, FrameOwners};
use return_stack::Links;

/// Most (range, owner) entries in the owner table.
pub const MAX_OWNER_RANGES: usize = percpu::MAX_CORES * physmem::MAX_RANGES_PER_CORE;

/// Which core owns each frame; written once at boot, read-only afterwards.
static OWNERS: spin::Once<FrameOwners<MAX_OWNER_RANGES>> = spin::Once::new();

/// Frames that came back from another core already free (a double free seen by the owner).
static BAD_RETURNS: AtomicU64 = AtomicU64::new(0);

/// The link word of a free frame is its first 8 bytes, reached through the direct map.
struct FrameLinks;

impl Links for FrameLinks {
    fn link(&self, node: u64) -> &return_stack::AtomicU64 {
        // SAFETY: `node` is a free frame (its owner's or in transit to it), so nobody else
        // uses its memory; the direct map keeps it mapped and 8-byte aligned.
        unsafe { &*(phys_to_virt(node) as *const return_stack::AtomicU64) }
    }
}

/// Records the frame ownership table (boot core, once, before other cores start).
pub fn set_owners(owners: FrameOwners<MAX_OWNER_RANGES>) {
    OWNERS.call_once(|| owners);
}

/// The core that owns frame `pa`.
pub fn owner_of(pa: u64) -> Option<usize> {
    OWNERS.get()?.owner_of(pa)
}

/// Takes back frames other cores returned to this core.
fn take_returns(core: &percpu::PerCore, frames: &mut physmem::CoreFrames<'static>) {
    if core.frame_returns.is_empty() {
        return;
    }
    let mut taken = core.frame_returns.take_all();
    while let Some(pa) = taken.next(&FrameLinks) {
        if frames.free(pa).is_err() {
            BAD_RETURNS.fetch_add(1, Ordering::Relaxed);
            crate::println!(
                "frames: core {} got back frame {:#x} that was not allocated",
                core.index,
                pa
            );
        }
    }
}

/// Allocates a frame from the calling core's own list. Returns its physical address.
pub fn alloc() -> Option<u64> {
    let core = this_core();
    core.frames.with(|frames| {
        take_returns(core, frames);
        let pa = frames.alloc();
        core.set_free_frames(frames.free_count());
        pa
    })
}

/// Frees frame `pa`: into the local list if this core owns it, otherwise onto the owner's
/// return stack. A double free of a local frame is reported as an error; one of a foreign
/// frame is caught when the owner takes it back (counted in [`bad_returns`]).
pub fn free(pa: u64) -> Result<(), FrameError> {
    let owner = owner_of(pa).ok_or(FrameError::NotOwned)?;
    if !pa.is_multiple_of(physmem::FRAME_SIZE) {
        return Err(FrameError::Unaligned);
    }
    let core = this_core();
    if owner == core.index {
        return core.frames.with(|frames| {
            let r = frames.free(pa);
            core.set_free_frames(frames.free_count());
            r
        });
    }
    let owner_core = percpu::core(owner).ok_or(FrameError::NotOwned)?;
    owner_core.frame_returns.push(pa, &FrameLinks);
    Ok(())
}

/// Takes back this core's returned frames now (used before counting free frames).
pub fn take_returns_now() {
    let core = this_core();
    core.frames.with(|frames| {
        take_returns(core, frames);
        core.set_free_frames(frames.free_count());
    });
}

/// Returned frames that were already free when their owner took them back.
pub fn bad_returns() -> u64 {
    BAD_RETURNS.load(Ordering::Relaxed)
}

/// Total free frames over all cores (each core's last published count).
pub fn total_free() -> u64 {
    percpu::all_cores().map(|c| c.free_frames()).sum()
}
