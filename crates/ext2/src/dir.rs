//! Directories and names: linear directory blocks of variable-length entries, path
//! lookup, and the operations that change names (create, mkdir, unlink, rmdir, rename).
//!
//! Order of writes (see the crate doc): a new inode is written before the entry naming
//! it; an entry is removed before its inode loses the link; a rename writes the new name
//! before removing the old one.

use alloc::vec;
use alloc::vec::Vec;

use crate::disk::{
    dirent_size, get16, parse_dirent, put16, put32, put_dirent, FileKind, Inode, RawDirent,
    INDEX_FL, LINK_MAX, NAME_MAX, ROOT_INO,
};
use crate::fs::Ext2;
use crate::{BlockDevice, Error, Ino};

/// One name in a directory, as `readdir` returns it (`.` and `..` included).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    /// The inode the name refers to.
    pub ino: Ino,
    /// The name's bytes (not necessarily UTF-8).
    pub name: Vec<u8>,
    /// The kind, from the entry's type byte (or the inode, without FILETYPE).
    pub kind: FileKind,
}

/// The name stored in entry `e` of block `buf`.
fn name_of<'a>(buf: &'a [u8], e: &RawDirent) -> &'a [u8] {
    &buf[e.off + 8..e.off + 8 + e.name_len]
}

/// Splits a path into its non-empty components (`a//b/` is `a`, `b`).
fn components(path: &str) -> impl Iterator<Item = &[u8]> {
    path.split('/').filter(|c| !c.is_empty()).map(str::as_bytes)
}

impl<D: BlockDevice> Ext2<D> {
    /// Reads `dir` and checks that it is a directory.
    fn read_dir_inode(&mut self, dir: Ino) -> Result<Inode, Error> {
        let inode = self.read_inode(dir)?;
        if inode.kind() != FileKind::Dir {
            return Err(Error::NotADirectory);
        }
        Ok(inode)
    }

    /// Calls `f` on every entry (used or free) of directory `dir`, in order, until it
    /// returns `Some`; `f` gets the disk block, its bytes and the entry. The walk is
    /// bounded by the directory's size, itself checked against the disk's.
    fn scan<T>(
        &mut self,
        dir: &Inode,
        mut f: impl FnMut(u32, &[u8], &RawDirent) -> Option<T>,
    ) -> Result<Option<T>, Error> {
        let size = dir.size();
        if !size.is_multiple_of(self.bs as u64)
            || size / self.bs as u64 > self.sb.blocks_count as u64
        {
            return Err(Error::Corrupt(
                "directory size not a whole number of blocks within the disk",
            ));
        }
        let ft = self.filetype();
        for lblk in 0..size / self.bs as u64 {
            let b = self.bmap(dir, lblk)?.ok_or(Error::Corrupt("hole in a directory"))?;
            let buf = self.read_blk(b)?;
            let mut off = 0;
            while off < self.bs {
                let e = parse_dirent(&buf, off, ft)?;
                if let Some(t) = f(b, &buf, &e) {
                    return Ok(Some(t));
                }
                off += e.rec_len;
            }
        }
        Ok(None)
    }

    /// Finds `name` in directory `dir`: (block, entry).
    fn find(&mut self, dir: &Inode, name: &[u8]) -> Result<Option<(u32, RawDirent)>, Error> {
        self.scan(dir, |b, buf, e| (e.ino != 0 && name_of(buf, e) == name).then_some((b, *e)))
    }

    /// Looks `name` up in directory `dir` (`.` and `..` included; the root's `..` is the
    /// root).
    pub fn lookup_in(&mut self, dir: Ino, name: &[u8]) -> Result<Ino, Error> {
        if name.len() > NAME_MAX {
            return Err(Error::NameTooLong);
        }
        let inode = self.read_dir_inode(dir)?;
        match self.find(&inode, name)? {
            Some((_, e)) => Ok(e.ino),
            None => Err(Error::NotFound),
        }
    }

    /// Resolves `path` from the root (a leading `/` is optional; `.` and `..` are followed
    /// and `..` at the root stays there). Symlinks are not followed.
    pub fn lookup(&mut self, path: &str) -> Result<Ino, Error> {
        let mut cur = ROOT_INO;
        for name in components(path) {
            cur = self.lookup_in(cur, name)?;
        }
        Ok(cur)
    }

