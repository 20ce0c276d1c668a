//! Physical memory for the Atoll kernel, from the firmware's memory map to one free-frame
//! allocator per core. Boot goes top to bottom through the modules:
//!
//! 1. [`range`]: [`usable_frames`] turns the firmware's RAM ranges minus the reserved ones
//!    (kernel image, boot modules, ...) into a [`RangeSet`] of whole 4 KiB frames.
//! 2. [`partition`]: [`partition`](partition::partition) splits the usable frames among the
//!    cores, each core's share from its own NUMA node where the machine has nodes (Corey
//!    §4.1, "memid": every core allocates from its own free page list, holding pages of its
//!    local memory node); [`FrameOwners`] records who owns what, so a frame freed on a
//!    foreign core can be sent home (see the `return-stack` crate).
//! 3. [`frames`]: [`CoreFrames`] is one core's bitmap allocator over its share, touched by
//!    that core alone: no atomics, no locks.
//! 4. [`retype`]: after boot, blocks of frames move between cores (Multikernel §4.8);
//!    [`BlockOwners`] is each core's replica of who owns what moved.
//!
//! Everything here is hardware-neutral, allocation-free (the kernel calls it before it has a
//! heap) and tested on the host: `cargo test -p physmem`.
#![no_std]
#![forbid(unsafe_code)]

#[cfg(test)]
extern crate std;

pub mod frames;
pub mod partition;
pub mod range;
pub mod retype;

pub use frames::{bitmap_words, CoreFrames, FrameError, SetupError, TakeError, MAX_ADOPTED_BLOCKS};
pub use partition::{partition, CoreShare, FrameOwners, NodeMemory, OwnersError, PartitionError};
pub use range::{usable_frames, CapacityError, PhysRange, RangeSet};
pub use retype::{Arrival, BlockOwners, InTransit, BLOCK_FRAMES, BLOCK_SIZE, MAX_RETYPED_BLOCKS};

/// Size of a physical frame (a base page) in bytes.
pub const FRAME_SIZE: u64 = 4096;
/// Most cores the kernel's per-core tables are sized for.
pub const MAX_CORES: usize = 64;
/// Most separate physical ranges one core's share may hold (its node's memory can have holes).
pub const MAX_RANGES_PER_CORE: usize = 16;
