//! `DISK`: the virtio-blk disk a VM gets (issue M13), and e2fsprogs run on its image.
//!
//! The kernel drives the first `virtio-blk-pci` device it finds. `DISK` says what backs it:
//!
//! - a directory: an ext2 image built from it with `mke2fs -d` into
//!   `target/disks/<dirname>-<hash>.img`, and built again only when something in the
//!   directory is newer than the image, so what Atoll writes to the disk is still there at
//!   the next boot (QEMU's writes make the image newer than the directory);
//! - a regular file: a raw image, used as it is;
//! - `none`: no disk;
//! - unset: `target/disks/default.img`, built from the repository's `disk/` the same way.
//!
//! The tools come from Debian's e2fsprogs (`cargo xtask deps` installs it); every run of
//! them here is bounded by a timeout.

use std::ffi::OsStr;
use std::fs;
use std::io::{ErrorKind, Read};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use crate::{deps, Result};

/// The e2fsprogs tools xtask runs: it builds images, checks them, and reads files back.
pub const TOOLS: [&str; 3] = ["mke2fs", "e2fsck", "debugfs"];

/// The Debian package that provides [`TOOLS`].
pub const TOOLS_PACKAGE: &str = "e2fsprogs";

/// The file-system block size of a built image (the kernel's ext2 takes 1, 2 or 4 KiB).
const BLOCK_BYTES: u64 = 4096;

/// The smallest image built from a directory: room for what Atoll writes to it.
const MIN_IMAGE_MIB: u64 = 64;

/// Space on top of twice the content: the file system's own tables (inodes, bitmaps).
const HEADROOM_MIB: u64 = 16;

/// `mke2fs` is given this long (a large directory takes a while to copy).
const MKE2FS_TIMEOUT: Duration = Duration::from_secs(600);

/// What `DISK` asks for, resolved to paths.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Disk {
    /// `DISK=none`: no disk device.
    None,
    /// `DISK=FILE`: a raw image, used as it is (canonical path).
    File(PathBuf),
    /// `DISK=DIR`, or no `DISK` (the repository's `disk/`): an ext2 image built from `dir`
    /// (canonical path) into `image`, kept while nothing in `dir` is newer.
    Dir {
        /// The directory the image is built from.
        dir: PathBuf,
        /// Where the image is kept.
        image: PathBuf,
    },
}

impl Disk {
    /// Resolves the `DISK` setting: `default_dir` is the repository's `disk/`, `disks`
    /// the directory images are built into (`target/disks`). A path that is neither a
    /// directory nor a regular file is an error.
    pub fn choose(setting: Option<&str>, default_dir: &Path, disks: &Path) -> Result<Disk> {
        let Some(setting) = setting else {
            let dir = fs::canonicalize(default_dir).map_err(|e| {
                format!("the default disk's directory {}: {e}", default_dir.display())
            })?;
            return Ok(Disk::Dir { dir, image: disks.join("default.img") });
        };
        if setting == "none" {
            return Ok(Disk::None);
        }
        let path = fs::canonicalize(setting).map_err(|e| {
            format!("DISK={setting}: {e} (DISK takes a directory, a raw image file or `none`)")
        })?;
        if path.is_dir() {
            let image = disks.join(image_name(&path));
            if image.starts_with(&path) {
                // mke2fs would copy the image being built into itself (and the rest of
                // the build output with it).
                return Err(format!(
                    "DISK={setting}: the directory holds the image's own folder {}; give one \
                     that does not contain the build output",
                    disks.display()
                ));
            }
            Ok(Disk::Dir { dir: path, image })
        } else if path.is_file() {
            Ok(Disk::File(path))
        } else {
            Err(format!("DISK={setting}: not a directory or a regular file"))
        }
    }

