//! A corpus of a few hundred damaged images (bytes changed in the superblock, the group
//! descriptors, inodes, directory blocks, bitmaps and an indirect block): mount either
//! refuses with a reason, or every operation returns `Ok` or an error. Never a panic, and
//! never an endless loop: the device refuses I/O past a budget, and the test fails if
//! any case reaches it.

mod common;

use common::*;
use ext2::{BlockDevice, Error, Ext2, FileKind, IoError, MemDisk};

/// A memory disk that counts block I/O and fails past `budget`.
struct Counted {
    disk: MemDisk,
    ios: u64,
    budget: u64,
}

impl BlockDevice for Counted {
    fn read_block(&mut self, n: u32, buf: &mut [u8]) -> Result<(), IoError> {
        self.ios += 1;
        if self.ios > self.budget {
            return Err(IoError);
        }
        self.disk.read_block(n, buf)
    }
    fn write_block(&mut self, n: u32, buf: &[u8]) -> Result<(), IoError> {
        self.ios += 1;
        if self.ios > self.budget {
            return Err(IoError);
        }
        self.disk.write_block(n, buf)
    }
}

/// Most block I/O one case may do: ~100 times what the operations need on a clean image.
const IO_BUDGET: u64 = 200_000;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn le32(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().unwrap())
}

