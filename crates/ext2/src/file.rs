//! File contents: the block map (12 direct pointers, then single, double and triple
//! indirect blocks of `block_size / 4` pointers each), read, write, append and truncate.

use alloc::vec;
use alloc::vec::Vec;

use crate::disk::{get32, put32, FileKind, Inode, NDIR};
use crate::fs::Ext2;
use crate::{BlockDevice, Error, Ino};

/// Pointers of a last-level indirect block read at once by a read of consecutive blocks.
const LEAF_RUN: usize = 64;

/// The pointers [`Ext2::bmap_in_run`] read last: `ptrs` from index `first` of indirect
/// block `block` (0: none yet).
#[derive(Default)]
struct LeafPointers {
    block: u32,
    first: usize,
    ptrs: Vec<u32>,
}

impl<D: BlockDevice> Ext2<D> {
    /// Pointers per indirect block.
    fn ptrs(&self) -> u64 {
        (self.bs / 4) as u64
    }

    /// The largest file size this block size allows: the blocks the map can address,
    /// capped (as Linux `ext2_max_size` does) so that data plus indirect blocks fit the
    /// 32-bit `i_blocks` count of 512-byte sectors (and below 2 GiB on revision 0).
    pub fn max_file_size(&self) -> u64 {
        let p = self.ptrs();
        let addressable = NDIR as u64 + p + p * p + p * p * p;
        let meta = 1 + (1 + p) + (1 + p + p * p);
        let sector_cap = (u32::MAX as u64 >> (self.bs.trailing_zeros() - 9)) - meta;
        let limit = addressable.min(sector_cap) * self.bs as u64;
        // Revision 0 has no LARGE_FILE feature to announce `i_size_high`.
        if self.sb.rev_level == 0 {
            limit.min((1 << 31) - 1)
        } else {
            limit
        }
    }

    /// Where file block `lblk` sits in the map: the inode slot, then the index at each
    /// indirect level (`depth` of them).
    fn map_path(&self, lblk: u64) -> Result<(usize, usize, [usize; 3]), Error> {
        let p = self.ptrs();
        if lblk < NDIR as u64 {
            return Ok((lblk as usize, 0, [0; 3]));
        }
        let mut rel = lblk - NDIR as u64;
        let mut span = p;
        for depth in 1..=3 {
            if rel < span {
                let mut idx = [0usize; 3];
                let mut r = rel;
                for level in (0..depth).rev() {
                    idx[level] = (r % p) as usize;
                    r /= p;
                }
                return Ok((NDIR + depth - 1, depth, idx));
            }
            rel -= span;
            span *= p;
        }
        Err(Error::FileTooLarge)
    }

    /// Follows the map from pointer `ptr` through indirect blocks at indices `path`: the
    /// pointer reached (0: a hole on the way).
    fn follow(&mut self, mut ptr: u32, path: &[usize]) -> Result<u32, Error> {
        for &i in path {
            if ptr == 0 {
                return Ok(0);
            }
            if !self.is_data_block(ptr) {
                return Err(Error::Corrupt("indirect block pointer outside the data area"));
            }
            let mut word = [0u8; 4];
            self.read_part(ptr, 4 * i, &mut word)?;
            ptr = u32::from_le_bytes(word);
        }
        Ok(ptr)
    }

    /// The disk block holding file block `lblk`, or `None` for a hole.
    pub(crate) fn bmap(&mut self, inode: &Inode, lblk: u64) -> Result<Option<u32>, Error> {
        let (slot, depth, idx) = self.map_path(lblk)?;
        match self.follow(inode.block(slot), &idx[..depth])? {
            0 => Ok(None),
            b if self.is_data_block(b) => Ok(Some(b)),
            _ => Err(Error::Corrupt("data block pointer outside the data area")),
        }
    }

