//! Benchmarks run from the console (`bench urpc`, `bench multicast`, `bench shm`). Each
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

use crate::arch::{cpu, timer};
use crate::mem::frames;
use crate::monitor::protocol::MonitorMessage;
use crate::monitor::{self, CallId};
use crate::percpu::this_core;
use crate::smp::{self, all_ok, Outcome};
use crate::tlb::{Flush, Shootdown};
use crate::{knowledge, println};
use agreement::CoreSet;
use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use record::{median, Cores, Fixed2, Record};
use skb::MulticastTree;
use skb::Protocol;
use urpc::{ChannelMemory, Receiver, Sender, PAYLOAD_WORDS};

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
        run: urpc,
    },
    Experiment {
        name: "multicast",
        iteration: "rounds per protocol and core count",
        default: 50,
        max: 200,
        run: multicast,
    },
    Experiment {
        name: "shootdown",
        iteration: "shootdowns per protocol and core count",
        default: 50,
        max: 200,
        run: shootdown,
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
        run: polling,
    },
    Experiment {
        name: "shm",
        iteration: "updates per client and configuration",
        default: 500,
        max: 20_000,
        run: shm,
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
pub const USAGE: &str = "urpc|multicast|shootdown|twophase|polling|shm [ITERATIONS]";

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
    monitor::send(to, message).map_err(|e| format!("send to core {to}: {:?}", e.error))
}

/// A two-way URPC channel pair and a pair of raw cache lines, lent to the two cores.
#[repr(C, align(64))]
struct PairMemory {
    forward: ChannelMemory<QUEUE>,
    backward: ChannelMemory<QUEUE>,
    ping: AtomicU64,
    _pad: [u64; 7],
    pong: AtomicU64,
}

impl PairMemory {
    /// Empty channels and zeroed lines, on the heap (they are lent to two cores).
    fn new_boxed() -> Box<PairMemory> {
        Box::new(PairMemory {
            forward: ChannelMemory::new(),
            backward: ChannelMemory::new(),
            ping: AtomicU64::new(0),
            _pad: [0; 7],
            pong: AtomicU64::new(0),
        })
    }
}

/// Multikernel Table 2: URPC one-way latency and pipelined throughput for each pair of
/// cores, with a raw cache-line ping-pong between the same cores as the floor.
fn urpc(iterations: usize, deadline: Deadline) -> Result<(), String> {
    let cores = smp::online_cores();
    if cores.len() < 2 {
        return Err(NEEDS_TWO_CORES.into());
    }
    let n = cores.len();
    for (i, &a) in cores.iter().enumerate() {
        for &b in &cores[i + 1..] {
            deadline.check()?;
            let pair = format!(",\"pair\":[{a},{b}]");
            let latency = pair_latency(a, b, iterations, Transport::Urpc, deadline)?;
            let floor = pair_latency(a, b, iterations, Transport::Floor, deadline)?;
            let throughput = pair_throughput(a, b, iterations * 10, deadline)?;
            let ratio = Fixed2(latency as f64 / floor.max(1) as f64);
            result(URPC, n, "latency_cycles", latency, "cycles", &pair);
            result(URPC, n, "floor_latency_cycles", floor, "cycles", &pair);
            result(URPC, n, "latency_vs_floor", ratio, "ratio", &pair);
            let rate = Fixed2(throughput);
            result(URPC, n, "throughput_msgs_per_kcycle", rate, "msgs/kcycle", &pair);
            // Over the most a QUEUE-slot ring carries at this floor (as `workloads::pingpong`).
            let bound = QUEUE as f64 * 1000.0 / (2.0 * floor.max(1) as f64);
            result(URPC, n, "throughput_vs_bound", Fixed2(throughput / bound), "ratio", &pair);
        }
    }
    Ok(())
}

/// What a latency sample travels over.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Transport {
    /// A fresh URPC channel pair.
    Urpc,
    /// Two raw cache lines: the floor a channel cannot beat.
    Floor,
}

