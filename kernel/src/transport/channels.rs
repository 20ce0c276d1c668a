//! The channel table: one URPC channel per ordered pair of cores, set up at boot.
//!
//! Channel `from → to` lives in a zeroed frame of the *receiving* core's own memory (its
//! NUMA node), allocated while the boot core builds that core. The table of addresses is
//! written before any other core starts and read-only afterwards.

use crate::arch::paging::phys_to_virt;
use crate::param::CHANNEL_SLOTS;
use crate::percpu::MAX_CORES;
use core::sync::atomic::{AtomicU64, Ordering};
use urpc::ChannelMemory;

/// The memory of one channel.
pub type Channel = ChannelMemory<CHANNEL_SLOTS>;

const _: () = assert!(core::mem::size_of::<Channel>() <= 4096, "a channel must fit one frame");

/// `TABLE[from][to]`: virtual address of channel `from → to` (0 = none).
static TABLE: [[AtomicU64; MAX_CORES]; MAX_CORES] =
    [const { [const { AtomicU64::new(0) }; MAX_CORES] }; MAX_CORES];

/// Records channel `from → to` in the zeroed frame `pa` (boot core, before APs start).
pub fn install(from: usize, to: usize, pa: u64) {
    // SAFETY: `pa` is a frame of the receiving core, mapped by the direct map.
    unsafe { core::ptr::write_bytes(phys_to_virt(pa) as *mut u8, 0, 4096) };
    TABLE[from][to].store(phys_to_virt(pa), Ordering::Release);
}

/// Channel `from → to`, if it was set up.
pub fn get(from: usize, to: usize) -> Option<&'static Channel> {
    let va = TABLE.get(from)?.get(to)?.load(Ordering::Acquire);
    if va == 0 {
        return None;
    }
    // SAFETY: `install` zeroed a whole frame for it (all-zero is a valid empty channel), the
    // frame is never freed, and only atomics inside are ever written.
    Some(unsafe { &*(va as *const Channel) })
}