    /// [`Ext2::bmap`] for one read of consecutive blocks: the pointers of the last-level
    /// indirect block are read [`LEAF_RUN`] at a time and kept in `leaf`, so a run of
    /// blocks costs one read of their pointers, not one each. `leaf` lives for one read
    /// (nothing writes the map meanwhile).
    fn bmap_in_run(
        &mut self,
        inode: &Inode,
        lblk: u64,
        leaf: &mut LeafPointers,
    ) -> Result<Option<u32>, Error> {
        let (slot, depth, idx) = self.map_path(lblk)?;
        if depth == 0 {
            return self.bmap(inode, lblk);
        }
        let ptr = self.follow(inode.block(slot), &idx[..depth - 1])?;
        if ptr == 0 {
            return Ok(None);
        }
        if !self.is_data_block(ptr) {
            return Err(Error::Corrupt("indirect block pointer outside the data area"));
        }
        let i = idx[depth - 1];
        if leaf.block != ptr || i < leaf.first || i >= leaf.first + leaf.ptrs.len() {
            let n = (self.ptrs() as usize - i).min(LEAF_RUN);
            let mut bytes = vec![0u8; 4 * n];
            self.read_part(ptr, 4 * i, &mut bytes)?;
            leaf.block = ptr;
            leaf.first = i;
            leaf.ptrs = bytes.chunks_exact(4).map(|w| get32(w, 0)).collect();
        }
        match leaf.ptrs[i - leaf.first] {
            0 => Ok(None),
            b if self.is_data_block(b) => Ok(Some(b)),
            _ => Err(Error::Corrupt("data block pointer outside the data area")),
        }
    }

    /// Points file block `lblk` at the already-written block `b`, allocating (and zeroing
    /// on disk, before linking) any missing indirect block. The inode itself is only
    /// updated in memory; the caller writes it last.
    fn set_map(&mut self, inode: &mut Inode, lblk: u64, b: u32) -> Result<(), Error> {
        let (slot, depth, idx) = self.map_path(lblk)?;
        if depth == 0 {
            inode.set_block(slot, b);
            return Ok(());
        }
        let sectors = (self.bs / 512) as u32;
        let mut ptr = inode.block(slot);
        if ptr == 0 {
            ptr = self.alloc_zeroed(b)?;
            inode.set_block(slot, ptr);
            inode.set_sectors(inode.sectors().saturating_add(sectors));
        }
        for (level, &i) in idx[..depth].iter().enumerate() {
            if !self.is_data_block(ptr) {
                return Err(Error::Corrupt("indirect block pointer outside the data area"));
            }
            // One pointer is read or written, not the whole indirect block.
            if level + 1 == depth {
                return Ok(self.dev.write_part(ptr, self.bs, 4 * i, &b.to_le_bytes())?);
            }
            let mut word = [0u8; 4];
            self.read_part(ptr, 4 * i, &mut word)?;
            let mut next = u32::from_le_bytes(word);
            if next == 0 {
                next = self.alloc_zeroed(b)?;
                inode.set_sectors(inode.sectors().saturating_add(sectors));
                self.dev.write_part(ptr, self.bs, 4 * i, &next.to_le_bytes())?;
            }
            ptr = next;
        }
        Ok(())
    }

    /// Allocates a block near `goal` and writes zeros to it.
    fn alloc_zeroed(&mut self, goal: u32) -> Result<u32, Error> {
        let b = self.alloc_block(goal)?;
        self.write_blk(b, &vec![0u8; self.bs])?;
        Ok(b)
    }

    /// Writes `data` as file block `lblk` (a whole block), allocating the block if it is a
    /// hole. The data reaches the disk before any pointer to it.
    pub(crate) fn put_file_block(
        &mut self,
        ino: Ino,
        inode: &mut Inode,
        lblk: u64,
        data: &[u8],
    ) -> Result<(), Error> {
        if let Some(b) = self.bmap(inode, lblk)? {
            return Ok(self.dev.write_data_block(b, data)?);
        }
        let goal = match lblk.checked_sub(1).map(|prev| self.bmap(inode, prev)) {
            Some(Ok(Some(prev))) => prev + 1,
            _ => self.group_first_block(self.inode_group(ino)),
        };
        let b = self.alloc_block(goal)?;
        self.dev.write_data_block(b, data)?;
        if let Err(e) = self.set_map(inode, lblk, b) {
            self.free_block(b)?;
            return Err(e);
        }
        inode.set_sectors(inode.sectors().saturating_add((self.bs / 512) as u32));
        Ok(())
    }

    /// The first block of group `g`, an allocation goal.
    fn group_first_block(&self, g: usize) -> u32 {
        self.sb.first_data_block + g as u32 * self.sb.blocks_per_group
    }

    /// Reads up to `buf.len()` bytes of file `ino` from `offset`; returns how many (0 at
    /// or past the end). Holes read as zeros. Directories can be read this way too.
    pub fn read(&mut self, ino: Ino, offset: u64, buf: &mut [u8]) -> Result<usize, Error> {
        self.read_vectored(ino, offset, &mut [buf])
    }

