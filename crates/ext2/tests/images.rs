//! Images made by `mke2fs -d` are read back byte-exact, changed by many operations, and
//! then found clean by `e2fsck -fn`, with `debugfs` showing what was written.

mod common;

use std::fs;
use std::os::unix::fs::symlink;

use common::*;
use ext2::{Error, Ext2, FileKind};

/// Fills `dir` with the tree the tests read back: small, multi-block, indirect and
/// double-indirect files, a sparse file, nested directories and two symlinks.
fn populate(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let files = vec![
        ("empty".to_string(), vec![]),
        ("hello.txt".to_string(), b"hello, ext2\n".to_vec()),
        ("five_k".to_string(), pattern(1, 5000)),
        ("big".to_string(), pattern(2, 300 * 1024 + 17)),
        ("sub/inner".to_string(), pattern(3, 70 * 1024)),
        ("sub/deeper/leaf".to_string(), b"leaf".to_vec()),
    ];
    for (name, data) in &files {
        let p = dir.join(name);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, data).unwrap();
    }
    // A sparse file: 1 MiB hole then 10 bytes.
    let sparse = fs::File::create(dir.join("sparse")).unwrap();
    sparse.set_len(1 << 20).unwrap();
    drop(sparse);
    let mut data = vec![0u8; 1 << 20];
    data.extend_from_slice(b"0123456789");
    fs::OpenOptions::new().append(true).open(dir.join("sparse")).unwrap();
    use std::io::{Seek, SeekFrom, Write};
    let mut f = fs::OpenOptions::new().write(true).open(dir.join("sparse")).unwrap();
    f.seek(SeekFrom::Start(1 << 20)).unwrap();
    f.write_all(b"0123456789").unwrap();
    let mut files = files;
    files.push(("sparse".to_string(), data));
    symlink("hello.txt", dir.join("fastlink")).unwrap();
    symlink("x".repeat(200), dir.join("slowlink")).unwrap();
    files
}

