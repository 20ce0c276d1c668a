//! Memory a device reads and writes (DMA) for `virtio-drivers`: its queues and packet
//! buffers come from whole blocks of this core's frames (`mem::frames`, 64 contiguous
//! frames a block), reached through the direct map, so a buffer's physical address is its
//! direct-map address less the map's base, and every buffer is physically contiguous.

use crate::arch::paging::phys_to_virt;
use crate::mem::frames;
use core::ptr::NonNull;
use physmem::BLOCK_FRAMES;
use virtio_drivers::{BufferDirection, Hal, PhysAddr};

/// Bytes of a page.
const PAGE: usize = 4096;

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

/// `virtio-drivers`' view of the machine: DMA memory from [`alloc_pages`], device
/// registers through the direct map.
pub struct AtollHal;

// SAFETY: `dma_alloc` returns zeroed, contiguous memory no one else uses, at a physical
// address the device reaches (identity: no IOMMU); `share` is given only direct-map
// buffers (the drivers here keep every buffer in `alloc_pages` memory), whose physical
// address is the direct-map offset and which are contiguous.
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

    unsafe fn share(buffer: NonNull<[u8]>, _direction: BufferDirection) -> PhysAddr {
        direct_map_phys(buffer.as_ptr() as *mut u8 as u64)
    }

    unsafe fn unshare(_paddr: PhysAddr, _buffer: NonNull<[u8]>, _direction: BufferDirection) {}
}
