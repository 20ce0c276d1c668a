//! `sharebench [--cores LIST] [--ops N] [--config global|percore|all]` (Corey §8.4,
//! Figure 9): each core adds a small segment of its own to a share with `share_addobj`
//! and takes it out with `share_delobj`, N times (default 10000); one op is one add and
//! one remove. `global`: one share in every core's share set (the cores contend on it);
//! `percore`: each core its own share. Prints ops per 1000 cycles over all cores
//! (`value`) and per core (`per_core`). Default cores: all.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering::*};
use libatoll::bench::{barrier, Ratio, Record};
use libatoll::cores::{all_cores, spread};
use libatoll::obj::{root_share, segment_alloc, share_addobj, share_delobj, share_free, share_new};
use libatoll::shared::{SharedStatic, ZeroInit};
use libatoll::{args, println, rdtsc, CforkOptions, ObjRef};

const MAX_CORES: usize = 256;
const HELP: &str = "usage: sharebench [--cores LIST] [--ops N] [--config global|percore|all]\n  N add+delete pairs per core (default 10000); default cores: all; default config: all";

/// Which share the cores use (see the module comment).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Config {
    Global,
    PerCore,
}

impl Config {
    fn name(self) -> &'static str {
        match self {
            Config::Global => "global",
            Config::PerCore => "percore",
        }
    }
}

/// The plan and results, in memory shared by every core.
#[repr(C)]
struct Ctl {
    ops: AtomicU64,
    cores: AtomicU64,
    /// The global share, or 0 for per-core shares.
    global: AtomicU64,
    arrived: AtomicU64,
    cycles: [AtomicU64; MAX_CORES],
    failed: [AtomicU64; MAX_CORES],
}

// SAFETY: atomics only; all-zero is a valid value.
unsafe impl ZeroInit for Ctl {}

static CTL: SharedStatic<Ctl> = SharedStatic::new();

fn main() -> i32 {
    let line = args::arg_string();
    let mut words = line.split_whitespace();
    let all = alloc::vec![Config::Global, Config::PerCore];
    let (mut cores, mut ops, mut configs) = (all_cores(), 10_000u64, all.clone());
    while let Some(word) = words.next() {
        let ok = match word {
            "--cores" => args::cores_value(words.next()).map(|c| cores = c).is_some(),
            "--ops" => args::number(words.next(), 1..=100_000_000).map(|v| ops = v).is_some(),
            "--config" => match words.next() {
                Some("global") => Some(alloc::vec![Config::Global]),
                Some("percore") => Some(alloc::vec![Config::PerCore]),
                Some("all") => Some(all.clone()),
                _ => None,
            }
            .map(|c| configs = c)
            .is_some(),
            _ => false,
        };
        if !ok || cores.len() > MAX_CORES {
            println!("{HELP}");
            return if word == "--help" { 0 } else { 2 };
        }
    }
    let ctl = match CTL.init() {
        Ok(c) => c,
        Err(e) => {
            println!("sharebench: no shared memory: {e:?}");
            return 1;
        }
    };
    let mut code = 0;
    for config in configs {
        if let Err(why) = run(ctl, config, &cores, ops) {
            println!("sharebench: {}: {why}", config.name());
            code = 1;
        }
    }
    code
}

/// Runs one configuration on every listed core and prints its result.
fn run(ctl: &Ctl, config: Config, cores: &[usize], ops: u64) -> Result<(), &'static str> {
    ctl.ops.store(ops, Relaxed);
    ctl.cores.store(cores.len() as u64, Relaxed);
    ctl.arrived.store(0, Relaxed);
    for i in 0..cores.len() {
        ctl.cycles[i].store(0, Relaxed);
        ctl.failed[i].store(0, Relaxed);
    }
    // The global share goes into every child's share set through `cfork`'s shares.
    let global = match config {
        Config::Global => share_new().map_err(|_| "share_alloc failed")?,
        Config::PerCore => 0,
    };
    ctl.global.store(global, Relaxed);
    let passed: Vec<u64> = if global != 0 { alloc::vec![global] } else { Vec::new() };
    let statuses =
        spread(cores, &CforkOptions { share_segments: &[], shares: &passed, stack: 0 }, worker);
    if global != 0 {
        share_free(global);
    }
    let statuses = statuses.map_err(|_| "cfork failed")?;
    // Sum of each core's ops per 1000 cycles, in millionths.
    let mut millionths = 0u64;
    for (i, status) in statuses.iter().enumerate() {
        if !status.ok() || ctl.failed[i].load(Acquire) != 0 {
            println!("sharebench: core {}: {status:?}", cores[i]);
            return Err("a core failed");
        }
        let cycles = ctl.cycles[i].load(Acquire).max(1);
        millionths += (ops as u128 * 1000 * 1_000_000 / cycles as u128) as u64;
    }
    let per_core = Ratio::precise(millionths, 1_000_000 * cores.len() as u64, 4);
    let extra = alloc::format!(",\"per_core\":{per_core},\"ops\":{ops}");
    let record = Record {
        experiment: "sharebench",
        config: config.name(),
        active_cores: cores.len(),
        metric: "ops_per_kcycle",
        unit: "ops/kcycle",
        extra: &extra,
    };
    record.print(Ratio::precise(millionths, 1_000_000, 4));
    Ok(())
}

/// One core: add its segment to the share and take it out again, `ops` times (timed).
fn worker(i: u64) -> i32 {
    let ctl = CTL.get();
    let i = i as usize;
    let root = root_share();
    let global = ctl.global.load(Acquire);
    let seg = segment_alloc(root, 4096);
    let share = if global != 0 { Ok(global) } else { share_new() };
    let (Ok(seg), Ok(share)) = (seg, share) else {
        ctl.failed[i].store(1, Release);
        barrier(&ctl.arrived, ctl.cores.load(Acquire));
        return 1;
    };
    barrier(&ctl.arrived, ctl.cores.load(Acquire));
    let ops = ctl.ops.load(Acquire);
    let start = rdtsc();
    for _ in 0..ops {
        let added = share_addobj(share, ObjRef::new(root, seg));
        if added.is_err() || share_delobj(ObjRef::new(share, seg)).is_err() {
            ctl.failed[i].store(1, Release);
            break;
        }
    }
    ctl.cycles[i].store(rdtsc() - start, Release);
    if global == 0 {
        share_free(share);
    }
    let _ = share_delobj(ObjRef::new(root, seg));
    0
}

libatoll::main!(main);
