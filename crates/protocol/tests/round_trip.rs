//! Every field type survives encode then decode; bad words are refused, not trusted.

use proptest::prelude::*;
use protocol::{Carried, Lent, Malformed, Protocol, PAYLOAD_WORDS};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Counts its drops, so a test can see a box freed exactly once.
struct Parcel {
    value: u64,
    drops: &'static AtomicUsize,
}

impl Drop for Parcel {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

protocol::messages! {
    /// One kind per field type, and two that mix them.
    enum Sample {
        Plain { a: u64, b: u64 } = 1,
        Narrow { a: u32, b: usize, yes: bool } = 2,
        Frames { count: usize, frames: [u64; 6] } = 3,
        Handed { id: u64, parcel: Carried<Parcel> } = 4,
        Borrowed { body: Lent<u64> } = 5,
        Empty {} = 6,
        Full { words: [u64; 7] } = 9,
    }
}

fn round_trip(m: Sample) -> Sample {
    let (tag, words) = m.encode();
    // SAFETY: made by `encode` just above, decoded once.
    unsafe { Sample::decode(tag, &words) }.expect("decodes")
}

proptest! {
    #[test]
    fn plain_and_narrow_fields_round_trip(a in any::<u64>(), b in any::<u64>(),
                                          c in any::<u32>(), d in any::<usize>(), yes in any::<bool>()) {
        match round_trip(Sample::Plain { a, b }) {
            Sample::Plain { a: a2, b: b2 } => prop_assert_eq!((a2, b2), (a, b)),
            _ => prop_assert!(false, "wrong kind"),
        }
        match round_trip(Sample::Narrow { a: c, b: d, yes }) {
            Sample::Narrow { a: c2, b: d2, yes: y2 } => prop_assert_eq!((c2, d2, y2), (c, d, yes)),
            _ => prop_assert!(false, "wrong kind"),
        }
    }

    #[test]
    fn arrays_round_trip(count in any::<usize>(), frames in any::<[u64; 6]>(), words in any::<[u64; 7]>()) {
        match round_trip(Sample::Frames { count, frames }) {
            Sample::Frames { count: c, frames: f } => prop_assert_eq!((c, f), (count, frames)),
            _ => prop_assert!(false, "wrong kind"),
        }
        match round_trip(Sample::Full { words }) {
            Sample::Full { words: w } => prop_assert_eq!(w, words),
            _ => prop_assert!(false, "wrong kind"),
        }
    }

    #[test]
    fn a_carried_box_arrives_once(id in any::<u64>(), value in any::<u64>()) {
        static DROPS: AtomicUsize = AtomicUsize::new(0);
        let before = DROPS.load(Ordering::SeqCst);
        let parcel = Carried::new(Box::new(Parcel { value, drops: &DROPS }));
        match round_trip(Sample::Handed { id, parcel }) {
            Sample::Handed { id: i, parcel } => {
                prop_assert_eq!(i, id);
                prop_assert_eq!(DROPS.load(Ordering::SeqCst), before, "freed on the way");
                let parcel = parcel.into_box();
                prop_assert_eq!(parcel.value, value);
            }
            _ => prop_assert!(false, "wrong kind"),
        }
        prop_assert_eq!(DROPS.load(Ordering::SeqCst), before + 1, "freed once at the end");
    }

    #[test]
    fn words_of_no_kind_are_refused(tag in 10u32.., words in any::<[u64; PAYLOAD_WORDS]>()) {
        // SAFETY: no kind matches, so no field is read.
        let decoded = unsafe { Sample::decode(tag, &words) };
        prop_assert!(matches!(decoded, Err(Malformed::UnknownKind)));
    }

    #[test]
    fn a_bool_is_only_0_or_1(word in 2u64..) {
        let mut words = [0u64; PAYLOAD_WORDS];
        words[2] = word;
        // SAFETY: `Narrow` carries no handle.
        let decoded = unsafe { Sample::decode(2, &words) };
        prop_assert!(matches!(decoded, Err(Malformed::BadField)));
    }
}

#[test]
fn an_unsent_carried_box_is_freed_once() {
    static DROPS: AtomicUsize = AtomicUsize::new(0);
    drop(Carried::new(Box::new(Parcel { value: 1, drops: &DROPS })));
    assert_eq!(DROPS.load(Ordering::SeqCst), 1);
}

#[test]
fn a_null_or_misaligned_handle_is_refused() {
    let mut words = [0u64; PAYLOAD_WORDS];
    // SAFETY: the handle word is refused before it becomes an owner.
    assert!(matches!(unsafe { Sample::decode(4, &words) }, Err(Malformed::BadField)));
    words[1] = 0x1001; // not aligned for a `Parcel`
                       // SAFETY: as above.
    assert!(matches!(unsafe { Sample::decode(4, &words) }, Err(Malformed::BadField)));
    // SAFETY: as above (`Lent<u64>`).
    assert!(matches!(unsafe { Sample::decode(5, &[0; PAYLOAD_WORDS]) }, Err(Malformed::BadField)));
}

#[test]
fn kinds_are_listed_with_their_names() {
    assert_eq!(Sample::KINDS.len(), 7);
    assert_eq!(Sample::kind_name(4), Some("Handed"));
    assert!(Sample::has_kind(9) && !Sample::has_kind(7));
    let mut tags: Vec<u32> = Sample::KINDS.iter().map(|&(t, _)| t).collect();
    tags.dedup();
    assert_eq!(tags.len(), 7, "tags are distinct");
}

#[test]
fn a_lent_pointer_comes_back_as_lent() {
    let value = 42u64;
    let lent = Lent::new(&value).expect("not null");
    match round_trip(Sample::Borrowed { body: lent }) {
        // SAFETY: `value` lives for the whole test.
        Sample::Borrowed { body } => assert_eq!(unsafe { *body.as_ptr() }, 42),
        _ => panic!("wrong kind"),
    }
}

protocol::messages! {
    /// An enum generic over what one field carries, as a state machine's messages are.
    #[derive(Debug, PartialEq)]
    enum Generic<T> {
        Carry { id: u64, thing: T } = 10,
        Bare {} = 11,
    }
}

proptest! {
    #[test]
    fn a_generic_enum_round_trips_for_any_field_type(id in any::<u64>(), thing in any::<u32>(), flag in any::<bool>()) {
        let (tag, words) = Generic::Carry { id, thing }.encode();
        // SAFETY: made by `encode` just above, decoded once.
        prop_assert_eq!(unsafe { Generic::<u32>::decode(tag, &words) }, Ok(Generic::Carry { id, thing }));
        let (tag, words) = Generic::Carry { id, thing: flag }.encode();
        // SAFETY: as above.
        prop_assert_eq!(unsafe { Generic::<bool>::decode(tag, &words) }, Ok(Generic::Carry { id, thing: flag }));
        let (tag, words) = Generic::<u64>::Bare {}.encode();
        prop_assert_eq!(tag, 11);
        // SAFETY: as above.
        prop_assert_eq!(unsafe { Generic::<u64>::decode(tag, &words) }, Ok(Generic::Bare {}));
    }
}
