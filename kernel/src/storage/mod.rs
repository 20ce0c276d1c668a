//! The disk's files (issue M13): the ext2 file system (`crates/ext2`) of the first virtio
//! block device, over Corey's buffer cache (`crates/bcache`, §5.3), mounted at boot
//! ([`mount`]) and used by the `fs_*` system calls (`user::files`).
//!
//! Every block the file system reads or writes goes through the buffer cache on the
//! calling core ([`disk::CachedDisk`]): lookups in its lock-free tree, writes copied into
//! a buffer of the writing core's own pool, reads inside its scalable read-write lock.
//! The file system's own state (superblock, group counters, bitmaps) is behind one lock,
//! [`FS`]: one operation at a time, each a bounded piece (`fs::ATOMIC_IO` bytes of a
//! read or write), so a write of at most that many bytes is never mixed with another.

pub mod disk;

use crate::drivers::virtio_blk::{self, SECTOR};
use crate::percpu;
use abi::fs::kind;
use abi::Error;
use alloc::collections::{BTreeMap, BTreeSet};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use bcache::{Cache, Config};
use disk::{CachedDisk, VirtioDisk};
use ext2::{Ext2, FileKind, Ino};
use locks::McsLock;

/// The mounted file system (`None` without a disk, or when its mount was refused).
static FS: McsLock<Option<Ext2<CachedDisk>>> = McsLock::new(None);
/// The buffer cache under it.
static CACHE: spin::Once<Cache<VirtioDisk>> = spin::Once::new();
/// Files private to one core (after Corey §9), by inode. Taken inside [`FS`]'s lock.
static PRIVATE: McsLock<BTreeMap<Ino, PrivateFile>> = McsLock::new(BTreeMap::new());

/// A file private to a core: its data blocks live in that core's own part of the cache,
/// found without the shared tree, until its last private open file is closed.
struct PrivateFile {
    /// The core.
    core: usize,
    /// Its open files opened private.
    opens: usize,
    /// The blocks made private to the core.
    blocks: BTreeSet<u64>,
}

/// Buffers in the cache, all cores together.
static BUFFERS: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

/// Block buffers each core's pool holds at most (Corey §5.3's per-core allocators).
const CACHE_BUFFERS_PER_CORE: usize = 8192;
/// At most this share (1/N) of the boot core's free memory goes to buffers.
const CACHE_MEMORY_SHARE: u64 = 8;

/// What [`mount`] found.
pub struct Mounted {
    /// Bytes per block.
    pub block_size: usize,
    /// Blocks and free blocks.
    pub blocks: u64,
    /// Free blocks.
    pub free_blocks: u64,
    /// Buffers per core in the cache.
    pub buffers_per_core: usize,
    /// Whether it is mounted read-only.
    pub read_only: bool,
}

/// Mounts the disk's ext2 file system (boot core, after the drivers started). `Ok(None)`
/// without a disk; `Err` with the reason when the image is refused (the kernel goes on
/// without files).
pub fn mount() -> Result<Option<Mounted>, String> {
    let Some(info) = virtio_blk::info() else { return Ok(None) };
    mount_disk(info.sectors).map(Some)
}

/// [`mount`] of a disk of `sectors`.
fn mount_disk(sectors: u64) -> Result<Mounted, String> {
    // The superblock (bytes 1024..2048) says the block size the cache must use.
    let mut sb = [0u8; 1024];
    virtio_blk::read(2, &mut sb).map_err(|e| format!("reading the superblock: {e:?}"))?;
    let magic = u16::from_le_bytes([sb[56], sb[57]]);
    let log = u32::from_le_bytes([sb[24], sb[25], sb[26], sb[27]]);
    if magic != 0xef53 {
        return Err(format!("no ext2 file system (magic {magic:#06x}, not 0xef53)"));
    }
    if log > 2 {
        return Err(format!("block size 1024 << {log} is not 1, 2 or 4 KiB"));
    }
    let block_size = 1024usize << log;
    let blocks = sectors / (block_size / SECTOR) as u64;
    let cores = percpu::core_count();
    let free = percpu::this_core().free_frames() * 4096 / CACHE_MEMORY_SHARE;
    let fit = (free / (cores * block_size) as u64) as usize;
    let buffers_per_core = fit.clamp(4, CACHE_BUFFERS_PER_CORE);
    let config = Config { cores, block_size, buffers_per_core };
    let cache = Cache::new(VirtioDisk { block_size, blocks }, config)
        .map_err(|e| format!("buffer cache: {e:?}"))?;
    let cache = CACHE.call_once(|| cache);
    BUFFERS.store((cores * buffers_per_core) as u64, core::sync::atomic::Ordering::Relaxed);
    let disk = CachedDisk { cache, private_to: None, made_private: Vec::new() };
    let fs = Ext2::mount(disk).map_err(|e| format!("{e}"))?;
    let st = fs.statfs();
    let mounted = Mounted {
        block_size,
        blocks: st.total_blocks as u64,
        free_blocks: st.free_blocks as u64,
        buffers_per_core,
        read_only: fs.is_read_only(),
    };
    FS.with(|slot| *slot = Some(fs));
    Ok(mounted)
}

