//! An ext2 file system (revision 0 and 1) that reads and writes images made by the host's
//! `mke2fs -t ext2` and left clean for `e2fsck -fn`. It sits on a [`BlockDevice`] (the
//! kernel implements one over its buffer cache) and keeps no cache of its own beyond the
//! superblock and the group descriptors.
//!
//! Why our own: in November 2026 crates.io had no maintained `no_std` crate that writes
//! ext2. `ext4-view` is read-only by design, `ext2` 0.1 needs `std` and a Unix host,
//! `mkfs-ext2` 0.1 only parses the superblock (and needs nightly), and `efs` is GPL-3.0
//! and declares itself early work; Atoll is MIT/Apache.
//!
//! What is supported: block sizes 1024, 2048 and 4096; 128-byte and larger inodes; direct,
//! single, double and triple indirect blocks; linear directories (an htree directory is
//! read linearly and loses its index flag on its first change, as Linux ext2 does); the
//! FILETYPE incompatible feature; SPARSE_SUPER and LARGE_FILE. Mount refuses any other
//! incompatible feature with [`Error::Unsupported`], and mounts read-only when it finds an
//! unknown read-only-compatible one. Symlinks, devices and extended attributes are kept
//! and freed, never created; symlinks are not followed.
//!
//! Layout: `disk` has the on-disk records, `fs` mounting, counters and the block and
//! inode bitmaps, `file` the block map and file contents, `dir` directories and names.
//!
//! Crash ordering (ext2 has no journal; `e2fsck` repairs what a crash leaves): a block is
//! written before anything that points at it (file data before the indirect block or inode
//! that maps it, a new inode before the directory entry that names it), and a pointer is
//! cleared before the block or inode it pointed at is freed. A crash then leaves at worst
//! leaked blocks or inodes and stale counters, never a pointer to garbage. The bitmaps
//! are written at each allocation; the free counters in the superblock and group
//! descriptors only by [`Ext2::sync`].
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

mod dir;
mod disk;
mod file;
mod fs;

pub use dir::DirEntry;
pub use disk::{FileKind, ROOT_INO};
pub use fs::{Ext2, Stat, StatFs};

use alloc::vec::Vec;

/// An inode number (the root directory is 2).
pub type Ino = u32;

/// Why an operation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// A path component or inode does not exist.
    NotFound,
    /// The name to create already exists.
    Exists,
    /// A path component, or the operation's target, is not a directory.
    NotADirectory,
    /// The operation needs a non-directory (write, unlink) and got a directory.
    IsADirectory,
    /// `rmdir` (or a rename onto a directory) found entries besides `.` and `..`.
    NotEmpty,
    /// A name is longer than 255 bytes.
    NameTooLong,
    /// No free block or inode is left (or a directory reached the link limit).
    NoSpace,
    /// The file would pass the largest size this block size can map.
    FileTooLarge,
    /// The image contradicts itself; the reason says where.
    Corrupt(&'static str),
    /// The image uses a feature this crate does not implement; the reason names it.
    Unsupported(&'static str),
    /// The block device failed.
    Io,
    /// The file system is mounted read-only.
    ReadOnly,
    /// A bad argument: an empty name, `.` or `..` as a name, a directory moved into itself.
    InvalidArgument,
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::NotFound => f.write_str("not found"),
            Error::Exists => f.write_str("already exists"),
            Error::NotADirectory => f.write_str("not a directory"),
            Error::IsADirectory => f.write_str("is a directory"),
            Error::NotEmpty => f.write_str("directory not empty"),
            Error::NameTooLong => f.write_str("name longer than 255 bytes"),
            Error::NoSpace => f.write_str("no space left"),
            Error::FileTooLarge => f.write_str("file too large"),
            Error::Corrupt(why) => write!(f, "corrupt file system: {why}"),
            Error::Unsupported(why) => write!(f, "unsupported file system: {why}"),
            Error::Io => f.write_str("device I/O error"),
            Error::ReadOnly => f.write_str("read-only file system"),
            Error::InvalidArgument => f.write_str("invalid argument"),
        }
    }
}

/// The error a [`BlockDevice`] returns; the file system reports it as [`Error::Io`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IoError;

impl From<IoError> for Error {
    fn from(_: IoError) -> Error {
        Error::Io
    }
}

/// A disk seen as numbered blocks. The length of `buf` is the block size: block `n` starts
/// at byte `n * buf.len()`. Every call uses the file system's block size except the one
/// that reads the superblock at mount, which reads block 1 of 1024 bytes.
pub trait BlockDevice {
    /// Fills `buf` with block `n`.
    fn read_block(&mut self, n: u32, buf: &mut [u8]) -> Result<(), IoError>;
    /// Writes `buf` to block `n`.
    fn write_block(&mut self, n: u32, buf: &[u8]) -> Result<(), IoError>;
    /// Fills `buf` with the bytes at `offset` of block `n` of `block_size` bytes (a part of
    /// one block: an inode, a block pointer, the part of a data block a read wants). The
    /// default reads the whole block; a device with a cache copies only the part.
    fn read_part(
        &mut self,
        n: u32,
        block_size: usize,
        offset: usize,
        buf: &mut [u8],
    ) -> Result<(), IoError> {
        let mut whole = alloc::vec![0u8; block_size];
        self.read_block(n, &mut whole)?;
        buf.copy_from_slice(whole.get(offset..offset + buf.len()).ok_or(IoError)?);
        Ok(())
    }
    /// Writes `data` at `offset` of block `n` of `block_size` bytes, keeping the rest of
    /// the block. The default reads, changes and writes the whole block.
    fn write_part(
        &mut self,
        n: u32,
        block_size: usize,
        offset: usize,
        data: &[u8],
    ) -> Result<(), IoError> {
        let mut whole = alloc::vec![0u8; block_size];
        self.read_block(n, &mut whole)?;
        whole.get_mut(offset..offset + data.len()).ok_or(IoError)?.copy_from_slice(data);
        self.write_block(n, &whole)
    }
    /// Writes `buf` to block `n`, which holds a file's data (not the file system's own
    /// records): a device may keep such blocks apart (the kernel keeps the blocks of a
    /// file private to a core in that core's own cache). The default is `write_block`.
    fn write_data_block(&mut self, n: u32, buf: &[u8]) -> Result<(), IoError> {
        self.write_block(n, buf)
    }
    /// Makes every write so far durable (called by [`Ext2::sync`]).
    fn flush(&mut self) -> Result<(), IoError> {
        Ok(())
    }
}

/// A disk held in memory: a RAM disk for the kernel, an image for tests.
pub struct MemDisk {
    /// The disk's bytes.
    pub bytes: Vec<u8>,
}

impl BlockDevice for MemDisk {
    fn read_block(&mut self, n: u32, buf: &mut [u8]) -> Result<(), IoError> {
        let start = n as usize * buf.len();
        let src = self.bytes.get(start..start + buf.len()).ok_or(IoError)?;
        buf.copy_from_slice(src);
        Ok(())
    }

    fn write_block(&mut self, n: u32, buf: &[u8]) -> Result<(), IoError> {
        let start = n as usize * buf.len();
        let dst = self.bytes.get_mut(start..start + buf.len()).ok_or(IoError)?;
        dst.copy_from_slice(buf);
        Ok(())
    }
}
