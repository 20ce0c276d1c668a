//! Std stress test: a sender thread and a receiver thread push a million messages through a
//! small ring. Every payload word is derived from the sequence number, so a lost, repeated,
//! reordered or torn message shows as a mismatch.
#![cfg(not(loom))]

use std::thread;
use urpc::{ChannelMemory, Reassembler, Receiver, Sender, PAYLOAD_WORDS};

const MESSAGES: u64 = 1_000_000;

/// Payload of message `seq`: each word a different function of it.
fn payload(seq: u64) -> [u64; PAYLOAD_WORDS] {
    core::array::from_fn(|i| {
        seq.rotate_left(9 * i as u32) ^ 0x9e37_79b9_7f4a_7c15u64.wrapping_mul(i as u64 + 1)
    })
}

/// Spins a little, then lets the other thread run (the test may share one core).
fn backoff(spins: &mut u32) {
    *spins = spins.wrapping_add(1);
    if spins.is_multiple_of(64) {
        thread::yield_now();
    } else {
        std::hint::spin_loop();
    }
}

fn stream<const SLOTS: usize>(batch: usize) {
    let mem = ChannelMemory::<SLOTS>::new();
    thread::scope(|s| {
        let mem = &mem;
        let sender = s.spawn(move || {
            let mut tx = Sender::new(mem);
            let mut spins = 0;
            for seq in 0..MESSAGES {
                while tx.try_send(seq as u32, &payload(seq)).is_err() {
                    backoff(&mut spins);
                }
            }
        });
        let mut rx = Receiver::with_credit_batch(mem, batch);
        let mut spins = 0;
        for seq in 0..MESSAGES {
            let m = loop {
                match rx.try_recv() {
                    Some(m) => break m,
                    // Finished yet nothing here: the sender panicked (fail, do not hang).
                    None if sender.is_finished() && !rx.has_message() => {
                        panic!("sender stopped before {seq}")
                    }
                    None => backoff(&mut spins),
                }
            };
            assert!(m.is_well_formed() && !m.is_fragment());
            assert_eq!(m.tag, seq as u32, "lost, repeated or reordered message");
            assert_eq!(m.payload, payload(seq), "torn message {seq}");
        }
        assert!(!rx.has_message());
    });
}

#[test]
fn million_messages_through_4_slots() {
    stream::<4>(2);
}

#[test]
fn million_messages_through_16_slots_credit_every_message() {
    stream::<16>(1);
}

#[test]
fn byte_strings_of_every_length_arrive_whole() {
    const STRINGS: usize = 20_000;
    let string = |i: usize| -> Vec<u8> { (0..i % 449).map(|j| (i * 7 + j) as u8).collect() };
    let mem = ChannelMemory::<8>::new();
    thread::scope(|s| {
        let mem = &mem;
        let sender = s.spawn(move || {
            let mut tx = Sender::new(mem);
            let mut spins = 0;
            for i in 0..STRINGS {
                while tx.try_send_bytes(i as u32, &string(i)).is_err() {
                    backoff(&mut spins);
                }
            }
        });
        let mut rx = Receiver::new(mem);
        let mut buf = [0u8; 8 * 56];
        let mut r = Reassembler::new(&mut buf);
        let (mut next, mut spins) = (0, 0);
        while next < STRINGS {
            let Some(m) = rx.try_recv() else {
                let stopped = sender.is_finished() && !rx.has_message();
                assert!(!stopped, "sender stopped before {next}");
                backoff(&mut spins);
                continue;
            };
            if let Some((tag, bytes)) = r.push(&m).expect("healthy channel") {
                assert_eq!(tag as usize, next);
                assert_eq!(bytes, &string(next)[..]);
                next += 1;
            }
        }
    });
}