/// Runs `responder` on core `b` (split phase) and `initiator` on core `a`, then waits for
/// both. The responder is a remote call, so it cannot be the calling core: if `b` is, the
/// two swap (a round trip is the same either way).
fn on_pair(
    a: usize,
    b: usize,
    initiator: &smp::Work<'_>,
    responder: &smp::Work<'_>,
) -> Result<(), String> {
    let (a, b) = if b == this_core().index { (b, a) } else { (a, b) };
    let id: CallId = monitor::call_async(b, responder).map_err(|e| format!("{e:?}"))?;
    let first = smp::run_on(&[a], JOB_TIMEOUT_US, initiator);
    let second = monitor::wait(id, JOB_TIMEOUT_US);
    all_ok(&[a, b], &[first.into_iter().next().unwrap_or(Outcome::NotOnline), second])
}

/// Median one-way latency between `a` and `b` in cycles over `transport`.
fn pair_latency(
    a: usize,
    b: usize,
    iterations: usize,
    transport: Transport,
    deadline: Deadline,
) -> Result<u64, String> {
    let mem = PairMemory::new_boxed();
    let samples = try_vec(iterations, || AtomicU64::new(0))?;
    let mut rtts = try_vec(iterations, || 0u64)?;
    let initiator = |_| -> Result<(), String> {
        let (mut tx, mut rx) = (Sender::new(&mem.forward), Receiver::new(&mem.backward));
        for (i, sample) in samples.iter().enumerate() {
            let start = cpu::rdtsc();
            if transport == Transport::Urpc {
                let payload = [i as u64; PAYLOAD_WORDS];
                spin(deadline, || tx.try_send(1, &payload).ok())?;
                spin(deadline, || rx.try_recv())?;
            } else {
                mem.ping.store(i as u64 + 1, Ordering::Release);
                spin(deadline, || {
                    (mem.pong.load(Ordering::Acquire) == i as u64 + 1).then_some(())
                })?;
            }
            sample.store(cpu::rdtsc() - start, Ordering::Relaxed);
        }
        Ok(())
    };
    let responder = |_| -> Result<(), String> {
        let (mut tx, mut rx) = (Sender::new(&mem.backward), Receiver::new(&mem.forward));
        for i in 0..iterations as u64 {
            if transport == Transport::Urpc {
                let msg = spin(deadline, || rx.try_recv())?;
                spin(deadline, || tx.try_send(2, &msg.payload).ok())?;
            } else {
                spin(deadline, || (mem.ping.load(Ordering::Acquire) == i + 1).then_some(()))?;
                mem.pong.store(i + 1, Ordering::Release);
            }
        }
        Ok(())
    };
    on_pair(a, b, &initiator, &responder)?;
    for (rtt, sample) in rtts.iter_mut().zip(&samples) {
        *rtt = sample.load(Ordering::Relaxed);
    }
    Ok(median(&mut rtts).unwrap_or(0) / 2)
}

/// Pipelined throughput from `a` to `b` over a 16-slot channel, in messages per 1000
/// cycles: `a` streams `count` messages; `b` acknowledges the last one.
fn pair_throughput(a: usize, b: usize, count: usize, deadline: Deadline) -> Result<f64, String> {
    let mem = PairMemory::new_boxed();
    let cycles = AtomicU64::new(0);
    let initiator = |_| -> Result<(), String> {
        let (mut tx, mut rx) = (Sender::new(&mem.forward), Receiver::new(&mem.backward));
        let start = cpu::rdtsc();
        for i in 0..count {
            let payload = [i as u64; PAYLOAD_WORDS];
            spin(deadline, || tx.try_send(1, &payload).ok())?;
        }
        spin(deadline, || rx.try_recv())?;
        cycles.store(cpu::rdtsc() - start, Ordering::Relaxed);
        Ok(())
    };
    let responder = |_| -> Result<(), String> {
        let (mut tx, mut rx) = (Sender::new(&mem.backward), Receiver::new(&mem.forward));
        for i in 0..count {
            let msg = spin(deadline, || rx.try_recv())?;
            if msg.payload[0] != i as u64 {
                return Err(format!("message {i} arrived as {}", msg.payload[0]));
            }
        }
        spin(deadline, || tx.try_send(2, &[0; PAYLOAD_WORDS]).ok())?;
        Ok(())
    };
    on_pair(a, b, &initiator, &responder)?;
    Ok(count as f64 * 1000.0 / cycles.load(Ordering::Relaxed).max(1) as f64)
}