    /// [`Ext2::read`] into several buffers in turn (the pages of a program's buffer): up to
    /// their total length from `offset`; returns how many bytes.
    pub fn read_vectored(
        &mut self,
        ino: Ino,
        offset: u64,
        bufs: &mut [&mut [u8]],
    ) -> Result<usize, Error> {
        let inode = self.read_inode(ino)?;
        if !inode.has_block_map(self.bs) {
            return Err(Error::InvalidArgument);
        }
        let size = inode.size();
        if offset >= size {
            return Ok(0);
        }
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        let n = (total as u64).min(size - offset) as usize;
        let bs = self.bs as u64;
        let (mut done, mut i, mut at) = (0, 0, 0);
        let mut leaf = LeafPointers::default();
        while done < n {
            if at == bufs[i].len() {
                (i, at) = (i + 1, 0);
                continue;
            }
            let pos = offset + done as u64;
            let in_blk = (pos % bs) as usize;
            let len = (self.bs - in_blk).min(n - done).min(bufs[i].len() - at);
            let dst = &mut bufs[i][at..at + len];
            match self.bmap_in_run(&inode, pos / bs, &mut leaf)? {
                Some(b) => self.read_part(b, in_blk, dst)?,
                None => dst.fill(0),
            }
            done += len;
            at += len;
        }
        Ok(n)
    }

    /// The data blocks of file `ino`, in file order (holes left out; the indirect blocks
    /// are the map's, not data).
    pub fn data_blocks(&mut self, ino: Ino) -> Result<Vec<u32>, Error> {
        let inode = self.read_inode(ino)?;
        if !inode.has_block_map(self.bs) {
            return Ok(Vec::new());
        }
        let count = inode.size().div_ceil(self.bs as u64);
        let mut leaf = LeafPointers::default();
        let mut blocks = Vec::new();
        for lblk in 0..count {
            if let Some(b) = self.bmap_in_run(&inode, lblk, &mut leaf)? {
                blocks.push(b);
            }
        }
        Ok(blocks)
    }

    /// Writes `data` into regular file `ino` at `offset`, growing it (the gap, if any,
    /// stays a hole that reads as zeros). Returns the bytes written: all of them, or fewer
    /// if the disk filled after some were written; [`Error::NoSpace`] if none were.
    pub fn write(&mut self, ino: Ino, offset: u64, data: &[u8]) -> Result<usize, Error> {
        self.check_writable()?;
        let mut inode = self.read_inode(ino)?;
        match inode.kind() {
            FileKind::File => {}
            FileKind::Dir => return Err(Error::IsADirectory),
            _ => return Err(Error::InvalidArgument),
        }
        let end = offset.checked_add(data.len() as u64).ok_or(Error::FileTooLarge)?;
        if end > self.max_file_size() {
            return Err(Error::FileTooLarge);
        }
        let bs = self.bs as u64;
        let mut done = 0usize;
        let mut result = Ok(());
        while done < data.len() {
            let pos = offset + done as u64;
            let in_blk = (pos % bs) as usize;
            let len = (self.bs - in_blk).min(data.len() - done);
            let lblk = pos / bs;
            if len == self.bs {
                // A whole block goes from the caller's bytes, with no copy of its own.
                let whole = &data[done..done + len];
                if let Err(e) = self.put_file_block(ino, &mut inode, lblk, whole) {
                    result = Err(e);
                    break;
                }
                done += len;
                continue;
            }
            let mut blk = {
                match self.bmap(&inode, lblk) {
                    Ok(Some(b)) => self.read_blk(b)?,
                    Ok(None) => vec![0u8; self.bs],
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                }
            };
            blk[in_blk..in_blk + len].copy_from_slice(&data[done..done + len]);
            if let Err(e) = self.put_file_block(ino, &mut inode, lblk, &blk) {
                result = Err(e);
                break;
            }
            done += len;
        }
        if done > 0 {
            let new_end = offset + done as u64;
            if new_end > inode.size() {
                inode.set_size(new_end);
                self.note_large_file(new_end);
            }
            inode.touch(self.now);
            self.write_inode(ino, &inode)?;
            return Ok(done);
        }
        result.map(|_| 0)
    }

    /// Appends `data` to the end of file `ino`; returns the new size.
    pub fn append(&mut self, ino: Ino, data: &[u8]) -> Result<u64, Error> {
        let size = self.read_inode(ino)?.size();
        let n = self.write(ino, size, data)?;
        Ok(size + n as u64)
    }