    /// Resolves all but the last component of `path`: (parent directory, last name). The
    /// last name must be a real name, not `.` or `..`.
    fn parent_of<'p>(&mut self, path: &'p str) -> Result<(Ino, &'p [u8]), Error> {
        let comps: Vec<&[u8]> = components(path).collect();
        let (&name, dirs) = comps.split_last().ok_or(Error::InvalidArgument)?;
        if name.len() > NAME_MAX {
            return Err(Error::NameTooLong);
        }
        if name == b"." || name == b".." || name.contains(&0) {
            return Err(Error::InvalidArgument);
        }
        let mut cur = ROOT_INO;
        for d in dirs {
            cur = self.lookup_in(cur, d)?;
        }
        self.read_dir_inode(cur)?;
        Ok((cur, name))
    }

    /// The names in directory `dir`, `.` and `..` included, in on-disk order.
    pub fn readdir(&mut self, dir: Ino) -> Result<Vec<DirEntry>, Error> {
        let inode = self.read_dir_inode(dir)?;
        let mut out = Vec::new();
        self.scan(&inode, |_, buf, e| {
            if e.ino != 0 {
                let kind = FileKind::from_dirent_type(e.file_type);
                out.push(DirEntry { ino: e.ino, name: name_of(buf, e).to_vec(), kind });
            }
            None::<()>
        })?;
        if !self.filetype() {
            for e in &mut out {
                e.kind = self.read_inode(e.ino)?.kind();
            }
        }
        Ok(out)
    }

    /// The entry type byte for `kind` (0 without FILETYPE).
    fn type_byte(&self, kind: FileKind) -> u8 {
        if self.filetype() {
            kind.dirent_type()
        } else {
            0
        }
    }

    /// Rewrites directory inode `dir` after a change of its entries: new times, and no
    /// htree flag (the index no longer matches the entries; Linux ext2 does the same).
    fn dir_changed(&mut self, dir: Ino, inode: &mut Inode) -> Result<(), Error> {
        inode.set_flags(inode.flags() & !INDEX_FL);
        inode.touch(self.now);
        self.write_inode(dir, inode)
    }

    /// Adds entry `name` -> `ino` to directory `dir`: into the slack of an entry or a
    /// free entry big enough, else into a new block appended to the directory.
    fn add_entry(&mut self, dir: Ino, name: &[u8], ino: Ino, kind: FileKind) -> Result<(), Error> {
        let need = dirent_size(name.len());
        let mut inode = self.read_dir_inode(dir)?;
        let t = self.type_byte(kind);
        let slot = self.scan(&inode, |b, _, e| {
            let used = if e.ino == 0 { 0 } else { dirent_size(e.name_len) };
            (e.rec_len - used >= need).then_some((b, e.off, e.rec_len, used))
        })?;
        match slot {
            Some((b, off, rec_len, used)) => {
                let mut buf = self.read_blk(b)?;
                if used == 0 {
                    put_dirent(&mut buf, off, ino, rec_len, name, t);
                } else {
                    put16(&mut buf, off + 4, used as u16);
                    put_dirent(&mut buf, off + used, ino, rec_len - used, name, t);
                }
                self.write_blk(b, &buf)?;
            }
            None => {
                let mut buf = vec![0u8; self.bs];
                put_dirent(&mut buf, 0, ino, self.bs, name, t);
                let lblk = inode.size() / self.bs as u64;
                self.put_file_block(dir, &mut inode, lblk, &buf)?;
                inode.set_size(inode.size() + self.bs as u64);
            }
        }
        self.dir_changed(dir, &mut inode)
    }

    /// Removes entry `name` from directory `dir`, folding its space into the entry before
    /// it (or marking it free when it starts its block). Returns the inode it named.
    fn remove_entry(&mut self, dir: Ino, name: &[u8]) -> Result<Ino, Error> {
        let mut inode = self.read_dir_inode(dir)?;
        let mut prev: Option<(u32, usize)> = None;
        let found = self.scan(&inode, |b, buf, e| {
            if e.ino != 0 && name_of(buf, e) == name {
                let before = prev.filter(|&(pb, _)| pb == b && e.off != 0).map(|(_, off)| off);
                return Some((b, *e, before));
            }
            prev = Some((b, e.off));
            None
        })?;
        let (b, e, before) = found.ok_or(Error::NotFound)?;
        let mut buf = self.read_blk(b)?;
        match before {
            Some(poff) => {
                let merged = get16(&buf, poff + 4) as usize + e.rec_len;
                put16(&mut buf, poff + 4, merged as u16);
            }
            None => put32(&mut buf, e.off, 0),
        }
        self.write_blk(b, &buf)?;
        self.dir_changed(dir, &mut inode)?;
        Ok(e.ino)
    }

    /// Points the existing entry `name` of `dir` at `ino` (rename onto an existing name,
    /// and a moved directory's `..`).
    fn set_entry(&mut self, dir: Ino, name: &[u8], ino: Ino, kind: FileKind) -> Result<(), Error> {
        let mut inode = self.read_dir_inode(dir)?;
        let (b, e) = self.find(&inode, name)?.ok_or(Error::NotFound)?;
        let mut buf = self.read_blk(b)?;
        put32(&mut buf, e.off, ino);
        if self.filetype() {
            buf[e.off + 7] = kind.dirent_type();
        }
        self.write_blk(b, &buf)?;
        self.dir_changed(dir, &mut inode)
    }

    /// Whether directory `inode` holds nothing but `.` and `..`.
    fn is_empty_dir(&mut self, inode: &Inode) -> Result<bool, Error> {
        let other = self.scan(inode, |_, buf, e| {
            let n = name_of(buf, e);
            (e.ino != 0 && n != b"." && n != b"..").then_some(())
        })?;
        Ok(other.is_none())
    }

    /// Adds `delta` to the link count of `ino`.
    fn add_links(&mut self, ino: Ino, delta: i32) -> Result<(), Error> {
        let mut inode = self.read_inode(ino)?;
        let n = (inode.links() as i32 + delta).clamp(0, u16::MAX as i32);
        inode.set_links(n as u16);
        inode.touch_ctime(self.now);
        self.write_inode(ino, &inode)
    }

    /// Creates an inode of `kind` named `name` in directory `parent`. A directory gets its
    /// first block with `.` and `..`. The inode is complete on disk before it is named.
    fn make(&mut self, parent: Ino, name: &[u8], kind: FileKind, perm: u16) -> Result<Ino, Error> {
        self.check_writable()?;
        let pinode = self.read_dir_inode(parent)?;
        if self.find(&pinode, name)?.is_some() {
            return Err(Error::Exists);
        }
        if kind == FileKind::Dir && pinode.links() >= LINK_MAX {
            return Err(Error::NoSpace);
        }
        let ino = self.alloc_inode(self.inode_group(parent), kind)?;
        let mut inode = Inode::new(self.sb.inode_size, kind, perm, self.now);
        inode.set_links(1);
        if kind == FileKind::Dir {
            inode.set_links(2);
            let mut buf = vec![0u8; self.bs];
            let t = self.type_byte(FileKind::Dir);
            put_dirent(&mut buf, 0, ino, 12, b".", t);
            put_dirent(&mut buf, 12, parent, self.bs - 12, b"..", t);
            if let Err(e) = self.put_file_block(ino, &mut inode, 0, &buf) {
                self.free_inode(ino, inode)?;
                return Err(e);
            }
            inode.set_size(self.bs as u64);
        }
        self.write_inode(ino, &inode)?;
        if let Err(e) = self.add_entry(parent, name, ino, kind) {
            self.free_inode(ino, inode)?;
            return Err(e);
        }
        if kind == FileKind::Dir {
            self.add_links(parent, 1)?;
        }
        Ok(ino)
    }

    /// Creates an empty regular file at `path` with permission bits `perm`.
    pub fn create(&mut self, path: &str, perm: u16) -> Result<Ino, Error> {
        let (parent, name) = self.parent_of(path)?;
        self.make(parent, name, FileKind::File, perm)
    }

    /// Creates a directory at `path` with permission bits `perm`.
    pub fn mkdir(&mut self, path: &str, perm: u16) -> Result<Ino, Error> {
        let (parent, name) = self.parent_of(path)?;
        self.make(parent, name, FileKind::Dir, perm)
    }

    /// Removes the name `path` (not a directory); the inode and its blocks are freed when
    /// its last link goes. The kernel must keep an open file's name until it is closed.
    pub fn unlink(&mut self, path: &str) -> Result<(), Error> {
        self.check_writable()?;
        let (parent, name) = self.parent_of(path)?;
        let ino = self.lookup_in(parent, name)?;
        let mut inode = self.read_inode(ino)?;
        if inode.kind() == FileKind::Dir {
            return Err(Error::IsADirectory);
        }
        self.remove_entry(parent, name)?;
        self.drop_link(ino, &mut inode)
    }

    /// Takes one link from non-directory `ino`, freeing it at zero.
    fn drop_link(&mut self, ino: Ino, inode: &mut Inode) -> Result<(), Error> {
        let links = inode.links().saturating_sub(1);
        if links == 0 {
            return self.free_inode(ino, inode.clone());
        }
        inode.set_links(links);
        inode.touch_ctime(self.now);
        self.write_inode(ino, inode)
    }

    /// Removes the empty directory `path`.
    pub fn rmdir(&mut self, path: &str) -> Result<(), Error> {
        self.check_writable()?;
        let (parent, name) = self.parent_of(path)?;
        let ino = self.lookup_in(parent, name)?;
        let inode = self.read_dir_inode(ino)?;
        if !self.is_empty_dir(&inode)? {
            return Err(Error::NotEmpty);
        }
        self.remove_entry(parent, name)?;
        self.free_inode(ino, inode)?;
        self.add_links(parent, -1)
    }

    /// Renames `from` to `to`, within or across directories. An existing `to` is replaced
    /// if it is a file (and `from` is not a directory) or an empty directory (and `from`
    /// is one). A directory cannot move into its own subtree.
    pub fn rename(&mut self, from: &str, to: &str) -> Result<(), Error> {
        self.check_writable()?;
        let (fp, fname) = self.parent_of(from)?;
        let (tp, tname) = self.parent_of(to)?;
        let src = self.lookup_in(fp, fname)?;
        let kind = self.read_inode(src)?.kind();
        let existing = match self.lookup_in(tp, tname) {
            Ok(t) => Some(t),
            Err(Error::NotFound) => None,
            Err(e) => return Err(e),
        };
        if existing == Some(src) {
            return Ok(());
        }
        if kind == FileKind::Dir {
            self.check_not_below(tp, src)?;
        }
        match existing {
            Some(t) => {
                let mut tinode = self.read_inode(t)?;
                match (kind == FileKind::Dir, tinode.kind() == FileKind::Dir) {
                    (true, false) => return Err(Error::NotADirectory),
                    (false, true) => return Err(Error::IsADirectory),
                    (true, true) if !self.is_empty_dir(&tinode)? => return Err(Error::NotEmpty),
                    _ => {}
                }
                self.set_entry(tp, tname, src, kind)?;
                if tinode.kind() == FileKind::Dir {
                    self.free_inode(t, tinode)?;
                    self.add_links(tp, -1)?;
                } else {
                    self.drop_link(t, &mut tinode)?;
                }
            }
            None => {
                if kind == FileKind::Dir && fp != tp && self.read_inode(tp)?.links() >= LINK_MAX {
                    return Err(Error::NoSpace);
                }
                self.add_entry(tp, tname, src, kind)?;
            }
        }
        self.remove_entry(fp, fname)?;
        if kind == FileKind::Dir && fp != tp {
            self.set_entry(src, b"..", tp, FileKind::Dir)?;
            self.add_links(fp, -1)?;
            self.add_links(tp, 1)?;
        }
        self.add_links(src, 0)
    }

    /// Fails with [`Error::InvalidArgument`] if directory `dir` is `ancestor` or below it
    /// (walking `..` up to the root: at most one step per directory, so a corrupt loop of
    /// `..` entries ends).
    fn check_not_below(&mut self, dir: Ino, ancestor: Ino) -> Result<(), Error> {
        let mut cur = dir;
        for _ in 0..=self.dir_count() {
            if cur == ancestor {
                return Err(Error::InvalidArgument);
            }
            if cur == ROOT_INO {
                return Ok(());
            }
            cur = self.lookup_in(cur, b"..")?;
        }
        Err(Error::Corrupt("directory parents form a loop"))
    }
}
