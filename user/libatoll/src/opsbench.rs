//! Per-core operation throughput, the shape of Corey's Figures 1 and 9: every core repeats
//! one operation (add and remove a share entry; dup and close a descriptor), either on one
//! share all the cores hold or on one of its own, timed from a common start. The result is
//! the sum of the cores' operations per 1000 cycles (`value`) and its mean (`per_core`).
//! Each core also times its operations in batches of [`BATCH`]; `batch_median` is the sum
//! over cores of the rate of each core's median batch: the steady rate, without the
//! batches in which the core was interrupted or its host thread (under TCG) descheduled,
//! so that scaling can be told apart from a noisy host.
//! A program implements [`OpsBench`] and calls [`main`]; this module parses the command
//! line, spreads the workers with `cfork`, and prints the `RESULT` lines.

use crate::bench::{barrier, Ratio, Record};
use crate::cores::{all_cores, spread};
use crate::obj::share_free;
use crate::shared::{SharedStatic, ZeroInit};
use crate::{args, println, rdtsc, CforkOptions};
use abi::Error;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering::*};

/// Most cores one run may list.
const MAX_CORES: usize = 256;
/// Operations per timed batch.
pub const BATCH: u64 = 1000;
/// Most batches a core keeps (the median is over the first this many).
const MAX_BATCHES: usize = 1024;

/// What one benchmark program supplies (a type with no data: its functions reach the
/// cfork'd children as a monomorphised worker, no pointer needs to travel).
pub trait OpsBench {
    /// The experiment's name (`RESULT`'s `experiment`, and the prefix of messages).
    const NAME: &'static str;
    /// The two configurations' names: cores on one shared share, cores on their own.
    const CONFIGS: [&'static str; 2];
    /// The `--help` text.
    const HELP: &'static str;
    /// Makes the share the cores hold in the shared configuration (freed afterwards).
    fn make_shared() -> Result<u64, Error>;
    /// One core's part: set up (untimed), then [`Lap::run`] the operation; `shared` is the
    /// shared share, or `None` in the per-core configuration. Returns whether it worked.
    fn worker(shared: Option<u64>, lap: &mut Lap) -> bool;
}

/// The plan and the results, in memory shared by every core.
#[repr(C)]
struct Ctl {
    ops: AtomicU64,
    cores: AtomicU64,
    /// The shared share, or 0 in the per-core configuration.
    shared: AtomicU64,
    arrived: AtomicU64,
    cycles: [AtomicU64; MAX_CORES],
    /// Each core's median batch, in cycles (0: fewer than one whole batch).
    batch: [AtomicU64; MAX_CORES],
    failed: [AtomicU64; MAX_CORES],
}

// SAFETY: atomics only; all-zero is a valid value.
unsafe impl ZeroInit for Ctl {}

static CTL: SharedStatic<Ctl> = SharedStatic::new();

/// One core's timed run, handed to [`OpsBench::worker`].
pub struct Lap {
    index: usize,
}

impl Lap {
    /// Waits until every core is ready, then runs `op` the planned number of times, timed;
    /// stops early (and reports failure) at the first `op` that fails.
    pub fn run(&mut self, mut op: impl FnMut() -> bool) -> bool {
        let ctl = CTL.get();
        barrier(&ctl.arrived, ctl.cores.load(Acquire));
        let ops = ctl.ops.load(Acquire);
        let mut batches: Vec<u64> = Vec::with_capacity(MAX_BATCHES);
        let start = rdtsc();
        let mut ok = true;
        let mut batch_start = start;
        for i in 1..=ops {
            if !op() {
                ok = false;
                break;
            }
            if i % BATCH == 0 && batches.len() < MAX_BATCHES {
                let now = rdtsc();
                // Capacity reserved before the start: no allocation inside the timing.
                batches.push(now - batch_start);
                batch_start = now;
            }
        }
        ctl.cycles[self.index].store(rdtsc() - start, Release);
        batches.sort_unstable();
        let median = batches.get(batches.len() / 2).copied().unwrap_or(0);
        ctl.batch[self.index].store(median, Release);
        ok
    }

