//! One-way latency (Multikernel Table 2, "latency"): thread A on CPU 0 sends a message and
//! waits for thread B on CPU 1 to echo it back; a trial reports the median round trip / 2,
//! in TSC cycles. The same ping-pong runs over URPC channels, over a raw pair of cache lines
//! (the physical floor: one line transfer each way, nothing else) and over rtrb.

use crate::{on_pair, tsc, warmup, QUEUE};
use record::median;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Acquire, Release};
use urpc::{ChannelMemory, Receiver, Sender, PAYLOAD_WORDS};

/// A 64-byte message for the peer queue: aligned to a cache line, as a URPC slot is, so
/// rtrb is measured at its best.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, align(64))]
pub struct Line64(pub [u64; 8]);

/// One word alone on its cache line.
#[repr(C, align(64))]
struct Line(AtomicU64);

/// Does warm-up plus `round_trips` timed calls of `exchange(i)` (which sends message `i`
/// and waits for its echo) and returns the median round trip / 2.
fn time_round_trips(round_trips: usize, mut exchange: impl FnMut(u64)) -> f64 {
    let warm = warmup(round_trips) as u64;
    let mut samples = Vec::with_capacity(round_trips);
    for i in 0..warm + round_trips as u64 {
        let start = tsc();
        exchange(i);
        let end = tsc();
        if i >= warm {
            samples.push(end.wrapping_sub(start));
        }
    }
    median(&mut samples).map_or(f64::NAN, |m| m as f64 / 2.0)
}

/// URPC one-way latency: a ping channel and a pong channel of [`QUEUE`] slots each.
pub fn urpc(round_trips: usize) -> f64 {
    let total = warmup(round_trips) + round_trips;
    let (ping, pong) =
        (Box::new(ChannelMemory::<QUEUE>::new()), Box::new(ChannelMemory::<QUEUE>::new()));
    let (ping, pong) = (&*ping, &*pong);
    on_pair(
        move || {
            let (mut tx, mut rx) = (Sender::new(ping), Receiver::new(pong));
            time_round_trips(round_trips, |i| {
                while tx.try_send(1, &[i; PAYLOAD_WORDS]).is_err() {}
                let echo = loop {
                    if let Some(m) = rx.try_recv() {
                        break m;
                    }
                };
                assert_eq!(echo.payload, [i; PAYLOAD_WORDS], "urpc echo");
            })
        },
        move || {
            let (mut tx, mut rx) = (Sender::new(pong), Receiver::new(ping));
            for _ in 0..total {
                let m = loop {
                    if let Some(m) = rx.try_recv() {
                        break m;
                    }
                };
                while tx.try_send(m.tag, &m.payload).is_err() {}
            }
        },
    )
}

/// The floor: A writes a counter on its line, B waits for it and writes it on its own
/// line, A waits for that. Two cache-line transfers per round trip and nothing else.
pub fn floor(round_trips: usize) -> f64 {
    let total = (warmup(round_trips) + round_trips) as u64;
    let (ping, pong) = (Line(AtomicU64::new(0)), Line(AtomicU64::new(0)));
    let (ping, pong) = (&ping, &pong);
    on_pair(
        move || {
            time_round_trips(round_trips, |i| {
                // Counters start at 1: 0 is the lines' initial value.
                ping.0.store(i + 1, Release);
                while pong.0.load(Acquire) != i + 1 {}
            })
        },
        move || {
            for i in 1..=total {
                while ping.0.load(Acquire) != i {}
                pong.0.store(i, Release);
            }
        },
    )
}

/// rtrb one-way latency: two rtrb ring buffers of [`QUEUE`] 64-byte messages.
pub fn rtrb(round_trips: usize) -> f64 {
    let total = warmup(round_trips) + round_trips;
    let (mut ping_tx, mut ping_rx) = rtrb::RingBuffer::<Line64>::new(QUEUE);
    let (mut pong_tx, mut pong_rx) = rtrb::RingBuffer::<Line64>::new(QUEUE);
    on_pair(
        move || {
            time_round_trips(round_trips, |i| {
                while ping_tx.push(Line64([i; 8])).is_err() {}
                let echo = loop {
                    if let Ok(m) = pong_rx.pop() {
                        break m;
                    }
                };
                assert_eq!(echo, Line64([i; 8]), "rtrb echo");
            })
        },
        move || {
            for _ in 0..total {
                let m = loop {
                    if let Ok(m) = ping_rx.pop() {
                        break m;
                    }
                };
                while pong_tx.push(m).is_err() {}
            }
        },
    )
}
