//! The disk of the file experiments (issue M13: `file_read`, `file_write`,
//! `filesum_disk`): one ext2
//! image holding `bench/seq.bin` and `bench/rand.bin` (4 MiB each, the bytes
//! `workloads::fileio::input_byte` gives, which both systems check), built once per
//! `make bench` in `target/bench/disk/`. Every job boots a fresh copy of it, so Atoll and
//! the Linux guest start from the same bytes on the disk and nothing in memory.

use std::fs;
use std::path::{Path, PathBuf};

use crate::qemu::Vm;
use crate::{build, disk, Result};

/// Bytes of each input file (`workloads::fileio::FILE_BYTES`).
const FILE_BYTES: usize = 4 << 20;

/// Whether experiment `name` needs the bench disk.
pub fn needs_disk(name: &str) -> bool {
    matches!(name, "file_read" | "file_write" | "filesum_disk")
}

/// Byte `i` of the input files: `workloads::fileio::input_byte` (the benchmarks check the
/// bytes they read against it, so a difference fails them rather than skewing them).
fn input_byte(i: usize) -> u8 {
    (i.wrapping_mul(2_654_435_761) >> 13) as u8
}

/// Where the image and the jobs' copies live.
fn dir() -> PathBuf {
    build::target_dir().join("bench").join("disk")
}

/// The image, built if it is not there yet.
fn template() -> Result<PathBuf> {
    let image = dir().join("template.img");
    if image.is_file() {
        return Ok(image);
    }
    let content = dir().join("content");
    let files = content.join("bench");
    fs::create_dir_all(&files).map_err(|e| format!("{}: {e}", files.display()))?;
    let bytes: Vec<u8> = (0..FILE_BYTES).map(input_byte).collect();
    for name in ["seq.bin", "rand.bin"] {
        let path = files.join(name);
        fs::write(&path, &bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    disk::build_image(&content, &image)?;
    Ok(image)
}

/// Gives `vm` a fresh copy of the bench image, named after the job's `log`.
pub fn attach(vm: &mut Vm, log: &Path) -> Result {
    let template = template()?;
    let name = log.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let copy = dir().join(format!("{name}.img"));
    fs::copy(&template, &copy).map_err(|e| format!("{}: {e}", copy.display()))?;
    vm.extra.extend(disk::qemu_args(&copy));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_file_experiments_get_the_disk() {
        assert!(needs_disk("file_read") && needs_disk("file_write"));
        assert!(!needs_disk("tcp_conn") && !needs_disk("nullsys"));
    }

    #[test]
    fn the_input_is_not_constant() {
        let distinct: std::collections::BTreeSet<u8> = (0..4096).map(input_byte).collect();
        assert!(distinct.len() > 200);
    }
}