/// Makes kernel core `core` drive the disk (`kcore`, when a kernel core with the disk on
/// its list starts); false if another kernel core drives it already.
pub fn claim_disk(core: usize) -> bool {
    disk::claim_driver(core)
}

/// Kernel core `core` lets go of the disk (`kcore`, when it ends).
pub fn release_disk(core: usize) {
    disk::release_driver(core);
}

/// The system-call error for a file-system error.
fn to_abi(e: ext2::Error) -> Error {
    match e {
        ext2::Error::NotFound => Error::NotFound,
        ext2::Error::Exists => Error::Exists,
        ext2::Error::NotADirectory => Error::NotADirectory,
        ext2::Error::IsADirectory => Error::IsADirectory,
        ext2::Error::NotEmpty => Error::NotEmpty,
        ext2::Error::NameTooLong => Error::NameTooLong,
        ext2::Error::NoSpace => Error::NoSpace,
        ext2::Error::FileTooLarge => Error::FileTooLarge,
        ext2::Error::Corrupt(_) | ext2::Error::Unsupported(_) => Error::NoFileSystem,
        ext2::Error::Io => Error::Io,
        ext2::Error::ReadOnly => Error::ReadOnly,
        ext2::Error::InvalidArgument => Error::InvalidArgument,
    }
}

/// Runs `f` on the mounted file system, under its lock.
fn with_fs<R>(f: impl FnOnce(&mut Ext2<CachedDisk>) -> Result<R, ext2::Error>) -> Result<R, Error> {
    FS.with(|fs| {
        let fs = fs.as_mut().ok_or(Error::NoFileSystem)?;
        finish_closes();
        f(fs).map_err(to_abi)
    })
}

/// `Busy` if `ino` is private to another core than this one.
fn check_owner(ino: Ino) -> Result<(), Error> {
    let me = percpu::this_core().index;
    match PRIVATE.with(|p| p.get(&ino).map(|f| f.core)) {
        Some(core) if core != me => Err(Error::Busy),
        _ => Ok(()),
    }
}

/// Runs `f` on the mounted file system with `ino`'s new data blocks made private to this
/// core if the file is private to it (its owner runs every operation on it).
fn with_fs_on<R>(
    ino: Ino,
    f: impl FnOnce(&mut Ext2<CachedDisk>) -> Result<R, ext2::Error>,
) -> Result<R, Error> {
    FS.with(|fs| {
        let fs = fs.as_mut().ok_or(Error::NoFileSystem)?;
        finish_closes();
        check_owner(ino)?;
        let me = percpu::this_core().index;
        let private = PRIVATE.with(|p| p.contains_key(&ino));
        fs.device_mut().private_to = private.then_some(me);
        let result = f(fs).map_err(to_abi);
        let made = core::mem::take(&mut fs.device_mut().made_private);
        fs.device_mut().private_to = None;
        if !made.is_empty() {
            PRIVATE.with(|p| {
                if let Some(file) = p.get_mut(&ino) {
                    file.blocks.extend(made);
                }
            });
        }
        result
    })
}

/// Makes `ino` private to this core (after Corey §9): its data blocks move to this core's
/// own part of the cache, where this core finds them without the shared tree, and blocks
/// it writes later go there too. Another core's operations on the file are `Busy` until
/// the last private open file of it is closed ([`close_private`]).
pub fn open_private(ino: Ino) -> Result<(), Error> {
    let me = percpu::this_core().index;
    FS.with(|fs| {
        let fs = fs.as_mut().ok_or(Error::NoFileSystem)?;
        finish_closes();
        let cache = CACHE.get().ok_or(Error::NoFileSystem)?;
        let opened_before = PRIVATE.with(|p| match p.get_mut(&ino) {
            Some(f) if f.core != me => Err(Error::Busy),
            Some(f) => {
                f.opens += 1;
                Ok(true)
            }
            None => Ok(false),
        })?;
        if opened_before {
            return Ok(());
        }
        let mut blocks = BTreeSet::new();
        for b in fs.data_blocks(ino).map_err(to_abi)? {
            if cache.make_private(me, b as u64).is_err() {
                // Nothing is left private on a failed open.
                for &done in &blocks {
                    let _ = cache.make_shared(me, done);
                }
                return Err(Error::Io);
            }
            blocks.insert(b as u64);
        }
        PRIVATE.with(|p| p.insert(ino, PrivateFile { core: me, opens: 1, blocks }));
        Ok(())
    })
}