    /// The set-up failed: still meet the other cores at the start, and report failure.
    pub fn fail(&mut self) -> bool {
        let ctl = CTL.get();
        barrier(&ctl.arrived, ctl.cores.load(Acquire));
        false
    }
}

/// The program: `NAME [--cores LIST] [--ops N] [--config A|B|all] [--sweep]`, defaults
/// all cores, 10,000 operations per core, both configurations. `--sweep` runs on the
/// first 1, 2, ... of the listed cores in turn, so one boot gives the whole scaling curve
/// (runs in different boots of a TCG guest can differ twofold in speed). Returns the exit
/// code.
pub fn main<B: OpsBench>() -> i32 {
    let line = args::arg_string();
    let mut words = line.split_whitespace();
    let (mut cores, mut ops, mut configs) = (all_cores(), 10_000u64, alloc::vec![0, 1]);
    let mut sweep = false;
    while let Some(word) = words.next() {
        let ok = match word {
            "--cores" => args::cores_value(words.next()).map(|c| cores = c).is_some(),
            "--ops" => args::number(words.next(), 1..=100_000_000).map(|v| ops = v).is_some(),
            "--sweep" => {
                sweep = true;
                true
            }
            "--config" => match words.next() {
                Some("all") => Some(alloc::vec![0, 1]),
                Some(name) => B::CONFIGS.iter().position(|&c| c == name).map(|i| alloc::vec![i]),
                None => None,
            }
            .map(|c| configs = c)
            .is_some(),
            _ => false,
        };
        if !ok || cores.len() > MAX_CORES {
            println!("{}", B::HELP);
            return if word == "--help" { 0 } else { 2 };
        }
    }
    let ctl = match CTL.init() {
        Ok(c) => c,
        Err(e) => {
            println!("{}: no shared memory: {e:?}", B::NAME);
            return 1;
        }
    };
    let mut code = 0;
    let first = if sweep { 1 } else { cores.len() };
    for n in first..=cores.len() {
        for &config in &configs {
            if let Err(why) = run::<B>(ctl, config, &cores[..n], ops) {
                println!("{}: {}: {why}", B::NAME, B::CONFIGS[config]);
                code = 1;
            }
        }
    }
    code
}

/// Runs configuration `config` (0: shared, 1: per core) on every listed core and prints
/// its result.
fn run<B: OpsBench>(
    ctl: &Ctl,
    config: usize,
    cores: &[usize],
    ops: u64,
) -> Result<(), &'static str> {
    ctl.ops.store(ops, Relaxed);
    ctl.cores.store(cores.len() as u64, Relaxed);
    ctl.arrived.store(0, Relaxed);
    for i in 0..cores.len() {
        ctl.cycles[i].store(0, Relaxed);
        ctl.batch[i].store(0, Relaxed);
        ctl.failed[i].store(0, Relaxed);
    }
    // The shared share goes into every child's share set through `cfork`'s shares.
    let shared = if config == 0 { B::make_shared().map_err(|_| "share_alloc failed")? } else { 0 };
    ctl.shared.store(shared, Relaxed);
    let passed: Vec<u64> = if shared != 0 { alloc::vec![shared] } else { Vec::new() };
    let statuses = spread(
        cores,
        &CforkOptions { share_segments: &[], shares: &passed, stack: 0 },
        worker::<B>,
    );
    if shared != 0 {
        share_free(shared);
    }
    let statuses = statuses.map_err(|_| "cfork failed")?;
    // Sum of each core's ops per 1000 cycles, in millionths.
    let (mut millionths, mut batch_millionths) = (0u64, 0u64);
    for (i, status) in statuses.iter().enumerate() {
        if !status.ok() || ctl.failed[i].load(Acquire) != 0 {
            println!("{}: core {}: {status:?}", B::NAME, cores[i]);
            return Err("a core failed");
        }
        let cycles = ctl.cycles[i].load(Acquire).max(1);
        millionths += (ops as u128 * 1000 * 1_000_000 / cycles as u128) as u64;
        if let Some(batch) = Some(ctl.batch[i].load(Acquire)).filter(|&b| b != 0) {
            batch_millionths += (BATCH as u128 * 1000 * 1_000_000 / batch as u128) as u64;
        }
    }
    let per_core = Ratio::precise(millionths, 1_000_000 * cores.len() as u64, 4);
    let batch_median = Ratio::precise(batch_millionths, 1_000_000, 4);
    let extra =
        alloc::format!(",\"per_core\":{per_core},\"ops\":{ops},\"batch_median\":{batch_median}");
    let record = Record {
        experiment: B::NAME,
        config: B::CONFIGS[config],
        active_cores: cores.len(),
        metric: "ops_per_kcycle",
        unit: "ops/kcycle",
        extra: &extra,
    };
    record.print(Ratio::precise(millionths, 1_000_000, 4));
    Ok(())
}

/// One core (`spread`'s worker): the program's worker on a [`Lap`].
fn worker<B: OpsBench>(i: u64) -> i32 {
    let ctl = CTL.get();
    let index = i as usize;
    let shared = Some(ctl.shared.load(Acquire)).filter(|&s| s != 0);
    if B::worker(shared, &mut Lap { index }) {
        0
    } else {
        ctl.failed[index].store(1, Release);
        1
    }
}
