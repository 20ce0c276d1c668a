//! The ext2 on-disk records (superblock, group descriptor, inode, directory entry) and the
//! little-endian byte helpers that read and patch them. Field offsets follow the ext2
//! layout in "The Second Extended File System" (Poirier) and Linux `fs/ext2/ext2.h`.

use alloc::vec::Vec;

use crate::Error;

/// The superblock's magic number (`s_magic`).
pub const MAGIC: u16 = 0xEF53;
/// The root directory's inode number.
pub const ROOT_INO: u32 = 2;
/// Direct block pointers in an inode; slots 12, 13, 14 are single, double, triple indirect.
pub const NDIR: usize = 12;
/// The longest name a directory entry holds.
pub const NAME_MAX: usize = 255;
/// Linux's ext2 link limit (`EXT2_LINK_MAX`).
pub const LINK_MAX: u16 = 32000;

/// `s_feature_incompat`: directory entries carry a file type byte.
pub const INCOMPAT_FILETYPE: u32 = 0x0002;
/// `s_feature_ro_compat`: only some groups hold superblock backups.
pub const RO_COMPAT_SPARSE_SUPER: u32 = 0x0001;
/// `s_feature_ro_compat`: files may be 2 GiB or larger (`i_size_high` in use).
pub const RO_COMPAT_LARGE_FILE: u32 = 0x0002;
/// `s_feature_compat`: blocks are reserved after the descriptor table for online growth.
pub const COMPAT_RESIZE_INODE: u32 = 0x0010;

/// `s_state` bit: the file system was cleanly unmounted.
pub const STATE_VALID: u16 = 0x0001;
/// Inode flag: the directory carries an htree index (`EXT2_INDEX_FL`).
pub const INDEX_FL: u32 = 0x1000;
/// Magic number of an extended attribute block header.
pub const XATTR_MAGIC: u32 = 0xEA02_0000;

/// Reads a little-endian u16 at `off`.
pub fn get16(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes([b[off], b[off + 1]])
}

/// Reads a little-endian u32 at `off`.
pub fn get32(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

/// Writes a little-endian u16 at `off`.
pub fn put16(b: &mut [u8], off: usize, v: u16) {
    b[off..off + 2].copy_from_slice(&v.to_le_bytes());
}

/// Writes a little-endian u32 at `off`.
pub fn put32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_le_bytes());
}

/// The superblock fields the driver uses, parsed and checked once at mount. The raw 1024
/// bytes are kept so that `sync` rewrites every field it does not know unchanged.
#[derive(Clone)]
pub struct Superblock {
    /// The 1024 bytes as read (bytes 1024..2048 of the disk).
    pub raw: Vec<u8>,
    /// `s_inodes_count`: inodes in all groups.
    pub inodes_count: u32,
    /// `s_blocks_count`: blocks in the file system, metadata included.
    pub blocks_count: u32,
    /// `s_r_blocks_count`: blocks reserved for root (reported, not enforced).
    pub r_blocks_count: u32,
    /// Free blocks: the groups' sum at mount, kept up to date, written at sync.
    pub free_blocks: u32,
    /// Free inodes, likewise.
    pub free_inodes: u32,
    /// `s_first_data_block`: 1 with 1 KiB blocks (block 0 holds the boot sector), else 0.
    pub first_data_block: u32,
    /// Bytes per block: 1024 << `s_log_block_size`.
    pub block_size: usize,
    /// `s_blocks_per_group`.
    pub blocks_per_group: u32,
    /// `s_inodes_per_group`.
    pub inodes_per_group: u32,
    /// `s_state`: VALID when cleanly unmounted.
    pub state: u16,
    /// `s_rev_level`: 0 (fixed inode size, no features) or 1.
    pub rev_level: u32,
    /// `s_first_ino`: the first inode not reserved (11 on revision 0).
    pub first_ino: u32,
    /// `s_inode_size` (128 on revision 0).
    pub inode_size: usize,
    /// `s_feature_incompat`.
    pub incompat: u32,
    /// `s_feature_ro_compat`.
    pub ro_compat: u32,
    /// `s_reserved_gdt_blocks`: blocks kept after the descriptor table (RESIZE_INODE).
    pub reserved_gdt: u32,
}