/// Closes one private open file of `ino` (any core: the open file's last holder, maybe
/// inside a message handler while this core holds the file system's lock). The close is
/// queued and done by the next file-system operation, before it looks at the file: with
/// the last close, the file's private blocks go back to the shared cache (written back
/// first if changed).
pub fn close_private(ino: Ino) {
    CLOSING.lock().push(ino);
}

/// Private closes not done yet ([`close_private`]).
static CLOSING: spin::Mutex<Vec<Ino>> = spin::Mutex::new(Vec::new());

/// Does the queued private closes; the file system's lock is held.
fn finish_closes() {
    let Some(cache) = CACHE.get() else { return };
    let closing = core::mem::take(&mut *CLOSING.lock());
    for ino in closing {
        let last = PRIVATE.with(|p| {
            let file = p.get_mut(&ino)?;
            file.opens = file.opens.saturating_sub(1);
            if file.opens > 0 {
                return None;
            }
            p.remove(&ino)
        });
        if let Some(file) = last {
            for b in file.blocks {
                let _ = cache.make_shared(file.core, b);
            }
        }
    }
}

/// Blocks private to some core now, all cores together.
fn private_blocks() -> u64 {
    PRIVATE.with(|p| p.values().map(|f| f.blocks.len() as u64).sum())
}

/// The ABI kind of a file-system kind.
fn kind_code(k: FileKind) -> u64 {
    match k {
        FileKind::File => kind::FILE,
        FileKind::Dir => kind::DIR,
        FileKind::Symlink => kind::SYMLINK,
        _ => kind::OTHER,
    }
}

/// Checks a path the calls take: absolute, not empty.
fn check_path(path: &str) -> Result<(), Error> {
    if !path.starts_with('/') {
        return Err(Error::InvalidArgument);
    }
    Ok(())
}

/// Opens `path` with `abi::fs::open` flags: its inode and ABI kind. `CREATE` makes a
/// missing file; `TRUNCATE` empties a file.
pub fn open(path: &str, flags: u64) -> Result<(Ino, u64), Error> {
    use abi::fs::open::{CREATE, EXCLUSIVE, TRUNCATE};
    // Files private to another core are refused in `truncate`; opening one is harmless.
    check_path(path)?;
    with_fs(|fs| {
        let ino = match fs.lookup(path) {
            Ok(_) if flags & CREATE != 0 && flags & EXCLUSIVE != 0 => {
                return Err(ext2::Error::Exists)
            }
            Ok(ino) => ino,
            Err(ext2::Error::NotFound) if flags & CREATE != 0 => fs.create(path, 0o644)?,
            Err(e) => return Err(e),
        };
        let st = fs.stat(ino)?;
        if flags & TRUNCATE != 0 && st.kind == FileKind::Dir {
            return Err(ext2::Error::IsADirectory);
        }
        Ok((ino, kind_code(st.kind)))
    })
    .and_then(|(ino, kind)| {
        // As `truncate` does it: a private file's blocks go back to the shared cache first.
        if flags & TRUNCATE != 0 {
            truncate(ino, 0)?;
        }
        Ok((ino, kind))
    })
}

/// Reads `ino` from `offset` into `bufs` in turn (the pages of a program's buffer).
pub fn read_vectored(ino: Ino, offset: u64, bufs: &mut [&mut [u8]]) -> Result<usize, Error> {
    with_fs_on(ino, |fs| fs.read_vectored(ino, offset, bufs))
}

/// Writes `data` into `ino` at `offset` (`abi::fs::APPEND`: at its end).
pub fn write(ino: Ino, offset: u64, data: &[u8]) -> Result<usize, Error> {
    with_fs_on(ino, |fs| {
        if offset == abi::fs::APPEND {
            fs.append(ino, data).map(|_| data.len())
        } else {
            fs.write(ino, offset, data)
        }
    })
}

/// Cuts or extends `ino` to `len` bytes. A private file's blocks past the new end go back
/// to the shared cache first, so none is left private once the file system frees it.
pub fn truncate(ino: Ino, len: u64) -> Result<(), Error> {
    with_fs_on(ino, |fs| {
        let cache = CACHE.get().ok_or(ext2::Error::Io)?;
        let cut = PRIVATE.with(|p| p.get(&ino).map(|f| f.core));
        if let Some(core) = cut {
            let bs = fs.statfs().block_size as u64;
            let kept = len.div_ceil(bs) as usize;
            let past: Vec<u32> = fs.data_blocks(ino)?.into_iter().skip(kept).collect();
            for b in past {
                cache.make_shared(core, b as u64).map_err(|_| ext2::Error::Io)?;
                PRIVATE.with(|p| p.get_mut(&ino).map(|f| f.blocks.remove(&(b as u64))));
            }
        }
        fs.truncate(ino, len)
    })
}

