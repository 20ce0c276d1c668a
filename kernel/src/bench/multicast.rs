//! `bench multicast` (Multikernel §5.1): one message to every core, by unicast and
//! through the SKB's multicast tree.
//! Also the broadcast protocol's rounds on shared lines (`broadcast_rounds`), which
//! `bench shootdown` and `bench multicast` both time.

use super::{result, send, spin, try_vec, Deadline, JOB_TIMEOUT_US, NEEDS_TWO_CORES};
use crate::arch::{cpu, timer};
use crate::monitor::protocol::MonitorMessage;
use crate::monitor::{self};
use crate::percpu::this_core;
use crate::smp::{self};
use crate::smp::{all_ok, Outcome};
use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use record::median;
use skb::MulticastTree;

/// How long the source waits for the acks of one multicast round.
pub(super) const ACK_TIMEOUT_US: u64 = 10_000_000;

/// Waits until `expected` more benchmark acks than `before` have arrived.
pub(super) fn wait_acks(before: u64, expected: u64, deadline: Deadline) -> Result<(), String> {
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
pub(super) fn multicast(rounds: usize, deadline: Deadline) -> Result<(), String> {
    let cores = smp::online_cores();
    if cores.len() < 2 {
        return Err(NEEDS_TWO_CORES.into());
    }
    let source = this_core().index;
    let skb = crate::skb_replica::get().ok_or("the SKB is not measured")?;
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
pub(super) fn packages_below(skb: &skb::Skb, k: usize) -> usize {
    let mut packages: Vec<u32> = (0..k).filter_map(|c| skb.core(c)).map(|c| c.package).collect();
    packages.sort_unstable();
    packages.dedup();
    packages.len()
}

/// Prints the median latency of `protocol` to `k` cores in `packages` packages. The lines
/// say `impl` `kernel`: the monitor's own channels in ring 0, apart from the rows of the
/// user-space workload that both systems run (`workloads::multicast`, `mcbench`).
pub(super) fn multicast_result(k: usize, packages: usize, protocol: &str, cycles: u64) {
    let extra = format!(",\"protocol\":\"{protocol}\",\"impl\":\"kernel\",\"packages\":{packages}");
    result("multicast", k, "latency_cycles", cycles, "cycles", &extra);
}

/// Runs `round(0..rounds)` one after another; the median of their cycles.
pub(super) fn time_rounds(
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
pub(super) fn unicast_round(
    targets: &[usize],
    round: u64,
    deadline: Deadline,
) -> Result<(), String> {
    let before = monitor::bench_acks();
    for &t in targets {
        send(t, MonitorMessage::Bench { round })?;
    }
    wait_acks(before, targets.len() as u64, deadline)
}

/// The SKB's multicast tree, cut to cores below `k`: one message per package aggregator,
/// which forwards within its package and acks once; cores of the source's own package
/// get direct messages.
pub(super) fn tree_round(
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

/// The line of the broadcast protocol: the round the source has started, and whether the
/// listeners should stop (the source gave up).
#[repr(C, align(64))]
pub(super) struct BroadcastLine {
    pub(super) round: AtomicU64,
    pub(super) stop: AtomicBool,
}

/// Broadcast: the source writes one shared line that every target polls, and each target
/// acks by message. Each target runs a listener job for all the rounds; the median
/// latency of a round in cycles.
pub(super) fn broadcast_rounds(
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
