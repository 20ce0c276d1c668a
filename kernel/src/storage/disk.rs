//! The disk seen two ways: as the buffer cache's block device ([`VirtioDisk`], whole
//! file-system blocks on the virtio disk) and as the file system's block device
//! ([`CachedDisk`], every block through the buffer cache, on the calling core).
//!
//! Who drives the disk is chosen per disk, as for the NIC (issue M13): the calling core
//! (the default), or a kernel core whose list holds the disk (Corey §3.2, §4.4;
//! `pcore_add_device`), which then does every core's transfers, each reaching it as a
//! remote call over the monitors' channels that its polling loop serves.

use crate::drivers::virtio_blk::{self, DiskError, SECTOR};
use crate::percpu::this_core;
use bcache::Cache;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// The kernel core that drives the disk, or `NO_DRIVER` (the calling core does).
static DRIVER: AtomicUsize = AtomicUsize::new(NO_DRIVER);
const NO_DRIVER: usize = usize::MAX;
/// Transfers done by a kernel core for another core.
static REMOTE_TRANSFERS: AtomicU64 = AtomicU64::new(0);
/// How long a transfer waits for the kernel core (a stopped core's calls time out).
const REMOTE_TIMEOUT_US: u64 = 10_000_000;

/// Makes kernel core `core` drive the disk; false (and nothing changes) if another kernel
/// core drives it already.
pub fn claim_driver(core: usize) -> bool {
    DRIVER.compare_exchange(NO_DRIVER, core, Ordering::AcqRel, Ordering::Acquire).is_ok()
}

/// Kernel core `core` stops driving the disk: each calling core drives it again.
pub fn release_driver(core: usize) {
    let _ = DRIVER.compare_exchange(core, NO_DRIVER, Ordering::AcqRel, Ordering::Acquire);
}

/// The kernel core that drives the disk, if one does.
pub fn driver() -> Option<usize> {
    Some(DRIVER.load(Ordering::Acquire)).filter(|&c| c != NO_DRIVER)
}

/// Transfers kernel cores did for other cores since boot.
pub fn remote_transfers() -> u64 {
    REMOTE_TRANSFERS.load(Ordering::Relaxed)
}

/// Runs disk transfer `io` on the core that drives the disk: here, or on the kernel core
/// by a remote call (which waits; a syscall's thread lends its core to nobody meanwhile).
fn on_driver(io: &(dyn Fn() -> Result<(), DiskError> + Sync)) -> Result<(), DiskError> {
    let Some(core) = driver().filter(|&c| c != this_core().index) else { return io() };
    let work = |_| io().map_err(|e| alloc::format!("{e:?}"));
    let outcome = crate::smp::run_on(&[core], REMOTE_TIMEOUT_US, &work);
    REMOTE_TRANSFERS.fetch_add(1, Ordering::Relaxed);
    match outcome.first() {
        Some(crate::smp::Outcome::Done(Ok(_))) => Ok(()),
        _ => Err(DiskError::Device),
    }
}

/// The virtio disk in blocks of the file system's size.
pub struct VirtioDisk {
    /// Bytes per block.
    pub block_size: usize,
    /// Blocks on the disk (whole ones).
    pub blocks: u64,
}

impl bcache::BlockDevice for VirtioDisk {
    type Error = DiskError;

    fn blocks(&self) -> u64 {
        self.blocks
    }

    fn read_block(&self, block: u64, buf: &mut [u8]) -> Result<(), DiskError> {
        let sector = block * (self.block_size / SECTOR) as u64;
        // The kernel core fills the buffer through this lock (a remote call's work is `Fn`).
        let buf = spin::Mutex::new(buf);
        on_driver(&|| virtio_blk::read(sector, &mut buf.lock()))
    }

    fn write_block(&self, block: u64, buf: &[u8]) -> Result<(), DiskError> {
        let sector = block * (self.block_size / SECTOR) as u64;
        on_driver(&|| virtio_blk::write(sector, buf))
    }
}

/// The file system's view: blocks through the buffer cache `cache`, on the calling core's
/// buffers (Corey §5.3: a write lands in a buffer of the writing core).
pub struct CachedDisk {
    /// The buffer cache (it lives as long as the kernel).
    pub cache: &'static Cache<VirtioDisk>,
    /// While an operation on a file private to a core runs, that core: the data blocks
    /// the operation writes are made private to it (after Corey §9).
    pub private_to: Option<usize>,
    /// The blocks made private during that operation.
    pub made_private: alloc::vec::Vec<u64>,
}

impl CachedDisk {
    /// Where `len` bytes of numbered piece `n` lie: (cache block, offset in it). The file
    /// system reads its superblock as block 1 of 1024 bytes, whatever its block size.
    fn locate(&self, n: u32, len: usize) -> Result<(u64, usize), ext2::IoError> {
        let bs = self.cache.block_size();
        if len == 0 || len > bs || !bs.is_multiple_of(len) {
            return Err(ext2::IoError);
        }
        let byte = n as u64 * len as u64;
        Ok((byte / bs as u64, (byte % bs as u64) as usize))
    }
}

impl ext2::BlockDevice for CachedDisk {
    fn read_block(&mut self, n: u32, buf: &mut [u8]) -> Result<(), ext2::IoError> {
        let (block, offset) = self.locate(n, buf.len())?;
        self.cache.read(this_core().index, block, offset, buf).map_err(|_| ext2::IoError)
    }

    fn write_block(&mut self, n: u32, buf: &[u8]) -> Result<(), ext2::IoError> {
        let (block, offset) = self.locate(n, buf.len())?;
        self.cache.write(this_core().index, block, offset, buf).map_err(|_| ext2::IoError)
    }

    fn read_part(
        &mut self,
        n: u32,
        block_size: usize,
        offset: usize,
        buf: &mut [u8],
    ) -> Result<(), ext2::IoError> {
        let (block, start) = self.locate(n, block_size)?;
        let at = self.cache.read(this_core().index, block, start + offset, buf);
        at.map_err(|_| ext2::IoError)
    }

    fn write_part(
        &mut self,
        n: u32,
        block_size: usize,
        offset: usize,
        data: &[u8],
    ) -> Result<(), ext2::IoError> {
        let (block, start) = self.locate(n, block_size)?;
        let at = self.cache.write(this_core().index, block, start + offset, data);
        at.map_err(|_| ext2::IoError)
    }

    fn write_data_block(&mut self, n: u32, buf: &[u8]) -> Result<(), ext2::IoError> {
        if let Some(core) = self.private_to {
            let (block, _) = self.locate(n, buf.len())?;
            self.cache.make_private(core, block).map_err(|_| ext2::IoError)?;
            self.made_private.push(block);
        }
        self.write_block(n, buf)
    }

    /// Writes every dirty block back, then asks the disk to make them durable.
    fn flush(&mut self) -> Result<(), ext2::IoError> {
        self.cache.sync(this_core().index).map_err(|_| ext2::IoError)?;
        on_driver(&virtio_blk::flush).map_err(|_| ext2::IoError)
    }
}