/// How long the source waits for the acks of one multicast round.
const ACK_TIMEOUT_US: u64 = 10_000_000;

/// Waits until `expected` more benchmark acks than `before` have arrived.
fn wait_acks(before: u64, expected: u64, deadline: Deadline) -> Result<(), String> {
    let start = cpu::rdtsc();
    while monitor::bench_acks() < before + expected {
        monitor::poll();
        if timer::us_since(start) > ACK_TIMEOUT_US {
            return Err(format!("only {} of {expected} acks", monitor::bench_acks() - before));
        }
        deadline.check()?;
    }
    Ok(())
}

/// Multikernel Figure 6: the latency of a request to every core and the collection of all
/// their acks, by protocol (one channel each; the SKB's multicast tree; one shared line),
/// against the number of cores. The calling core is the source.
fn multicast(rounds: usize, deadline: Deadline) -> Result<(), String> {
    let cores = smp::online_cores();
    if cores.len() < 2 {
        return Err(NEEDS_TWO_CORES.into());
    }
    let source = this_core().index;
    let skb = knowledge::get().ok_or("the SKB is not measured")?;
    let tree = skb.multicast_tree(source);
    for k in 2..=cores.len() {
        let targets: Vec<usize> = cores.iter().copied().filter(|&c| c != source && c < k).collect();
        let packages = packages_below(skb, k);
        let line = |protocol: &str, cycles: u64| multicast_result(k, packages, protocol, cycles);
        let unicast = time_rounds(rounds, |round| unicast_round(&targets, round, deadline))?;
        line("unicast", unicast);
        let multicast = time_rounds(rounds, |round| tree_round(&tree, k, round, deadline))?;
        line("multicast", multicast);
        let broadcast = broadcast_rounds(source, &targets, rounds, deadline)?;
        line("broadcast", broadcast);
    }
    Ok(())
}

/// How many packages the cores below `k` span (the `packages` of Figure 6's lines).
fn packages_below(skb: &skb::Skb, k: usize) -> usize {
    let mut packages: Vec<u32> = (0..k).filter_map(|c| skb.core(c)).map(|c| c.package).collect();
    packages.sort_unstable();
    packages.dedup();
    packages.len()
}

/// Prints the median latency of `protocol` to `k` cores in `packages` packages. The lines
/// say `impl` `kernel`: the monitor's own channels in ring 0, apart from the rows of the
/// user-space workload that both systems run (`workloads::multicast`, `mcbench`).
fn multicast_result(k: usize, packages: usize, protocol: &str, cycles: u64) {
    let extra = format!(",\"protocol\":\"{protocol}\",\"impl\":\"kernel\",\"packages\":{packages}");
    result("multicast", k, "latency_cycles", cycles, "cycles", &extra);
}

/// Runs `round(0..rounds)` one after another; the median of their cycles.
fn time_rounds(
    rounds: usize,
    mut round: impl FnMut(u64) -> Result<(), String>,
) -> Result<u64, String> {
    let mut samples = try_vec(rounds, || 0u64)?;
    for (r, sample) in samples.iter_mut().enumerate() {
        let start = cpu::rdtsc();
        round(r as u64)?;
        *sample = cpu::rdtsc() - start;
    }
    Ok(median(&mut samples).unwrap_or(0))
}

/// Unicast: one message to each target over its own channel, then all their acks.
fn unicast_round(targets: &[usize], round: u64, deadline: Deadline) -> Result<(), String> {
    let before = monitor::bench_acks();
    for &t in targets {
        send(t, MonitorMessage::Bench { round })?;
    }
    wait_acks(before, targets.len() as u64, deadline)
}

/// The SKB's multicast tree, cut to cores below `k`: one message per package aggregator,
/// which forwards within its package and acks once; cores of the source's own package
/// get direct messages.
fn tree_round(
    tree: &MulticastTree,
    k: usize,
    round: u64,
    deadline: Deadline,
) -> Result<(), String> {
    let before = monitor::bench_acks();
    let mut expected = 0;
    for agg in &tree.aggregators {
        if agg.core == tree.source || agg.core >= k {
            for &m in agg.members.iter().filter(|&&m| m < k) {
                send(m, MonitorMessage::Bench { round })?;
                expected += 1;
            }
        } else {
            send(agg.core, MonitorMessage::Multicast { round, source: tree.source, limit: k })?;
            expected += 1;
        }
    }
    wait_acks(before, expected, deadline)
}