fn image_round_trip(bs: u32) {
    if !have_tools("image_round_trip") {
        return;
    }
    let tmp = TempDir::new(&format!("rt{bs}"));
    let src = tmp.path("src");
    fs::create_dir(&src).unwrap();
    let files = populate(&src);
    let img = tmp.path("img");
    mkfs(&img, bs, 8192, Some(&src), &[]);

    let mut fs = Ext2::mount(FileDisk::open(&img)).unwrap();
    fs.set_time(1_700_000_000);
    assert!(!fs.is_read_only());
    for (name, data) in &files {
        let ino = fs.lookup(name).unwrap();
        assert_eq!(fs.stat(ino).unwrap().kind, FileKind::File);
        assert_eq!(&read_all(&mut fs, ino), data, "{name} read back differs");
    }
    // `.` and `..`, and `..` past the root stays at the root.
    let root = fs.lookup("/").unwrap();
    assert_eq!(fs.lookup("/sub/deeper/../..").unwrap(), root);
    assert_eq!(fs.lookup("../../..").unwrap(), root);
    let leaf = fs.lookup("/sub/deeper/leaf").unwrap();
    assert_eq!(fs.lookup("sub/./deeper/leaf").unwrap(), leaf);
    assert_eq!(fs.lookup("nope"), Err(Error::NotFound));
    assert_eq!(fs.lookup("hello.txt/x"), Err(Error::NotADirectory));
    let link = fs.lookup("fastlink").unwrap();
    assert_eq!(fs.stat(link).unwrap().kind, FileKind::Symlink);
    let mut names: Vec<String> = fs
        .readdir(root)
        .unwrap()
        .iter()
        .map(|e| String::from_utf8(e.name.clone()).unwrap())
        .collect();
    names.sort();
    let mut want: Vec<String> = fs::read_dir(&src)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    want.extend([".".to_string(), "..".to_string(), "lost+found".to_string()]);
    want.sort();
    assert_eq!(names, want);

    // Many changes.
    let before = fs.statfs();
    let a = fs.create("/new_a", 0o644).unwrap();
    assert_eq!(fs.create("/new_a", 0o644), Err(Error::Exists));
    assert_eq!(fs.write(a, 0, b"first"), Ok(5));
    assert_eq!(fs.append(a, b" second").unwrap(), 12);
    let big = pattern(9, 600 * 1024);
    assert_eq!(fs.write(a, 100_000, &big), Ok(big.len()));
    let mut expect_a = b"first second".to_vec();
    expect_a.resize(100_000, 0);
    expect_a.extend_from_slice(&big);
    assert_eq!(read_all(&mut fs, a), expect_a);
    fs.truncate(a, 50_003).unwrap();
    expect_a.truncate(50_003);
    fs.truncate(a, 70_000).unwrap();
    expect_a.resize(70_000, 0);
    assert_eq!(read_all(&mut fs, a), expect_a);

    fs.mkdir("/d1", 0o755).unwrap();
    fs.mkdir("/d1/d2", 0o755).unwrap();
    assert_eq!(stat_path(&mut fs, "/d1").links, 3);
    let b = fs.create("/d1/d2/b", 0o600).unwrap();
    fs.write(b, 0, &pattern(4, 3000)).unwrap();
    fs.rename("/d1/d2/b", "/d1/b2").unwrap(); // across directories
    fs.rename("/d1/b2", "/d1/b3").unwrap(); // within
    fs.rename("/hello.txt", "/d1/b3").unwrap(); // replaces a file
    assert_eq!(read_path(&mut fs, "/d1/b3"), b"hello, ext2\n");
    fs.rename("/sub/deeper", "/d1/deeper").unwrap(); // a directory across
    let d1 = fs.lookup("/d1").unwrap();
    assert_eq!(fs.lookup("/d1/deeper/..").unwrap(), d1);
    assert_eq!(fs.rename("/d1", "/d1/d2/x"), Err(Error::InvalidArgument));
    fs.mkdir("/empty_dir", 0o755).unwrap();
    fs.rename("/d1/d2", "/empty_dir").unwrap(); // replaces an empty directory
    assert_eq!(fs.rename("/sub", "/d1"), Err(Error::NotEmpty));
    assert_eq!(fs.rmdir("/d1"), Err(Error::NotEmpty));
    assert_eq!(fs.unlink("/d1"), Err(Error::IsADirectory));
    assert_eq!(fs.rmdir("/five_k"), Err(Error::NotADirectory));
    fs.unlink("/big").unwrap();
    fs.unlink("/fastlink").unwrap();
    fs.unlink("/slowlink").unwrap();
    fs.unlink("/sparse").unwrap();
    fs.rmdir("/empty_dir").unwrap();
    for i in 0..200 {
        let f = fs.create(&format!("/sub/f{i}"), 0o644).unwrap();
        fs.write(f, 0, &pattern(i, (i as usize * 37) % 5000)).unwrap();
    }
    for i in (0..200).step_by(3) {
        fs.unlink(&format!("/sub/f{i}")).unwrap();
    }
    assert!(fs.statfs().free_blocks < before.free_blocks);
    fs.sync().unwrap();
    assert_clean(&img); // after sync, still mounted
    fs.unmount().unwrap();
    assert_clean(&img);

    assert_eq!(debugfs_cat(&img, "/new_a"), expect_a);
    assert_eq!(debugfs_cat(&img, "/d1/b3"), b"hello, ext2\n");
    assert_eq!(debugfs_cat(&img, "/sub/f7"), pattern(7, 7 * 37));
    let mut names = debugfs_ls(&img, "/d1");
    names.sort();
    assert_eq!(names, [".", "..", "b3", "deeper"]);

    // Mount again: the same contents.
    let mut fs = Ext2::mount(FileDisk::open(&img)).unwrap();
    assert_eq!(read_path(&mut fs, "/new_a"), expect_a);
    assert_eq!(read_path(&mut fs, "/d1/deeper/leaf"), b"leaf");
    assert_eq!(ls(&mut fs, "/sub").len(), 2 + 1 + 200 - 67);
    fs.unmount().unwrap();
    assert_clean(&img);
}

#[test]
fn image_1024() {
    image_round_trip(1024);
}

#[test]
fn image_2048() {
    image_round_trip(2048);
}

#[test]
fn image_4096() {
    image_round_trip(4096);
}

/// 128-byte inodes and no FILETYPE, SPARSE_SUPER or dir_index: the oldest layout mke2fs
/// still makes.
#[test]
fn image_old_layout() {
    if !have_tools("image_old_layout") {
        return;
    }
    let tmp = TempDir::new("old");
    let src = tmp.path("src");
    fs::create_dir(&src).unwrap();
    fs::write(src.join("f"), pattern(5, 20_000)).unwrap();
    let img = tmp.path("img");
    mkfs(
        &img,
        1024,
        4096,
        Some(&src),
        &["-I", "128", "-O", "^filetype,^sparse_super,^dir_index,^resize_inode,^ext_attr"],
    );
    let mut fs = Ext2::mount(MemDiskFile::load(&img)).unwrap();
    assert_eq!(read_path(&mut fs, "f"), pattern(5, 20_000));
    fs.mkdir("/d", 0o755).unwrap();
    let g = fs.create("/d/g", 0o644).unwrap();
    fs.write(g, 0, &pattern(6, 9000)).unwrap();
    fs.rename("/f", "/d/f").unwrap();
    let kinds: Vec<FileKind> = ls(&mut fs, "/d").iter().map(|e| e.kind).collect();
    assert_eq!(kinds, [FileKind::Dir, FileKind::Dir, FileKind::File, FileKind::File]);
    let disk = fs.unmount().unwrap();
    disk.store(&img);
    assert_clean(&img);
    assert_eq!(debugfs_cat(&img, "/d/g"), pattern(6, 9000));
}

