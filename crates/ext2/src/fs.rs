//! Mounting (superblock and group descriptor checks), `sync`, `statfs`, reading and
//! writing inodes, and the block and inode bitmaps that allocation and freeing go through.

use alloc::vec;
use alloc::vec::Vec;

use crate::disk::{
    get32, put16, put32, FileKind, GroupDesc, Inode, Superblock, INCOMPAT_FILETYPE,
    RO_COMPAT_LARGE_FILE, RO_COMPAT_SPARSE_SUPER, STATE_VALID, XATTR_MAGIC,
};
use crate::{BlockDevice, Error, Ino};

/// The read-only-compatible features this crate writes correctly.
const RO_COMPAT_KNOWN: u32 = RO_COMPAT_SPARSE_SUPER | RO_COMPAT_LARGE_FILE;

/// A mounted ext2 file system over the device `D`. Not thread-safe: the kernel holds it
/// under one lock.
pub struct Ext2<D: BlockDevice> {
    /// The disk.
    pub(crate) dev: D,
    /// The superblock, its free counters kept current in memory.
    pub(crate) sb: Superblock,
    /// Every group's descriptor, counters kept current in memory.
    pub(crate) groups: Vec<GroupDesc>,
    /// Raw descriptor table, rewritten with the counters of `groups` at sync.
    gdt_raw: Vec<u8>,
    /// Bytes per block.
    pub(crate) bs: usize,
    /// Mounted read-only (an unknown ro_compat feature): every change fails.
    read_only: bool,
    /// Whether the image was marked clean when mounted (restored by `unmount`).
    was_clean: bool,
    /// A feature flag changed, so `sync` rewrites the superblock backups too.
    features_changed: bool,
    /// The time stamped on inodes, in seconds since 1970 (see [`Ext2::set_time`]).
    pub(crate) now: u32,
}

/// What `stat` reports about an inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    /// The inode number.
    pub ino: Ino,
    /// File, directory, symlink, ...
    pub kind: FileKind,
    /// Permission bits (`mode & 0o7777`).
    pub perm: u16,
    /// Hard links (a directory counts its `.` and each child's `..`).
    pub links: u16,
    /// Size in bytes.
    pub size: u64,
    /// 512-byte sectors allocated, indirect blocks included.
    pub sectors: u32,
    /// Owner user id.
    pub uid: u32,
    /// Owner group id.
    pub gid: u32,
    /// Last access (seconds since 1970; reads do not update it).
    pub atime: u32,
    /// Last content change.
    pub mtime: u32,
    /// Last inode change.
    pub ctime: u32,
}

/// What `statfs` reports, as `df` needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatFs {
    /// Bytes per block.
    pub block_size: u32,
    /// Blocks in the file system.
    pub total_blocks: u32,
    /// Free blocks (including those reserved for root).
    pub free_blocks: u32,
    /// Blocks reserved for root.
    pub reserved_blocks: u32,
    /// Inodes in the file system.
    pub total_inodes: u32,
    /// Free inodes.
    pub free_inodes: u32,
    /// Longest file name.
    pub name_max: u32,
}