/// Multikernel Figure 6 with the real operation (§4.7, §5.1): the latency of a TLB
/// shootdown of one page (`tlb::Shootdown`: the invalidation sent, applied and acknowledged
/// by every participant) to the cores below `k`, by each of the four protocols, against `k`.
/// The participants are idle (polling, or halted and woken by the notification).
fn shootdown(rounds: usize, deadline: Deadline) -> Result<(), String> {
    let cores = smp::online_cores();
    if cores.len() < 2 {
        return Err(NEEDS_TWO_CORES.into());
    }
    let source = this_core().index;
    let skb = knowledge::get().ok_or("the SKB is not measured")?;
    // The per-message costs the model (`agreement-sim`, in `make bench`'s report) predicts
    // from: the one-way latency to a core of this package and to one of another, measured
    // now, beside the shootdowns.
    let home = skb.core(source).map(|c| c.package);
    for (link, remote) in [("local", false), ("remote", true)] {
        let peer = cores
            .iter()
            .copied()
            .find(|&c| c != source && (skb.core(c).map(|c| c.package) != home) == remote);
        if let Some(peer) = peer {
            let cycles = knowledge::one_way_latency(peer, 15)?;
            result(
                "shootdown",
                2,
                "one_way_cycles",
                cycles,
                "cycles",
                &format!(",\"link\":\"{link}\""),
            );
        }
    }
    // A page nothing maps: invalidating it costs what invalidating a mapped page does.
    let flush = Flush { start: 0xffff_e000_0000_0000, pages: 1, global: false };
    for k in 2..=cores.len() {
        let targets: CoreSet = cores.iter().copied().filter(|&c| c != source && c < k).collect();
        let packages = packages_below(skb, k);
        for protocol in Protocol::ALL {
            let cycles = time_rounds(rounds, |_| {
                deadline.check()?;
                Shootdown::start_with(targets, flush, Some(protocol))
                    .wait()
                    .map_err(|c| format!("cores {:#x} never acknowledged", c.0))
            })?;
            let extra = format!(",\"protocol\":\"{}\",\"packages\":{}", protocol.name(), packages);
            result("shootdown", k, "latency_cycles", cycles, "cycles", &extra);
        }
    }
    Ok(())
}

/// Multikernel §5.2 ("The cost of polling"): an idle core polls its channels for P cycles,
/// then halts, and a later message must wake it with an IPI costing C; with P = C (the
/// SKB's measured C) the receiver's overhead is at most 2C per message and the added
/// latency at most C, whatever the arrival times. Core 1 is idle; core 0 pings it `rounds`
/// times, each `gap` cycles after the last answer, for gaps of ¼ C to 8 C: the median
/// one-way latency (round trip / 2), how often core 1 had halted (its wake-up count), and
/// the overhead those imply per message: the polling it did (min(gap, P)) plus C for each
/// wake-up.
fn polling(rounds: usize, deadline: Deadline) -> Result<(), String> {
    let cores = smp::online_cores();
    let Some(&target) = cores.iter().find(|&&c| c != this_core().index) else {
        return Err(NEEDS_TWO_CORES.into());
    };
    let core = crate::percpu::core(target).ok_or("no such core")?;
    let skb = knowledge::get().ok_or("the SKB is not measured")?;
    let c = skb.ipi_cost().unwrap_or(skb::DEFAULT_IPI_COST_CYCLES).max(1);
    let p = monitor::poll_budget();
    result("polling", 2, "ipi_cost_cycles", c, "cycles", "");
    result("polling", 2, "poll_budget_cycles", p, "cycles", "");
    for quarters in [1u64, 2, 4, 8, 16, 32] {
        let gap = c * quarters / 4;
        let mut samples = try_vec(rounds, || 0u64)?;
        let woken = core.wakeups();
        for sample in samples.iter_mut() {
            deadline.check()?;
            let start = cpu::rdtsc();
            while cpu::rdtsc() - start < gap {
                core::hint::spin_loop();
            }
            *sample = monitor::ping(target, 5_000_000).ok_or("no pong")? / 2;
        }
        let halted = core.wakeups() - woken;
        let label = format!(",\"config\":\"gap={}C/4\"", quarters);
        result("polling", 2, "latency_cycles", median(&mut samples).unwrap_or(0), "cycles", &label);
        let halted_pct = halted * 100 / rounds as u64;
        result("polling", 2, "halted_pct", halted_pct, "%", &label);
        let overhead = gap.min(p) + c * halted / rounds as u64;
        result("polling", 2, "overhead_cycles", overhead, "cycles", &label);
    }
    Ok(())
}