impl Superblock {
    /// Parses and validates the 1024-byte superblock. Every check that could otherwise make
    /// later arithmetic overflow or index out of bounds is made here.
    pub fn parse(raw: &[u8]) -> Result<Superblock, Error> {
        if get16(raw, 56) != MAGIC {
            return Err(Error::Corrupt("bad superblock magic"));
        }
        let rev_level = get32(raw, 76);
        if rev_level > 1 {
            return Err(Error::Unsupported("superblock revision above 1"));
        }
        let log = get32(raw, 24);
        if log > 2 {
            return Err(Error::Unsupported("block size other than 1024, 2048 or 4096"));
        }
        let block_size = 1024usize << log;
        let (first_ino, inode_size, compat, incompat, ro_compat) = if rev_level == 0 {
            (11, 128, 0, 0, 0)
        } else {
            (
                get32(raw, 84),
                get16(raw, 88) as usize,
                get32(raw, 92),
                get32(raw, 96),
                get32(raw, 100),
            )
        };
        let sb = Superblock {
            raw: raw.to_vec(),
            inodes_count: get32(raw, 0),
            blocks_count: get32(raw, 4),
            r_blocks_count: get32(raw, 8),
            free_blocks: get32(raw, 12),
            free_inodes: get32(raw, 16),
            first_data_block: get32(raw, 20),
            block_size,
            blocks_per_group: get32(raw, 32),
            inodes_per_group: get32(raw, 40),
            state: get16(raw, 58),
            rev_level,
            first_ino,
            inode_size,
            incompat,
            ro_compat,
            reserved_gdt: if compat & COMPAT_RESIZE_INODE != 0 {
                get16(raw, 206) as u32
            } else {
                0
            },
        };
        sb.check()?;
        Ok(sb)
    }

    /// The consistency checks of `parse`: sizes in range, counts that agree, features.
    fn check(&self) -> Result<(), Error> {
        let bits = 8 * self.block_size as u32;
        if self.first_data_block != u32::from(self.block_size == 1024) {
            return Err(Error::Corrupt("first data block does not match the block size"));
        }
        if self.blocks_per_group == 0 || self.blocks_per_group > bits {
            return Err(Error::Corrupt("blocks per group out of range"));
        }
        if self.inodes_per_group == 0 || self.inodes_per_group > bits {
            return Err(Error::Corrupt("inodes per group out of range"));
        }
        if self.inode_size < 128
            || !self.inode_size.is_power_of_two()
            || self.inode_size > self.block_size
        {
            return Err(Error::Corrupt(
                "inode size not a power of two between 128 and the block size",
            ));
        }
        if self.blocks_count <= self.first_data_block + 1 {
            return Err(Error::Corrupt("too few blocks"));
        }
        // Far more groups than any disk ext2 addresses: a block count and group size that
        // would make the descriptor table gigabytes long.
        if self.groups() > 1 << 20 {
            return Err(Error::Corrupt("more than 2^20 block groups"));
        }
        let groups = self.groups() as u64;
        if groups * self.inodes_per_group as u64 != self.inodes_count as u64 {
            return Err(Error::Corrupt("inode count is not groups times inodes per group"));
        }
        if self.first_ino <= ROOT_INO || self.first_ino >= self.inodes_count {
            return Err(Error::Corrupt("first non-reserved inode out of range"));
        }
        if self.reserved_gdt > self.blocks_per_group {
            return Err(Error::Corrupt("reserved descriptor blocks exceed a group"));
        }
        if self.incompat & !INCOMPAT_FILETYPE != 0 {
            return Err(Error::Unsupported(incompat_name(self.incompat & !INCOMPAT_FILETYPE)));
        }
        Ok(())
    }

    /// The number of block groups.
    pub fn groups(&self) -> u32 {
        (self.blocks_count - self.first_data_block).div_ceil(self.blocks_per_group)
    }

    /// Blocks taken by the group descriptor table (32 bytes a group).
    pub fn gdt_blocks(&self) -> u32 {
        (self.groups() as usize * 32).div_ceil(self.block_size) as u32
    }

    /// Blocks of inode table a group holds.
    pub fn itable_blocks(&self) -> u32 {
        (self.inodes_per_group as usize * self.inode_size).div_ceil(self.block_size) as u32
    }

