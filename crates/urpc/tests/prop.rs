//! Property tests of fragmentation and reassembly: random byte strings (with plain messages
//! between them) round-trip through rings of several sizes; corrupted, dropped, repeated or
//! swapped fragments give errors, never panics, and never a string that was not sent.
#![cfg(not(loom))]

use proptest::prelude::*;
use urpc::{
    ChannelMemory, Message, Reassembler, Receiver, SendBytesError, Sender, MAX_FRAGMENTED_BYTES,
    PAYLOAD_WORDS,
};

/// Big enough for the longest string of the largest ring used here (64 slots).
const BUF: usize = 64 * 56;

/// One thing to send: a byte string, or a plain message with this tag.
#[derive(Clone, Debug)]
enum Item {
    Bytes(u32, Vec<u8>),
    Plain(u32),
}

fn item() -> impl Strategy<Value = Item> {
    let len = prop_oneof![0usize..=120, 0usize..=BUF + 10];
    prop_oneof![
        4 => (any::<u32>(), len.prop_flat_map(|n| proptest::collection::vec(any::<u8>(), n)))
            .prop_map(|(t, b)| Item::Bytes(t, b)),
        1 => any::<u32>().prop_map(Item::Plain),
    ]
}

/// What the receiver got, in order.
#[derive(Debug, PartialEq)]
enum Got {
    Bytes(u32, Vec<u8>),
    Plain(u32, [u64; PAYLOAD_WORDS]),
}

/// Drains `rx`, reassembling fragments; no errors are expected on a healthy channel.
fn drain<const S: usize>(rx: &mut Receiver<'_, S>, r: &mut Reassembler<'_>, got: &mut Vec<Got>) {
    while let Some(m) = rx.try_recv() {
        assert!(m.is_well_formed());
        if m.is_fragment() {
            if let Some((tag, bytes)) = r.push(&m).expect("healthy channel") {
                got.push(Got::Bytes(tag, bytes.to_vec()));
            }
        } else {
            got.push(Got::Plain(m.tag, m.payload));
        }
    }
}

/// Sends every item through an `S`-slot ring, draining the receiver whenever the ring is
/// full; checks that exactly the items that fit arrive, in order, intact.
fn round_trip<const S: usize>(items: &[Item], batch: usize) {
    let mem = ChannelMemory::<S>::new();
    let (mut tx, mut rx) = (Sender::new(&mem), Receiver::with_credit_batch(&mem, batch));
    let mut buf = vec![0u8; BUF];
    let mut r = Reassembler::new(&mut buf);
    let (mut want, mut got) = (Vec::new(), Vec::new());
    for it in items {
        match it {
            Item::Bytes(tag, bytes) => {
                if bytes.len() > Sender::<S>::MAX_BYTES {
                    assert_eq!(tx.try_send_bytes(*tag, bytes), Err(SendBytesError::TooLong));
                    continue;
                }
                // One drain always makes room: the empty poll returns every credit.
                if tx.try_send_bytes(*tag, bytes).is_err() {
                    drain(&mut rx, &mut r, &mut got);
                    tx.try_send_bytes(*tag, bytes).unwrap();
                }
                want.push(Got::Bytes(*tag, bytes.clone()));
            }
            Item::Plain(tag) => {
                let payload = [*tag as u64; PAYLOAD_WORDS];
                if tx.try_send(*tag, &payload).is_err() {
                    drain(&mut rx, &mut r, &mut got);
                    tx.try_send(*tag, &payload).unwrap();
                }
                want.push(Got::Plain(*tag, payload));
            }
        }
    }
    drain(&mut rx, &mut r, &mut got);
    assert!(!r.in_progress());
    assert_eq!(got, want);
}