/// Multikernel Figure 8: the latency of a two-phase commit (`twophase`: prepare, votes,
/// decision, acknowledgements) with the cores below `k` as participants, one operation at
/// a time (`single`), and the cost per operation when `PIPELINE` operations on different
/// registers are in flight at once (`pipelined`: what a retype-heavy workload sees).
fn two_phase(rounds: usize, deadline: Deadline) -> Result<(), String> {
    const PIPELINE: usize = 8;
    let reg = |register, value| crate::twophase::Operation::Register { register, value };
    let cores = smp::online_cores();
    if cores.len() < 2 {
        return Err(NEEDS_TWO_CORES.into());
    }
    // Registers of this core's own (a run never conflicts with one from another core),
    // made in every replica at start-up and reused by every run: a register, once seen, is
    // kept for good, so fresh ones per run grew every core's heap.
    let me = this_core().index;
    let register = |i: u64| crate::twophase::bench_register(me, i);
    const _: () = assert!((PIPELINE as u64) < crate::twophase::BENCH_REGISTERS);
    for k in 2..=cores.len() {
        let participants: CoreSet = cores.iter().copied().filter(|&c| c < k).collect();
        let single = time_rounds(rounds, |round| {
            deadline.check()?;
            match crate::twophase::commit(participants, reg(register(PIPELINE as u64), round)) {
                agreement::Decision::Commit => Ok(()),
                agreement::Decision::Abort => Err("an operation without conflict aborted".into()),
            }
        })?;
        result("twophase", k, "latency_cycles", single, "cycles", ",\"config\":\"single\"");
        let batches = rounds.div_ceil(PIPELINE).max(1);
        let batch = time_rounds(batches, |round| {
            deadline.check()?;
            // One register each for the operations in flight at once (they must not
            // conflict); a batch ends before the next starts.
            let ops: Vec<_> = (0..PIPELINE as u64)
                .map(|i| crate::twophase::start(participants, reg(register(i), round + i)))
                .collect();
            for op in ops {
                if crate::twophase::finish(op) != agreement::Decision::Commit {
                    return Err("a pipelined operation aborted".into());
                }
            }
            Ok(())
        })?;
        let per_op = batch / PIPELINE as u64;
        result("twophase", k, "latency_cycles", per_op, "cycles", ",\"config\":\"pipelined\"");
    }
    retype_rounds(&cores, rounds.min(RETYPE_ROUNDS), deadline)
}

/// Most timed retypes in one run (each moves a block there and back).
const RETYPE_ROUNDS: usize = 20;

/// A retype over two-phase commit among every online core (`config` `retype`): this core
/// gives one block to the next core, timed until the commit is done and the frames are
/// sent; then, untimed, that core gives the same block back once its frames arrived, so a
/// run leaves the ownership as it found it.
fn retype_rounds(cores: &[usize], rounds: usize, deadline: Deadline) -> Result<(), String> {
    let me = this_core().index;
    let to = *cores.iter().find(|&&c| c != me).ok_or(NEEDS_TWO_CORES)?;
    let mut samples = try_vec(rounds, || 0u64)?;
    for sample in samples.iter_mut() {
        deadline.check()?;
        let start = cpu::rdtsc();
        let first = crate::retype::give(1, to).map_err(|e| format!("retype: {e}"))?;
        *sample = cpu::rdtsc() - start;
        let back = |_| -> Result<(), String> {
            let last = first + physmem::BLOCK_SIZE - physmem::FRAME_SIZE;
            while !(frames::is_free_here(first) && frames::is_free_here(last)) {
                deadline.check()?;
                monitor::flush_frame_returns();
                monitor::poll();
                cpu::pause();
            }
            if !frames::take_blocks_at(first, 1) {
                return Err(format!("block {first:#x} did not arrive whole"));
            }
            crate::retype::give_taken(first, 1, me).map(|_| ()).map_err(|e| format!("{e}"))
        };
        smp::all_ok(&[to], &smp::run_on(&[to], JOB_TIMEOUT_US, &back))?;
    }
    let cycles = median(&mut samples).unwrap_or(0);
    result("twophase", cores.len(), "latency_cycles", cycles, "cycles", ",\"config\":\"retype\"");
    Ok(())
}