    /// Makes the image ready (unless `dry_run`: then nothing is built) and returns the
    /// QEMU arguments that attach it (none for [`Disk::None`]) with a line for the user
    /// saying which image it is and whether it was (re)built.
    pub fn attach(&self, dry_run: bool) -> Result<(Vec<String>, String)> {
        let (image, line) = match self {
            Disk::None => return Ok((Vec::new(), "no disk (DISK=none)".into())),
            Disk::File(file) => {
                (file, format!("virtio-blk disk {} (a raw image, used as it is)", file.display()))
            }
            Disk::Dir { dir, image } => {
                let (dir_text, image_text) = (dir.display(), image.display());
                let why = match staleness(dir, image)? {
                    Staleness::UpToDate => {
                        let line = format!(
                            "virtio-blk disk {image_text}, built from {dir_text} before and kept \
                             (nothing there is newer): what Atoll wrote to it is still there"
                        );
                        return Ok((qemu_args(image), line));
                    }
                    Staleness::Missing => "no image yet".to_string(),
                    Staleness::Newer(file) => format!(
                        "{} is newer; what Atoll wrote to the old image is gone",
                        file.display()
                    ),
                };
                let line = if dry_run {
                    format!("virtio-blk disk {image_text}, would be built from {dir_text} ({why})")
                } else {
                    let mib = build_image(dir, image)?;
                    let built = format!("built from {dir_text}: {mib} MiB ext2");
                    format!("virtio-blk disk {image_text}, {built} ({why})")
                };
                (image, line)
            }
        };
        Ok((qemu_args(image), line))
    }
}

/// The file name of the image built from `dir` (a canonical path): its last component,
/// made safe for a file name, and a short hash of the whole path (two `www` folders get
/// two images).
fn image_name(dir: &Path) -> String {
    let name = dir.file_name().map_or("root".into(), |n| n.to_string_lossy().into_owned());
    let safe: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' })
        .collect();
    format!("{safe}-{:08x}.img", fnv1a(dir.as_os_str().as_bytes()) as u32)
}

/// FNV-1a, 64 bits: a stable hash (std's `DefaultHasher` may change between releases,
/// and the image name must not).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(0xcbf2_9ce4_8422_2325, |hash, &b| (hash ^ b as u64).wrapping_mul(0x100_0000_01b3))
}

/// The QEMU arguments that give the VM `image` as a raw virtio-blk disk.
pub fn qemu_args(image: &Path) -> Vec<String> {
    // QEMU's option syntax splits on commas; a comma inside a value is written twice.
    let file = image.to_string_lossy().replace(',', ",,");
    vec![
        "-drive".into(),
        format!("file={file},if=none,id=disk0,format=raw"),
        "-device".into(),
        "virtio-blk-pci,drive=disk0".into(),
    ]
}

/// Whether an image built from a directory must be built (again).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Staleness {
    /// There is no image yet.
    Missing,
    /// This file or folder of the directory is newer than the image.
    Newer(PathBuf),
    /// Nothing in the directory is newer than the image.
    UpToDate,
}

/// Whether `image` must be built from `dir`: it is missing, or an entry under `dir` (a
/// file, or a folder, whose time changes when an entry is added or removed) was modified
/// after it.
pub fn staleness(dir: &Path, image: &Path) -> Result<Staleness> {
    let built = match fs::metadata(image) {
        Ok(meta) => meta.modified().map_err(|e| format!("{}: {e}", image.display()))?,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Staleness::Missing),
        Err(e) => return Err(format!("{}: {e}", image.display())),
    };
    let scan = scan(dir)?;
    Ok(match scan.newest {
        Some((time, path)) if time > built => Staleness::Newer(path),
        _ => Staleness::UpToDate,
    })
}

/// What [`scan`] found in a directory.
#[derive(Debug, Default)]
struct Scan {
    /// The most recently modified entry (the directory itself included) and its time.
    newest: Option<(SystemTime, PathBuf)>,
    /// The space the content takes in blocks: each file's size and each folder rounded
    /// up to whole blocks.
    bytes: u64,
}