/// What `fs_stat` reports of `ino`.
pub fn stat(ino: Ino) -> Result<abi::fs::Stat, Error> {
    with_fs(|fs| fs.stat(ino)).map(|st| abi::fs::Stat {
        ino: st.ino as u64,
        kind: kind_code(st.kind),
        size: st.size,
        links: st.links as u64,
        allocated: st.sectors as u64 * 512,
        mtime: st.mtime as u64,
        perm: st.perm as u64,
    })
}

/// Directory `ino`'s entries from number `first` on, as records, as many as fit in
/// `limit` bytes: (the records, how many).
pub fn readdir(ino: Ino, first: u64, limit: usize) -> Result<(Vec<u8>, u64), Error> {
    let entries = with_fs(|fs| fs.readdir(ino))?;
    let mut out = alloc::vec![0u8; limit];
    let (mut used, mut count) = (0, 0);
    for e in entries.iter().skip(first.min(usize::MAX as u64) as usize) {
        let record =
            abi::fs::DirRecord { ino: e.ino, kind: kind_code(e.kind) as u8, name: &e.name };
        match record.write(&mut out[used..]) {
            Some(n) => used += n,
            None => break,
        }
        count += 1;
    }
    if count == 0 && (first as usize) < entries.len() {
        return Err(Error::InvalidArgument); // the buffer cannot hold even one entry
    }
    out.truncate(used);
    Ok((out, count))
}

/// Makes directory `path`.
pub fn mkdir(path: &str) -> Result<(), Error> {
    check_path(path)?;
    with_fs(|fs| fs.mkdir(path, 0o755).map(|_| ()))
}

/// Removes file `path`, or empty directory `path`. A file private to a core is `Busy`
/// until it is closed: its blocks must go back to the shared cache before they are freed.
pub fn remove(path: &str) -> Result<(), Error> {
    check_path(path)?;
    FS.with(|fs| {
        let fs = fs.as_mut().ok_or(Error::NoFileSystem)?;
        finish_closes();
        let ino = fs.lookup(path).map_err(to_abi)?;
        if ino == ext2::ROOT_INO {
            return Err(Error::InvalidArgument);
        }
        if PRIVATE.with(|p| p.contains_key(&ino)) {
            return Err(Error::Busy);
        }
        let removed = match fs.stat(ino).map_err(to_abi)?.kind {
            FileKind::Dir => fs.rmdir(path),
            _ => fs.unlink(path),
        };
        removed.map_err(to_abi)
    })
}

/// Renames `from` to `to`. Replacing a file private to a core is `Busy`, as removing it.
pub fn rename(from: &str, to: &str) -> Result<(), Error> {
    check_path(from)?;
    check_path(to)?;
    FS.with(|fs| {
        let fs = fs.as_mut().ok_or(Error::NoFileSystem)?;
        finish_closes();
        if let Ok(target) = fs.lookup(to) {
            if PRIVATE.with(|p| p.contains_key(&target)) {
                return Err(Error::Busy);
            }
        }
        fs.rename(from, to).map_err(to_abi)
    })
}

/// Writes every changed block back and flushes the disk, and the free counters too.
pub fn sync() -> Result<(), Error> {
    with_fs(|fs| fs.sync())
}

/// Writes every changed block back and flushes the disk (`fsync`).
pub fn sync_data() -> Result<(), Error> {
    with_fs(|fs| fs.sync_data())
}

/// What `df` reports.
pub fn statfs() -> Result<abi::fs::StatFs, Error> {
    let st = with_fs(|fs| Ok(fs.statfs()))?;
    let private_blocks = FS.with(|_| {
        finish_closes();
        private_blocks()
    });
    let cache_blocks = BUFFERS.load(core::sync::atomic::Ordering::Relaxed);
    let driver = disk::driver().map_or(0, |c| c as u64 + 1);
    Ok(abi::fs::StatFs {
        block_size: st.block_size as u64,
        blocks: st.total_blocks as u64,
        free_blocks: st.free_blocks as u64,
        inodes: st.total_inodes as u64,
        free_inodes: st.free_inodes as u64,
        cache_blocks,
        driver,
        remote_transfers: disk::remote_transfers(),
        private_blocks,
    })
}