/// The line of the broadcast protocol: the round the source has started, and whether the
/// listeners should stop (the source gave up).
#[repr(C, align(64))]
struct BroadcastLine {
    round: AtomicU64,
    stop: AtomicBool,
}

/// Broadcast: the source writes one shared line that every target polls, and each target
/// acks by message. Each target runs a listener job for all the rounds; the median
/// latency of a round in cycles.
fn broadcast_rounds(
    source: usize,
    targets: &[usize],
    rounds: usize,
    deadline: Deadline,
) -> Result<u64, String> {
    let line = Box::new(BroadcastLine { round: AtomicU64::new(0), stop: AtomicBool::new(false) });
    let listener = |_| -> Result<(), String> {
        for round in 1..=rounds as u64 {
            spin(deadline, || {
                let started = line.round.load(Ordering::Acquire) >= round;
                (started || line.stop.load(Ordering::Acquire)).then_some(())
            })?;
            if line.stop.load(Ordering::Acquire) {
                return Ok(());
            }
            send(source, MonitorMessage::BenchAck { round })?;
        }
        Ok(())
    };
    let mut calls = Vec::with_capacity(targets.len());
    let mut started = Ok(());
    for &t in targets {
        match monitor::call_async(t, &listener) {
            Ok(id) => calls.push(id),
            Err(e) => {
                started = Err(format!("listener on core {t}: {e:?}"));
                break;
            }
        }
    }
    let timed = started.and_then(|()| {
        time_rounds(rounds, |round| {
            let before = monitor::bench_acks();
            line.round.store(round + 1, Ordering::Release);
            wait_acks(before, targets.len() as u64, deadline)
        })
    });
    // The listeners borrow `line`: every one is waited for, whatever happened above.
    line.stop.store(true, Ordering::Release);
    let outcomes: Vec<Outcome> =
        calls.into_iter().map(|id| monitor::wait(id, JOB_TIMEOUT_US)).collect();
    let cycles = timed?;
    all_ok(targets, &outcomes)?;
    Ok(cycles)
}

/// Most cache lines an update touches (Figure 3 goes to 8).
const UPDATE_LINES: usize = 8;

/// Cache lines of the shared array in the SHM experiment.
#[repr(C, align(64))]
struct SharedLine(AtomicU64, [u64; 7]);

/// Multikernel Figure 3: cycles per update of 1, 2, 4 or 8 cache lines, by cores updating
/// one shared array directly (SHMn) or by sending each update over a URPC channel to a
/// server core that owns the array and answers when done (MSGn), against the number of
/// client cores. The server is the last core and runs a dedicated loop over one channel
/// pair per client (as the paper's server did), not the general monitor.
fn shm(updates: usize, deadline: Deadline) -> Result<(), String> {
    let cores = smp::online_cores();
    if cores.len() < 2 {
        return Err(NEEDS_TWO_CORES.into());
    }
    let server = *cores.last().ok_or("no cores")?;
    let clients_all: Vec<usize> = cores.iter().copied().filter(|&c| c != server).collect();
    let lines: Vec<SharedLine> =
        (0..UPDATE_LINES).map(|_| SharedLine(AtomicU64::new(0), [0; 7])).collect();
    for k in 1..=clients_all.len() {
        let clients = &clients_all[..k];
        // The first configuration runs twice; the first pass warms caches and the
        // emulator's translations and is not reported.
        let configs = [(1usize, "shm", false), (1, "msg", false)].into_iter().chain(
            [1usize, 2, 4, 8].into_iter().flat_map(|n| [(n, "shm", true), (n, "msg", true)]),
        );
        for (n_lines, protocol, report) in configs {
            deadline.check()?;
            let per_update: Vec<AtomicU64> = clients.iter().map(|_| AtomicU64::new(0)).collect();
            if protocol == "shm" {
                shared_updates(clients, &lines[..n_lines], updates, &per_update)?;
            } else {
                message_updates(server, clients, n_lines, updates, &per_update, deadline)?;
            }
            if !report {
                continue;
            }
            let mut v: Vec<u64> = per_update.iter().map(|c| c.load(Ordering::Relaxed)).collect();
            let cycles = median(&mut v).unwrap_or(0);
            let extra = format!(",\"protocol\":\"{protocol}{n_lines}\",\"lines\":{n_lines}");
            result(SHM, k, "cycles_per_update", cycles, "cycles", &extra);
        }
    }
    Ok(())
}

