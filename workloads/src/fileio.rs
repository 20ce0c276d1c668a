//! Experiments `file_read` and `file_write` (issue M13), written once over [`Files`]: Atoll
//! implements it with `libatoll::fs` (the `filebench` program), Linux with `std::fs` on
//! the same ext2 image mounted at `/mnt` (`linux::fileio`). Both VMs boot a fresh copy of
//! one image that holds [`SEQ_FILE`] and [`RAND_FILE`] (made by `make bench`), so the
//! first pass over each file is cold (from the disk) and the second warm (from memory).
//!
//! - `file_read`: sequential reads of a whole file in [`SEQ_CHUNK`] pieces, cold then warm
//!   (MB/s); [`RANDOM_READS`] reads of 4 KiB at scattered block offsets, cold then warm
//!   (reads/s).
//! - `file_write`: [`FILE_BYTES`] written in [`SEQ_CHUNK`] pieces without `fsync` (MB/s),
//!   and [`SYNCED_WRITES`] appends of 4 KiB each followed by `fsync` (writes/s).

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

/// Bytes of each input file.
pub const FILE_BYTES: usize = 4 << 20;
/// The file read sequentially (path under the file system's root).
pub const SEQ_FILE: &str = "bench/seq.bin";
/// The file read at random offsets.
pub const RAND_FILE: &str = "bench/rand.bin";
/// The file `file_write` writes (removed first, and after).
pub const WRITE_FILE: &str = "bench/written.bin";
/// Bytes per sequential read or write call.
pub const SEQ_CHUNK: usize = 64 * 1024;
/// Bytes of a random read and of a synced write.
pub const SMALL: usize = 4096;
/// Random reads per pass.
pub const RANDOM_READS: usize = 1000;
/// Synced writes.
pub const SYNCED_WRITES: usize = 100;

/// Byte `i` of the input files (the harness writes them so; a read checks a few).
pub fn input_byte(i: usize) -> u8 {
    (i.wrapping_mul(2_654_435_761) >> 13) as u8
}

/// A file system as the experiments use it. Paths are relative to the root of the image.
pub trait Files {
    /// An open file.
    type File;
    /// Opens `path` for reading.
    fn open(&mut self, path: &str) -> Result<Self::File, String>;
    /// Creates (or empties) `path` for writing.
    fn create(&mut self, path: &str) -> Result<Self::File, String>;
    /// Reads into `buf` at `offset`; the count.
    fn read_at(&mut self, f: &mut Self::File, buf: &mut [u8], offset: u64)
        -> Result<usize, String>;
    /// Writes all of `data` at `offset`.
    fn write_at(&mut self, f: &mut Self::File, data: &[u8], offset: u64) -> Result<(), String>;
    /// Makes the file's data durable (`fsync`).
    fn fsync(&mut self, f: &mut Self::File) -> Result<(), String>;
    /// Removes `path` if it exists.
    fn remove(&mut self, path: &str) -> Result<(), String>;
    /// Microseconds from some fixed start.
    fn now_us(&self) -> u64;
}

/// The block offsets of the random reads: a fixed scatter over the file (an LCG).
pub fn random_offsets() -> Vec<u64> {
    let blocks = (FILE_BYTES / SMALL) as u64;
    let mut x = 0x2545_f491_4f6c_dd1du64;
    (0..RANDOM_READS)
        .map(|_| {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (x >> 33) % blocks * SMALL as u64
        })
        .collect()
}

/// MB/s (10^6 bytes) of `bytes` in `us`, to two decimals.
fn mb_per_s(bytes: usize, us: u64) -> crate::result::Fixed2 {
    crate::result::Fixed2(bytes as f64 / us.max(1) as f64)
}

/// Operations per second of `ops` in `us`.
fn per_s(ops: usize, us: u64) -> u64 {
    ops as u64 * 1_000_000 / us.max(1)
}

/// One result line: `config` names the row (`seq-cold`, `fsync`, ...).
fn result(
    system: &str,
    experiment: &str,
    config: &str,
    metric: &str,
    value: impl core::fmt::Display,
    unit: &str,
) -> String {
    crate::result::line(
        system,
        experiment,
        1,
        metric,
        value,
        unit,
        &format!(",\"config\":\"{config}\""),
    )
}

