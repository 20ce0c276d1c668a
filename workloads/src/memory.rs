//! Memory for workloads: where it is placed ([`Placement`]), the platform's raw grant
//! ([`Region`]) and the typed view workloads use ([`Shared`]), plus a spinning barrier that
//! lives in such memory.

use core::hint::spin_loop;
use core::marker::PhantomData;
use core::mem::{align_of, size_of};
use core::ops::Deref;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use alloc::format;
use alloc::string::String;

use crate::Platform;

/// The alignment every [`Region`] has (a page).
pub const REGION_ALIGN: usize = 4096;

/// Where memory is placed and how it is mapped (Corey's choice of what is shared).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Private to one core: only that core's work touches it. Linux: a `MAP_PRIVATE`
    /// anonymous mapping first touched on that core, so its pages come from the core's NUMA
    /// node. Atoll: a segment mapped in the root address range, each frame from the core
    /// that first touches its page.
    Local(usize),
    /// Shared by the cores of the workload. Linux: a `MAP_SHARED` anonymous mapping, which a
    /// process forked later still shares. Atoll: a segment mapped through slot address
    /// ranges spliced into the root range, which threads and `cfork` children share.
    Shared,
}

/// Types that may live in a [`Region`]: all-zero bytes are a valid value, and every field
/// that is ever written is an atomic, so several cores may hold shared references at once.
///
/// # Safety
/// An all-zero `Self` must be valid, and `Self` must be `Sync` with all mutation through
/// atomics (or other interior mutability that is `Sync`).
pub unsafe trait Zeroable: Sync {}

// SAFETY: zero is a valid atomic integer, and atomics are Sync.
unsafe impl Zeroable for AtomicU64 {}
// SAFETY: as above.
unsafe impl Zeroable for AtomicU32 {}
// SAFETY: `urpc` documents that all-zero memory is a valid empty channel; its state is all
// atomics.
unsafe impl<const SLOTS: usize> Zeroable for urpc::ChannelMemory<SLOTS> {}

/// One word alone on its 64-byte cache line.
#[derive(Debug, Default)]
#[repr(C, align(64))]
pub struct CacheLine(pub AtomicU64);

// SAFETY: one atomic (and padding).
unsafe impl Zeroable for CacheLine {}

/// Zeroed, page-aligned memory handed out by a [`Platform`]; returned to it when dropped.
/// A workload turns it into a typed [`Shared`] view with [`Region::typed`].
pub struct Region {
    ptr: NonNull<u8>,
    len: usize,
    free: unsafe fn(NonNull<u8>, usize),
}

// SAFETY: a Region is only ever viewed as `[T]` with `T: Zeroable` (Sync, all mutation
// atomic), so sharing or sending it between threads is sound.
unsafe impl Send for Region {}
// SAFETY: as above.
unsafe impl Sync for Region {}

impl Region {
    /// Wraps memory a platform has allocated.
    ///
    /// # Safety
    /// `ptr` must be aligned to [`REGION_ALIGN`] and point to `len` zeroed bytes that every
    /// core of the workload may read and write until `free(ptr, len)` is called (when the
    /// Region drops), and nothing else may use them meanwhile.
    pub unsafe fn from_raw(
        ptr: NonNull<u8>,
        len: usize,
        free: unsafe fn(NonNull<u8>, usize),
    ) -> Region {
        Region { ptr, len, free }
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for an empty region.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The address of the first byte (for tests and diagnostics).
    pub fn addr(&self) -> usize {
        self.ptr.as_ptr() as usize
    }

    /// Views the memory as `count` values of `T` (it must be large enough).
    pub fn typed<T: Zeroable>(self, count: usize) -> Result<Shared<T>, String> {
        let need = size_of::<T>().checked_mul(count).ok_or("region size overflows")?;
        if need > self.len {
            return Err(format!("region of {} bytes cannot hold {need}", self.len));
        }
        if align_of::<T>() > REGION_ALIGN || !self.addr().is_multiple_of(align_of::<T>()) {
            return Err(format!("region at {:#x} is not aligned for the type", self.addr()));
        }
        Ok(Shared { region: self, count, _type: PhantomData })
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: `from_raw`'s contract: `free` takes back exactly this allocation, once.
        unsafe { (self.free)(self.ptr, self.len) }
    }
}

impl core::fmt::Debug for Region {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Region({:#x}, {} bytes)", self.addr(), self.len)
    }
}

/// A [`Region`] viewed as a slice of `T`s; freed when dropped.
pub struct Shared<T: Zeroable> {
    region: Region,
    count: usize,
    _type: PhantomData<T>,
}

impl<T: Zeroable> Shared<T> {
    /// The memory under the view, for the platform calls that act on a whole mapping
    /// ([`Platform::set_writable`]).
    pub fn region(&self) -> &Region {
        &self.region
    }
}

impl<T: Zeroable> Deref for Shared<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        // SAFETY: `typed` checked size and alignment; the bytes are zeroed (a valid `T` by
        // `Zeroable`) and stay allocated while `self.region` lives; only shared references
        // are handed out and `T` mutates only through atomics.
        unsafe { core::slice::from_raw_parts(self.region.ptr.as_ptr().cast::<T>(), self.count) }
    }
}

/// Allocates `count` zeroed `T`s from `platform`, placed as `placement` asks.
pub fn alloc_slice<T: Zeroable, P: Platform + ?Sized>(
    platform: &P,
    count: usize,
    placement: Placement,
) -> Result<Shared<T>, String> {
    let bytes = size_of::<T>().checked_mul(count.max(1)).ok_or("allocation size overflows")?;
    platform.alloc(bytes, placement)?.typed(count)
}

/// A barrier for the cores of one workload, spinning on two cache lines of shared memory
/// (the same code on every platform). Reusable: a core leaves round `n` only after every
/// party has arrived, and rounds follow each other.
#[derive(Debug, Default)]
#[repr(C)]
pub struct SpinBarrier {
    arrived: CacheLine,
    generation: CacheLine,
}

// SAFETY: two cache lines of atomics.
unsafe impl Zeroable for SpinBarrier {}

impl SpinBarrier {
    /// Waits until `parties` cores (counting this one) have called `wait` in this round.
    pub fn wait(&self, parties: usize) {
        let generation = self.generation.0.load(Ordering::Acquire);
        if self.arrived.0.fetch_add(1, Ordering::AcqRel) + 1 >= parties as u64 {
            // The last to arrive resets the count, then opens the next round.
            self.arrived.0.store(0, Ordering::Relaxed);
            self.generation.0.fetch_add(1, Ordering::Release);
        } else {
            while self.generation.0.load(Ordering::Acquire) == generation {
                spin_loop();
            }
        }
    }
}