    /// Whether group `g` holds a superblock backup (all groups, or with SPARSE_SUPER only
    /// groups 0, 1 and powers of 3, 5 and 7).
    pub fn has_super(&self, g: u32) -> bool {
        if self.ro_compat & RO_COMPAT_SPARSE_SUPER == 0 || g <= 1 {
            return true;
        }
        [3u32, 5, 7].iter().any(|&base| {
            let mut n = base;
            while n < g {
                n = n.saturating_mul(base);
            }
            n == g
        })
    }

    /// Copies the in-memory counters and flags back into `raw`.
    pub fn store(&mut self) {
        put32(&mut self.raw, 12, self.free_blocks);
        put32(&mut self.raw, 16, self.free_inodes);
        put16(&mut self.raw, 58, self.state);
        if self.rev_level >= 1 {
            put32(&mut self.raw, 100, self.ro_compat);
        }
    }
}

/// Names the first unsupported incompatible feature in `flags`, for the mount error.
fn incompat_name(flags: u32) -> &'static str {
    const NAMES: [(u32, &str); 8] = [
        (0x0001, "incompat feature COMPRESSION unsupported"),
        (0x0004, "incompat feature RECOVER unsupported (journal needs replay)"),
        (0x0008, "incompat feature JOURNAL_DEV unsupported"),
        (0x0010, "incompat feature META_BG unsupported"),
        (0x0040, "incompat feature EXTENTS unsupported"),
        (0x0080, "incompat feature 64BIT unsupported"),
        (0x0200, "incompat feature FLEX_BG unsupported"),
        (0x0400, "incompat feature EA_INODE unsupported"),
    ];
    NAMES
        .iter()
        .find(|(bit, _)| flags & bit != 0)
        .map_or("unknown incompat feature unsupported", |n| n.1)
}

/// A block group descriptor (the first 20 of its 32 bytes; the rest stay as on disk).
#[derive(Clone, Copy, Debug)]
pub struct GroupDesc {
    /// The block holding the group's block bitmap.
    pub block_bitmap: u32,
    /// The block holding the group's inode bitmap.
    pub inode_bitmap: u32,
    /// The first block of the group's inode table.
    pub inode_table: u32,
    /// Free blocks in the group.
    pub free_blocks: u16,
    /// Free inodes in the group.
    pub free_inodes: u16,
    /// Directories among the group's inodes.
    pub used_dirs: u16,
}

impl GroupDesc {
    /// Parses the descriptor at the start of `b`.
    pub fn parse(b: &[u8]) -> GroupDesc {
        GroupDesc {
            block_bitmap: get32(b, 0),
            inode_bitmap: get32(b, 4),
            inode_table: get32(b, 8),
            free_blocks: get16(b, 12),
            free_inodes: get16(b, 14),
            used_dirs: get16(b, 16),
        }
    }

    /// Writes the descriptor's counters into `b` (its block pointers never change).
    pub fn store(&self, b: &mut [u8]) {
        put16(b, 12, self.free_blocks);
        put16(b, 14, self.free_inodes);
        put16(b, 16, self.used_dirs);
    }
}

/// What an inode is, from the top four bits of `i_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (never followed by this crate).
    Symlink,
    /// A character device.
    CharDev,
    /// A block device.
    BlockDev,
    /// A named pipe.
    Fifo,
    /// A Unix socket.
    Socket,
    /// A mode this crate does not know (a corrupt inode).
    Unknown,
}

impl FileKind {
    /// The kind encoded in an `i_mode`.
    pub fn from_mode(mode: u16) -> FileKind {
        match mode & 0xF000 {
            0x8000 => FileKind::File,
            0x4000 => FileKind::Dir,
            0xA000 => FileKind::Symlink,
            0x2000 => FileKind::CharDev,
            0x6000 => FileKind::BlockDev,
            0x1000 => FileKind::Fifo,
            0xC000 => FileKind::Socket,
            _ => FileKind::Unknown,
        }
    }

    /// The `i_mode` type bits of this kind.
    pub fn mode_bits(self) -> u16 {
        match self {
            FileKind::File => 0x8000,
            FileKind::Dir => 0x4000,
            FileKind::Symlink => 0xA000,
            FileKind::CharDev => 0x2000,
            FileKind::BlockDev => 0x6000,
            FileKind::Fifo => 0x1000,
            FileKind::Socket => 0xC000,
            FileKind::Unknown => 0,
        }
    }

