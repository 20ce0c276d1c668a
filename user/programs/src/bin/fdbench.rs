//! `fdbench [--cores LIST] [--ops N] [--config shared|private|all]` (Corey §1 and §8.4,
//! the talk's file-descriptor example): each core opens a descriptor of its own, then
//! `dup`s and `close`s it N times (default 10000); one op is one dup and one close. The
//! descriptor table is a share (libatoll's `FdTable`): `shared`, one table in every
//! core's share set (like a Unix process's, the cores contend on it); `private`, each
//! core's root share. Prints ops per 1000 cycles over all cores (`value`) and per core
//! (`per_core`). Default cores: all.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering::*};
use libatoll::bench::{barrier, Ratio, Record};
use libatoll::cores::{all_cores, spread};
use libatoll::fd::FdTable;
use libatoll::obj::share_free;
use libatoll::shared::{SharedStatic, ZeroInit};
use libatoll::{args, println, rdtsc, CforkOptions};

const MAX_CORES: usize = 256;
const HELP: &str = "usage: fdbench [--cores LIST] [--ops N] [--config shared|private|all]\n  N dup+close pairs per core (default 10000); default cores: all; default config: all";
/// The file every core opens (always in the initrd: this program).
const FILE: &str = "fdbench";

/// Which table the cores use (see the module comment).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Config {
    Shared,
    Private,
}

impl Config {
    fn name(self) -> &'static str {
        match self {
            Config::Shared => "shared",
            Config::Private => "private",
        }
    }
}

/// The plan and results, in memory shared by every core.
#[repr(C)]
struct Ctl {
    ops: AtomicU64,
    cores: AtomicU64,
    /// The shared table's share, or 0 for private tables.
    table: AtomicU64,
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
    let all = alloc::vec![Config::Shared, Config::Private];
    let (mut cores, mut ops, mut configs) = (all_cores(), 10_000u64, all.clone());
    while let Some(word) = words.next() {
        let ok = match word {
            "--cores" => args::cores_value(words.next()).map(|c| cores = c).is_some(),
            "--ops" => args::number(words.next(), 1..=100_000_000).map(|v| ops = v).is_some(),
            "--config" => match words.next() {
                Some("shared") => Some(alloc::vec![Config::Shared]),
                Some("private") => Some(alloc::vec![Config::Private]),
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
            println!("fdbench: no shared memory: {e:?}");
            return 1;
        }
    };
    let mut code = 0;
    for config in configs {
        if let Err(why) = run(ctl, config, &cores, ops) {
            println!("fdbench: {}: {why}", config.name());
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
    // The shared table goes into every child's share set through `cfork`'s shares.
    let table = match config {
        Config::Shared => FdTable::new_shared().map_err(|_| "share_alloc failed")?.share(),
        Config::Private => 0,
    };
    ctl.table.store(table, Relaxed);
    let passed: Vec<u64> = if table != 0 { alloc::vec![table] } else { Vec::new() };
    let statuses =
        spread(cores, &CforkOptions { share_segments: &[], shares: &passed, stack: 0 }, worker);
    if table != 0 {
        share_free(table);
    }
    let statuses = statuses.map_err(|_| "cfork failed")?;
    // Sum of each core's ops per 1000 cycles, in millionths.
    let mut millionths = 0u64;
    for (i, status) in statuses.iter().enumerate() {
        if !status.ok() || ctl.failed[i].load(Acquire) != 0 {
            println!("fdbench: core {}: {status:?}", cores[i]);
            return Err("a core failed");
        }
        let cycles = ctl.cycles[i].load(Acquire).max(1);
        millionths += (ops as u128 * 1000 * 1_000_000 / cycles as u128) as u64;
    }
    let per_core = Ratio::precise(millionths, 1_000_000 * cores.len() as u64, 4);
    let extra = alloc::format!(",\"per_core\":{per_core},\"ops\":{ops}");
    let record = Record {
        experiment: "fdbench",
        config: config.name(),
        active_cores: cores.len(),
        metric: "ops_per_kcycle",
        unit: "ops/kcycle",
        extra: &extra,
    };
    record.print(Ratio::precise(millionths, 1_000_000, 4));
    Ok(())
}

/// One core: open its descriptor, then dup and close it `ops` times (timed).
fn worker(i: u64) -> i32 {
    let ctl = CTL.get();
    let i = i as usize;
    let shared = ctl.table.load(Acquire);
    let mut table = if shared != 0 { FdTable::with_share(shared) } else { FdTable::private() };
    let Ok(fd) = table.open(FILE) else {
        ctl.failed[i].store(1, Release);
        barrier(&ctl.arrived, ctl.cores.load(Acquire));
        return 1;
    };
    barrier(&ctl.arrived, ctl.cores.load(Acquire));
    let ops = ctl.ops.load(Acquire);
    let start = rdtsc();
    for _ in 0..ops {
        let closed = table.dup(fd).and_then(|new| table.close(new));
        if closed.is_err() {
            ctl.failed[i].store(1, Release);
            break;
        }
    }
    ctl.cycles[i].store(rdtsc() - start, Release);
    let _ = table.close(fd);
    0
}

libatoll::main!(main);
