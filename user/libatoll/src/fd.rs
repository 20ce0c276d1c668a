//! File descriptors kept in shares (Corey §3.3 and the talk's FD example): a descriptor
//! table is a share, a descriptor is the id of a segment holding the file, placed in that
//! share. A private table is the core's root share (no lock, no other core touches it);
//! a shared table is a share given to other cores (through `cfork`'s shares), which they
//! all update. The application picks per table.
//!
//! The read offset of each descriptor is kept in this core's memory, not in the kernel.

use crate::obj::{
    file_open, root_share, segment_copy, segment_get_nbytes, segment_read, share_delobj,
};
use crate::ObjRef;
use abi::{copy_mode, Error};
use alloc::vec::Vec;

/// A descriptor table: a share and this core's read offsets for its descriptors.
#[derive(Debug)]
pub struct FdTable {
    share: u64,
    /// (descriptor, read offset), for descriptors this core opened or was told about.
    offsets: Vec<(u64, u64)>,
}

impl FdTable {
    /// The private table: the root share.
    pub fn private() -> FdTable {
        FdTable::with_share(root_share())
    }

    /// A new shared table: a share in the root share and the share set; give its id to
    /// children in `CforkOptions::shares`.
    pub fn new_shared() -> Result<FdTable, Error> {
        Ok(FdTable::with_share(crate::obj::share_new()?))
    }

    /// The table in `share` (a share of the caller's set, e.g. one a parent passed on).
    pub fn with_share(share: u64) -> FdTable {
        FdTable { share, offsets: Vec::new() }
    }

    /// The share holding the descriptors.
    pub fn share(&self) -> u64 {
        self.share
    }

    /// Opens initrd file `path`: a new descriptor in this table, reading from offset 0.
    pub fn open(&mut self, path: &str) -> Result<u64, Error> {
        let fd = file_open(self.share, path)?;
        self.offsets.push((fd, 0));
        Ok(fd)
    }

    /// Reads from `fd` at its offset into `buf` and moves the offset on; 0 at the end.
    pub fn read(&mut self, fd: u64, buf: &mut [u8]) -> Result<usize, Error> {
        let offset = self.offset(fd);
        let n = segment_read(self.obj(fd), offset, buf)?;
        self.set_offset(fd, offset + n);
        Ok(n as usize)
    }

    /// The file's size.
    pub fn size(&self, fd: u64) -> Result<u64, Error> {
        segment_get_nbytes(self.obj(fd))
    }

    /// `dup`: a new descriptor for the same file in the same table, a copy-on-write copy
    /// of the segment (it shares the pages), starting at `fd`'s offset.
    pub fn dup(&mut self, fd: u64) -> Result<u64, Error> {
        let new = segment_copy(self.share, self.obj(fd), copy_mode::COW)?;
        let offset = self.offset(fd);
        self.offsets.push((new, offset));
        Ok(new)
    }

    /// `close`: takes the descriptor out of the table (the file's pages go with the last).
    pub fn close(&mut self, fd: u64) -> Result<(), Error> {
        share_delobj(self.obj(fd))?;
        if let Some(i) = self.offsets.iter().position(|&(d, _)| d == fd) {
            self.offsets.swap_remove(i);
        }
        Ok(())
    }

    fn obj(&self, fd: u64) -> ObjRef {
        ObjRef::new(self.share, fd)
    }

    /// This core's offset for `fd` (0 for one it has not read yet).
    fn offset(&self, fd: u64) -> u64 {
        self.offsets.iter().find(|&&(d, _)| d == fd).map_or(0, |&(_, o)| o)
    }

    fn set_offset(&mut self, fd: u64, offset: u64) {
        match self.offsets.iter_mut().find(|(d, _)| *d == fd) {
            Some(entry) => entry.1 = offset,
            None => self.offsets.push((fd, offset)),
        }
    }
}