    /// The directory entry's file type byte (FILETYPE feature).
    pub fn dirent_type(self) -> u8 {
        match self {
            FileKind::Unknown => 0,
            FileKind::File => 1,
            FileKind::Dir => 2,
            FileKind::CharDev => 3,
            FileKind::BlockDev => 4,
            FileKind::Fifo => 5,
            FileKind::Socket => 6,
            FileKind::Symlink => 7,
        }
    }

    /// The kind a directory entry's file type byte names.
    pub fn from_dirent_type(t: u8) -> FileKind {
        match t {
            1 => FileKind::File,
            2 => FileKind::Dir,
            3 => FileKind::CharDev,
            4 => FileKind::BlockDev,
            5 => FileKind::Fifo,
            6 => FileKind::Socket,
            7 => FileKind::Symlink,
            _ => FileKind::Unknown,
        }
    }
}

/// An inode as its raw `inode_size` bytes, with accessors for the fields the driver uses.
/// Keeping the bytes keeps the fields it does not know (uid high bits, extra space,
/// in-inode attributes) intact across a rewrite.
#[derive(Clone)]
pub struct Inode {
    /// The inode's `inode_size` bytes as stored in the inode table.
    pub raw: Vec<u8>,
}

impl Inode {
    /// `i_mode`: type and permission bits.
    pub fn mode(&self) -> u16 {
        get16(&self.raw, 0)
    }
    /// Sets `i_mode`.
    pub fn set_mode(&mut self, m: u16) {
        put16(&mut self.raw, 0, m)
    }
    /// The inode's kind.
    pub fn kind(&self) -> FileKind {
        FileKind::from_mode(self.mode())
    }
    /// The size in bytes (`i_size` plus `i_size_high` for regular files).
    pub fn size(&self) -> u64 {
        let high = if self.kind() == FileKind::File { get32(&self.raw, 108) as u64 } else { 0 };
        (high << 32) | get32(&self.raw, 4) as u64
    }
    /// Sets the size (the caller sets LARGE_FILE when it passes 2 GiB).
    pub fn set_size(&mut self, s: u64) {
        put32(&mut self.raw, 4, s as u32);
        put32(&mut self.raw, 108, (s >> 32) as u32);
    }
    /// `i_links_count`.
    pub fn links(&self) -> u16 {
        get16(&self.raw, 26)
    }
    /// Sets `i_links_count`.
    pub fn set_links(&mut self, n: u16) {
        put16(&mut self.raw, 26, n)
    }
    /// `i_blocks`: 512-byte sectors held, data plus indirect plus attribute blocks.
    pub fn sectors(&self) -> u32 {
        get32(&self.raw, 28)
    }
    /// Sets `i_blocks`.
    pub fn set_sectors(&mut self, n: u32) {
        put32(&mut self.raw, 28, n)
    }
    /// `i_flags`.
    pub fn flags(&self) -> u32 {
        get32(&self.raw, 32)
    }
    /// Sets `i_flags`.
    pub fn set_flags(&mut self, f: u32) {
        put32(&mut self.raw, 32, f)
    }
    /// Block pointer slot `i` (0..15).
    pub fn block(&self, i: usize) -> u32 {
        get32(&self.raw, 40 + 4 * i)
    }
    /// Sets block pointer slot `i`.
    pub fn set_block(&mut self, i: usize, b: u32) {
        put32(&mut self.raw, 40 + 4 * i, b)
    }
    /// `i_file_acl`: the extended attribute block, or 0.
    pub fn xattr_block(&self) -> u32 {
        get32(&self.raw, 104)
    }
    /// `(atime, ctime, mtime, dtime)` in seconds.
    pub fn times(&self) -> (u32, u32, u32, u32) {
        (get32(&self.raw, 8), get32(&self.raw, 12), get32(&self.raw, 16), get32(&self.raw, 20))
    }
    /// Sets ctime and mtime (a content change). The nanosecond fields of a large inode are
    /// cleared, so they never pair a new second with an old fraction.
    pub fn touch(&mut self, now: u32) {
        put32(&mut self.raw, 12, now);
        put32(&mut self.raw, 16, now);
        if self.raw.len() >= 140 && get16(&self.raw, 128) >= 12 {
            put32(&mut self.raw, 132, 0);
            put32(&mut self.raw, 136, 0);
        }
    }
    /// Sets ctime alone (a change of name or link count).
    pub fn touch_ctime(&mut self, now: u32) {
        put32(&mut self.raw, 12, now);
        if self.raw.len() >= 136 && get16(&self.raw, 128) >= 8 {
            put32(&mut self.raw, 132, 0);
        }
    }
    /// `i_uid` and `i_gid` (low 16 bits plus the Linux high halves).
    pub fn owner(&self) -> (u32, u32) {
        let uid = get16(&self.raw, 2) as u32 | (get16(&self.raw, 120) as u32) << 16;
        let gid = get16(&self.raw, 24) as u32 | (get16(&self.raw, 122) as u32) << 16;
        (uid, gid)
    }

