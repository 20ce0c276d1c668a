//! Hosted benchmarks of Atoll's URPC channels: the `urpc` crate between two Linux threads
//! pinned to CPUs 0 and 1, measured in the same run against the physical floor (a raw
//! cache-line ping-pong) and against a peer SPSC queue (`rtrb`). These are the numbers of
//! Multikernel Table 2 (one-way latency; pipelined throughput with a queue of 16 messages),
//! on the real cores; `make bench-host` runs them (`cargo run --release -p bench-host`).
//!
//! Every measurement function runs one trial on a fresh pair of threads and returns one
//! number; `main` repeats each trial and reports the median. Timing is in TSC cycles.
//! All polling loops spin without `pause`, the same for every implementation, so the
//! comparison measures the queues and not the back-off.

use record::{median, Cores, Fixed2, Record};
use std::thread;

pub mod bcache;
pub mod latency;
pub mod locks;
pub mod mcrt;
pub mod metis;
pub mod npb;
pub mod throughput;

/// The two CPUs the benchmark threads are pinned to.
pub const PAIR: [usize; 2] = [0, 1];

/// Queue length of the throughput trials and ring size of every queue (Multikernel Table 2
/// uses a queue length of 16).
pub const QUEUE: usize = 16;

/// Iteration counts of one run.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Timed round trips per latency trial (each trial first does a tenth as many untimed).
    pub round_trips: usize,
    /// Timed messages per throughput trial (after a tenth as many untimed).
    pub messages: usize,
    /// Trials per measurement; the median is reported.
    pub trials: usize,
}

impl Config {
    /// The full benchmark (`make bench-host`): about seven seconds on a 2-core VM.
    pub const FULL: Config = Config { round_trips: 300_000, messages: 8_000_000, trials: 5 };

    /// Tiny counts, so tests exercise every trial quickly (`--quick`).
    pub const QUICK: Config = Config { round_trips: 500, messages: 5_000, trials: 1 };
}

/// Reads the time-stamp counter (constant-rate and synchronised across cores on the x86-64
/// machines Atoll targets).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub fn tsc() -> u64 {
    // SAFETY: RDTSC has no preconditions on x86-64 and touches no memory.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Elsewhere, nanoseconds stand in for cycles (the numbers are then ns, not cycles).