impl<D: BlockDevice> Ext2<D> {
    /// Mounts the file system on `dev`: reads and checks the superblock and the group
    /// descriptors, and (when writable) marks the image not clean until [`Ext2::unmount`].
    /// A corrupt image is refused with [`Error::Corrupt`], an unsupported one with
    /// [`Error::Unsupported`]; an unknown read-only feature mounts read-only.
    pub fn mount(mut dev: D) -> Result<Ext2<D>, Error> {
        let mut raw = vec![0u8; 1024];
        dev.read_block(1, &mut raw)?;
        let mut sb = Superblock::parse(&raw)?;
        let bs = sb.block_size;
        let read_only = sb.ro_compat & !RO_COMPAT_KNOWN != 0;
        let ngroups = sb.groups();
        let gdt_start = sb.first_data_block + 1;
        let mut gdt_raw = vec![0u8; sb.gdt_blocks() as usize * bs];
        for (i, chunk) in gdt_raw.chunks_mut(bs).enumerate() {
            dev.read_block(gdt_start + i as u32, chunk)?;
        }
        let groups: Vec<GroupDesc> =
            (0..ngroups as usize).map(|g| GroupDesc::parse(&gdt_raw[g * 32..])).collect();
        let itb = sb.itable_blocks();
        let (mut free_blocks, mut free_inodes) = (0u64, 0u64);
        for gd in &groups {
            let in_fs = |b: u32| b > gdt_start && b < sb.blocks_count;
            if !in_fs(gd.block_bitmap) || !in_fs(gd.inode_bitmap) || !in_fs(gd.inode_table) {
                return Err(Error::Corrupt("group descriptor points outside the file system"));
            }
            if gd.inode_table as u64 + itb as u64 > sb.blocks_count as u64 {
                return Err(Error::Corrupt("inode table runs past the end of the file system"));
            }
            if gd.free_blocks as u32 > sb.blocks_per_group
                || gd.free_inodes as u32 > sb.inodes_per_group
                || gd.used_dirs as u32 > sb.inodes_per_group
            {
                return Err(Error::Corrupt("group descriptor counter exceeds its group"));
            }
            free_blocks += gd.free_blocks as u64;
            free_inodes += gd.free_inodes as u64;
        }
        // As Linux does, the superblock's totals are recomputed from the groups (they are
        // only written at sync, so after a crash they lag behind).
        sb.free_blocks = free_blocks.min(sb.blocks_count as u64) as u32;
        sb.free_inodes = free_inodes.min(sb.inodes_count as u64) as u32;
        let was_clean = sb.state & STATE_VALID != 0;
        // Until the kernel sets the clock, stamp the latest time the superblock records
        // (mount, write or mkfs time) so that new times are at least plausible.
        let now = [44, 48, 264].iter().map(|&off| get32(&sb.raw, off)).max().unwrap_or(0);
        let mut fs = Ext2 {
            dev,
            sb,
            groups,
            gdt_raw,
            bs,
            read_only,
            was_clean,
            features_changed: false,
            now,
        };
        let root = fs.read_inode(crate::disk::ROOT_INO)?;
        if root.kind() != FileKind::Dir {
            return Err(Error::Corrupt("root inode is not a directory"));
        }
        if !fs.read_only {
            // Not clean while mounted: a crash now makes the next boot's fsck look.
            fs.sb.state &= !STATE_VALID;
            fs.write_superblock()?;
        }
        Ok(fs)
    }

    /// Whether the file system is mounted read-only (an unknown read-only feature).
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Sets the clock stamped on inodes from now on (seconds since 1970). The crate has
    /// no clock; until this is called it uses the latest time the superblock records.
    pub fn set_time(&mut self, secs: u32) {
        self.now = secs;
    }

    /// Writes the free counters to the superblock and group descriptors and flushes the
    /// device. File data and bitmaps are already on the device.
    pub fn sync(&mut self) -> Result<(), Error> {
        if self.read_only {
            return Ok(());
        }
        for (g, gd) in self.groups.iter().enumerate() {
            gd.store(&mut self.gdt_raw[g * 32..g * 32 + 32]);
        }
        let start = self.sb.first_data_block + 1;
        for (i, chunk) in self.gdt_raw.chunks(self.bs).enumerate() {
            self.dev.write_block(start + i as u32, chunk)?;
        }
        self.write_superblock()?;
        if self.features_changed {
            self.write_backup_superblocks()?;
            self.features_changed = false;
        }
        self.dev.flush()?;
        Ok(())
    }

