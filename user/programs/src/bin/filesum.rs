//! `filesum FILE [--rounds N]`: Corey's `filesum` application (§6.2: "returns the sum of a
//! file's bytes") over the disk (issue M13), two ways, and experiment `filesum_disk`:
//! `read` sums the file through `fs_read` into a 64 KiB buffer, from the kernel's buffer
//! cache, each round; `read-private` the same with the file private to this core (after
//! Corey §9: its blocks in the core's own part of the cache, found without the shared
//! tree; the first round moves them there); `mapped` reads it once into a segment
//! (`File::map`) and sums it there each round, as Corey's webd application cores map
//! their files. Prints the sum
//! and, for each way, `RESULT` lines of cycles per byte (the first round, then the
//! median of the rest). Exits 1 if the two sums differ or the file cannot be read, 2 for
//! bad arguments.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec;
use alloc::vec::Vec;
use libatoll::fs::File;
use libatoll::{args, println, rdtsc};
use workloads::filesum::sum;
use workloads::result::{line, median, Fixed2};

const USAGE: &str = "usage: filesum /FILE [--rounds N]   (N 2-100, default 5)";

/// One round of summing through `fs_read`: (sum, cycles).
fn sum_by_reads(file: &File, size: u64) -> Result<(u64, u64), libatoll::abi::Error> {
    let mut buf = vec![0u8; 64 * 1024];
    let start = rdtsc();
    let (mut total, mut at) = (0u64, 0u64);
    while at < size {
        let n = file.read_at(&mut buf, at)?;
        if n == 0 {
            break;
        }
        total = total.wrapping_add(sum(&buf[..n]));
        at += n as u64;
    }
    Ok((total, rdtsc() - start))
}

fn main() -> i32 {
    let text = args::arg_string();
    let mut words = text.split_whitespace();
    let (Some(path), rest) = (words.next(), words) else {
        println!("{USAGE}");
        return 2;
    };
    let rest: Vec<&str> = rest.collect();
    let rounds = match rest.as_slice() {
        [] => 5,
        ["--rounds", n] => match n.parse::<usize>() {
            Ok(n) if (2..=100).contains(&n) => n,
            _ => {
                println!("{USAGE}");
                return 2;
            }
        },
        _ => {
            println!("{USAGE}");
            return 2;
        }
    };
    if !path.starts_with('/') {
        println!("{USAGE}");
        return 2;
    }
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) => {
            println!("filesum: {path}: {e:?}");
            return 1;
        }
    };
    let size = match file.stat() {
        Ok(st) if st.kind != libatoll::abi::fs::kind::FILE => {
            println!("filesum: {path} is not a file");
            return 1;
        }
        Ok(st) if st.size > 0 => st.size,
        Ok(_) => {
            println!("filesum: {path} is empty");
            return 1;
        }
        Err(e) => {
            println!("filesum: {path}: {e:?}");
            return 1;
        }
    };
    let mut by_reads = Vec::new();
    let mut read_sum = 0;
    for _ in 0..rounds {
        match sum_by_reads(&file, size) {
            Ok((s, cycles)) => {
                read_sum = s;
                by_reads.push(cycles);
            }
            Err(e) => {
                println!("filesum: reading {path}: {e:?}");
                return 1;
            }
        }
    }
    // The same through the file made private to this core (after Corey §9): its blocks in
    // this core's own part of the cache, found without the shared tree.
    let flags = libatoll::abi::fs::open::PRIVATE;
    let private = match File::open_in(libatoll::obj::root_share(), path, flags) {
        Ok(f) => f,
        Err(e) => {
            println!("filesum: opening {path} private: {e:?}");
            return 1;
        }
    };
    let mut by_private = Vec::new();
    for _ in 0..rounds {
        match sum_by_reads(&private, size) {
            Ok((s, cycles)) if s == read_sum => by_private.push(cycles),
            Ok((s, _)) => {
                println!("filesum: FAIL the private file's sum {s} differs");
                return 1;
            }
            Err(e) => {
                println!("filesum: reading {path} private: {e:?}");
                return 1;
            }
        }
    }
    drop(private);
    let start = rdtsc();
    let mem = match file.map() {
        Ok(m) => m,
        Err(e) => {
            println!("filesum: mapping {path}: {e:?}");
            return 1;
        }
    };
    let map_cycles = rdtsc() - start;
    // SAFETY: `map` mapped `mem.bytes` bytes at `mem.va`, ours alone, `size` of them the
    // file's.
    let bytes = unsafe { core::slice::from_raw_parts(mem.va as *const u8, size as usize) };
    let mut mapped = Vec::new();
    let mut map_sum = 0;
    for _ in 0..rounds {
        let start = rdtsc();
        map_sum = sum(bytes);
        mapped.push(rdtsc() - start);
    }
    mem.free();
    println!("filesum: {path}: {size} bytes, sum {read_sum}");
    if read_sum != map_sum {
        println!("filesum: FAIL the mapped sum {map_sum} differs");
        return 1;
    }
    let per_byte = |cycles: u64| Fixed2(cycles as f64 / size as f64);
    let extra = |config: &str, round: &str| {
        alloc::format!(",\"config\":\"{config}\",\"round\":\"{round}\"")
    };
    for (config, samples, first_extra) in [
        ("read", &mut by_reads, 0),
        ("read-private", &mut by_private, 0),
        ("mapped", &mut mapped, map_cycles),
    ] {
        let first = samples[0] + first_extra;
        let warm = median(&mut samples[1..]).unwrap_or(0);
        for (round, cycles) in [("first", first), ("warm", warm)] {
            let e = extra(config, round);
            println!(
                "{}",
                line(
                    "atoll",
                    "filesum_disk",
                    1,
                    "cycles_per_byte",
                    per_byte(cycles),
                    "cycles/byte",
                    &e
                )
            );
        }
    }
    0
}

libatoll::main!(main);