#[cfg(not(target_arch = "x86_64"))]
pub fn tsc() -> u64 {
    use std::sync::OnceLock;
    use std::time::Instant;
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// Warm-up iterations before `timed` timed ones: a tenth, at least one.
pub fn warmup(timed: usize) -> usize {
    timed / 10 + 1
}

/// Runs `trial` `trials` times and returns the median result.
pub fn median_of(trials: usize, mut trial: impl FnMut() -> f64) -> f64 {
    let mut values: Vec<f64> = (0..trials.max(1)).map(|_| trial()).collect();
    median(&mut values).unwrap_or(f64::NAN)
}

/// Pins the calling thread to `cpu`; false if the system refused (e.g. fewer CPUs).
pub(crate) fn pin(cpu: usize) -> bool {
    core_affinity::set_for_current(core_affinity::CoreId { id: cpu })
}

/// Whether both benchmark CPUs exist, so the threads are really pinned to two cores.
pub fn pinning_possible() -> bool {
    let ids = core_affinity::get_core_ids().unwrap_or_default();
    PAIR.iter().all(|&cpu| ids.iter().any(|id| id.id == cpu))
}

/// Runs `a` on a thread pinned to CPU `PAIR[0]` and `b` on one pinned to `PAIR[1]`, at the
/// same time, and returns what `a` returns. If pinning fails the threads run unpinned (the
/// numbers are then not the pair's; `main` warns).
pub fn on_pair<R: Send>(a: impl FnOnce() -> R + Send, b: impl FnOnce() + Send) -> R {
    thread::scope(|s| {
        let second = s.spawn(move || {
            pin(PAIR[1]);
            b()
        });
        let first = s.spawn(move || {
            pin(PAIR[0]);
            a()
        });
        let result = first.join().expect("benchmark thread panicked");
        second.join().expect("benchmark thread panicked");
        result
    })
}

/// One `RESULT {json}` line, in the record shape `make bench` collects (written by the
/// `record` crate, like every benchmark's): the pair of CPUs and the peer implementation
/// (`impl`) go in the extra fields; a value that is not finite is `null`.
pub fn result_line(
    experiment: &str,
    implementation: Option<&str>,
    metric: &str,
    value: f64,
    unit: &str,
) -> String {
    let implementation = implementation.map(|i| format!(",\"impl\":\"{i}\"")).unwrap_or_default();
    let extra = format!(",\"pair\":[{},{}]{implementation}", PAIR[0], PAIR[1]);
    Record::new(experiment, "host", Cores::Machine(2), metric, unit)
        .extra(&extra)
        .line(Fixed2(value))
        .to_string()
}

/// The medians of one benchmark run.
#[derive(Clone, Copy, Debug)]
pub struct Results {
    /// URPC one-way latency, cycles.
    pub urpc_latency: f64,
    /// Raw cache-line ping-pong one-way latency (the floor), cycles.
    pub floor_latency: f64,
    /// rtrb one-way latency, cycles.
    pub rtrb_latency: f64,
    /// URPC pipelined throughput, messages per kilocycle.
    pub urpc_throughput: f64,
    /// rtrb pipelined throughput, messages per kilocycle.
    pub rtrb_throughput: f64,
}

/// Runs every measurement `config.trials` times, the kinds interleaved so that drift in the
/// machine (frequency, a noisy neighbour) touches them alike, and keeps each one's median.
pub fn run(config: Config) -> Results {
    let mut trials: [Vec<f64>; 5] = Default::default();
    for _ in 0..config.trials.max(1) {
        trials[0].push(latency::urpc(config.round_trips));
        trials[1].push(latency::floor(config.round_trips));
        trials[2].push(latency::rtrb(config.round_trips));
        trials[3].push(throughput::urpc(config.messages));
        trials[4].push(throughput::rtrb(config.messages));
    }
    let [a, b, c, d, e] = trials.map(|mut t| median(&mut t).unwrap_or(f64::NAN));
    Results {
        urpc_latency: a,
        floor_latency: b,
        rtrb_latency: c,
        urpc_throughput: d,
        rtrb_throughput: e,
    }
}

impl Results {
    /// The `RESULT {json}` lines of this run.
    pub fn lines(&self) -> Vec<String> {
        let peer = Some("rtrb");
        vec![
            result_line("urpc", None, "latency_cycles", self.urpc_latency, "cycles"),
            result_line("urpc", None, "floor_latency_cycles", self.floor_latency, "cycles"),
            result_line("urpc", None, "latency_vs_floor", self.latency_vs_floor(), "ratio"),
            result_line(
                "urpc",
                None,
                "throughput_msgs_per_kcycle",
                self.urpc_throughput,
                "msgs/kcycle",
            ),
            result_line("urpc", None, "throughput_vs_bound", self.throughput_vs_bound(), "ratio"),
            result_line("urpc", peer, "throughput_vs_peer", self.throughput_vs_peer(), "ratio"),
            result_line("spsc_peer", peer, "latency_cycles", self.rtrb_latency, "cycles"),
            result_line(
                "spsc_peer",
                peer,
                "throughput_msgs_per_kcycle",
                self.rtrb_throughput,
                "msgs/kcycle",
            ),
        ]
    }

    /// URPC latency over the floor's (the target: at most 1.5).
    pub fn latency_vs_floor(&self) -> f64 {
        self.urpc_latency / self.floor_latency
    }

    /// URPC throughput over the most a [`QUEUE`]-slot ring can carry at this floor,
    /// `QUEUE / (2 × floor)` (each unacknowledged message needs a slot transfer and a
    /// credit transfer back; `workloads::pingpong::bound` on the VMs): unlike msgs/kcycle,
    /// it does not depend on how far apart the host places the two CPUs.
    pub fn throughput_vs_bound(&self) -> f64 {
        self.urpc_throughput * 2.0 * self.floor_latency / (QUEUE as f64 * 1000.0)
    }

    /// URPC throughput over rtrb's (target: at least 1).
    pub fn throughput_vs_peer(&self) -> f64 {
        self.urpc_throughput / self.rtrb_throughput
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_of_trials() {
        assert_eq!(median_of(3, || 7.0), 7.0);
        let mut n = 0.0;
        assert_eq!(
            median_of(4, || {
                n += 1.0;
                n
            }),
            3.0
        );
    }

    #[test]
    fn the_bound_is_the_queue_over_two_floors() {
        let r = Results {
            urpc_latency: 0.0,
            floor_latency: 500.0,
            rtrb_latency: 0.0,
            urpc_throughput: 8.0,
            rtrb_throughput: 1.0,
        };
        // 16 slots over 2 × 500 cycles: 16 msgs/kcycle at most; 8 is half of it.
        assert_eq!(r.throughput_vs_bound(), 0.5);
        assert_eq!(r.lines().iter().filter(|l| l.contains("throughput_vs_bound")).count(), 1);
    }

    #[test]
    fn result_lines_are_json_records() {
        let line = result_line("urpc", Some("rtrb"), "m", 1.234, "ratio");
        assert_eq!(
            line,
            "RESULT {\"experiment\":\"urpc\",\"system\":\"host\",\"cores\":2,\"metric\":\"m\",\
             \"value\":1.23,\"unit\":\"ratio\",\"pair\":[0,1],\"impl\":\"rtrb\"}"
        );
        assert!(result_line("urpc", None, "m", f64::NAN, "x").contains("\"value\":null"));
    }
}
