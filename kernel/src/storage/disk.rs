//! The disk seen two ways: as the buffer cache's block device ([`VirtioDisk`], whole
//! file-system blocks on the virtio disk) and as the file system's block device
//! ([`CachedDisk`], every block through the buffer cache, on the calling core).

use crate::drivers::virtio_blk::{self, DiskError, SECTOR};
use crate::percpu::this_core;
use bcache::Cache;

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
        virtio_blk::read(block * (self.block_size / SECTOR) as u64, buf)
    }

    fn write_block(&self, block: u64, buf: &[u8]) -> Result<(), DiskError> {
        virtio_blk::write(block * (self.block_size / SECTOR) as u64, buf)
    }
}

/// The file system's view: blocks through the buffer cache `cache`, on the calling core's
/// buffers (Corey §5.3: a write lands in a buffer of the writing core).
pub struct CachedDisk {
    /// The buffer cache (it lives as long as the kernel).
    pub cache: &'static Cache<VirtioDisk>,
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

    /// Writes every dirty block back, then asks the disk to make them durable.
    fn flush(&mut self) -> Result<(), ext2::IoError> {
        self.cache.sync(this_core().index).map_err(|_| ext2::IoError)?;
        virtio_blk::flush().map_err(|_| ext2::IoError)
    }
}