/// Walks `dir` (symbolic links are not followed: mke2fs copies them as links).
fn scan(dir: &Path) -> Result<Scan> {
    let mut found = Scan::default();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(path) = pending.pop() {
        let meta = fs::symlink_metadata(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let time = meta.modified().map_err(|e| format!("{}: {e}", path.display()))?;
        if found.newest.as_ref().is_none_or(|(newest, _)| time > *newest) {
            found.newest = Some((time, path.clone()));
        }
        found.bytes += meta.len().div_ceil(BLOCK_BYTES).max(1) * BLOCK_BYTES;
        if meta.is_dir() {
            let unreadable = |e: std::io::Error| format!("{}: {e}", path.display());
            for entry in fs::read_dir(&path).map_err(unreadable)? {
                pending.push(entry.map_err(unreadable)?.path());
            }
        }
    }
    Ok(found)
}

/// The size of an image for `content` bytes: twice the content and 16 MiB, in whole MiB,
/// and at least 64 MiB.
fn image_mib(content: u64) -> u64 {
    (content * 2).div_ceil(1 << 20).saturating_add(HEADROOM_MIB).max(MIN_IMAGE_MIB)
}

/// Builds an ext2 image of `dir` at `image` (replacing it); returns its size in MiB.
/// mke2fs writes to a temporary file that is renamed when complete, so a failed build
/// leaves no image behind to be taken as up to date.
pub fn build_image(dir: &Path, image: &Path) -> Result<u64> {
    let mib = image_mib(scan(dir)?.bytes);
    if let Some(parent) = image.parent() {
        fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    }
    let mut partial = image.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    for old in [image, &partial] {
        // mke2fs asks before overwriting an existing file system.
        match fs::remove_file(old) {
            Err(e) if e.kind() != ErrorKind::NotFound => {
                return Err(format!("{}: {e}", old.display()));
            }
            _ => {}
        }
    }
    let size = format!("{mib}M");
    let args: [&OsStr; 11] = [
        "-q".as_ref(),
        "-t".as_ref(),
        "ext2".as_ref(),
        "-b".as_ref(),
        "4096".as_ref(),
        "-L".as_ref(),
        "atoll".as_ref(),
        "-d".as_ref(),
        dir.as_os_str(),
        partial.as_os_str(),
        size.as_ref(),
    ];
    let out = run_tool("mke2fs", &args, MKE2FS_TIMEOUT)?;
    if out.code != 0 {
        let _ = fs::remove_file(&partial);
        return Err(format!(
            "mke2fs of {} into {} exited {}:\n{}",
            dir.display(),
            image.display(),
            out.code,
            out.tail(20)
        ));
    }
    fs::rename(&partial, image).map_err(|e| format!("{}: {e}", image.display()))?;
    Ok(mib)
}

/// Where one of [`TOOLS`] is: on `PATH`, or in `/usr/sbin` or `/sbin` (Debian installs
/// them there, and a user's `PATH` often lacks those).
pub fn find_tool(name: &str) -> Option<PathBuf> {
    deps::find_program(name).or_else(|| {
        ["/usr/sbin", "/sbin"].iter().find_map(|dir| deps::find_program(&format!("{dir}/{name}")))
    })
}

/// The output of a tool that ran to its end.
#[derive(Debug)]
pub struct ToolOutput {
    /// Its exit code.
    pub code: i32,
    /// What it wrote to stdout.
    pub stdout: Vec<u8>,
    /// What it wrote to stderr.
    pub stderr: Vec<u8>,
}

impl ToolOutput {
    /// The last `count` lines of stdout, then stderr, indented for a test report.
    pub fn tail(&self, count: usize) -> String {
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&self.stdout),
            String::from_utf8_lossy(&self.stderr)
        );
        let lines: Vec<&str> = text.lines().collect();
        let tail = &lines[lines.len().saturating_sub(count)..];
        tail.iter().map(|l| format!("    {l}")).collect::<Vec<_>>().join("\n")
    }
}

