//! Memory a device reads and writes (DMA) for `virtio-drivers`: its queues and packet
//! buffers come from whole blocks of this core's frames (`mem::frames`, 64 contiguous
//! frames a block), reached through the direct map, so a buffer's physical address is its
//! direct-map address less the map's base, and every buffer is physically contiguous.
//!
//! A buffer outside the direct map (a kernel stack, where `virtio-drivers` builds a block
//! request's header and status, or a heap block) is not physically contiguous, so
//! [`AtollHal::share`] copies it into a bounce buffer of [`BOUNCE_BYTES`] and
//! [`AtollHal::unshare`] copies the device's answer back, as the `Hal` contract allows.

use crate::arch::paging::phys_to_virt;
use crate::mem::frames;
use core::ptr::NonNull;
use physmem::BLOCK_FRAMES;
use virtio_drivers::{BufferDirection, Hal, PhysAddr};

/// Bytes of a page.
const PAGE: usize = 4096;

/// Bytes of one bounce buffer: the largest buffer outside the direct map a driver hands
/// to a device (the block driver's transfers are cut to this size).
pub const BOUNCE_BYTES: usize = 64 * 1024;
/// Bounce buffers: a device request uses at most three buffers (header, data, status).
const BOUNCE_SLOTS: usize = 4;

/// The bounce buffers: their physical base (0 until first used) and which are taken.
static BOUNCE: spin::Mutex<(u64, [bool; BOUNCE_SLOTS])> =
    spin::Mutex::new((0, [false; BOUNCE_SLOTS]));

/// The carving point in the block being used: (next free byte's physical address, end).
static POOL: spin::Mutex<(u64, u64)> = spin::Mutex::new((0, 0));

/// `pages` zeroed, contiguous pages of DMA memory: carved from the current block, or a
/// new run of blocks taken off this core's free list. Device memory lives as long as the
/// device, which is the machine's lifetime, so it is never given back (see
/// [`AtollHal::dma_dealloc`]). `None` if the core has no free run of blocks.
pub fn alloc_pages(pages: usize) -> Option<u64> {
    let bytes = (pages * PAGE) as u64;
    let mut pool = POOL.lock();
    if pool.1 - pool.0 < bytes {
        let block_bytes = BLOCK_FRAMES * PAGE as u64;
        let blocks = bytes.div_ceil(block_bytes);
        let first = frames::take_free_blocks(blocks)?;
        *pool = (first, first + blocks * block_bytes);
    }
    let pa = pool.0;
    pool.0 += bytes;
    // SAFETY: fresh frames of this pool, reached through the direct map; nobody else has
    // them.
    unsafe { core::ptr::write_bytes(phys_to_virt(pa) as *mut u8, 0, bytes as usize) };
    Some(pa)
}

/// The physical address of `va`, a direct-map address ([`alloc_pages`]' memory).
pub fn direct_map_phys(va: u64) -> u64 {
    va - phys_to_virt(0)
}

/// Whether `va..va + len` lies in the direct map (then it is physically contiguous).
fn in_direct_map(va: u64, len: usize) -> bool {
    let base = phys_to_virt(0);
    va >= base && va + len as u64 <= crate::arch::paging::HEAP_BASE
}

/// Copies `buffer` into a free bounce buffer (if the device is to read it) and returns
/// the bounce buffer's physical address.
fn bounce_in(buffer: NonNull<[u8]>, direction: BufferDirection) -> PhysAddr {
    let len = buffer.len();
    assert!(len <= BOUNCE_BYTES, "a {len}-byte DMA buffer outside the direct map");
    let mut bounce = BOUNCE.lock();
    if bounce.0 == 0 {
        let pages = BOUNCE_SLOTS * BOUNCE_BYTES / PAGE;
        bounce.0 = alloc_pages(pages).expect("no free block of frames for bounce buffers");
    }
    let slot = bounce.1.iter().position(|taken| !taken).expect("every bounce buffer in use");
    bounce.1[slot] = true;
    let pa = bounce.0 + (slot * BOUNCE_BYTES) as u64;
    if direction != BufferDirection::DeviceToDriver {
        // SAFETY: `buffer` is valid for reads (the `share` contract); the slot is ours.
        unsafe {
            core::ptr::copy_nonoverlapping(
                buffer.as_ptr() as *const u8,
                phys_to_virt(pa) as *mut u8,
                len,
            )
        };
    }
    pa
}

/// Copies the device's answer out of bounce buffer `pa` into `buffer` (if the device
/// wrote it) and frees the bounce buffer.
fn bounce_out(pa: PhysAddr, buffer: NonNull<[u8]>, direction: BufferDirection) {
    let mut bounce = BOUNCE.lock();
    let slot = ((pa - bounce.0) as usize) / BOUNCE_BYTES;
    if direction != BufferDirection::DriverToDevice {
        // SAFETY: `buffer` is valid for writes (the `unshare` contract) and the bounce
        // buffer holds `buffer.len()` bytes the device wrote.
        unsafe {
            core::ptr::copy_nonoverlapping(
                phys_to_virt(pa) as *const u8,
                buffer.as_ptr() as *mut u8,
                buffer.len(),
            )
        };
    }
    bounce.1[slot] = false;
}

/// `virtio-drivers`' view of the machine: DMA memory from [`alloc_pages`], device
/// registers through the direct map.
pub struct AtollHal;

// SAFETY: `dma_alloc` returns zeroed, contiguous memory no one else uses, at a physical
// address the device reaches (identity: no IOMMU); `share` returns a direct-map buffer's
// own physical address (contiguous), and for any other buffer a bounce buffer that
// `unshare` copies back and frees.
unsafe impl Hal for AtollHal {
    fn dma_alloc(pages: usize, _direction: BufferDirection) -> (PhysAddr, NonNull<u8>) {
        let pa = alloc_pages(pages).expect("no free block of frames for a device queue");
        (pa, NonNull::new(phys_to_virt(pa) as *mut u8).expect("the direct map is not at 0"))
    }

    unsafe fn dma_dealloc(_paddr: PhysAddr, _vaddr: NonNull<u8>, _pages: usize) -> i32 {
        // Devices are never stopped (see `alloc_pages`): nothing comes back.
        0
    }

    unsafe fn mmio_phys_to_virt(paddr: PhysAddr, size: usize) -> NonNull<u8> {
        let va = crate::arch::pci::registers(paddr, size as u64)
            .expect("a device's registers above the direct map");
        NonNull::new(va as *mut u8).expect("the direct map is not at 0")
    }

    unsafe fn share(buffer: NonNull<[u8]>, direction: BufferDirection) -> PhysAddr {
        let va = buffer.as_ptr() as *mut u8 as u64;
        if in_direct_map(va, buffer.len()) {
            direct_map_phys(va)
        } else {
            bounce_in(buffer, direction)
        }
    }

    unsafe fn unshare(paddr: PhysAddr, buffer: NonNull<[u8]>, direction: BufferDirection) {
        if !in_direct_map(buffer.as_ptr() as *mut u8 as u64, buffer.len()) {
            bounce_out(paddr, buffer, direction);
        }
    }
}
