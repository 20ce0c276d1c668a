//! The disk's files (`fs_*` calls, issue M13): an ext2 file system on the first virtio
//! block device, in the kernel's buffer cache (Corey §5.3).

/// `fs_open` flags.
pub mod open {
    /// Open for writing too (reading is always allowed).
    pub const WRITE: u64 = 1;
    /// Create the file if it does not exist (implies `WRITE`).
    pub const CREATE: u64 = 2;
    /// With `CREATE`: fail with `Exists` if it exists.
    pub const EXCLUSIVE: u64 = 4;
    /// Cut the file to 0 bytes (needs `WRITE`).
    pub const TRUNCATE: u64 = 8;
    /// Make the file private to the calling core (after Corey §9): its blocks live in
    /// that core's own part of the buffer cache, found without the shared tree, until
    /// the last open file opened so is closed. Meanwhile another core's reads, writes
    /// and truncates of it, a `PRIVATE` open on another core, and removing it or
    /// renaming onto it, are `Busy`. The open file must be used on the core that
    /// opened it.
    pub const PRIVATE: u64 = 16;
    /// Every flag.
    pub const ALL: u64 = WRITE | CREATE | EXCLUSIVE | TRUNCATE | PRIVATE;
}

/// `fs_sync`'s argument.
pub mod sync {
    /// Everything, the superblock's and groups' free counters too (`sync`).
    pub const EVERYTHING: u64 = 0;
    /// Every changed block (files' data, inodes, directories, bitmaps), but not the
    /// free counters, which the next mount recomputes (`fsync`).
    pub const DATA: u64 = 1;
}

/// `fs_write`'s offset that means "at the end of the file".
pub const APPEND: u64 = u64::MAX;
/// Longest path `fs_*` calls take, in bytes.
pub const PATH_MAX: u64 = 1024;
/// Bytes one `fs_write` or `fs_read` moves atomically: a write of at most this many
/// bytes is never mixed with another core's write to the same file; a longer one is
/// done in pieces of this size, each atomic.
pub const ATOMIC_IO: u64 = 64 * 1024;

/// What a name is (`Stat::kind`, `DirRecord`'s kind byte).
pub mod kind {
    /// A regular file.
    pub const FILE: u64 = 1;
    /// A directory.
    pub const DIR: u64 = 2;
    /// A symbolic link (kept, never followed).
    pub const SYMLINK: u64 = 3;
    /// Anything else (device, FIFO, socket).
    pub const OTHER: u64 = 4;
}

/// What `fs_stat` writes: 7 words in this order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stat {
    /// The inode number.
    pub ino: u64,
    /// [`kind`].
    pub kind: u64,
    /// Size in bytes.
    pub size: u64,
    /// Hard links.
    pub links: u64,
    /// Bytes allocated on the disk.
    pub allocated: u64,
    /// Last change of the contents, seconds since 1970.
    pub mtime: u64,
    /// Permission bits.
    pub perm: u64,
}

impl Stat {
    /// The words `fs_stat` writes.
    pub const fn to_words(self) -> [u64; 7] {
        [self.ino, self.kind, self.size, self.links, self.allocated, self.mtime, self.perm]
    }

    /// Reads them back.
    pub const fn from_words(w: [u64; 7]) -> Stat {
        Stat {
            ino: w[0],
            kind: w[1],
            size: w[2],
            links: w[3],
            allocated: w[4],
            mtime: w[5],
            perm: w[6],
        }
    }
}

/// What `fs_statfs` writes: 9 words in this order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatFs {
    /// Bytes per block.
    pub block_size: u64,
    /// Blocks in the file system.
    pub blocks: u64,
    /// Free blocks.
    pub free_blocks: u64,
    /// Inodes in the file system.
    pub inodes: u64,
    /// Free inodes.
    pub free_inodes: u64,
    /// Blocks the buffer cache can hold, all cores' pools together.
    pub cache_blocks: u64,
    /// The kernel core that drives the disk, plus one (0: each calling core does).
    pub driver: u64,
    /// Transfers a kernel core did for other cores since boot.
    pub remote_transfers: u64,
    /// Blocks of files private to a core (`open::PRIVATE`), all cores together.
    pub private_blocks: u64,
}

impl StatFs {
    /// The words `fs_statfs` writes.
    pub const fn to_words(self) -> [u64; 9] {
        [
            self.block_size,
            self.blocks,
            self.free_blocks,
            self.inodes,
            self.free_inodes,
            self.cache_blocks,
            self.driver,
            self.remote_transfers,
            self.private_blocks,
        ]
    }

    /// Reads them back.
    pub const fn from_words(w: [u64; 9]) -> StatFs {
        StatFs {
            block_size: w[0],
            blocks: w[1],
            free_blocks: w[2],
            inodes: w[3],
            free_inodes: w[4],
            cache_blocks: w[5],
            driver: w[6],
            remote_transfers: w[7],
            private_blocks: w[8],
        }
    }
}

/// One entry of `fs_readdir`'s output: its inode number (4 bytes, little-endian), its
/// [`kind`] (1 byte), the name's length (1 byte), then the name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirRecord<'a> {
    /// The inode number.
    pub ino: u32,
    /// [`kind`].
    pub kind: u8,
    /// The name's bytes.
    pub name: &'a [u8],
}

impl<'a> DirRecord<'a> {
    /// Bytes of the record.
    pub const fn len(&self) -> usize {
        6 + self.name.len()
    }

    /// Whether the name is empty (never, in a valid record).
    pub const fn is_empty(&self) -> bool {
        self.name.is_empty()
    }

    /// Writes the record at the start of `out`; `None` if it does not fit (or the
    /// name is longer than 255 bytes).
    pub fn write(&self, out: &mut [u8]) -> Option<usize> {
        if self.name.len() > 255 || out.len() < self.len() {
            return None;
        }
        out[..4].copy_from_slice(&self.ino.to_le_bytes());
        out[4] = self.kind;
        out[5] = self.name.len() as u8;
        out[6..self.len()].copy_from_slice(self.name);
        Some(self.len())
    }

    /// The record at the start of `bytes`, and the bytes after it.
    pub fn read(bytes: &'a [u8]) -> Option<(DirRecord<'a>, &'a [u8])> {
        let head = bytes.get(..6)?;
        let len = head[5] as usize;
        let name = bytes.get(6..6 + len)?;
        let ino = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        Some((DirRecord { ino, kind: head[4], name }, &bytes[6 + len..]))
    }
}