/// The in-memory disk, loaded from and stored to an image file.
struct MemDiskFile;

impl MemDiskFile {
    fn load(img: &std::path::Path) -> ext2::MemDisk {
        ext2::MemDisk { bytes: fs::read(img).unwrap() }
    }
}

trait Store {
    fn store(&self, img: &std::path::Path);
}

impl Store for ext2::MemDisk {
    fn store(&self, img: &std::path::Path) {
        fs::write(img, &self.bytes).unwrap();
    }
}

/// An unknown read-only-compatible feature mounts read-only; an unknown incompatible
/// one is refused with its name.
#[test]
fn feature_flags() {
    if !have_tools("feature_flags") {
        return;
    }
    let tmp = TempDir::new("feat");
    let img = tmp.path("img");
    mkfs(&img, 1024, 2048, None, &[]);
    let mut bytes = fs::read(&img).unwrap();
    bytes[1024 + 100] |= 0x80; // ro_compat: an unknown bit
    let mut fs = Ext2::mount(ext2::MemDisk { bytes: bytes.clone() }).unwrap();
    assert!(fs.is_read_only());
    assert_eq!(fs.create("/x", 0o644), Err(Error::ReadOnly));
    assert!(fs.readdir(2).is_ok());
    bytes[1024 + 100] &= !0x80;
    bytes[1024 + 96] |= 0x40; // incompat: extents
    assert!(
        matches!(Ext2::mount(ext2::MemDisk { bytes }), Err(Error::Unsupported(r)) if r.contains("EXTENTS"))
    );
}

/// A directory with an htree index (made by `e2fsck -D`) reads linearly, and after a
/// change loses the index flag and stays consistent.
#[test]
fn htree_directory_is_read_and_changed_linearly() {
    if !have_tools("htree") {
        return;
    }
    let tmp = TempDir::new("htree");
    let src = tmp.path("src");
    fs::create_dir_all(src.join("d")).unwrap();
    for i in 0..2000 {
        fs::write(src.join(format!("d/file_{i}")), format!("{i}")).unwrap();
    }
    let img = tmp.path("img");
    mkfs(&img, 1024, 16384, Some(&src), &[]);
    index_directories(&img);
    let mut fs = Ext2::mount(FileDisk::open(&img)).unwrap();
    assert_eq!(ls(&mut fs, "/d").len(), 2002);
    for i in (0..2000).step_by(7) {
        assert_eq!(read_path(&mut fs, &format!("/d/file_{i}")), format!("{i}").as_bytes());
    }
    fs.create("/d/new", 0o644).unwrap();
    fs.unlink("/d/file_5").unwrap();
    fs.rename("/d/file_6", "/d/renamed").unwrap();
    assert_eq!(read_path(&mut fs, "/d/renamed"), b"6");
    assert_eq!(ls(&mut fs, "/d").len(), 2002);
    fs.unmount().unwrap();
    assert_clean(&img);
}

/// Revision 0 (`mke2fs -r 0`): fixed 128-byte inodes, no features, files below 2 GiB.
#[test]
fn image_revision_0() {
    if !have_tools("image_revision_0") {
        return;
    }
    let tmp = TempDir::new("rev0");
    let src = tmp.path("src");
    fs::create_dir_all(src.join("sub")).unwrap();
    fs::write(src.join("sub/f"), pattern(8, 70_000)).unwrap();
    let img = tmp.path("img");
    mkfs(&img, 1024, 4096, Some(&src), &["-r", "0"]);
    let mut fs = Ext2::mount(FileDisk::open(&img)).unwrap();
    assert_eq!(read_path(&mut fs, "/sub/f"), pattern(8, 70_000));
    assert_eq!(fs.max_file_size(), (1 << 31) - 1);
    let g = fs.create("/sub/g", 0o644).unwrap();
    assert_eq!(fs.write(g, 1 << 31, b"x"), Err(Error::FileTooLarge));
    fs.write(g, 0, &pattern(9, 5000)).unwrap();
    fs.rename("/sub", "/moved").unwrap();
    fs.unlink("/moved/f").unwrap();
    fs.unmount().unwrap();
    assert_clean(&img);
    assert_eq!(debugfs_cat(&img, "/moved/g"), pattern(9, 5000));
}
