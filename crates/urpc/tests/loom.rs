//! Loom model of one channel: a sender thread sends more messages than the ring has slots
//! (so it wraps and must wait for credits) while the receiver takes them. Every message is
//! received exactly once, in order, with its whole payload; the sender never overruns.
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p urpc --release --test loom`.
#![cfg(loom)]

use loom::sync::Arc;
use loom::thread;
use urpc::{ChannelMemory, Reassembler, Receiver, Sender, PAYLOAD_WORDS};

/// Payload of message `seq`: every word differs, so a torn read shows.
fn payload(seq: u64) -> [u64; PAYLOAD_WORDS] {
    core::array::from_fn(|i| seq * 100 + i as u64)
}

/// Sends `count` messages through a `SLOTS`-slot ring (credits every `batch`); the receiver
/// checks each as it arrives.
fn model<const SLOTS: usize>(count: u64, batch: usize) {
    let mem = Arc::new(ChannelMemory::<SLOTS>::new());
    let sender = {
        let mem = mem.clone();
        thread::spawn(move || {
            let mut tx = Sender::new(&mem);
            for seq in 0..count {
                // Full: let the receiver run (loom explores every point it could).
                while tx.try_send(seq as u32, &payload(seq)).is_err() {
                    thread::yield_now();
                }
            }
        })
    };
    let mut rx = Receiver::with_credit_batch(&mem, batch);
    for seq in 0..count {
        let m = loop {
            match rx.try_recv() {
                Some(m) => break m,
                None => thread::yield_now(),
            }
        };
        assert_eq!(m.tag, seq as u32, "lost, repeated or reordered message");
        assert_eq!(m.payload, payload(seq), "torn message");
    }
    sender.join().unwrap();
    assert!(rx.try_recv().is_none(), "a message appeared from nowhere");
}

/// Two slots, three messages: wraps once, credits every message. Exhaustive.
#[test]
fn two_slots_wrap_exhaustive() {
    loom::model(|| model::<2>(3, 1));
}

/// Two slots, four messages, credits every second message: the sender waits on the batch.
#[test]
fn two_slots_batched_credits() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = None;
    builder.check(|| model::<2>(4, 2));
}

/// Four slots, six messages, default batch (2): wraps with the sender racing ahead. Bounded
/// to 7 preemptions (7 s; unbounded takes about a minute).
#[test]
fn four_slots_wrap() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(7);
    builder.check(|| model::<4>(6, 2));
}

/// A plain message, then a two-fragment string, through two slots with credits every two
/// messages: the string needs the whole ring, so it can only go once the receiver's empty
/// poll hands back the credit it holds for the plain message (otherwise: livelock, which
/// loom reports). The string arrives whole.
#[test]
fn two_slots_fragments_wait_for_held_credit() {
    loom::model(|| {
        let mem = Arc::new(ChannelMemory::<2>::new());
        let bytes: Vec<u8> = (0..100).collect();
        let sender = {
            let (mem, bytes) = (mem.clone(), bytes.clone());
            thread::spawn(move || {
                let mut tx = Sender::new(&mem);
                tx.try_send(1, &payload(1)).unwrap();
                while tx.try_send_bytes(2, &bytes).is_err() {
                    thread::yield_now();
                }
            })
        };
        let mut rx = Receiver::with_credit_batch(&mem, 2);
        let mut buf = [0u8; 112];
        let mut r = Reassembler::new(&mut buf);
        let mut plain = None;
        loop {
            let Some(m) = rx.try_recv() else {
                thread::yield_now();
                continue;
            };
            if !m.is_fragment() {
                assert!(plain.is_none(), "plain message twice");
                plain = Some(m);
            } else if let Some((tag, got)) = r.push(&m).unwrap() {
                assert_eq!((tag, got), (2, &bytes[..]));
                break;
            }
        }
        assert_eq!(plain.map(|m| (m.tag, m.payload)), Some((1, payload(1))));
        sender.join().unwrap();
    });
}