/// The fragments `try_send_bytes` would write for `bytes`, taken off a big ring.
fn fragments_of(tag: u32, bytes: &[u8]) -> Vec<Message> {
    let mem = Box::new(ChannelMemory::<128>::new());
    let (mut tx, mut rx) = (Sender::new(&mem), Receiver::new(&mem));
    tx.try_send_bytes(tag, bytes).unwrap();
    std::iter::from_fn(|| rx.try_recv()).collect()
}

/// One fault in one multi-fragment string.
#[derive(Clone, Debug)]
enum Fault {
    Drop(usize),
    Repeat(usize),
    Swap(usize, usize),
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn strings_round_trip(items in proptest::collection::vec(item(), 0..24),
                          ring in 0usize..5, batch in 1usize..=64) {
        match ring {
            0 => round_trip::<2>(&items, batch),
            1 => round_trip::<4>(&items, batch),
            2 => round_trip::<8>(&items, batch),
            3 => round_trip::<16>(&items, batch),
            _ => round_trip::<64>(&items, batch),
        }
    }

    #[test]
    fn misordered_fragments_are_errors(
        strings in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 1..6),
        victim in any::<prop::sample::Index>(),
        fault in prop_oneof![
            any::<usize>().prop_map(Fault::Drop),
            any::<usize>().prop_map(Fault::Repeat),
            (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Fault::Swap(a, b)),
        ],
        extra in 57usize..300,
    ) {
        // Make sure the victim string has at least two fragments.
        let mut strings = strings;
        let v = victim.index(strings.len());
        let len = strings[v].len().max(extra);
        strings[v].resize(len, 0xa5);
        let mut stream = Vec::new();
        for (i, s) in strings.iter().enumerate() {
            let mut frags = fragments_of(i as u32, s);
            if i == v {
                let n = frags.len();
                match fault {
                    Fault::Drop(k) => { frags.remove(k % n); }
                    Fault::Repeat(k) => { let f = frags[k % n]; frags.insert(k % n, f); }
                    Fault::Swap(a, b) => {
                        let (a, b) = (a % n, b % n);
                        let b = if a == b { (b + 1) % n } else { b };
                        frags.swap(a, b);
                    }
                }
            }
            stream.extend(frags);
        }
        let mut buf = vec![0u8; 300];
        let mut r = Reassembler::new(&mut buf);
        let (mut errors, mut got) = (0, Vec::new());
        for m in &stream {
            match r.push(m) {
                Ok(Some((tag, bytes))) => got.push((tag as usize, bytes.to_vec())),
                Ok(None) => {}
                Err(_) => errors += 1,
            }
        }
        // The fault shows, as an error or as a string left unfinished.
        prop_assert!(errors > 0 || r.in_progress());
        // Whatever came out is a string that was sent, whole, in sending order.
        let mut last = None;
        for (tag, bytes) in got {
            prop_assert_eq!(&bytes, &strings[tag]);
            prop_assert!(last.is_none_or(|l| l < tag));
            last = Some(tag);
        }
    }

    #[test]
    fn random_headers_never_panic(
        msgs in proptest::collection::vec((any::<u64>(), any::<[u64; PAYLOAD_WORDS]>(), any::<bool>()), 0..64),
        cap in 0usize..400,
    ) {
        let mut buf = vec![0u8; cap];
        let mut r = Reassembler::new(&mut buf);
        for (header, payload, valid_looking) in msgs {
            // Half the time keep the fragment bit, so the checks past it are reached too.
            let header = if valid_looking { header | (1 << 40) } else { header };
            let m = Message::from_raw(header, payload);
            let _ = m.is_well_formed();
            if let Ok(Some((_, bytes))) = r.push(&m) {
                prop_assert!(bytes.len() <= cap);
            }
        }
    }
}

#[test]
fn max_fragmented_bytes_is_what_the_index_can_count() {
    assert_eq!(MAX_FRAGMENTED_BYTES, 65536 * 56);
    assert_eq!(Sender::<65536>::MAX_BYTES, MAX_FRAGMENTED_BYTES);
    assert_eq!(Sender::<2>::MAX_BYTES, 112);
}