    /// Sets the size of regular file `ino` to `len`: growing leaves a hole, shrinking frees
    /// the blocks past the new end (and zeros the rest of the last block, so a later grow
    /// reads zeros there).
    pub fn truncate(&mut self, ino: Ino, len: u64) -> Result<(), Error> {
        self.check_writable()?;
        let mut inode = self.read_inode(ino)?;
        match inode.kind() {
            FileKind::File => {}
            FileKind::Dir => return Err(Error::IsADirectory),
            _ => return Err(Error::InvalidArgument),
        }
        if len > self.max_file_size() {
            return Err(Error::FileTooLarge);
        }
        if len < inode.size() {
            let bs = self.bs as u64;
            if !len.is_multiple_of(bs) {
                if let Some(b) = self.bmap(&inode, len / bs)? {
                    let mut buf = self.read_blk(b)?;
                    buf[(len % bs) as usize..].fill(0);
                    self.write_blk(b, &buf)?;
                }
            }
        }
        let old = inode.size();
        inode.set_size(len);
        self.note_large_file(len);
        inode.touch(self.now);
        if len < old {
            self.truncate_blocks(ino, &mut inode, len)
        } else {
            self.write_inode(ino, &inode)
        }
    }

    /// Frees every block of `inode` past the first `ceil(len / block_size)`, indirect
    /// blocks that become empty included, and writes inode `ino`. Pointers are cleared on
    /// disk (indirect blocks, then the inode) before the blocks they named are freed.
    pub(crate) fn truncate_blocks(
        &mut self,
        ino: Ino,
        inode: &mut Inode,
        len: u64,
    ) -> Result<(), Error> {
        let keep = len.div_ceil(self.bs as u64);
        let p = self.ptrs();
        let mut freed = Vec::new();
        // Bound the walk by the disk size: a valid map holds no more blocks than the disk.
        let mut budget = self.sb.blocks_count as u64 + 16;
        for slot in (keep.min(NDIR as u64) as usize)..NDIR {
            if inode.block(slot) != 0 {
                freed.push(inode.block(slot));
                inode.set_block(slot, 0);
            }
        }
        let mut start = NDIR as u64;
        let mut span = p;
        for depth in 1..=3 {
            let slot = NDIR + depth - 1;
            let ptr = inode.block(slot);
            if ptr != 0 && keep < start + span {
                let rel = keep.saturating_sub(start);
                if self.trunc_tree(ptr, depth, rel, &mut freed, &mut budget)? {
                    freed.push(ptr);
                    inode.set_block(slot, 0);
                }
            }
            start += span;
            span *= p;
        }
        let per = (self.bs / 512) as u32;
        inode.set_sectors(inode.sectors().saturating_sub(per.saturating_mul(freed.len() as u32)));
        self.write_inode(ino, inode)?;
        for b in freed {
            self.free_block(b)?;
        }
        Ok(())
    }

    /// Under indirect block `blk` of `depth` levels, clears the pointers to file blocks at
    /// index `keep` and beyond (relative to the subtree's first block), collecting what
    /// they pointed at in `freed`. Returns whether the subtree is now empty (the caller
    /// then frees `blk`). The modified block is written before returning.
    fn trunc_tree(
        &mut self,
        blk: u32,
        depth: usize,
        keep: u64,
        freed: &mut Vec<u32>,
        budget: &mut u64,
    ) -> Result<bool, Error> {
        if !self.is_data_block(blk) {
            return Err(Error::Corrupt("indirect block pointer outside the data area"));
        }
        let mut buf = self.read_blk(blk)?;
        let p = self.ptrs();
        let span = p.pow(depth as u32 - 1);
        let (mut changed, mut empty) = (false, true);
        for i in 0..p as usize {
            let ptr = get32(&buf, 4 * i);
            if ptr == 0 {
                continue;
            }
            *budget =
                budget.checked_sub(1).ok_or(Error::Corrupt("block map larger than the disk"))?;
            let start = i as u64 * span;
            if start + span <= keep {
                empty = false;
                continue;
            }
            let gone = if depth == 1 {
                if !self.is_data_block(ptr) {
                    return Err(Error::Corrupt("data block pointer outside the data area"));
                }
                true
            } else {
                self.trunc_tree(ptr, depth - 1, keep.saturating_sub(start), freed, budget)?
            };
            if gone {
                freed.push(ptr);
                put32(&mut buf, 4 * i, 0);
                changed = true;
            } else {
                empty = false;
            }
        }
        if changed && !empty {
            self.write_blk(blk, &buf)?;
        }
        Ok(empty)
    }
}
