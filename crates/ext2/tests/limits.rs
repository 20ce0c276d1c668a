//! The edges: a full disk, over-long names, 10,000 files in one directory, and a file
//! grown past the largest size the block size can map.

mod common;

use common::*;
use ext2::{Error, Ext2, MemDisk};

/// A fresh empty image of `size_kib` in memory (plus its path, for e2fsck afterwards).
fn fresh(
    tmp: &TempDir,
    bs: u32,
    size_kib: u32,
    extra: &[&str],
) -> (std::path::PathBuf, Ext2<MemDisk>) {
    let img = tmp.path("img");
    mkfs(&img, bs, size_kib, None, extra);
    let fs = Ext2::mount(MemDisk { bytes: std::fs::read(&img).unwrap() }).unwrap();
    (img, fs)
}

/// Stores the unmounted disk back into `img` and checks it with e2fsck.
fn store_and_check(img: &std::path::Path, fs: Ext2<MemDisk>) {
    let disk = fs.unmount().unwrap();
    std::fs::write(img, &disk.bytes).unwrap();
    assert_clean(img);
}

#[test]
fn full_disk_gives_no_space_and_keeps_files() {
    if !have_tools("full_disk") {
        return;
    }
    let tmp = TempDir::new("full");
    let (img, mut fs) = fresh(&tmp, 1024, 1024, &[]);
    let mut written = Vec::new();
    let mut hit = None;
    for i in 0..1000u64 {
        let name = format!("/f{i}");
        let ino = match fs.create(&name, 0o644) {
            Ok(ino) => ino,
            Err(e) => {
                hit = Some(e);
                break;
            }
        };
        let data = pattern(i, 40_000);
        match fs.write(ino, 0, &data) {
            Ok(n) if n == data.len() => written.push((name, data)),
            Ok(n) => {
                written.push((name, data[..n].to_vec()));
                assert_eq!(fs.write(ino, n as u64, &data[n..]), Err(Error::NoSpace));
                hit = Some(Error::NoSpace);
                break;
            }
            Err(e) => {
                written.push((name, vec![]));
                hit = Some(e);
                break;
            }
        }
    }
    assert_eq!(hit, Some(Error::NoSpace));
    assert!(written.len() > 10);
    assert_eq!(fs.statfs().free_blocks, 0);
    for (name, data) in &written {
        assert_eq!(&read_path(&mut fs, name), data, "{name}");
    }
    // Freeing one file makes room again.
    fs.unlink(&written[0].0).unwrap();
    let ino = fs.create("/after", 0o644).unwrap();
    assert_eq!(fs.write(ino, 0, &pattern(99, 10_000)), Ok(10_000));
    store_and_check(&img, fs);
}

#[test]
fn inodes_run_out() {
    if !have_tools("inodes_run_out") {
        return;
    }
    let tmp = TempDir::new("inodes");
    let (img, mut fs) = fresh(&tmp, 1024, 1024, &["-N", "64"]);
    let free = fs.statfs().free_inodes;
    for i in 0..free {
        fs.create(&format!("/n{i}"), 0o644).unwrap();
    }
    assert_eq!(fs.create("/one_more", 0o644), Err(Error::NoSpace));
    assert_eq!(fs.mkdir("/dir_more", 0o755), Err(Error::NoSpace));
    assert_eq!(fs.statfs().free_inodes, 0);
    store_and_check(&img, fs);
}

#[test]
fn long_names() {
    if !have_tools("long_names") {
        return;
    }
    let tmp = TempDir::new("names");
    let (img, mut fs) = fresh(&tmp, 1024, 1024, &[]);
    let n255 = format!("/{}", "a".repeat(255));
    let n256 = format!("/{}", "b".repeat(256));
    fs.create(&n255, 0o644).unwrap();
    fs.lookup(&n255).unwrap();
    assert_eq!(fs.create(&n256, 0o644), Err(Error::NameTooLong));
    assert_eq!(fs.mkdir(&n256, 0o755), Err(Error::NameTooLong));
    assert_eq!(fs.lookup(&n256), Err(Error::NameTooLong));
    assert_eq!(fs.rename(&n255, &n256), Err(Error::NameTooLong));
    assert_eq!(fs.create("/", 0o644), Err(Error::InvalidArgument));
    assert_eq!(fs.create("/..", 0o644), Err(Error::InvalidArgument));
    store_and_check(&img, fs);
}

#[test]
fn ten_thousand_files_in_one_directory() {
    if !have_tools("ten_thousand") {
        return;
    }
    let tmp = TempDir::new("10k");
    let (img, mut fs) = fresh(&tmp, 4096, 65536, &["-N", "12000"]);
    fs.mkdir("/many", 0o755).unwrap();
    for i in 0..10_000 {
        fs.create(&format!("/many/file_{i:05}"), 0o644).unwrap();
    }
    for i in (0..10_000).step_by(97) {
        fs.lookup(&format!("/many/file_{i:05}")).unwrap();
    }
    assert_eq!(ls(&mut fs, "/many").len(), 10_002);
    for i in (0..10_000).step_by(2) {
        fs.unlink(&format!("/many/file_{i:05}")).unwrap();
    }
    assert_eq!(ls(&mut fs, "/many").len(), 5_002);
    store_and_check(&img, fs);
}

#[test]
fn file_too_large() {
    if !have_tools("file_too_large") {
        return;
    }
    for bs in [1024u32, 4096] {
        let tmp = TempDir::new(&format!("large{bs}"));
        let (img, mut fs) = fresh(&tmp, bs, 4096, &[]);
        let max = fs.max_file_size();
        // Linux ext2_max_size: the map's reach at 1 KiB, the 32-bit sector count at 4 KiB.
        assert_eq!(max, if bs == 1024 { 16_843_020 * 1024 } else { 535_820_284 * 4096 });
        let ino = fs.create("/huge", 0o644).unwrap();
        assert_eq!(fs.write(ino, max, b"x"), Err(Error::FileTooLarge));
        assert_eq!(fs.write(ino, u64::MAX - 1, b"xy"), Err(Error::FileTooLarge));
        assert_eq!(fs.truncate(ino, max + 1), Err(Error::FileTooLarge));
        // The last byte that fits: a sparse write through the triple-indirect block.
        assert_eq!(fs.write(ino, max - 1, b"z"), Ok(1));
        assert_eq!(fs.stat(ino).unwrap().size, max);
        let mut b = [9u8; 2];
        assert_eq!(fs.read(ino, max - 2, &mut b), Ok(2));
        assert_eq!(b, [0, b'z']);
        assert_eq!(fs.read(ino, 12345, &mut b), Ok(2));
        assert_eq!(b, [0, 0]);
        // A second such file shrunk back: the triple-indirect chain is freed again.
        let free = fs.statfs().free_blocks;
        let back = fs.create("/back", 0o644).unwrap();
        fs.write(back, max - 5000, &pattern(1, 5000)).unwrap();
        fs.write(back, 0, b"head").unwrap();
        assert!(fs.statfs().free_blocks < free);
        fs.truncate(back, 4).unwrap();
        assert_eq!(fs.statfs().free_blocks, free - 1);
        assert_eq!(read_all(&mut fs, back), b"head");
        let mid = fs.create("/mid", 0o644).unwrap();
        assert_eq!(fs.write(mid, 3 << 30, b"past 2 GiB"), Ok(10));
        store_and_check(&img, fs);
        assert_eq!(debugfs_size(&img, "/mid"), (3 << 30) + 10);
        assert_eq!(debugfs_size(&img, "/huge"), max);
    }
}
