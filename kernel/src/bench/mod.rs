//! Benchmarks run from the console (`bench urpc`, `bench multicast`, `bench shm`, …). Each
//! measurement prints one `RESULT {json}` line; absolute numbers under QEMU/TCG mean
//! little, so every experiment reports a ratio measured in the same run (URPC against the
//! raw cache-line floor; protocols against each other). `urpc` and `shm` are the kernel's
//! own measurement of its channels (experiments `urpc_kernel`, `shm_vs_msg_kernel`); the
//! like-for-like comparison with Linux is the user programs `urpcbench` and `shmbench`,
//! which run the `workloads` code the Linux guest runs.
//!
//! Whoever types the command chooses the iteration count, so it is bounded (see
//! [`EXPERIMENTS`]), sample memory is reserved fallibly, and every wait has a deadline:
//! a run always ends with its results or an error, and the console answers again
//! (DESIGN principle 5).

mod console;
mod multicast;
mod polling;
mod shm;
mod shootdown;
mod twophase;
mod urpc;

use crate::arch::{cpu, timer};
use crate::monitor::protocol::MonitorMessage;
use crate::println;
use crate::transport;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use record::{Cores, Record};
use twophase::two_phase;

/// One experiment of `bench`.
struct Experiment {
    name: &'static str,
    /// What one iteration is.
    iteration: &'static str,
    /// Iterations when the command gives none (`make bench` passes these to both systems).
    default: usize,
    /// The most iterations accepted: at the maximum a run takes well under a second on a
    /// 2-core VM and a few seconds on a 4-core one (TCG on an idle 2-CPU host). Bigger VMs
    /// sweep more pairs and core counts, and a busy host makes every cross-core round trip
    /// a host scheduling delay; [`TIME_LIMIT_US`] bounds them all.
    max: usize,
    run: fn(usize, Deadline) -> Result<(), String>,
}

/// The experiments, in the order the usage text lists them.
const EXPERIMENTS: &[Experiment] = &[
    Experiment {
        name: "urpc",
        iteration: "round trips per pair",
        default: 2000,
        max: 20_000,
        run: urpc::urpc,
    },
    Experiment {
        name: "multicast",
        iteration: "rounds per protocol and core count",
        default: 50,
        max: 200,
        run: multicast::multicast,
    },
    Experiment {
        name: "shootdown",
        iteration: "shootdowns per protocol and core count",
        default: 50,
        max: 200,
        run: shootdown::shootdown,
    },
    Experiment {
        name: "twophase",
        iteration: "operations per core count and mode",
        default: 50,
        max: 500,
        run: two_phase,
    },
    Experiment {
        name: "polling",
        iteration: "messages per arrival gap",
        default: 30,
        max: 200,
        run: polling::polling,
    },
    Experiment {
        name: "shm",
        iteration: "updates per client and configuration",
        default: 500,
        max: 20_000,
        run: shm::shm,
    },
    Experiment {
        name: "console",
        iteration: "lines per printing core and core count",
        default: 50,
        max: 500,
        run: console::console,
    },
];

/// The longest one `bench` run may take: every wait gives up at this deadline, so a run on
/// a big or busy machine ends with an error instead of never answering.
const TIME_LIMIT_US: u64 = 60_000_000;
/// How long the console waits for one benchmark job. Longer than [`TIME_LIMIT_US`]: a job
/// ends by its own deadline first, so no core still runs a job whose borrowed memory the
/// console has freed.
const JOB_TIMEOUT_US: u64 = 2 * TIME_LIMIT_US;
/// Queue length of the throughput test (Multikernel Table 2 uses 16).
const QUEUE: usize = 16;
/// The `experiment` of `bench urpc`'s and `bench shm`'s lines. They are not `urpc` and
/// `shm_vs_msg`: those are the `workloads` code that runs on both systems (Atoll's user
/// programs `urpcbench` and `shmbench`); these measure the same channels in ring 0, with
/// interrupts off, started from the monitor (`docs/bench.md`).
const URPC: &str = "urpc_kernel";
const SHM: &str = "shm_vs_msg_kernel";
/// The error of an experiment that needs two cores on a machine with one.
const NEEDS_TWO_CORES: &str = "needs 2 cores";

/// The arguments `bench` takes.
pub const USAGE: &str = "urpc|multicast|shootdown|twophase|polling|shm|console [ITERATIONS]";

/// Runs `bench EXPERIMENT [ITERATIONS]` (`args` is the line after `bench`).
pub fn command(args: &str) -> Result<(), String> {
    let mut words = args.split_whitespace();
    let experiment = words
        .next()
        .and_then(|name| EXPERIMENTS.iter().find(|e| e.name == name))
        .ok_or_else(usage)?;
    let iterations = match words.next() {
        Some(word) => cmdline::number(word, 1..=experiment.max)?,
        None => experiment.default,
    };
    if words.next().is_some() {
        return Err(usage());
    }
    (experiment.run)(iterations, Deadline::after_us(TIME_LIMIT_US))
}

/// The usage error: the experiments with their iteration counts.
fn usage() -> String {
    let mut text = format!("usage: bench {USAGE}");
    for e in EXPERIMENTS {
        text += &format!("; {}: 1..={} {} (default {})", e.name, e.max, e.iteration, e.default);
    }
    text
}

/// Prints one result line in the shape `make bench` reads (the `record` crate's).
fn result(
    experiment: &str,
    cores: usize,
    metric: &str,
    value: impl core::fmt::Display,
    unit: &str,
    extra: &str,
) {
    let record = Record::new(experiment, "atoll", Cores::Machine(cores), metric, unit);
    println!("{}", record.extra(extra).line(value));
}

/// When a run must stop, in TSC cycles. Copied into every job of the run.
#[derive(Clone, Copy)]
struct Deadline(u64);

impl Deadline {
    fn after_us(us: u64) -> Deadline {
        Deadline(cpu::rdtsc().saturating_add(timer::us_to_tsc(us)))
    }

    /// `Err` once the deadline has passed.
    fn check(self) -> Result<(), String> {
        if cpu::rdtsc() > self.0 {
            return Err(format!("stopped at the time limit ({} s)", TIME_LIMIT_US / 1_000_000));
        }
        Ok(())
    }
}

/// Spins until `ready` gives a value or `deadline` passes. The TSC is read only every
/// 64th try, so the loop stays as tight as the measured paths need.
fn spin<T>(deadline: Deadline, mut ready: impl FnMut() -> Option<T>) -> Result<T, String> {
    let mut tries = 0u32;
    loop {
        if let Some(value) = ready() {
            return Ok(value);
        }
        tries = tries.wrapping_add(1);
        if tries.is_multiple_of(64) {
            deadline.check()?;
        }
    }
}

/// `len` values from `make`, in memory reserved fallibly (`len` comes from the console).
fn try_vec<T>(len: usize, make: impl FnMut() -> T) -> Result<Vec<T>, String> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| format!("no memory for {len} samples"))?;
    v.extend(core::iter::repeat_with(make).take(len));
    Ok(v)
}

/// Sends `request` to core `to`, the error as text.
fn send(to: usize, message: MonitorMessage) -> Result<(), String> {
    transport::send(to, message).map_err(|e| format!("send to core {to}: {:?}", e.error))
}
