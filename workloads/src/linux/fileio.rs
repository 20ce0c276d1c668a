//! `file_read` and `file_write` on Linux (issue M13): `std::fs` on the bench image, which
//! the guest's `/init` mounts at [`ROOT`] (ext2, through the ext4 driver, on virtio-blk).

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::string::{String, ToString};
use std::time::Instant;
use std::vec::Vec;

use crate::fileio::{file_read, file_write, Files};

/// Where the guest mounts the bench image.
pub const ROOT: &str = "/mnt";

/// The image's files through `std::fs`.
pub struct LinuxFiles {
    root: PathBuf,
    start: Instant,
}

impl LinuxFiles {
    /// The files under [`ROOT`]; an error when nothing is mounted there.
    pub fn new() -> Result<LinuxFiles, String> {
        let root = PathBuf::from(ROOT);
        if !root.join(crate::fileio::SEQ_FILE).is_file() {
            return Err(format!("no bench image mounted at {ROOT}"));
        }
        Ok(LinuxFiles { root, start: Instant::now() })
    }
}

impl Files for LinuxFiles {
    type File = File;

    fn open(&mut self, path: &str) -> Result<File, String> {
        File::open(self.root.join(path)).map_err(|e| format!("{path}: {e}"))
    }

    fn create(&mut self, path: &str) -> Result<File, String> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(self.root.join(path))
            .map_err(|e| format!("{path}: {e}"))
    }

    fn read_at(&mut self, f: &mut File, buf: &mut [u8], offset: u64) -> Result<usize, String> {
        f.read_at(buf, offset).map_err(|e| e.to_string())
    }

    fn write_at(&mut self, f: &mut File, data: &[u8], offset: u64) -> Result<(), String> {
        f.write_all_at(data, offset).map_err(|e| e.to_string())
    }

    fn fsync(&mut self, f: &mut File) -> Result<(), String> {
        f.sync_all().map_err(|e| e.to_string())
    }

    fn remove(&mut self, path: &str) -> Result<(), String> {
        match fs::remove_file(self.root.join(path)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.to_string()),
            _ => Ok(()),
        }
    }

    fn now_us(&self) -> u64 {
        self.start.elapsed().as_micros() as u64
    }
}

/// `file_read`'s result lines.
pub fn read() -> Result<Vec<String>, String> {
    file_read(&mut LinuxFiles::new()?, "linux")
}

/// `file_write`'s result lines.
pub fn write() -> Result<Vec<String>, String> {
    file_write(&mut LinuxFiles::new()?, "linux")
}