/// Runs one of [`TOOLS`] with `args` and no input; kills it after `timeout`. Being killed,
/// or dying by a signal, is an error; any exit code is the caller's to judge.
pub fn run_tool(name: &str, args: &[&OsStr], timeout: Duration) -> Result<ToolOutput> {
    let Some(program) = find_tool(name) else {
        return Err(format!(
            "{name} not found: run `make deps` (or `cargo xtask deps`) first (Debian package \
             {TOOLS_PACKAGE})"
        ));
    };
    let mut child = Command::new(&program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", program.display()))?;
    // Read both pipes while waiting: a tool that fills one would otherwise block forever.
    let mut stdout = child.stdout.take().expect("stdout is piped");
    let mut stderr = child.stderr.take().expect("stderr is piped");
    let out = thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stdout.read_to_end(&mut bytes);
        bytes
    });
    let err = thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stderr.read_to_end(&mut bytes);
        bytes
    });
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) if start.elapsed() >= timeout => {
                let _ = child.kill();
                let _ = child.wait();
                break Err(format!("{name} ran over {} s and was killed", timeout.as_secs()));
            }
            Ok(None) => thread::sleep(Duration::from_millis(5)),
            Err(e) => break Err(format!("waiting for {name}: {e}")),
        }
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    let status = status?;
    match status.code() {
        Some(code) => Ok(ToolOutput { code, stdout, stderr }),
        None => Err(format!("{name} ended by a signal ({status})")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;
    use std::time::UNIX_EPOCH;

    /// A fresh directory for one test, removed when dropped.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(tag: &str) -> TempDir {
            let dir = std::env::temp_dir().join(format!("xtask-disk-{}-{tag}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    /// Sets the modification time of `path` to `secs` after the epoch.
    fn touch(path: &Path, secs: u64) {
        let time = UNIX_EPOCH + Duration::from_secs(secs);
        File::options()
            .write(!path.is_dir())
            .read(true)
            .open(path)
            .unwrap()
            .set_modified(time)
            .unwrap();
    }

    /// A directory `src` with a file in a folder, everything at time 1000, and an image
    /// `disk.img` beside it at time 2000.
    fn built(tmp: &TempDir) -> (PathBuf, PathBuf) {
        let (src, image) = (tmp.0.join("src"), tmp.0.join("disk.img"));
        fs::create_dir_all(src.join("www")).unwrap();
        fs::write(src.join("www/index.html"), "<p>hi</p>").unwrap();
        fs::write(&image, "").unwrap();
        for path in [&src.join("www/index.html"), &src.join("www"), &src] {
            touch(path, 1000);
        }
        touch(&image, 2000);
        (src, image)
    }

    #[test]
    fn an_image_newer_than_everything_is_kept() {
        let tmp = TempDir::new("kept");
        let (src, image) = built(&tmp);
        assert_eq!(staleness(&src, &image).unwrap(), Staleness::UpToDate);
        // QEMU writing the image makes it newer still: kept.
        touch(&image, 3000);
        assert_eq!(staleness(&src, &image).unwrap(), Staleness::UpToDate);
    }

    #[test]
    fn a_missing_image_is_built() {
        let tmp = TempDir::new("missing");
        let (src, image) = built(&tmp);
        fs::remove_file(&image).unwrap();
        assert_eq!(staleness(&src, &image).unwrap(), Staleness::Missing);
    }

    #[test]
    fn a_newer_file_deep_inside_rebuilds_and_is_named() {
        let tmp = TempDir::new("newer");
        let (src, image) = built(&tmp);
        touch(&src.join("www/index.html"), 2500);
        assert_eq!(staleness(&src, &image).unwrap(), Staleness::Newer(src.join("www/index.html")));
    }

    #[test]
    fn a_removed_file_rebuilds_through_its_folders_time() {
        let tmp = TempDir::new("removed");
        let (src, image) = built(&tmp);
        touch(&src.join("www"), 2001);
        assert_eq!(staleness(&src, &image).unwrap(), Staleness::Newer(src.join("www")));
    }

    #[test]
    fn the_image_is_at_least_64_mib_and_grows_with_the_content() {
        assert_eq!(image_mib(0), 64);
        assert_eq!(image_mib(20 << 20), 64);
        // 24 MiB of content: 48 + 16.
        assert_eq!(image_mib(24 << 20), 64);
        assert_eq!(image_mib((24 << 20) + 1), 65);
        assert_eq!(image_mib(100 << 20), 216);
        let tmp = TempDir::new("size");
        let (src, _) = built(&tmp);
        // Two folders and one small file: a block each.
        assert_eq!(scan(&src).unwrap().bytes, 3 * BLOCK_BYTES);
    }

    #[test]
    fn qemu_gets_a_raw_virtio_blk_drive() {
        let args = qemu_args(Path::new("/t/disks/default.img"));
        assert_eq!(
            args.join(" "),
            "-drive file=/t/disks/default.img,if=none,id=disk0,format=raw \
             -device virtio-blk-pci,drive=disk0"
        );
        assert_eq!(
            qemu_args(Path::new("/a,b.img"))[1],
            "file=/a,,b.img,if=none,id=disk0,format=raw"
        );
    }

    #[test]
    fn the_setting_picks_a_directory_a_file_or_none() {
        let tmp = TempDir::new("choose");
        let (src, image) = built(&tmp);
        let (src, image) = (fs::canonicalize(src).unwrap(), fs::canonicalize(image).unwrap());
        let disks = tmp.0.join("disks");
        let default = Disk::choose(None, &src, &disks).unwrap();
        assert_eq!(default, Disk::Dir { dir: src.clone(), image: disks.join("default.img") });
        assert_eq!(Disk::choose(Some("none"), &src, &disks).unwrap(), Disk::None);
        let file = Disk::choose(Some(image.to_str().unwrap()), &src, &disks).unwrap();
        assert_eq!(file, Disk::File(image));
        let Disk::Dir { dir, image } =
            Disk::choose(Some(src.to_str().unwrap()), &src, &disks).unwrap()
        else {
            panic!("a directory is built into an image");
        };
        assert_eq!(dir, src);
        let name = image.file_name().unwrap().to_str().unwrap();
        assert!(
            image.starts_with(&disks) && name.starts_with("src-") && name.ends_with(".img"),
            "{name}"
        );
        assert_eq!(name.len(), "src-".len() + 8 + ".img".len(), "{name}");
        // The same path always gives the same name.
        assert_eq!(image_name(&dir), name);
    }

    #[test]
    fn a_path_that_does_not_exist_is_an_error() {
        let tmp = TempDir::new("nothing");
        let missing = tmp.0.join("no-such-thing");
        let err = Disk::choose(Some(missing.to_str().unwrap()), &tmp.0, &tmp.0.join("disks"))
            .unwrap_err();
        assert!(
            err.contains("DISK=") && err.contains("no-such-thing") && err.contains("none"),
            "{err}"
        );
        // A missing default directory is one too, not a silent diskless run.
        assert!(Disk::choose(None, &missing, &tmp.0).unwrap_err().contains("default disk"));
    }

    #[test]
    fn a_directory_holding_the_images_is_refused() {
        let tmp = TempDir::new("holds");
        let err =
            Disk::choose(Some(tmp.0.to_str().unwrap()), &tmp.0, &tmp.0.join("disks")).unwrap_err();
        assert!(err.contains("build output"), "{err}");
    }

    #[test]
    fn names_are_safe_and_hashes_stable() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        let name = image_name(Path::new("/home/u/my files"));
        assert!(name.starts_with("my_files-"), "{name}");
        assert!(image_name(Path::new("/")).starts_with("root-"));
        assert_ne!(image_name(Path::new("/a/www")), image_name(Path::new("/b/www")));
    }

    /// Needs e2fsprogs; skipped (with a note) without it.
    #[test]
    fn a_built_image_is_clean_ext2_and_holds_the_files() {
        if TOOLS.iter().any(|t| find_tool(t).is_none()) {
            eprintln!("skipped: e2fsprogs is not installed");
            return;
        }
        let tmp = TempDir::new("build");
        let (src, image) = built(&tmp);
        assert_eq!(build_image(&src, &image).unwrap(), 64);
        assert_eq!(staleness(&src, &image).unwrap(), Staleness::UpToDate);
        let fsck =
            run_tool("e2fsck", &["-fn".as_ref(), image.as_os_str()], Duration::from_secs(60))
                .unwrap();
        assert_eq!(fsck.code, 0, "{}", fsck.tail(20));
        let cat = run_tool(
            "debugfs",
            &["-R".as_ref(), "cat /www/index.html".as_ref(), image.as_os_str()],
            Duration::from_secs(60),
        )
        .unwrap();
        assert_eq!(cat.stdout, b"<p>hi</p>");
        assert!(!tmp.0.join("disk.img.partial").exists());
    }

    /// Needs e2fsprogs. `make run`'s disk: built the first time, kept the next (as QEMU's
    /// writes leave it), built again when a file in the directory changes.
    #[test]
    fn attaching_builds_keeps_and_rebuilds() {
        if TOOLS.iter().any(|t| find_tool(t).is_none()) {
            eprintln!("skipped: e2fsprogs is not installed");
            return;
        }
        let tmp = TempDir::new("attach");
        let (src, _) = built(&tmp);
        let disk = Disk::choose(Some(src.to_str().unwrap()), &src, &tmp.0.join("disks")).unwrap();
        let Disk::Dir { image, .. } = &disk else { panic!("{disk:?}") };
        let (args, line) = disk.attach(true).unwrap();
        assert!(line.contains("would be built") && line.contains("no image yet"), "{line}");
        assert!(!image.exists(), "a dry run built the image");
        assert_eq!(args, qemu_args(image));
        let (_, line) = disk.attach(false).unwrap();
        assert!(line.contains("built from") && line.contains("64 MiB"), "{line}");
        let (_, line) = disk.attach(false).unwrap();
        assert!(line.contains("kept"), "{line}");
        // An edit after the image was built (times in the past, so the rebuilt image is
        // newer than both).
        touch(image, 1500);
        touch(&src.join("www/index.html"), 1800);
        let (_, line) = disk.attach(false).unwrap();
        assert!(line.contains("index.html is newer") && line.contains("gone"), "{line}");
        assert_eq!(staleness(&src, image).unwrap(), Staleness::UpToDate);
    }
}
