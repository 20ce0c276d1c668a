//! Multikernel Table 2: URPC one-way latency and pipelined throughput between two cores,
//! with the raw cache-line ping-pong between the same cores as the floor. The method is the
//! kernel's `bench urpc` (`kernel/src/bench.rs`): every round trip is timed on the
//! initiator, the median round trip / 2 is the one-way latency; throughput streams
//! `10 × iterations` messages through a 16-slot channel and times them up to the
//! receiver's single acknowledgement, after a tenth as many untimed (as `bench-host`
//! does), so that what happens once per run (a thread's first touch of its code and data,
//! an emulator translating the loop) is not counted as per-message cost.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};

use urpc::{ChannelMemory, Receiver, Sender, PAYLOAD_WORDS};

use crate::memory::{alloc_slice, CacheLine, Placement, Zeroable};
use crate::result::{self, median, Fixed2};
use crate::Platform;

/// Ring size of every channel, and so the queue length of the throughput test (Multikernel
/// Table 2 uses 16).
pub const QUEUE: usize = 16;

/// Round trips per latency measurement when none are asked for (the kernel's default).
pub const DEFAULT_ITERATIONS: usize = 2000;

/// The memory of one ping-pong: a channel each way and two lines for the floor.
#[derive(Debug, Default)]
#[repr(C, align(64))]
pub struct PairMemory {
    forward: ChannelMemory<QUEUE>,
    backward: ChannelMemory<QUEUE>,
    ping: CacheLine,
    pong: CacheLine,
}

// SAFETY: two URPC channels (valid when zero) and two cache lines of atomics.
unsafe impl Zeroable for PairMemory {}

/// What carries the ping-pong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// A URPC channel each way (64-byte messages).
    Urpc,
    /// One cache line each way, a counter and nothing else: the physical floor.
    Floor,
}

/// Median one-way latency in cycles between cores `a` (initiator) and `b` (responder).
pub fn latency<P: Platform + ?Sized>(
    p: &P,
    a: usize,
    b: usize,
    iterations: usize,
    transport: Transport,
) -> Result<u64, String> {
    check_pair(p, a, b)?;
    let mem = alloc_slice::<PairMemory, P>(p, 1, Placement::Shared)?;
    let mem = &mem[0];
    let samples: Vec<AtomicU64> = (0..iterations.max(1)).map(|_| AtomicU64::new(0)).collect();
    let initiator = || {
        let (mut tx, mut rx) = (Sender::new(&mem.forward), Receiver::new(&mem.backward));
        for (i, sample) in samples.iter().enumerate() {
            let start = p.cycles();
            match transport {
                Transport::Urpc => {
                    while tx.try_send(1, &[i as u64; PAYLOAD_WORDS]).is_err() {}
                    while rx.try_recv().is_none() {}
                }
                Transport::Floor => {
                    mem.ping.0.store(i as u64 + 1, Ordering::Release);
                    while mem.pong.0.load(Ordering::Acquire) != i as u64 + 1 {}
                }
            }
            sample.store(p.cycles() - start, Ordering::Relaxed);
        }
    };
    let responder = || {
        let (mut tx, mut rx) = (Sender::new(&mem.backward), Receiver::new(&mem.forward));
        for i in 0..samples.len() as u64 {
            match transport {
                Transport::Urpc => {
                    let msg = loop {
                        if let Some(m) = rx.try_recv() {
                            break m;
                        }
                    };
                    while tx.try_send(2, &msg.payload).is_err() {}
                }
                Transport::Floor => {
                    while mem.ping.0.load(Ordering::Acquire) != i + 1 {}
                    mem.pong.0.store(i + 1, Ordering::Release);
                }
            }
        }
    };
    p.run_on(&[a, b], &|core| if core == a { initiator() } else { responder() })?;
    let mut rtts: Vec<u64> = samples.iter().map(|s| s.load(Ordering::Relaxed)).collect();
    Ok(median(&mut rtts).unwrap_or(0) / 2)
}

