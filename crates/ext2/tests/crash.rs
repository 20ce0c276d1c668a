//! The crash-ordering rule, tested by crashing: every write of a run of operations is
//! recorded, and the image after each prefix of those writes (a crash at that point) is
//! checked with `e2fsck -fn`. Leaked blocks and inodes, stale counters and link counts are
//! what a crash may leave (e2fsck repairs them); a name for an unused inode, a pointer to
//! a block outside the disk or one claimed twice must never appear.

mod common;

use common::*;
use ext2::{BlockDevice, Ext2, IoError, MemDisk};

/// A memory disk that records every block written, in order.
struct Recording {
    disk: MemDisk,
    writes: Vec<(u32, Vec<u8>)>,
}

impl BlockDevice for Recording {
    fn read_block(&mut self, n: u32, buf: &mut [u8]) -> Result<(), IoError> {
        self.disk.read_block(n, buf)
    }
    fn write_block(&mut self, n: u32, buf: &[u8]) -> Result<(), IoError> {
        self.writes.push((n, buf.to_vec()));
        self.disk.write_block(n, buf)
    }
}

/// What e2fsck must never say after a crash, whatever the moment.
const FORBIDDEN: [&str; 6] = [
    "deleted/unused inode",
    "llegal block",
    "ultiply-claimed",
    "bad inode #",
    "has dtime set",
    "zero dtime",
];

#[test]
fn every_crash_point_is_repairable() {
    if !have_tools("crash") {
        return;
    }
    let tmp = TempDir::new("crash");
    let src = tmp.path("src");
    std::fs::create_dir_all(src.join("dir")).unwrap();
    std::fs::write(src.join("small"), b"small").unwrap();
    std::fs::write(src.join("dir/big"), pattern(1, 40_000)).unwrap();
    let img = tmp.path("img");
    mkfs(&img, 1024, 2048, Some(&src), &[]);
    let base = std::fs::read(&img).unwrap();

    let mut fs =
        Ext2::mount(Recording { disk: MemDisk { bytes: base.clone() }, writes: vec![] }).unwrap();
    let a = fs.create("/a", 0o644).unwrap();
    fs.write(a, 0, &pattern(2, 40_000)).unwrap(); // direct and indirect blocks
    fs.mkdir("/d", 0o755).unwrap();
    let b = fs.create("/d/b", 0o644).unwrap();
    fs.write(b, 0, &pattern(3, 3000)).unwrap();
    fs.rename("/a", "/d/a2").unwrap();
    fs.truncate(a, 5000).unwrap(); // frees the indirect block and its blocks
    fs.unlink("/small").unwrap();
    fs.unlink("/dir/big").unwrap();
    let c = fs.create("/c", 0o644).unwrap();
    fs.write(c, 0, &pattern(4, 30_000)).unwrap(); // reuses what was freed
    fs.rename("/d/b", "/dir/b").unwrap();
    fs.rmdir("/d").unwrap_err(); // not empty
    let dev = fs.unmount().unwrap();
    assert!(dev.writes.len() > 40, "{} writes", dev.writes.len());

    let mut disk = MemDisk { bytes: base };
    let crash_img = tmp.path("crash");
    for (k, (n, data)) in dev.writes.iter().enumerate() {
        disk.write_block(*n, data).unwrap();
        std::fs::write(&crash_img, &disk.bytes).unwrap();
        let (_, text) = fsck(&crash_img);
        for bad in FORBIDDEN {
            assert!(
                !text.contains(bad),
                "after write {k} (block {n}) e2fsck says {bad:?}:\n{text}"
            );
        }
    }
    // All writes done (the unmount's sync included): clean.
    assert_clean(&crash_img);
}
