//! `sharebench [--cores LIST] [--ops N] [--config global|percore|all]` (Corey §8.4,
//! Figure 9): each core adds a small segment of its own to a share with `share_addobj`
//! and takes it out with `share_delobj`, N times (default 10000); one op is one add and
//! one remove. `global`: one share in every core's share set (the cores contend on it);
//! `percore`: each core its own share. Prints ops per 1000 cycles over all cores
//! (`value`) and per core (`per_core`). Default cores: all.
#![no_std]
#![no_main]

use libatoll::abi::Error;
use libatoll::obj::{root_share, segment_alloc, share_addobj, share_delobj, share_free, share_new};
use libatoll::opsbench::{Lap, OpsBench};
use libatoll::ObjRef;

struct ShareBench;

impl OpsBench for ShareBench {
    const NAME: &'static str = "sharebench";
    const CONFIGS: [&'static str; 2] = ["global", "percore"];
    const HELP: &'static str = "usage: sharebench [--cores LIST] [--ops N] [--config global|percore|all] [--sweep]\n  N add+delete pairs per core (default 10000); default cores: all; default config: all;\n  --sweep: on the first 1, 2, ... of the cores in turn";

    fn make_shared() -> Result<u64, Error> {
        share_new()
    }

    /// One core: add its segment to the share and take it out again (timed).
    fn worker(global: Option<u64>, lap: &mut Lap) -> bool {
        let root = root_share();
        let seg = segment_alloc(root, 4096);
        let share = match global {
            Some(s) => Ok(s),
            None => share_new(),
        };
        let (Ok(seg), Ok(share)) = (seg, share) else { return lap.fail() };
        let ok = lap.run(|| {
            share_addobj(share, ObjRef::new(root, seg)).is_ok()
                && share_delobj(ObjRef::new(share, seg)).is_ok()
        });
        if global.is_none() {
            share_free(share);
        }
        let _ = share_delobj(ObjRef::new(root, seg));
        ok
    }
}

fn main() -> i32 {
    libatoll::opsbench::main::<ShareBench>()
}

libatoll::main!(main);
