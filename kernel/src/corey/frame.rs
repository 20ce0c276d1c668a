//! Frames of segments: each page is a counted frame (`Arc<Frame>`), freed when its last
//! mapping goes, and charged to the thread that faulted it in (AMPS §3.3); and `Kernel`,
//! the `vm::Host` that gives the memory logic its frames.

use super::PAGE;
use crate::arch::paging::phys_to_virt;
use crate::mem::frames;
use crate::percpu::{this_core, PerCoreState};
use alloc::sync::Arc;

/// A physical frame; freed (sent home to its owner) when the last holder drops it.
pub struct Frame(pub(super) u64, Option<(Arc<crate::thread::Resident>, usize)>);

/// The resident-page counters of the thread whose fault this core is serving: frames
/// filled meanwhile are charged to it (AMPS §3.3).
pub(super) static CHARGE_TO: PerCoreState<Option<Arc<crate::thread::Resident>>> =
    crate::per_core_state!(None);

/// Runs `f` (a soft fault) with the frames it fills charged to `resident`.
pub fn charging<R>(resident: &Arc<crate::thread::Resident>, f: impl FnOnce() -> R) -> R {
    CHARGE_TO.with(|c| *c = Some(resident.clone()));
    let r = f();
    CHARGE_TO.with(|c| *c = None);
    r
}

/// A fresh frame of this core, zeroed; its physical address.
pub(super) fn zeroed_frame() -> Option<u64> {
    let pa = frames::alloc()?;
    // SAFETY: a fresh frame of this core's own, reached through the direct map.
    unsafe { core::ptr::write_bytes(phys_to_virt(pa) as *mut u8, 0, PAGE as usize) };
    Some(pa)
}

impl Frame {
    /// Its physical address (a device reaches a pinned page by it: `sysdev`).
    pub fn phys(&self) -> u64 {
        self.0
    }

    /// Frame `pa` of this core, charged to the thread whose fault is being served, if any.
    pub(super) fn new(pa: u64) -> Arc<Frame> {
        let node = this_core().node as usize;
        let charged = CHARGE_TO.with(|c| c.clone()).map(|r| {
            r.charge(node);
            (r, node)
        });
        Arc::new(Frame(pa, charged))
    }

    /// A fresh frame of this core, zeroed.
    pub(super) fn zeroed() -> Option<Arc<Frame>> {
        Some(Frame::new(zeroed_frame()?))
    }

    /// A fresh frame of this core holding a copy of `self`.
    pub(super) fn copy(&self) -> Option<Arc<Frame>> {
        let pa = frames::alloc()?;
        // SAFETY: `self.0` is a live frame (we hold it), `pa` a fresh one; both are reached
        // through the direct map and do not overlap.
        unsafe {
            core::ptr::copy_nonoverlapping(
                phys_to_virt(self.0) as *const u8,
                phys_to_virt(pa) as *mut u8,
                PAGE as usize,
            )
        };
        Some(Frame::new(pa))
    }
}

impl Drop for Frame {
    fn drop(&mut self) {
        if let Some((resident, node)) = self.1.take() {
            resident.uncharge(node);
        }
        let _ = frames::free(self.0);
    }
}
