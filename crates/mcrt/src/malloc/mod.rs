//! The allocator (McRT §2.3, [38]). (Being written: per-thread allocation blocks, recycled
//! at thread exit, lock-based and non-blocking versions, batched remote frees.)
//!
//! Its interface to the rest of the runtime (the STM allocates through it):
//! [`alloc`], [`free`], and the scheduler's callback [`on_thread_exit`].

use crate::runtime::Task;
use core::alloc::Layout;

/// Allocates `layout` (null when memory is short).
pub fn alloc(layout: Layout) -> *mut u8 {
    // SAFETY: (interim) the global allocator; a zero size is refused.
    if layout.size() == 0 {
        return core::ptr::null_mut();
    }
    unsafe { alloc::alloc::alloc(layout) }
}

/// Frees `ptr`, allocated by [`alloc`] with `layout`.
///
/// # Safety
/// `ptr` came from [`alloc`] with this `layout` and is not used again.
pub unsafe fn free(ptr: *mut u8, layout: Layout) {
    // SAFETY: as the caller promised.
    unsafe { alloc::alloc::dealloc(ptr, layout) }
}

/// The scheduler's callback when a thread that allocated ends (§2.3): its blocks go to the
/// recycling pool.
pub(crate) fn on_thread_exit(_t: &Task) {}
