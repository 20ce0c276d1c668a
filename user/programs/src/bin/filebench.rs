//! `filebench read | write`: experiments `file_read` and `file_write` (issue M13) on the
//! disk's files, the logic written once in `workloads::fileio` (Linux's peer is
//! `atoll-bench-linux file_read|file_write`, on the same image). Prints `RESULT` lines;
//! exits 1 with `filebench: <why>` when the disk lacks the bench files (`make bench`
//! gives the VM an image with them).
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use libatoll::abi::fs::open;
use libatoll::fs::{self, File};
use libatoll::net::Clock;
use libatoll::obj::root_share;
use libatoll::{args, println};
use workloads::fileio::{file_read, file_write, Files};

/// The disk's files through `libatoll::fs`, timed by the time-stamp counter.
struct AtollFiles {
    clock: Clock,
}

/// `path` under the root.
fn absolute(path: &str) -> String {
    format!("/{path}")
}

impl Files for AtollFiles {
    type File = File;

    fn open(&mut self, path: &str) -> Result<File, String> {
        File::open(&absolute(path)).map_err(|e| format!("{path}: {e:?}"))
    }

    fn create(&mut self, path: &str) -> Result<File, String> {
        let flags = open::CREATE | open::TRUNCATE;
        File::open_in(root_share(), &absolute(path), flags).map_err(|e| format!("{path}: {e:?}"))
    }

    fn read_at(&mut self, f: &mut File, buf: &mut [u8], offset: u64) -> Result<usize, String> {
        f.read_at(buf, offset).map_err(|e| format!("read: {e:?}"))
    }

    fn write_at(&mut self, f: &mut File, data: &[u8], offset: u64) -> Result<(), String> {
        let mut done = 0;
        while done < data.len() {
            match f.write_at(&data[done..], offset + done as u64) {
                Ok(0) => return Err(String::from("write: the disk is full")),
                Ok(n) => done += n,
                Err(e) => return Err(format!("write: {e:?}")),
            }
        }
        Ok(())
    }

    fn fsync(&mut self, f: &mut File) -> Result<(), String> {
        f.sync_all().map_err(|e| format!("fsync: {e:?}"))
    }

    fn remove(&mut self, path: &str) -> Result<(), String> {
        match fs::remove(&absolute(path)) {
            Ok(()) | Err(libatoll::abi::Error::NotFound) => Ok(()),
            Err(e) => Err(format!("remove {path}: {e:?}")),
        }
    }

    fn now_us(&self) -> u64 {
        self.clock.micros()
    }
}

fn main() -> i32 {
    let line = args::arg_string();
    let mode = line.trim();
    if !matches!(mode, "read" | "write") {
        println!("usage: filebench read | write");
        return 2;
    }
    let clock = match Clock::new() {
        Ok(c) => c,
        Err(e) => {
            println!("filebench: no clock: {e:?}");
            return 1;
        }
    };
    let mut files = AtollFiles { clock };
    let lines: Result<Vec<String>, String> = match mode {
        "read" => file_read(&mut files, "atoll"),
        _ => file_write(&mut files, "atoll"),
    };
    match lines {
        Ok(lines) => {
            for l in lines {
                println!("{l}");
            }
            0
        }
        Err(why) => {
            println!("filebench: {why}");
            1
        }
    }
}

libatoll::main!(main);
