//! Helpers shared by the integration tests: a file-backed block device, and wrappers
//! around the host's `mke2fs`, `e2fsck` and `debugfs` (tests skip, saying so, when they
//! are missing).
#![allow(dead_code)]

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use ext2::{BlockDevice, IoError};

/// A disk image file as a block device.
pub struct FileDisk {
    pub file: File,
}

impl FileDisk {
    /// Opens `path` for reading and writing.
    pub fn open(path: &Path) -> FileDisk {
        FileDisk { file: OpenOptions::new().read(true).write(true).open(path).unwrap() }
    }
}

impl BlockDevice for FileDisk {
    fn read_block(&mut self, n: u32, buf: &mut [u8]) -> Result<(), IoError> {
        self.file.seek(SeekFrom::Start(n as u64 * buf.len() as u64)).map_err(|_| IoError)?;
        self.file.read_exact(buf).map_err(|_| IoError)
    }

    fn write_block(&mut self, n: u32, buf: &[u8]) -> Result<(), IoError> {
        self.file.seek(SeekFrom::Start(n as u64 * buf.len() as u64)).map_err(|_| IoError)?;
        self.file.write_all(buf).map_err(|_| IoError)
    }

    fn flush(&mut self) -> Result<(), IoError> {
        self.file.sync_data().map_err(|_| IoError)
    }
}

const MKE2FS: &str = "/usr/sbin/mke2fs";
const E2FSCK: &str = "/usr/sbin/e2fsck";
const DEBUGFS: &str = "/usr/sbin/debugfs";

/// Whether the e2fsprogs tools are installed; prints why a test is skipped if not.
pub fn have_tools(test: &str) -> bool {
    let ok = [MKE2FS, E2FSCK, DEBUGFS].iter().all(|t| Path::new(t).exists());
    if !ok {
        eprintln!("SKIP {test}: e2fsprogs (mke2fs, e2fsck, debugfs) not installed");
    }
    ok
}

/// A fresh empty directory under the system temp dir, removed by the caller's drop guard.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("ext2-test-{}-{tag}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Runs `mke2fs -q -t ext2 -b <bs> [extra] [-d src] img size_kib` and returns the image.
pub fn mkfs(img: &Path, bs: u32, size_kib: u32, src: Option<&Path>, extra: &[&str]) {
    let _ = fs::remove_file(img);
    let mut cmd = Command::new(MKE2FS);
    cmd.args(["-q", "-F", "-t", "ext2", "-b", &bs.to_string()]).args(extra);
    if let Some(src) = src {
        cmd.arg("-d").arg(src);
    }
    cmd.arg(img).arg(format!("{size_kib}k"));
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "mke2fs failed: {}", String::from_utf8_lossy(&out.stderr));
}

/// Runs `e2fsck -fn img`; returns (exit code, output).
pub fn fsck(img: &Path) -> (i32, String) {
    let out = Command::new(E2FSCK).arg("-fn").arg(img).output().unwrap();
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), text)
}

/// Asserts that `e2fsck -fn` finds `img` clean.
pub fn assert_clean(img: &Path) {
    let (code, text) = fsck(img);
    assert_eq!(code, 0, "e2fsck -fn found problems:\n{text}");
    if std::env::var("EXT2_TEST_VERBOSE").is_ok() {
        eprintln!("{text}");
    }
}

/// The contents of `path` inside `img`, as `debugfs -R "cat path"` prints them.
pub fn debugfs_cat(img: &Path, path: &str) -> Vec<u8> {
    let out = Command::new(DEBUGFS).arg("-R").arg(format!("cat {path}")).arg(img).output().unwrap();
    assert!(out.status.success());
    out.stdout
}

/// The names `debugfs -R "ls -p dir"` lists in `dir` of `img` (`.` and `..` included).
pub fn debugfs_ls(img: &Path, dir: &str) -> Vec<String> {
    let out =
        Command::new(DEBUGFS).arg("-R").arg(format!("ls -p {dir}")).arg(img).output().unwrap();
    // Lines look like "/12/100644/0/0/name/size/".
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split('/').nth(5).map(str::to_string))
        .filter(|n| !n.is_empty())
        .collect()
}

/// Deterministic bytes for test data: `len` bytes seeded by `seed`.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Reads the whole of file `ino`.
pub fn read_all<D: BlockDevice>(fs: &mut ext2::Ext2<D>, ino: ext2::Ino) -> Vec<u8> {
    let size = fs.stat(ino).unwrap().size as usize;
    let mut buf = vec![0u8; size];
    assert_eq!(fs.read(ino, 0, &mut buf).unwrap(), size);
    buf
}

/// Reads the whole of the file at `path`.
pub fn read_path<D: BlockDevice>(fs: &mut ext2::Ext2<D>, path: &str) -> Vec<u8> {
    let ino = fs.lookup(path).unwrap();
    read_all(fs, ino)
}

/// Lists the directory at `path`.
pub fn ls<D: BlockDevice>(fs: &mut ext2::Ext2<D>, path: &str) -> Vec<ext2::DirEntry> {
    let ino = fs.lookup(path).unwrap();
    fs.readdir(ino).unwrap()
}

/// Stats the inode at `path`.
pub fn stat_path<D: BlockDevice>(fs: &mut ext2::Ext2<D>, path: &str) -> ext2::Stat {
    let ino = fs.lookup(path).unwrap();
    fs.stat(ino).unwrap()
}

/// The size of `path` inside `img`, from `debugfs -R "stat path"`.
pub fn debugfs_size(img: &Path, path: &str) -> u64 {
    let out =
        Command::new(DEBUGFS).arg("-R").arg(format!("stat {path}")).arg(img).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let at = text.find("Size: ").expect("debugfs stat prints Size:") + 6;
    text[at..].split_whitespace().next().unwrap().parse().unwrap()
}

/// Runs `e2fsck -fyD img`, which gives every large directory an htree index.
pub fn index_directories(img: &Path) {
    let out = Command::new(E2FSCK).arg("-fyD").arg(img).output().unwrap();
    assert!(
        out.status.code().unwrap_or(8) < 4,
        "e2fsck -fyD failed: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}