    /// Makes every block written so far durable (`fsync`): files' data, inodes,
    /// directories and bitmaps, without rewriting the free counters of the superblock and
    /// group descriptors, which may lag until [`Ext2::sync`] (the next mount recomputes the
    /// superblock's totals, and `e2fsck` corrects the groups' after a crash).
    pub fn sync_data(&mut self) -> Result<(), Error> {
        Ok(self.dev.flush()?)
    }

    /// The block device, to change how it treats the next operation's blocks (the kernel
    /// marks the operations on a core's private file).
    pub fn device_mut(&mut self) -> &mut D {
        &mut self.dev
    }

    /// Syncs, marks the image clean (if it was clean at mount) and hands the device back.
    pub fn unmount(mut self) -> Result<D, Error> {
        if !self.read_only {
            if self.was_clean {
                self.sb.state |= STATE_VALID;
            }
            self.sync()?;
        }
        Ok(self.dev)
    }

    /// Block and inode totals for `df`.
    pub fn statfs(&self) -> StatFs {
        StatFs {
            block_size: self.bs as u32,
            total_blocks: self.sb.blocks_count,
            free_blocks: self.sb.free_blocks,
            reserved_blocks: self.sb.r_blocks_count,
            total_inodes: self.sb.inodes_count,
            free_inodes: self.sb.free_inodes,
            name_max: crate::disk::NAME_MAX as u32,
        }
    }

    /// Size, kind, mode, links and times of inode `ino`.
    pub fn stat(&mut self, ino: Ino) -> Result<Stat, Error> {
        let inode = self.read_inode(ino)?;
        let (atime, ctime, mtime, _) = inode.times();
        let (uid, gid) = inode.owner();
        Ok(Stat {
            ino,
            kind: inode.kind(),
            perm: inode.mode() & 0o7777,
            links: inode.links(),
            size: inode.size(),
            sectors: inode.sectors(),
            uid,
            gid,
            atime,
            mtime,
            ctime,
        })
    }

    /// Writes the superblock (bytes 1024..2048 of the disk).
    fn write_superblock(&mut self) -> Result<(), Error> {
        self.sb.store();
        put32(&mut self.sb.raw, 48, self.now); // s_wtime
        if self.bs == 1024 {
            self.dev.write_block(1, &self.sb.raw)?;
        } else {
            let mut b = vec![0u8; self.bs];
            self.dev.read_block(0, &mut b)?;
            b[1024..2048].copy_from_slice(&self.sb.raw);
            self.dev.write_block(0, &b)?;
        }
        Ok(())
    }

    /// Copies the superblock into every group that holds a backup, so `e2fsck` finds the
    /// same feature flags there.
    fn write_backup_superblocks(&mut self) -> Result<(), Error> {
        let mut b = vec![0u8; self.bs];
        for g in 1..self.sb.groups() {
            if !self.sb.has_super(g) {
                continue;
            }
            let blk = self.sb.first_data_block + g * self.sb.blocks_per_group;
            self.dev.read_block(blk, &mut b)?;
            b[..1024].copy_from_slice(&self.sb.raw);
            put16(&mut b, 90, g as u16); // s_block_group_nr
            self.dev.write_block(blk, &b)?;
        }
        Ok(())
    }

    /// Fails with [`Error::ReadOnly`] on a read-only mount; every change starts with it.
    pub(crate) fn check_writable(&self) -> Result<(), Error> {
        if self.read_only {
            Err(Error::ReadOnly)
        } else {
            Ok(())
        }
    }

    /// Whether directory entries carry a file type byte.
    pub(crate) fn filetype(&self) -> bool {
        self.sb.incompat & INCOMPAT_FILETYPE != 0
    }

    /// Reads a block into a new buffer.
    pub(crate) fn read_blk(&mut self, b: u32) -> Result<Vec<u8>, Error> {
        let mut buf = vec![0u8; self.bs];
        self.dev.read_block(b, &mut buf)?;
        Ok(buf)
    }

