//! The disk's files as system calls (`fs_*`, issue M13): the open file is a Corey object
//! in a share (Corey §5: the library OS keeps its descriptors in shares, and its offsets
//! in its own memory), and every call goes to `storage` on the caller's own core. Data
//! moves in pieces of `abi::fs::ATOMIC_IO` bytes, each under the file system's lock, with
//! the machine answered between pieces (`monitor::step`).

use crate::corey::user_memory::{copy_out, write_words};
use crate::corey::{self, FileHandle, OpenFile};
use crate::sched::with_running_mut;
use crate::storage;
use abi::fs::{kind, open, APPEND, ATOMIC_IO, PATH_MAX};
use abi::{nr, Error, SysResult};
use alloc::string::String;
use alloc::vec;

/// Runs file call `frame.rax`.
pub(super) fn call(frame: &crate::arch::user_entry::SyscallFrame) -> SysResult {
    let (a, b, c, d, e) = (frame.rdi, frame.rsi, frame.rdx, frame.r10, frame.r8);
    match frame.rax {
        nr::FS_OPEN => fs_open(a, b, c, d),
        nr::FS_READ => fs_read(file(a, b)?, c, d, e),
        nr::FS_WRITE => fs_write(file(a, b)?, c, d, e),
        nr::FS_STAT => {
            let st = storage::stat(file(a, b)?.ino)?;
            running(|p, space| write_words(p, space, c, &st.to_words()))?;
            Ok(0)
        }
        nr::FS_TRUNCATE => {
            let f = writable(file(a, b)?)?;
            storage::truncate(f.ino, c).map(|_| 0)
        }
        nr::FS_READDIR => fs_readdir(file(a, b)?, c, d, e),
        nr::FS_MKDIR => storage::mkdir(&path(a, b)?).map(|_| 0),
        nr::FS_REMOVE => storage::remove(&path(a, b)?).map(|_| 0),
        nr::FS_RENAME => storage::rename(&path(a, b)?, &path(c, d)?).map(|_| 0),
        nr::FS_SYNC => match a {
            abi::fs::sync::EVERYTHING => storage::sync().map(|_| 0),
            abi::fs::sync::DATA => storage::sync_data().map(|_| 0),
            _ => Err(Error::InvalidArgument),
        },
        nr::FS_STATFS => {
            let st = storage::statfs()?;
            running(|p, space| write_words(p, space, a, &st.to_words()))?;
            Ok(0)
        }
        _ => Err(Error::NoSuchCall),
    }
}

/// Runs `f` on the calling program's objects and address space.
fn running<R>(
    f: impl FnOnce(&mut corey::ProgramObjects, &mut corey::space::AddressSpace) -> Result<R, Error>,
) -> Result<R, Error> {
    with_running_mut(|r, space| f(&mut r.objects, space)).ok_or(Error::NotPermitted)?
}

/// The open file ⟨rs, ro⟩.
fn file(rs: u64, ro: u64) -> Result<OpenFile, Error> {
    running(|p, _| corey::open_file(p, rs, ro))
}

/// `f` if it was opened for writing.
fn writable(f: OpenFile) -> Result<OpenFile, Error> {
    if f.writable {
        Ok(f)
    } else {
        Err(Error::ReadOnly)
    }
}

/// The path of `len` bytes at `ptr` (UTF-8, at most `PATH_MAX` bytes).
fn path(ptr: u64, len: u64) -> Result<String, Error> {
    if len == 0 {
        return Err(Error::InvalidArgument);
    }
    if len > PATH_MAX {
        return Err(Error::NameTooLong);
    }
    let mut bytes = vec![0u8; len as usize];
    running(|p, space| {
        corey::fault_in(p, space, ptr, len, false);
        space.copy_in(ptr, &mut bytes)
    })?;
    String::from_utf8(bytes).map_err(|_| Error::InvalidArgument)
}

/// `fs_open(share, path, path_len, flags)`.
fn fs_open(share: u64, ptr: u64, len: u64, flags: u64) -> SysResult {
    if flags & !open::ALL != 0 || (flags & open::EXCLUSIVE != 0 && flags & open::CREATE == 0) {
        return Err(Error::InvalidArgument);
    }
    let write = flags & (open::WRITE | open::CREATE) != 0;
    if flags & open::TRUNCATE != 0 && !write {
        return Err(Error::InvalidArgument);
    }
    let path = path(ptr, len)?;
    let (ino, kind_code) = storage::open(&path, flags)?;
    if write && kind_code == kind::DIR {
        return Err(Error::IsADirectory);
    }
    let private = flags & open::PRIVATE != 0;
    if private {
        if kind_code != kind::FILE {
            return Err(Error::InvalidArgument);
        }
        storage::open_private(ino)?;
    }
    // From here the handle owns the private open: a failed allocation closes it.
    let handle = FileHandle(OpenFile { ino, writable: write, private });
    running(|p, _| corey::file_alloc(p, share, handle))
}

/// `fs_read(file, buf, len, offset)`: piece by piece into the caller's buffer.
fn fs_read(f: OpenFile, buf: u64, len: u64, offset: u64) -> SysResult {
    let mut done = 0u64;
    while done < len {
        if done > 0 {
            crate::monitor::step();
        }
        let want = (len - done).min(ATOMIC_IO);
        let at = offset.checked_add(done).ok_or(Error::InvalidArgument)?;
        // Straight from the buffer cache into the program's pages: no copy in between.
        let got = running(|p, space| {
            corey::fault_in(p, space, buf + done, want, true);
            space.fill_user(buf + done, want, |pages| storage::read_vectored(f.ino, at, pages))?
        });
        let got = match got {
            Ok(n) => n as u64,
            Err(e) if done == 0 => return Err(e),
            Err(_) => break,
        };
        done += got;
        if got < want {
            break;
        }
    }
    Ok(done)
}

/// `fs_write(file, buf, len, offset)`: piece by piece from the caller's buffer; each
/// piece is one atomic write.
fn fs_write(f: OpenFile, buf: u64, len: u64, offset: u64) -> SysResult {
    let f = writable(f)?;
    let mut done = 0u64;
    while done < len {
        if done > 0 {
            crate::monitor::step();
        }
        let n = (len - done).min(ATOMIC_IO) as usize;
        let mut piece = vec![0u8; n];
        let copied = running(|p, space| {
            corey::fault_in(p, space, buf + done, n as u64, false);
            space.copy_in(buf + done, &mut piece)
        });
        if let Err(e) = copied {
            return if done == 0 { Err(e) } else { Ok(done) };
        }
        let at = if offset == APPEND {
            APPEND
        } else {
            offset.checked_add(done).ok_or(Error::FileTooLarge)?
        };
        match storage::write(f.ino, at, &piece) {
            Ok(wrote) => {
                done += wrote as u64;
                if wrote < n {
                    break;
                }
            }
            Err(e) if done == 0 => return Err(e),
            Err(_) => break,
        }
    }
    Ok(done)
}

/// `fs_readdir(file, first, buf, len)`.
fn fs_readdir(f: OpenFile, first: u64, buf: u64, len: u64) -> SysResult {
    let (records, count) = storage::readdir(f.ino, first, len.min(ATOMIC_IO) as usize)?;
    running(|p, space| copy_out(p, space, buf, &records))?;
    Ok(count)
}