/// SHMn: each client adds 1 to every line of `lines`, `updates` times. Cycles per update go
/// to `per_update` (one slot per client). No waiting on other cores, so the work is
/// bounded by `updates` alone.
fn shared_updates(
    clients: &[usize],
    lines: &[SharedLine],
    updates: usize,
    per_update: &[AtomicU64],
) -> Result<(), String> {
    let work = |index: usize| -> Result<(), String> {
        let slot = clients.iter().position(|&c| c == index).ok_or("not a client")?;
        let start = cpu::rdtsc();
        for _ in 0..updates {
            for line in lines {
                line.0.fetch_add(1, Ordering::AcqRel);
            }
        }
        per_update[slot].store((cpu::rdtsc() - start) / updates as u64, Ordering::Relaxed);
        Ok(())
    };
    all_ok(clients, &smp::run_on(clients, JOB_TIMEOUT_US, &work))
}

/// MSGn: each client sends `updates` requests over its own channel to `server` and waits
/// for each answer; the server updates `n_lines` lines of its own array per request.
/// Cycles per update go to `per_update` (one slot per client).
fn message_updates(
    server: usize,
    clients: &[usize],
    n_lines: usize,
    updates: usize,
    per_update: &[AtomicU64],
    deadline: Deadline,
) -> Result<(), String> {
    let pairs: Vec<Box<PairMemory>> = clients.iter().map(|_| PairMemory::new_boxed()).collect();
    let serve = |_| -> Result<(), String> {
        let mut ends: Vec<_> =
            pairs.iter().map(|p| (Receiver::new(&p.forward), Sender::new(&p.backward))).collect();
        let mut array = [[0u64; 8]; UPDATE_LINES];
        let mut remaining = clients.len() * updates;
        let mut passes = 0u32;
        while remaining > 0 {
            for (rx, tx) in ends.iter_mut() {
                let Some(msg) = rx.try_recv() else { continue };
                for line in &mut array[..(msg.payload[1] as usize).min(UPDATE_LINES)] {
                    line[0] = line[0].wrapping_add(1);
                }
                spin(deadline, || tx.try_send(2, &msg.payload).ok())?;
                remaining -= 1;
            }
            passes = passes.wrapping_add(1);
            if passes.is_multiple_of(64) {
                deadline.check()?;
            }
        }
        core::hint::black_box(&array);
        Ok(())
    };
    let server_call = monitor::call_async(server, &serve).map_err(|e| format!("{e:?}"))?;
    let work = |index: usize| -> Result<(), String> {
        let slot = clients.iter().position(|&c| c == index).ok_or("not a client")?;
        let (mut tx, mut rx) =
            (Sender::new(&pairs[slot].forward), Receiver::new(&pairs[slot].backward));
        let start = cpu::rdtsc();
        for round in 0..updates as u64 {
            let mut payload = [0u64; PAYLOAD_WORDS];
            payload[0] = round;
            payload[1] = n_lines as u64;
            spin(deadline, || tx.try_send(1, &payload).ok())?;
            spin(deadline, || rx.try_recv())?;
        }
        per_update[slot].store((cpu::rdtsc() - start) / updates as u64, Ordering::Relaxed);
        Ok(())
    };
    let outcomes = smp::run_on(clients, JOB_TIMEOUT_US, &work);
    all_ok(&[server], &[monitor::wait(server_call, JOB_TIMEOUT_US)])?;
    all_ok(clients, &outcomes)
}