    /// Reads `buf.len()` bytes at `offset` of block `b`.
    pub(crate) fn read_part(&mut self, b: u32, offset: usize, buf: &mut [u8]) -> Result<(), Error> {
        Ok(self.dev.read_part(b, self.bs, offset, buf)?)
    }

    /// Writes a block.
    pub(crate) fn write_blk(&mut self, b: u32, buf: &[u8]) -> Result<(), Error> {
        Ok(self.dev.write_block(b, buf)?)
    }

    /// Where inode `ino` lives: (inode table block, byte offset in it).
    fn inode_place(&self, ino: Ino) -> Result<(u32, usize), Error> {
        if ino == 0 || ino > self.sb.inodes_count {
            return Err(Error::Corrupt("inode number out of range"));
        }
        let idx = (ino - 1) as usize;
        let ipg = self.sb.inodes_per_group as usize;
        let gd = &self.groups[idx / ipg];
        let byte = (idx % ipg) * self.sb.inode_size;
        Ok((gd.inode_table + (byte / self.bs) as u32, byte % self.bs))
    }

    /// Reads inode `ino`.
    pub(crate) fn read_inode(&mut self, ino: Ino) -> Result<Inode, Error> {
        let (blk, off) = self.inode_place(ino)?;
        let mut raw = vec![0u8; self.sb.inode_size];
        self.read_part(blk, off, &mut raw)?;
        Ok(Inode { raw })
    }

    /// Writes inode `ino`.
    pub(crate) fn write_inode(&mut self, ino: Ino, inode: &Inode) -> Result<(), Error> {
        let (blk, off) = self.inode_place(ino)?;
        Ok(self.dev.write_part(blk, self.bs, off, &inode.raw[..self.sb.inode_size])?)
    }

    /// Sets LARGE_FILE once a file reaches 2 GiB, as Linux does.
    pub(crate) fn note_large_file(&mut self, size: u64) {
        if size >= 1 << 31
            && self.sb.ro_compat & RO_COMPAT_LARGE_FILE == 0
            && self.sb.rev_level >= 1
        {
            self.sb.ro_compat |= RO_COMPAT_LARGE_FILE;
            self.features_changed = true;
        }
    }

    /// The group holding block `b`.
    fn block_group(&self, b: u32) -> usize {
        ((b.saturating_sub(self.sb.first_data_block)) / self.sb.blocks_per_group) as usize
    }

    /// Whether `b` is a block a file may point at: inside the file system and not one of
    /// its own group's superblock, descriptors, bitmaps or inode table. Pointers that fail
    /// this are reported as corruption instead of being followed.
    pub(crate) fn is_data_block(&self, b: u32) -> bool {
        if b <= self.sb.first_data_block || b >= self.sb.blocks_count {
            return false;
        }
        let g = self.block_group(b);
        let gd = &self.groups[g];
        let first = self.sb.first_data_block + g as u32 * self.sb.blocks_per_group;
        let meta_end = first as u64 + self.sb.gdt_blocks() as u64 + self.sb.reserved_gdt as u64;
        if self.sb.has_super(g as u32) && b as u64 <= meta_end {
            return false;
        }
        let itable = gd.inode_table..gd.inode_table.saturating_add(self.sb.itable_blocks());
        b != gd.block_bitmap && b != gd.inode_bitmap && !itable.contains(&b)
    }