/// One sequential pass over `path`: its bytes, checked at a few places.
fn sequential_pass<F: Files>(fs: &mut F, path: &str) -> Result<usize, String> {
    let mut f = fs.open(path)?;
    let mut buf = vec![0u8; SEQ_CHUNK];
    let mut offset = 0usize;
    loop {
        let n = fs.read_at(&mut f, &mut buf, offset as u64)?;
        if n == 0 {
            break;
        }
        if buf[0] != input_byte(offset) {
            return Err(format!("{path}: byte {offset} is not the input's"));
        }
        offset += n;
    }
    if offset != FILE_BYTES {
        return Err(format!("{path}: {offset} bytes, not {FILE_BYTES}"));
    }
    Ok(offset)
}

/// One pass of random reads over `path`.
fn random_pass<F: Files>(fs: &mut F, path: &str, offsets: &[u64]) -> Result<(), String> {
    let mut f = fs.open(path)?;
    let mut buf = vec![0u8; SMALL];
    for &at in offsets {
        if fs.read_at(&mut f, &mut buf, at)? != SMALL || buf[0] != input_byte(at as usize) {
            return Err(format!("{path}: the read at {at} is not the input's"));
        }
    }
    Ok(())
}

/// `file_read`: four result lines.
pub fn file_read<F: Files>(fs: &mut F, system: &str) -> Result<Vec<String>, String> {
    let mut lines = Vec::new();
    for config in ["seq-cold", "seq-warm"] {
        let start = fs.now_us();
        let bytes = sequential_pass(fs, SEQ_FILE)?;
        let us = fs.now_us() - start;
        lines.push(result(system, "file_read", config, "throughput", mb_per_s(bytes, us), "MB/s"));
    }
    let offsets = random_offsets();
    for config in ["rand-cold", "rand-warm"] {
        let start = fs.now_us();
        random_pass(fs, RAND_FILE, &offsets)?;
        let us = fs.now_us() - start;
        lines.push(result(
            system,
            "file_read",
            config,
            "reads",
            per_s(offsets.len(), us),
            "reads/s",
        ));
    }
    Ok(lines)
}

/// `file_write`: two result lines.
pub fn file_write<F: Files>(fs: &mut F, system: &str) -> Result<Vec<String>, String> {
    fs.remove(WRITE_FILE)?;
    let data: Vec<u8> = (0..SEQ_CHUNK).map(input_byte).collect();
    let mut f = fs.create(WRITE_FILE)?;
    let start = fs.now_us();
    for i in 0..FILE_BYTES / SEQ_CHUNK {
        fs.write_at(&mut f, &data, (i * SEQ_CHUNK) as u64)?;
    }
    let us = fs.now_us() - start;
    let mut lines = vec![result(
        system,
        "file_write",
        "no-fsync",
        "throughput",
        mb_per_s(FILE_BYTES, us),
        "MB/s",
    )];
    drop(f);
    fs.remove(WRITE_FILE)?;
    let mut f = fs.create(WRITE_FILE)?;
    let start = fs.now_us();
    for i in 0..SYNCED_WRITES {
        fs.write_at(&mut f, &data[..SMALL], (i * SMALL) as u64)?;
        fs.fsync(&mut f)?;
    }
    let us = fs.now_us() - start;
    lines.push(result(
        system,
        "file_write",
        "fsync",
        "writes",
        per_s(SYNCED_WRITES, us),
        "writes/s",
    ));
    drop(f);
    fs.remove(WRITE_FILE)?;
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_offsets_are_whole_blocks_inside_the_file_and_scattered() {
        let offsets = random_offsets();
        assert_eq!(offsets.len(), RANDOM_READS);
        assert!(offsets.iter().all(|&o| o % SMALL as u64 == 0 && o < FILE_BYTES as u64));
        let mut distinct = offsets.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert!(distinct.len() > RANDOM_READS / 2, "{} distinct", distinct.len());
    }

    #[test]
    fn rates() {
        assert_eq!(per_s(100, 1_000_000), 100);
        assert_eq!(per_s(1, 0), 1_000_000);
        assert_eq!(format!("{}", mb_per_s(4_000_000, 2_000_000)), "2.00");
    }
}