/// A named byte range of the image: (what it holds, start, end).
type Region = (&'static str, usize, usize);

/// The base image (1 KiB blocks): files of one block, of indirect blocks and of double
/// indirect blocks, nested directories, a symlink. Returns it with the byte ranges worth
/// damaging.
fn base_image() -> Option<(Vec<u8>, Vec<Region>)> {
    if !have_tools("corrupt") {
        return None;
    }
    let tmp = TempDir::new("corrupt");
    let src = tmp.path("src");
    std::fs::create_dir_all(src.join("dir/sub")).unwrap();
    std::fs::write(src.join("small"), b"small file").unwrap();
    std::fs::write(src.join("ind"), pattern(1, 100 * 1024)).unwrap();
    std::fs::write(src.join("dind"), pattern(2, 300 * 1024)).unwrap();
    for i in 0..30 {
        std::fs::write(src.join(format!("dir/f{i}")), pattern(i, 100 + i as usize * 50)).unwrap();
    }
    std::fs::write(src.join("dir/sub/leaf"), b"leaf").unwrap();
    std::os::unix::fs::symlink("small", src.join("link")).unwrap();
    let img = tmp.path("img");
    mkfs(&img, 1024, 2048, Some(&src), &[]);
    let bytes = std::fs::read(&img).unwrap();

    // Find the regions from the image itself.
    let bs = 1024;
    let gd = 2 * bs;
    let (bbm, ibm, itable) = (le32(&bytes, gd), le32(&bytes, gd + 4), le32(&bytes, gd + 8));
    let isz = u16::from_le_bytes([bytes[1024 + 88], bytes[1024 + 89]]) as usize;
    let inode = |ino: usize| itable as usize * bs + (ino - 1) * isz;
    let root_blk = le32(&bytes, inode(2) + 40) as usize;
    // The inodes of the files mke2fs -d made start at 12 (11 is lost+found).
    let mut regions = vec![
        // The superblock fields up to the reserved-GDT count, and the descriptor in use
        // (the rest of both is padding a damage would not reach the driver through).
        ("superblock", 1024, 1024 + 208),
        ("superblock", 1024, 1024 + 208),
        ("group descriptors", gd, gd + 32),
        ("group descriptors", gd, gd + 32),
        ("block bitmap", bbm as usize * bs, bbm as usize * bs + bs),
        ("inode bitmap", ibm as usize * bs, ibm as usize * bs + bs),
        ("reserved inodes", inode(1), inode(11)),
        ("file inodes", inode(11), inode(60)),
        ("root directory", root_blk * bs, root_blk * bs + bs),
    ];
    for ino in 12..60 {
        let at = inode(ino);
        let mode = u16::from_le_bytes([bytes[at], bytes[at + 1]]);
        let ind = le32(&bytes, at + 40 + 4 * 12) as usize;
        if mode & 0xF000 == 0x4000 {
            let b = le32(&bytes, at + 40) as usize;
            regions.push(("a directory block", b * bs, b * bs + bs));
        } else if ind != 0 {
            regions.push(("an indirect block", ind * bs, ind * bs + bs));
        }
    }
    Some((bytes, regions))
}

/// Damages `img`: a few random bytes, or one aligned word set to a telling value.
fn damage(img: &mut [u8], rng: &mut Rng, (start, end): (usize, usize)) {
    let blocks = le32(img, 1024 + 4);
    let values = [
        0,
        1,
        2,
        0xFFFF_FFFF,
        0x8000_0000,
        blocks,
        blocks.wrapping_sub(1),
        blocks.wrapping_add(1),
        0xFFFF,
    ];
    for _ in 0..1 + rng.below(4) {
        if rng.below(2) == 0 {
            let at = start + rng.below(end - start);
            img[at] = rng.next() as u8;
        } else {
            let at = (start + rng.below(end - start - 4)) & !3;
            let v = values[rng.below(values.len())];
            img[at..at + 4].copy_from_slice(&v.to_le_bytes());
        }
    }
}

/// Walks the tree from the root (bounded), reading every file it finds; returns the
/// paths seen.
fn walk(fs: &mut Ext2<Counted>) -> Vec<(String, FileKind)> {
    let mut seen = vec![];
    let mut stack = vec![("".to_string(), 2u32, 0)];
    while let Some((path, ino, depth)) = stack.pop() {
        let Ok(entries) = fs.readdir(ino) else { continue };
        for e in entries.into_iter().take(200) {
            if e.name == b"." || e.name == b".." {
                continue;
            }
            let p = format!("{path}/{}", String::from_utf8_lossy(&e.name));
            let _ = fs.lookup(&p);
            let Ok(st) = fs.stat(e.ino) else { continue };
            let mut buf = vec![0u8; 8192];
            let _ = fs.read(e.ino, 0, &mut buf);
            let _ = fs.read(e.ino, st.size.saturating_sub(100), &mut buf);
            let _ = fs.read(e.ino, 200_000, &mut buf);
            if st.kind == FileKind::Dir && depth < 6 && seen.len() < 500 {
                stack.push((p.clone(), e.ino, depth + 1));
            }
            seen.push((p, st.kind));
        }
    }
    seen
}

/// Every kind of operation, results ignored: only panics and endless loops fail.
fn exercise(fs: &mut Ext2<Counted>) {
    let seen = walk(fs);
    let _ = fs.statfs();
    if let Ok(ino) = fs.create("/new", 0o644) {
        let _ = fs.write(ino, 0, &pattern(3, 20_000));
        let _ = fs.append(ino, b"tail");
        let _ = fs.truncate(ino, 5000);
        let _ = fs.write(ino, 300_000, b"far");
    }
    let _ = fs.mkdir("/nd", 0o755);
    let _ = fs.create("/nd/x", 0o644);
    let _ = fs.rename("/nd/x", "/x2");
    let _ = fs.rename("/nd", "/dir/nd2");
    for (i, (p, kind)) in seen.iter().enumerate().take(12) {
        let _ = match (i % 4, kind) {
            (0, FileKind::Dir) => fs.rmdir(p),
            (0, _) => fs.unlink(p),
            (1, _) => fs.rename(p, &format!("/moved{i}")),
            (2, FileKind::File) => fs.lookup(p).and_then(|ino| fs.truncate(ino, 10)),
            (3, FileKind::File) => {
                fs.lookup(p).and_then(|ino| fs.write(ino, 70_000, b"x").map(|_| ()))
            }
            _ => fs.rename(p, "/x2"),
        };
    }
    let _ = fs.rmdir("/dir/nd2");
    walk(fs);
    let _ = fs.sync();
}

#[test]
fn damaged_images_never_panic_or_hang() {
    let Some((base, regions)) = base_image() else { return };
    let mut rng = Rng(0x5EED_1234_ABCD_0001);
    let (mut refused, mut mounted) = (0, 0);
    let mut reasons = std::collections::BTreeMap::<String, usize>::new();
    for case in 0..400 {
        let mut img = base.clone();
        let (name, start, end) = regions[case % regions.len()];
        damage(&mut img, &mut rng, (start, end));
        let dev = Counted { disk: MemDisk { bytes: img }, ios: 0, budget: IO_BUDGET };
        match Ext2::mount(dev) {
            Err(e) => {
                refused += 1;
                assert!(
                    matches!(e, Error::Corrupt(_) | Error::Unsupported(_)),
                    "case {case} ({name}): {e:?}"
                );
                *reasons.entry(format!("{e:?}")).or_default() += 1;
            }
            Ok(mut fs) => {
                mounted += 1;
                exercise(&mut fs);
                let dev = match fs.unmount() {
                    Ok(dev) => dev,
                    Err(_) => continue,
                };
                assert!(
                    dev.ios <= IO_BUDGET,
                    "case {case} ({name}) used the whole I/O budget: a runaway loop"
                );
            }
        }
    }
    eprintln!("damaged images: {refused} refused at mount, {mounted} mounted and exercised");
    for (r, n) in reasons {
        eprintln!("  {n:4} {r}");
    }
    assert!(refused > 0 && mounted > 0);
}

/// The same operations on the undamaged image all succeed (the corpus's control).
#[test]
fn control_image_works() {
    let Some((base, _)) = base_image() else { return };
    let dev = Counted { disk: MemDisk { bytes: base }, ios: 0, budget: IO_BUDGET };
    let mut fs = Ext2::mount(dev).unwrap();
    assert!(walk(&mut fs).len() > 30);
    exercise(&mut fs);
    let dev = fs.unmount().unwrap();
    assert!(dev.ios < IO_BUDGET / 100, "{} I/Os", dev.ios);
}