    /// Allocates a block, preferring `goal` and the blocks after it (so a file grows
    /// contiguously), then the following groups. Only the bitmap is written here.
    pub(crate) fn alloc_block(&mut self, goal: u32) -> Result<u32, Error> {
        if self.sb.free_blocks == 0 {
            return Err(Error::NoSpace);
        }
        let ngroups = self.groups.len();
        let goal = if self.is_data_block(goal) { goal } else { self.sb.first_data_block };
        let start_g = self.block_group(goal);
        for i in 0..=ngroups {
            let g = (start_g + i) % ngroups;
            if self.groups[g].free_blocks == 0 {
                continue;
            }
            let first = self.sb.first_data_block + (g as u32) * self.sb.blocks_per_group;
            let from = if i == 0 { (goal - first) as usize } else { 0 };
            let count = (self.sb.blocks_count - first).min(self.sb.blocks_per_group) as usize;
            let bm_blk = self.groups[g].block_bitmap;
            let found = match self.find_free_near(bm_blk, first, from, count)? {
                Some(bit) => Some(bit),
                None => {
                    let bm = self.read_blk(bm_blk)?;
                    find_zero(&bm, from, count, |bit| self.is_data_block(first + bit as u32))
                }
            };
            if let Some(bit) = found {
                // Only the bitmap's byte that changes is read back and written.
                let mut byte = [0u8; 1];
                self.read_part(bm_blk, bit / 8, &mut byte)?;
                byte[0] |= 1 << (bit % 8);
                self.dev.write_part(bm_blk, self.bs, bit / 8, &byte)?;
                self.groups[g].free_blocks -= 1;
                self.sb.free_blocks -= 1;
                return Ok(first + bit as u32);
            }
        }
        Err(Error::NoSpace)
    }

    /// A free data block among the 64 bitmap bits from bit `from` on (the common case of
    /// a file growing block after block), reading 8 bytes of the bitmap, not all of it.
    fn find_free_near(
        &mut self,
        bm_blk: u32,
        first: u32,
        from: usize,
        count: usize,
    ) -> Result<Option<usize>, Error> {
        let start = from / 8;
        if start + 8 > self.bs || from >= count {
            return Ok(None);
        }
        let mut bytes = [0u8; 8];
        self.read_part(bm_blk, start, &mut bytes)?;
        let found = (from..(start + 8) * 8).find(|&bit| {
            bit < count
                && bytes[bit / 8 - start] & (1 << (bit % 8)) == 0
                && self.is_data_block(first + bit as u32)
        });
        Ok(found)
    }

    /// Frees block `b` in its bitmap. A block already free (a corrupt image pointing at it
    /// twice) is left alone so the counters stay true to the bitmap.
    pub(crate) fn free_block(&mut self, b: u32) -> Result<(), Error> {
        if !self.is_data_block(b) {
            return Err(Error::Corrupt("freeing a block outside the data area"));
        }
        let g = self.block_group(b);
        let bit = (b - self.sb.first_data_block) as usize % self.sb.blocks_per_group as usize;
        let bm_blk = self.groups[g].block_bitmap;
        let mut bm = self.read_blk(bm_blk)?;
        if bm[bit / 8] & (1 << (bit % 8)) == 0 {
            return Ok(());
        }
        bm[bit / 8] &= !(1 << (bit % 8));
        self.write_blk(bm_blk, &bm)?;
        self.groups[g].free_blocks = self.groups[g].free_blocks.saturating_add(1);
        self.sb.free_blocks = self.sb.free_blocks.saturating_add(1);
        Ok(())
    }

    /// Allocates an inode, preferring group `goal_group` (the parent directory's), and
    /// counts a directory in its group's `used_dirs`.
    pub(crate) fn alloc_inode(&mut self, goal_group: usize, kind: FileKind) -> Result<Ino, Error> {
        if self.sb.free_inodes == 0 {
            return Err(Error::NoSpace);
        }
        let ngroups = self.groups.len();
        let ipg = self.sb.inodes_per_group as usize;
        for i in 0..ngroups {
            let g = (goal_group + i) % ngroups;
            if self.groups[g].free_inodes == 0 {
                continue;
            }
            let bm_blk = self.groups[g].inode_bitmap;
            let mut bm = self.read_blk(bm_blk)?;
            let first_ino = self.sb.first_ino as usize;
            if let Some(bit) = find_zero(&bm, 0, ipg, |bit| g * ipg + bit + 1 >= first_ino) {
                bm[bit / 8] |= 1 << (bit % 8);
                self.write_blk(bm_blk, &bm)?;
                let gd = &mut self.groups[g];
                gd.free_inodes -= 1;
                if kind == FileKind::Dir {
                    gd.used_dirs = gd.used_dirs.saturating_add(1);
                }
                self.sb.free_inodes -= 1;
                return Ok((g * ipg + bit + 1) as Ino);
            }
        }
        Err(Error::NoSpace)
    }