/// Pipelined throughput from `a` to `b` in messages per 1000 cycles: `a` streams `count`
/// timed messages through a [`QUEUE`]-slot channel, after [`warmup`]`(count)` untimed
/// ones; `b` checks each and acknowledges the last.
pub fn throughput<P: Platform + ?Sized>(
    p: &P,
    a: usize,
    b: usize,
    count: usize,
) -> Result<f64, String> {
    check_pair(p, a, b)?;
    let mem = alloc_slice::<PairMemory, P>(p, 1, Placement::Shared)?;
    let mem = &mem[0];
    let (cycles, wrong) = (AtomicU64::new(0), AtomicU64::new(u64::MAX));
    let warm = warmup(count) as u64;
    let total = warm + count as u64;
    let sender = || {
        let (mut tx, mut rx) = (Sender::new(&mem.forward), Receiver::new(&mem.backward));
        let mut start = p.cycles();
        for i in 0..total {
            if i == warm {
                start = p.cycles();
            }
            while tx.try_send(1, &[i; PAYLOAD_WORDS]).is_err() {}
        }
        while rx.try_recv().is_none() {}
        cycles.store(p.cycles() - start, Ordering::Relaxed);
    };
    let receiver = || {
        let (mut tx, mut rx) = (Sender::new(&mem.backward), Receiver::new(&mem.forward));
        for i in 0..total {
            let msg = loop {
                if let Some(m) = rx.try_recv() {
                    break m;
                }
            };
            if msg.payload[0] != i && wrong.load(Ordering::Relaxed) == u64::MAX {
                wrong.store(i, Ordering::Relaxed);
            }
        }
        while tx.try_send(2, &[0; PAYLOAD_WORDS]).is_err() {}
    };
    p.run_on(&[a, b], &|core| if core == a { sender() } else { receiver() })?;
    match wrong.load(Ordering::Relaxed) {
        u64::MAX => Ok(count as f64 * 1000.0 / cycles.load(Ordering::Relaxed).max(1) as f64),
        i => Err(format!("message {i} arrived out of order")),
    }
}

/// The most messages per 1000 cycles a [`QUEUE`]-slot channel can carry between two cores
/// whose one-way cache-line latency (the floor) is `floor` cycles: the sender may have
/// `QUEUE` messages unacknowledged, and each needs its slot to travel to the receiver and
/// its credit to travel back. Throughput over this bound (`throughput_vs_bound`) does not
/// depend on how far apart the two cores are, which a VM's host may change between boots.
pub fn bound(floor: f64) -> f64 {
    QUEUE as f64 * 1000.0 / (2.0 * floor.max(1.0))
}

/// Untimed warm-up iterations before `timed` timed ones: a tenth, at least one.
pub fn warmup(timed: usize) -> usize {
    timed / 10 + 1
}

/// The experiment on every pair of cores `a < b`: latency, floor, their ratio, throughput
/// and throughput over its [`bound`], as `experiment":"urpc"` result lines.
pub fn run<P: Platform + ?Sized>(p: &P, iterations: usize) -> Result<Vec<String>, String> {
    let n = p.cores();
    if n < 2 {
        return Err("needs 2 cores".into());
    }
    let mut lines = Vec::new();
    for a in 0..n {
        for b in a + 1..n {
            let pair = format!(",\"pair\":[{a},{b}]");
            let urpc = latency(p, a, b, iterations, Transport::Urpc)?;
            let floor = latency(p, a, b, iterations, Transport::Floor)?;
            let rate = throughput(p, a, b, iterations * 10)?;
            let ratio = Fixed2(urpc as f64 / floor.max(1) as f64);
            let of_bound = Fixed2(rate / bound(floor as f64));
            let sys = p.system();
            lines.push(result::line(sys, "urpc", n, "latency_cycles", urpc, "cycles", &pair));
            lines.push(result::line(
                sys,
                "urpc",
                n,
                "floor_latency_cycles",
                floor,
                "cycles",
                &pair,
            ));
            lines.push(result::line(sys, "urpc", n, "latency_vs_floor", ratio, "ratio", &pair));
            lines.push(result::line(
                sys,
                "urpc",
                n,
                "throughput_msgs_per_kcycle",
                Fixed2(rate),
                "msgs/kcycle",
                &pair,
            ));
            lines.push(result::line(
                sys,
                "urpc",
                n,
                "throughput_vs_bound",
                of_bound,
                "ratio",
                &pair,
            ));
        }
    }
    Ok(lines)
}

/// Refuses a pair that is not two distinct cores of the platform.
fn check_pair<P: Platform + ?Sized>(p: &P, a: usize, b: usize) -> Result<(), String> {
    if a == b || a >= p.cores() || b >= p.cores() {
        return Err(format!("cores {a} and {b} are not two of the {} cores", p.cores()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_warm_up_is_a_tenth_and_at_least_one() {
        assert_eq!(super::warmup(0), 1);
        assert_eq!(super::warmup(9), 1);
        assert_eq!(super::warmup(20_000), 2001);
    }

    #[test]
    fn the_bound_is_the_queue_over_two_floors() {
        assert_eq!(super::bound(500.0), 16.0);
        assert_eq!(super::bound(0.0), 8000.0);
    }
}
