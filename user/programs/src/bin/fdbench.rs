//! `fdbench [--cores LIST] [--ops N] [--config shared|private|all]` (Corey §1 and §8.4,
//! the talk's file-descriptor example): each core opens a descriptor of its own, then
//! `dup`s and `close`s it N times (default 10000); one op is one dup and one close. The
//! descriptor table is a share (libatoll's `FdTable`): `shared`, one table in every
//! core's share set (like a Unix process's, the cores contend on it); `private`, each
//! core's root share. Prints ops per 1000 cycles over all cores (`value`) and per core
//! (`per_core`). Default cores: all.
#![no_std]
#![no_main]

use libatoll::abi::Error;
use libatoll::fd::FdTable;
use libatoll::opsbench::{Lap, OpsBench};

/// The file every core opens (always in the initrd: this program).
const FILE: &str = "fdbench";

struct FdBench;

impl OpsBench for FdBench {
    const NAME: &'static str = "fdbench";
    const CONFIGS: [&'static str; 2] = ["shared", "private"];
    const HELP: &'static str = "usage: fdbench [--cores LIST] [--ops N] [--config shared|private|all] [--sweep]\n  N dup+close pairs per core (default 10000); default cores: all; default config: all;\n  --sweep: on the first 1, 2, ... of the cores in turn";

    fn make_shared() -> Result<u64, Error> {
        FdTable::new_shared().map(|t| t.share())
    }

    /// One core: open its descriptor, then dup and close it (timed).
    fn worker(shared: Option<u64>, lap: &mut Lap) -> bool {
        let mut table = match shared {
            Some(s) => FdTable::with_share(s),
            None => FdTable::private(),
        };
        let Ok(fd) = table.open(FILE) else { return lap.fail() };
        let ok = lap.run(|| table.dup(fd).and_then(|new| table.close(new)).is_ok());
        let _ = table.close(fd);
        ok
    }
}

fn main() -> i32 {
    libatoll::opsbench::main::<FdBench>()
}

libatoll::main!(main);
