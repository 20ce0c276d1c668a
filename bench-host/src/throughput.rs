//! Pipelined throughput (Multikernel Table 2, "throughput, queue length 16"): thread B on
//! CPU 1 streams messages into a ring of [`QUEUE`] slots as fast as the ring takes them, so
//! at most 16 are outstanding; thread A on CPU 0 receives them and checks every payload.
//! A trial reports messages per 1000 TSC cycles, timed on the receiver from the first timed
//! message to the last (after a warm-up), so both ends run at their steady rate.

use crate::latency::Line64;
use crate::{on_pair, tsc, warmup, QUEUE};
use urpc::{ChannelMemory, Receiver, Sender, PAYLOAD_WORDS};

/// Messages per kilocycle for `messages` messages received in `cycles`.
fn per_kcycle(messages: usize, cycles: u64) -> f64 {
    messages as f64 * 1000.0 / cycles.max(1) as f64
}

/// URPC throughput through one channel of [`QUEUE`] slots (credits every 8 messages).
pub fn urpc(messages: usize) -> f64 {
    let warm = warmup(messages) as u64;
    let total = warm + messages as u64;
    let mem = Box::new(ChannelMemory::<QUEUE>::new());
    let mem = &*mem;
    on_pair(
        move || {
            let mut rx = Receiver::new(mem);
            let mut start = 0;
            for i in 0..total {
                if i == warm {
                    start = tsc();
                }
                let m = loop {
                    if let Some(m) = rx.try_recv() {
                        break m;
                    }
                };
                assert_eq!(m.payload, [i; PAYLOAD_WORDS], "urpc stream");
            }
            per_kcycle(messages, tsc().wrapping_sub(start))
        },
        move || {
            let mut tx = Sender::new(mem);
            for i in 0..total {
                while tx.try_send(1, &[i; PAYLOAD_WORDS]).is_err() {}
            }
        },
    )
}

/// rtrb throughput through one ring buffer of [`QUEUE`] 64-byte messages.
pub fn rtrb(messages: usize) -> f64 {
    let warm = warmup(messages) as u64;
    let total = warm + messages as u64;
    let (mut tx, mut rx) = rtrb::RingBuffer::<Line64>::new(QUEUE);
    on_pair(
        move || {
            let mut start = 0;
            for i in 0..total {
                if i == warm {
                    start = tsc();
                }
                let m = loop {
                    if let Ok(m) = rx.pop() {
                        break m;
                    }
                };
                assert_eq!(m, Line64([i; 8]), "rtrb stream");
            }
            per_kcycle(messages, tsc().wrapping_sub(start))
        },
        move || {
            for i in 0..total {
                while tx.push(Line64([i; 8])).is_err() {}
            }
        },
    )
}