    /// A fresh in-use inode of `kind` and permission `perm`, times all `now`. A large inode
    /// gets `i_extra_isize` 32 (as Linux writes) with its extra fields zero but crtime.
    pub fn new(inode_size: usize, kind: FileKind, perm: u16, now: u32) -> Inode {
        let mut ino = Inode { raw: alloc::vec![0; inode_size] };
        ino.set_mode(kind.mode_bits() | (perm & 0o7777));
        for off in [8, 12, 16] {
            put32(&mut ino.raw, off, now);
        }
        if inode_size >= 160 {
            put16(&mut ino.raw, 128, 32);
            put32(&mut ino.raw, 144, now);
        }
        ino
    }

    /// Whether the block slots hold pointers: false for device files and for a symlink
    /// whose target lives in the slots themselves (a "fast" symlink, no data block).
    pub fn has_block_map(&self, block_size: usize) -> bool {
        match self.kind() {
            FileKind::File | FileKind::Dir => true,
            FileKind::Symlink => {
                let xattr = if self.xattr_block() != 0 { block_size as u32 / 512 } else { 0 };
                self.sectors() > xattr
            }
            _ => false,
        }
    }
}

/// One parsed directory entry: where it sits in its block and what it says.
#[derive(Clone, Copy, Debug)]
pub struct RawDirent {
    /// Byte offset of the entry in its block.
    pub off: usize,
    /// The inode named, 0 for a free entry.
    pub ino: u32,
    /// Bytes to the next entry (the entry plus the slack after it).
    pub rec_len: usize,
    /// Bytes of name.
    pub name_len: usize,
    /// The FILETYPE byte (0 without the feature).
    pub file_type: u8,
}

/// The space an entry with a name of `name_len` bytes needs: 8 bytes of header plus the
/// name, rounded up to 4.
pub fn dirent_size(name_len: usize) -> usize {
    (8 + name_len + 3) & !3
}

/// Parses the entry at `off` of directory block `b`, checking that it lies within the
/// block (Linux `ext2_check_page` rules). `filetype` says whether byte 7 is a type byte
/// (FILETYPE) or the high byte of a 16-bit name length (revision 0).
pub fn parse_dirent(b: &[u8], off: usize, filetype: bool) -> Result<RawDirent, Error> {
    if off + 8 > b.len() {
        return Err(Error::Corrupt("directory entry header crosses the block end"));
    }
    let rec_len = get16(b, off + 4) as usize;
    let name_len = if filetype { b[off + 6] as usize } else { get16(b, off + 6) as usize };
    if rec_len < 12 || !rec_len.is_multiple_of(4) {
        return Err(Error::Corrupt("directory entry length below 12 or unaligned"));
    }
    if off + rec_len > b.len() || dirent_size(name_len) > rec_len {
        return Err(Error::Corrupt("directory entry overruns its block or record"));
    }
    let file_type = if filetype { b[off + 7] } else { 0 };
    Ok(RawDirent { off, ino: get32(b, off), rec_len, name_len, file_type })
}

/// Writes an entry header and name at `off` of `b`.
pub fn put_dirent(b: &mut [u8], off: usize, ino: u32, rec_len: usize, name: &[u8], file_type: u8) {
    put32(b, off, ino);
    put16(b, off + 4, rec_len as u16);
    b[off + 6] = name.len() as u8;
    b[off + 7] = file_type;
    b[off + 8..off + 8 + name.len()].copy_from_slice(name);
}
