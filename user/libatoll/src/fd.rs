//! File descriptors kept in shares (Corey §3.3 and the talk's FD example): a descriptor
//! table is a share; an open file is a kernel object (the segment `file_open` fills with
//! the file's bytes) held by that share; a descriptor is an entry of the share naming the
//! open file. `open` makes the open file, whose own id is the first descriptor; `dup` is
//! `share_dupobj`, one more entry (a fresh id, one more reference to the same object: one
//! insert, no copy); `close` is `share_delobj` of the descriptor, and the open file goes
//! with its last descriptor. A private table is the core's root share (no lock, no other
//! core touches it); a shared table is a share given to other cores (through `cfork`'s
//! shares), which they all update under its lock. The application picks per table.
//!
//! Read offsets are kept per open file, as POSIX keeps them: a `dup`ped descriptor reads
//! on from where the original is and moves the same offset. They live in this core's
//! memory, in the [`FdTable`] value, not in the kernel: a core knows which open file a
//! descriptor names for the descriptors it opened or `dup`ped itself; another core's
//! descriptor in a shared table has an offset of its own on this core, from 0.

use crate::obj::{
    file_open, root_share, segment_get_nbytes, segment_read, share_delobj, share_dupobj,
};
use crate::ObjRef;
use abi::Error;
use alloc::vec::Vec;

/// A descriptor table: a share, which open file each descriptor this core knows names,
/// and this core's offset of each open file.
#[derive(Debug)]
pub struct FdTable {
    share: u64,
    /// (descriptor, open file): the open file is the id `open` returned.
    files: Vec<(u64, u64)>,
    /// (open file, read offset).
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
        FdTable { share, files: Vec::new(), offsets: Vec::new() }
    }

    /// The share holding the descriptors.
    pub fn share(&self) -> u64 {
        self.share
    }

    /// Opens initrd file `path`: a new open file in this table, reading from offset 0;
    /// returns its first descriptor.
    pub fn open(&mut self, path: &str) -> Result<u64, Error> {
        let fd = file_open(self.share, path)?;
        self.files.push((fd, fd));
        self.offsets.push((fd, 0));
        Ok(fd)
    }

    /// Reads from `fd` at its open file's offset into `buf` and moves the offset on; 0 at
    /// the end.
    pub fn read(&mut self, fd: u64, buf: &mut [u8]) -> Result<usize, Error> {
        let file = self.file(fd);
        let offset = self.offsets.iter().find(|&&(f, _)| f == file).map_or(0, |&(_, o)| o);
        let n = segment_read(self.obj(fd), offset, buf)?;
        match self.offsets.iter_mut().find(|(f, _)| *f == file) {
            Some(entry) => entry.1 = offset + n,
            None => self.offsets.push((file, offset + n)),
        }
        Ok(n as usize)
    }

    /// The file's size.
    pub fn size(&self, fd: u64) -> Result<u64, Error> {
        segment_get_nbytes(self.obj(fd))
    }

    /// `dup`: a new descriptor in the same table for the open file `fd` names (it shares
    /// the offset).
    pub fn dup(&mut self, fd: u64) -> Result<u64, Error> {
        let new = share_dupobj(self.share, self.obj(fd))?;
        let file = self.file(fd);
        self.files.push((new, file));
        Ok(new)
    }

    /// `close`: takes the descriptor out of the table; the open file, and its offset, go
    /// with its last descriptor.
    pub fn close(&mut self, fd: u64) -> Result<(), Error> {
        share_delobj(self.obj(fd))?;
        let file = self.file(fd);
        if let Some(i) = self.files.iter().position(|&(d, _)| d == fd) {
            self.files.swap_remove(i);
        }
        if !self.files.iter().any(|&(_, f)| f == file) {
            self.offsets.retain(|&(f, _)| f != file);
        }
        Ok(())
    }

    fn obj(&self, fd: u64) -> ObjRef {
        ObjRef::new(self.share, fd)
    }

    /// The open file `fd` names, as far as this core knows (itself if it does not).
    fn file(&self, fd: u64) -> u64 {
        self.files.iter().find(|&&(d, _)| d == fd).map_or(fd, |&(_, f)| f)
    }
}
