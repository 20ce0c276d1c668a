//! The disk's files (issue M13; `fs_*` calls, docs/storage.md). Paths are absolute (`/`
//! first); initrd files (no `/`) are [`crate::fd`]'s.
//!
//! As Corey's library OS does (§5), a descriptor is an entry of a share naming the
//! kernel's open-file object: [`File::open`] puts it in the root share (private to this
//! core), [`File::open_in`] in a share of your choice (one given to `cfork` children is a
//! shared descriptor table). The offset is this library's, kept in the [`File`] value.
//!
//! Writes of at most [`abi::fs::ATOMIC_IO`] bytes are atomic: two programs writing the
//! same bytes of a file leave one write or the other, never a mix.

use crate::obj::{root_share, share_delobj};
use crate::shared::SharedMem;
use crate::sys::{buf_addr, syscall3, syscall5};
use crate::ObjRef;
use abi::fs::{open, DirRecord, Stat, StatFs, APPEND};
use abi::{nr, Error};
use alloc::string::String;
use alloc::vec::Vec;

/// An open file or directory of the disk, with this program's offset in it. Dropping it
/// closes it (deletes its descriptor).
#[derive(Debug)]
pub struct File {
    descriptor: ObjRef,
    offset: u64,
    append: bool,
}

/// Where [`File::seek`] counts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeekFrom {
    /// From the start.
    Start(u64),
    /// From the end (the file's size now).
    End(i64),
    /// From the offset now.
    Current(i64),
}

/// One name in a directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    /// Its inode number.
    pub ino: u32,
    /// [`abi::fs::kind`].
    pub kind: u64,
    /// The name (bytes that are not UTF-8 shown as U+FFFD).
    pub name: String,
}

impl DirEntry {
    /// Whether it names a directory.
    pub fn is_dir(&self) -> bool {
        self.kind == abi::fs::kind::DIR
    }
}

/// `path` as the calls take it: its address and length.
fn path_args(path: &str) -> (u64, u64) {
    (buf_addr(path.as_bytes()), path.len() as u64)
}

impl File {
    /// Opens `path` for reading.
    pub fn open(path: &str) -> Result<File, Error> {
        File::open_in(root_share(), path, 0)
    }

    /// Creates `path` (or empties it) for writing.
    pub fn create(path: &str) -> Result<File, Error> {
        File::open_in(root_share(), path, open::CREATE | open::TRUNCATE)
    }

    /// Opens `path` to write at its end (creating it).
    pub fn append(path: &str) -> Result<File, Error> {
        let mut f = File::open_in(root_share(), path, open::CREATE)?;
        f.append = true;
        Ok(f)
    }

    /// Opens `path` with [`abi::fs::open`] `flags`, its descriptor placed in `share`.
    pub fn open_in(share: u64, path: &str, flags: u64) -> Result<File, Error> {
        let (ptr, len) = path_args(path);
        let id = syscall5(nr::FS_OPEN, share, ptr, len, flags, 0)?;
        Ok(File { descriptor: ObjRef::new(share, id), offset: 0, append: false })
    }

    /// The descriptor: ⟨share, object⟩.
    pub fn descriptor(&self) -> ObjRef {
        self.descriptor
    }

    /// Reads at the offset and moves it on; 0 at the end.
    pub fn read(&mut self, buf: &mut [u8]) -> Result<usize, Error> {
        let n = self.read_at(buf, self.offset)?;
        self.offset += n as u64;
        Ok(n)
    }

    /// Reads at `offset`, leaving the file's offset alone.
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize, Error> {
        let ObjRef { share, object } = self.descriptor;
        let ptr = buf_addr(buf);
        syscall5(nr::FS_READ, share, object, ptr, buf.len() as u64, offset).map(|n| n as usize)
    }

    /// Writes at the offset (or at the end, for [`File::append`]) and moves it on.
    pub fn write(&mut self, data: &[u8]) -> Result<usize, Error> {
        if self.append {
            let n = self.write_at(data, APPEND)?;
            self.offset = self.stat()?.size;
            return Ok(n);
        }
        let n = self.write_at(data, self.offset)?;
        self.offset += n as u64;
        Ok(n)
    }

    /// Writes all of `data` (the disk filling part way is `NoSpace`).
    pub fn write_all(&mut self, data: &[u8]) -> Result<(), Error> {
        let mut done = 0;
        while done < data.len() {
            match self.write(&data[done..])? {
                0 => return Err(Error::NoSpace),
                n => done += n,
            }
        }
        Ok(())
    }

    /// Writes at `offset` ([`abi::fs::APPEND`]: at the end), leaving the offset alone.
    pub fn write_at(&self, data: &[u8], offset: u64) -> Result<usize, Error> {
        let ObjRef { share, object } = self.descriptor;
        let ptr = buf_addr(data);
        syscall5(nr::FS_WRITE, share, object, ptr, data.len() as u64, offset).map(|n| n as usize)
    }

    /// Moves the offset; returns the new one.
    pub fn seek(&mut self, to: SeekFrom) -> Result<u64, Error> {
        let (base, delta) = match to {
            SeekFrom::Start(at) => (0, at as i128),
            SeekFrom::End(d) => (self.stat()?.size, d as i128),
            SeekFrom::Current(d) => (self.offset, d as i128),
        };
        let at = base as i128 + delta;
        if !(0..=u64::MAX as i128).contains(&at) {
            return Err(Error::InvalidArgument);
        }
        self.offset = at as u64;
        Ok(self.offset)
    }

