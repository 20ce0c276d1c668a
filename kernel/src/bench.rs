//! Benchmarks run from the console (`bench urpc`, `bench multicast`, `bench shm`). Each
//! measurement prints one `RESULT {json}` line; absolute numbers under QEMU/TCG mean
//! little, so every experiment reports a ratio measured in the same run (URPC against the
//! raw cache-line floor; protocols against each other).

use crate::arch::cpu;
use crate::monitor::protocol::Request;
use crate::monitor::{self, CallId};
use crate::percpu::this_core;
use crate::smp::{self, all_ok, Outcome};
use crate::{knowledge, println};
use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};
use record::{median, Cores, Fixed2, Record};
use urpc::{ChannelMemory, Receiver, Sender, PAYLOAD_WORDS};

/// Time limit of one benchmark job.
const JOB_TIMEOUT_US: u64 = 120_000_000;
/// Queue length of the throughput test (Multikernel Table 2 uses 16).
const QUEUE: usize = 16;

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

/// Runs `bench <what> [iterations]`.
pub fn run(args: &[&str]) {
    let iterations = args.get(1).and_then(|s| s.parse().ok());
    let outcome = match args.first().copied() {
        Some("urpc") => urpc(iterations.unwrap_or(2000)),
        Some("multicast") => multicast(iterations.unwrap_or(50)),
        Some("shm") => shm(iterations.unwrap_or(500)),
        _ => Err(String::from("usage: bench urpc|multicast|shm [iterations]")),
    };
    if let Err(e) = outcome {
        println!("bench: {e}");
    }
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
fn urpc(iterations: usize) -> Result<(), String> {
    let cores = smp::online_cores();
    if cores.len() < 2 {
        return Err("needs 2 cores".into());
    }
    let n = cores.len();
    for (i, &a) in cores.iter().enumerate() {
        for &b in &cores[i + 1..] {
            let pair = format!(",\"pair\":[{a},{b}]");
            let latency = pair_latency(a, b, iterations, true)?;
            let floor = pair_latency(a, b, iterations, false)?;
            let throughput = pair_throughput(a, b, iterations * 10)?;
            result("urpc", n, "latency_cycles", latency, "cycles", &pair);
            result("urpc", n, "floor_latency_cycles", floor, "cycles", &pair);
            result(
                "urpc",
                n,
                "latency_vs_floor",
                Fixed2(latency as f64 / floor.max(1) as f64),
                "ratio",
                &pair,
            );
            result(
                "urpc",
                n,
                "throughput_msgs_per_kcycle",
                Fixed2(throughput),
                "msgs/kcycle",
                &pair,
            );
        }
    }
    Ok(())
}

/// Runs `responder` on core `b` (split phase) and `initiator` on core `a`, then waits.
fn on_pair(
    a: usize,
    b: usize,
    initiator: &smp::Work<'_>,
    responder: &smp::Work<'_>,
) -> Result<(), String> {
    let me = this_core().index;
    if me == b {
        return Err("the console core must not be the responder".into());
    }
    let id: CallId = monitor::call_async(b, responder).map_err(|e| format!("{e:?}"))?;
    let first = smp::run_on(&[a], JOB_TIMEOUT_US, initiator);
    let second = monitor::wait(id, JOB_TIMEOUT_US);
    all_ok(&[a, b], &[first.into_iter().next().unwrap_or(Outcome::NotOnline), second])
}

/// Median one-way latency between `a` and `b` in cycles: over a fresh URPC channel pair
/// (`urpc`), or over two raw cache lines (the floor).
fn pair_latency(a: usize, b: usize, iterations: usize, urpc: bool) -> Result<u64, String> {
    let mem = PairMemory::new_boxed();
    let samples: Vec<AtomicU64> = (0..iterations).map(|_| AtomicU64::new(0)).collect();
    let initiator = |_| -> Result<(), String> {
        let (mut tx, mut rx) = (Sender::new(&mem.forward), Receiver::new(&mem.backward));
        for (i, sample) in samples.iter().enumerate() {
            let start = cpu::rdtsc();
            if urpc {
                let payload = [i as u64; PAYLOAD_WORDS];
                while tx.try_send(1, &payload).is_err() {}
                while rx.try_recv().is_none() {}
            } else {
                mem.ping.store(i as u64 + 1, Ordering::Release);
                while mem.pong.load(Ordering::Acquire) != i as u64 + 1 {}
            }
            sample.store(cpu::rdtsc() - start, Ordering::Relaxed);
        }
        Ok(())
    };
    let responder = |_| -> Result<(), String> {
        let (mut tx, mut rx) = (Sender::new(&mem.backward), Receiver::new(&mem.forward));
        for i in 0..iterations {
            if urpc {
                let msg = loop {
                    if let Some(m) = rx.try_recv() {
                        break m;
                    }
                };
                while tx.try_send(2, &msg.payload).is_err() {}
            } else {
                while mem.ping.load(Ordering::Acquire) != i as u64 + 1 {}
                mem.pong.store(i as u64 + 1, Ordering::Release);
            }
        }
        Ok(())
    };
    on_pair(a, b, &initiator, &responder)?;
    let mut rtts: Vec<u64> = samples.iter().map(|s| s.load(Ordering::Relaxed)).collect();
    Ok(median(&mut rtts).unwrap_or(0) / 2)
}

/// Pipelined throughput from `a` to `b` over a 16-slot channel, in messages per 1000
/// cycles: `a` streams `count` messages; `b` acknowledges the last one.
fn pair_throughput(a: usize, b: usize, count: usize) -> Result<f64, String> {
    let mem = PairMemory::new_boxed();
    let cycles = AtomicU64::new(0);
    let initiator = |_| -> Result<(), String> {
        let (mut tx, mut rx) = (Sender::new(&mem.forward), Receiver::new(&mem.backward));
        let start = cpu::rdtsc();
        for i in 0..count {
            let payload = [i as u64; PAYLOAD_WORDS];
            while tx.try_send(1, &payload).is_err() {}
        }
        while rx.try_recv().is_none() {}
        cycles.store(cpu::rdtsc() - start, Ordering::Relaxed);
        Ok(())
    };
    let responder = |_| -> Result<(), String> {
        let (mut tx, mut rx) = (Sender::new(&mem.backward), Receiver::new(&mem.forward));
        for i in 0..count {
            let msg = loop {
                if let Some(m) = rx.try_recv() {
                    break m;
                }
            };
            if msg.payload[0] != i as u64 {
                return Err(format!("message {i} arrived as {}", msg.payload[0]));
            }
        }
        while tx.try_send(2, &[0; PAYLOAD_WORDS]).is_err() {}
        Ok(())
    };
    on_pair(a, b, &initiator, &responder)?;
    Ok(count as f64 * 1000.0 / cycles.load(Ordering::Relaxed).max(1) as f64)
}

/// Waits until `expected` more benchmark acks than `before` have arrived.
fn wait_acks(before: u64, expected: u64) -> Result<(), String> {
    let start = cpu::rdtsc();
    while monitor::bench_acks() < before + expected {
        monitor::poll();
        if crate::arch::timer::us_since(start) > 10_000_000 {
            return Err(format!("only {} of {expected} acks", monitor::bench_acks() - before));
        }
    }
    Ok(())
}

/// Multikernel Figure 6: the latency of a request to every core and the collection of all
/// their acks, by protocol (one shared line; one channel each; the SKB's multicast tree),
/// against the number of cores. Runs on the boot core as the source.
fn multicast(rounds: usize) -> Result<(), String> {
    let cores = smp::online_cores();
    let source = this_core().index;
    let skb = knowledge::get().ok_or("the SKB is not measured")?;
    for k in 2..=cores.len() {
        let targets: Vec<usize> = cores.iter().copied().filter(|&c| c != source && c < k).collect();
        // Unicast: one message per core over its channel.
        let mut samples = Vec::new();
        for round in 0..rounds as u64 {
            let (before, start) = (monitor::bench_acks(), cpu::rdtsc());
            for &t in &targets {
                monitor::send(t, &Request::Bench(round)).map_err(|e| format!("{e:?}"))?;
            }
            wait_acks(before, targets.len() as u64)?;
            samples.push(cpu::rdtsc() - start);
        }
        result(
            "multicast",
            k,
            "latency_cycles",
            median(&mut samples).unwrap_or(0),
            "cycles",
            ",\"protocol\":\"unicast\"",
        );

        // Multicast tree: one message per package aggregator, which forwards within its
        // package and acks once; cores of the source's own package get direct messages.
        let tree = skb.multicast_tree(source);
        let mut samples = Vec::new();
        for round in 0..rounds as u64 {
            let (before, start) = (monitor::bench_acks(), cpu::rdtsc());
            let mut expected = 0;
            for agg in &tree.aggregators {
                if agg.core == source || agg.core >= k {
                    for &m in agg.members.iter().filter(|&&m| m < k) {
                        monitor::send(m, &Request::Bench(round)).map_err(|e| format!("{e:?}"))?;
                        expected += 1;
                    }
                } else {
                    let request = Request::Multicast { round, source, limit: k };
                    monitor::send(agg.core, &request).map_err(|e| format!("{e:?}"))?;
                    expected += 1;
                }
            }
            wait_acks(before, expected)?;
            samples.push(cpu::rdtsc() - start);
        }
        result(
            "multicast",
            k,
            "latency_cycles",
            median(&mut samples).unwrap_or(0),
            "cycles",
            ",\"protocol\":\"multicast\"",
        );

        // Broadcast: the source writes one shared line that every target polls.
        let line = PairMemory::new_boxed();
        let listener = |_| -> Result<(), String> {
            for round in 1..=rounds as u64 {
                while line.ping.load(Ordering::Acquire) < round {}
                monitor::send(source, &Request::BenchAck(round)).map_err(|e| format!("{e:?}"))?;
            }
            Ok(())
        };
        let calls: Vec<CallId> = targets
            .iter()
            .map(|&t| monitor::call_async(t, &listener).map_err(|e| format!("{e:?}")))
            .collect::<Result<_, _>>()?;
        let mut samples = Vec::new();
        for round in 1..=rounds as u64 {
            let (before, start) = (monitor::bench_acks(), cpu::rdtsc());
            line.ping.store(round, Ordering::Release);
            wait_acks(before, targets.len() as u64)?;
            samples.push(cpu::rdtsc() - start);
        }
        let outcomes: Vec<Outcome> =
            calls.into_iter().map(|id| monitor::wait(id, JOB_TIMEOUT_US)).collect();
        all_ok(&targets, &outcomes)?;
        result(
            "multicast",
            k,
            "latency_cycles",
            median(&mut samples).unwrap_or(0),
            "cycles",
            ",\"protocol\":\"broadcast\"",
        );
    }
    Ok(())
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
fn shm(updates: usize) -> Result<(), String> {
    let cores = smp::online_cores();
    if cores.len() < 2 {
        return Err("needs 2 cores".into());
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
            let per_update: Vec<AtomicU64> = clients.iter().map(|_| AtomicU64::new(0)).collect();
            if protocol == "shm" {
                let work = |index: usize| -> Result<(), String> {
                    let slot = clients.iter().position(|&c| c == index).ok_or("not a client")?;
                    let start = cpu::rdtsc();
                    for _ in 0..updates {
                        for line in &lines[..n_lines] {
                            line.0.fetch_add(1, Ordering::AcqRel);
                        }
                    }
                    per_update[slot]
                        .store((cpu::rdtsc() - start) / updates as u64, Ordering::Relaxed);
                    Ok(())
                };
                all_ok(clients, &smp::run_on(clients, JOB_TIMEOUT_US, &work))?;
            } else {
                message_updates(server, clients, n_lines, updates, &per_update)?;
            }
            if !report {
                continue;
            }
            let mut v: Vec<u64> = per_update.iter().map(|c| c.load(Ordering::Relaxed)).collect();
            let extra = format!(",\"protocol\":\"{protocol}{n_lines}\",\"lines\":{n_lines}");
            result(
                "shm_vs_msg",
                k,
                "cycles_per_update",
                median(&mut v).unwrap_or(0),
                "cycles",
                &extra,
            );
        }
    }
    Ok(())
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
) -> Result<(), String> {
    let pairs: Vec<Box<PairMemory>> = clients.iter().map(|_| PairMemory::new_boxed()).collect();
    let serve = |_| -> Result<(), String> {
        let mut ends: Vec<_> =
            pairs.iter().map(|p| (Receiver::new(&p.forward), Sender::new(&p.backward))).collect();
        let mut array = [[0u64; 8]; UPDATE_LINES];
        let mut remaining = clients.len() * updates;
        while remaining > 0 {
            for (rx, tx) in ends.iter_mut() {
                let Some(msg) = rx.try_recv() else { continue };
                for line in &mut array[..(msg.payload[1] as usize).min(UPDATE_LINES)] {
                    line[0] = line[0].wrapping_add(1);
                }
                while tx.try_send(2, &msg.payload).is_err() {}
                remaining -= 1;
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
            while tx.try_send(1, &payload).is_err() {}
            while rx.try_recv().is_none() {}
        }
        per_update[slot].store((cpu::rdtsc() - start) / updates as u64, Ordering::Relaxed);
        Ok(())
    };
    let outcomes = smp::run_on(clients, JOB_TIMEOUT_US, &work);
    all_ok(&[server], &[monitor::wait(server_call, JOB_TIMEOUT_US)])?;
    all_ok(clients, &outcomes)
}
