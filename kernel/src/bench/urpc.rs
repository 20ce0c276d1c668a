//! `bench urpc` (experiment `urpc_kernel`, Multikernel §4.6, Figure 5): URPC round trips
//! and throughput between two cores, against the raw cache-line floor.

use super::{result, spin, try_vec, Deadline, JOB_TIMEOUT_US, NEEDS_TWO_CORES, QUEUE, URPC};
use crate::arch::cpu;
use crate::monitor::{self, CallId};
use crate::percpu::this_core;
use crate::smp::{self, all_ok, Outcome};
use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use core::sync::atomic::{AtomicU64, Ordering};
use record::{median, Fixed2};
use urpc::{ChannelMemory, Receiver, Sender, PAYLOAD_WORDS};

/// A two-way URPC channel pair and a pair of raw cache lines, lent to the two cores.
#[repr(C, align(64))]
pub(super) struct PairMemory {
    pub(super) forward: ChannelMemory<QUEUE>,
    pub(super) backward: ChannelMemory<QUEUE>,
    pub(super) ping: AtomicU64,
    pub(super) _pad: [u64; 7],
    pub(super) pong: AtomicU64,
}

impl PairMemory {
    /// Empty channels and zeroed lines, on the heap (they are lent to two cores).
    pub(super) fn new_boxed() -> Box<PairMemory> {
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
pub(super) fn urpc(iterations: usize, deadline: Deadline) -> Result<(), String> {
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
pub(super) enum Transport {
    /// A fresh URPC channel pair.
    Urpc,
    /// Two raw cache lines: the floor a channel cannot beat.
    Floor,
}

/// Runs `responder` on core `b` (split phase) and `initiator` on core `a`, then waits for
/// both. The responder is a remote call, so it cannot be the calling core: if `b` is, the
/// two swap (a round trip is the same either way).
pub(super) fn on_pair(
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
pub(super) fn pair_latency(
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
pub(super) fn pair_throughput(
    a: usize,
    b: usize,
    count: usize,
    deadline: Deadline,
) -> Result<f64, String> {
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