    /// Its size, kind, links and times.
    pub fn stat(&self) -> Result<Stat, Error> {
        let mut words = [0u64; 7];
        let ObjRef { share, object } = self.descriptor;
        syscall3(nr::FS_STAT, share, object, words.as_mut_ptr() as u64)?;
        Ok(Stat::from_words(words))
    }

    /// Cuts or extends (with zeros) the file to `len` bytes.
    pub fn set_len(&self, len: u64) -> Result<(), Error> {
        let ObjRef { share, object } = self.descriptor;
        syscall3(nr::FS_TRUNCATE, share, object, len).map(|_| ())
    }

    /// Makes what was written durable: `fsync`. The kernel writes back every changed
    /// block of the disk (its buffer cache does not track blocks by file), all but the
    /// free counters that [`sync`] rewrites too.
    pub fn sync_all(&self) -> Result<(), Error> {
        syscall3(nr::FS_SYNC, abi::fs::sync::DATA, 0, 0).map(|_| ())
    }

    /// Reads from the offset to the end.
    pub fn read_to_end(&mut self) -> Result<Vec<u8>, Error> {
        let mut out = Vec::new();
        let mut buf = alloc::vec![0u8; 16 * 1024];
        loop {
            match self.read(&mut buf)? {
                0 => return Ok(out),
                n => out.extend_from_slice(&buf[..n]),
            }
        }
    }

    /// The file's bytes in a new segment mapped into this address space (a private copy:
    /// what the program changes there stays in memory). The segment is shared with
    /// later `cfork` children, as [`SharedMem`] is; [`SharedMem::free`] gives it back.
    pub fn map(&self) -> Result<SharedMem, Error> {
        let size = self.stat()?.size;
        let mem = SharedMem::new(size)?;
        // SAFETY: `mem` is `mem.bytes` of fresh memory mapped at `mem.va`, ours alone.
        let bytes = unsafe { core::slice::from_raw_parts_mut(mem.va as *mut u8, size as usize) };
        let mut done = 0;
        while done < bytes.len() {
            match self.read_at(&mut bytes[done..], done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) => {
                    mem.free();
                    return Err(e);
                }
            }
        }
        Ok(mem)
    }

    /// A directory's entries, `.` and `..` left out.
    pub fn entries(&self) -> Result<Vec<DirEntry>, Error> {
        let ObjRef { share, object } = self.descriptor;
        let mut buf = alloc::vec![0u8; 8192];
        let mut out = Vec::new();
        let mut first = 0;
        loop {
            let ptr = buf.as_mut_ptr() as u64;
            let count = syscall5(nr::FS_READDIR, share, object, first, ptr, buf.len() as u64)?;
            if count == 0 {
                return Ok(out);
            }
            let mut rest = &buf[..];
            for _ in 0..count {
                let Some((record, after)) = DirRecord::read(rest) else { break };
                rest = after;
                if record.name != b"." && record.name != b".." {
                    out.push(DirEntry {
                        ino: record.ino,
                        kind: record.kind as u64,
                        name: String::from_utf8_lossy(record.name).into_owned(),
                    });
                }
            }
            first += count;
        }
    }
}

impl Drop for File {
    fn drop(&mut self) {
        let _ = share_delobj(self.descriptor);
    }
}

/// The entries of directory `path`, `.` and `..` left out.
pub fn read_dir(path: &str) -> Result<Vec<DirEntry>, Error> {
    File::open(path)?.entries()
}

/// What `path` is: its size, kind, links, times.
pub fn stat(path: &str) -> Result<Stat, Error> {
    File::open(path)?.stat()
}

/// Reads the whole file `path`.
pub fn read(path: &str) -> Result<Vec<u8>, Error> {
    File::open(path)?.read_to_end()
}

/// Makes `path` hold exactly `data` (creating it).
pub fn write(path: &str, data: &[u8]) -> Result<(), Error> {
    File::create(path)?.write_all(data)
}

/// Makes directory `path`.
pub fn mkdir(path: &str) -> Result<(), Error> {
    let (ptr, len) = path_args(path);
    syscall3(nr::FS_MKDIR, ptr, len, 0).map(|_| ())
}

/// Removes file `path` or empty directory `path`.
pub fn remove(path: &str) -> Result<(), Error> {
    let (ptr, len) = path_args(path);
    syscall3(nr::FS_REMOVE, ptr, len, 0).map(|_| ())
}

/// Renames `from` to `to` (replacing a file, or an empty directory, there).
pub fn rename(from: &str, to: &str) -> Result<(), Error> {
    let ((a, b), (c, d)) = (path_args(from), path_args(to));
    syscall5(nr::FS_RENAME, a, b, c, d, 0).map(|_| ())
}

/// Writes every changed block to the disk and flushes it.
pub fn sync() -> Result<(), Error> {
    syscall3(nr::FS_SYNC, abi::fs::sync::EVERYTHING, 0, 0).map(|_| ())
}

/// The file system's size and free space, for `df`.
pub fn statfs() -> Result<StatFs, Error> {
    let mut words = [0u64; 9];
    syscall3(nr::FS_STATFS, words.as_mut_ptr() as u64, 0, 0)?;
    Ok(StatFs::from_words(words))
}