    /// The number of directories, from the group counters: no chain of parents is longer.
    pub(crate) fn dir_count(&self) -> u64 {
        self.groups.iter().map(|g| g.used_dirs as u64).sum()
    }

    /// The group of inode `ino` (a goal for allocations made for it).
    pub(crate) fn inode_group(&self, ino: Ino) -> usize {
        (ino.saturating_sub(1) / self.sb.inodes_per_group) as usize % self.groups.len()
    }

    /// Releases inode `ino` whose last link is gone: frees its blocks and attribute block,
    /// stamps `dtime` and clears its bitmap bit.
    pub(crate) fn free_inode(&mut self, ino: Ino, mut inode: Inode) -> Result<(), Error> {
        let xattr = inode.xattr_block();
        let has_map = inode.has_block_map(self.bs);
        inode.set_links(0);
        // dtime marks the inode deleted. e2fsck reads a dtime below the inode count as a
        // link in the orphan list, so a clock near zero is lifted past it.
        put32(&mut inode.raw, 20, self.now.max(self.sb.inodes_count));
        put32(&mut inode.raw, 104, 0);
        if has_map {
            self.truncate_blocks(ino, &mut inode, 0)?;
        } else {
            self.write_inode(ino, &inode)?;
        }
        if xattr != 0 {
            self.release_xattr_block(xattr)?;
        }
        let g = self.inode_group(ino);
        let bit = (ino - 1) as usize % self.sb.inodes_per_group as usize;
        let bm_blk = self.groups[g].inode_bitmap;
        let mut bm = self.read_blk(bm_blk)?;
        if bm[bit / 8] & (1 << (bit % 8)) == 0 {
            return Ok(());
        }
        bm[bit / 8] &= !(1 << (bit % 8));
        self.write_blk(bm_blk, &bm)?;
        let gd = &mut self.groups[g];
        gd.free_inodes = gd.free_inodes.saturating_add(1);
        if inode.kind() == FileKind::Dir {
            gd.used_dirs = gd.used_dirs.saturating_sub(1);
        }
        self.sb.free_inodes = self.sb.free_inodes.saturating_add(1);
        Ok(())
    }

    /// Drops one reference to a shared extended attribute block, freeing it at zero.
    fn release_xattr_block(&mut self, b: u32) -> Result<(), Error> {
        if !self.is_data_block(b) {
            return Err(Error::Corrupt("attribute block outside the data area"));
        }
        let mut buf = self.read_blk(b)?;
        let refs = get32(&buf, 4);
        if get32(&buf, 0) == XATTR_MAGIC && refs > 1 {
            put32(&mut buf, 4, refs - 1);
            self.write_blk(b, &buf)
        } else {
            self.free_block(b)
        }
    }
}

/// Finds a clear bit in `bm[..count bits]`, searching from `from` to the end and then from
/// the start, that `usable` accepts. Whole 0xFF bytes are skipped.
fn find_zero(
    bm: &[u8],
    from: usize,
    count: usize,
    usable: impl Fn(usize) -> bool,
) -> Option<usize> {
    let count = count.min(bm.len() * 8);
    let from = from.min(count);
    for range in [from..count, 0..from] {
        let mut bit = range.start;
        while bit < range.end {
            if bit % 8 == 0 && bm[bit / 8] == 0xFF {
                bit += 8;
                continue;
            }
            if bm[bit / 8] & (1 << (bit % 8)) == 0 && usable(bit) {
                return Some(bit);
            }
            bit += 1;
        }
    }
    None
}
