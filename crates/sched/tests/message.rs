//! Every scheduler message survives encode then decode, with the tags the kernel's monitor
//! routes (16–22), and a note (which carries no thread) decodes as the same message.

use proptest::prelude::*;
use protocol::{Malformed, Protocol};
use sched::{Message, Note, Report};

fn any_message() -> impl Strategy<Value = Message<u64>> {
    prop_oneof![
        any::<u64>().prop_map(|thread| Message::Arrive { thread }),
        any::<[u64; 4]>().prop_map(|[space, addr, n, cores]| Message::Wake {
            space,
            addr,
            n,
            cores
        }),
        any::<u64>().prop_map(|uid| Message::Joined { uid }),
        (any::<u64>(), any::<u64>(), any::<bool>(), any::<usize>(), any::<bool>()).prop_map(
            |(length, seq, online, origin, forward)| Message::Load {
                length,
                seq,
                online,
                origin,
                forward
            }
        ),
        any::<bool>().prop_map(|may_take_running| Message::Pull { may_take_running }),
        Just(Message::NoneToGive {}),
        Just(Message::Reap {}),
    ]
}

#[test]
fn the_kinds_have_their_tags() {
    let tags: Vec<u32> = Message::<u64>::KINDS.iter().map(|&(t, _)| t).collect();
    assert_eq!(tags, [16, 17, 18, 19, 20, 21, 22]);
}

proptest! {
    #[test]
    fn every_message_round_trips(m in any_message()) {
        let (tag, words) = m.encode();
        // SAFETY: made by `encode` just above, decoded once.
        prop_assert_eq!(unsafe { Message::<u64>::decode(tag, &words) }, Ok(m));
    }

    #[test]
    fn a_note_is_the_same_words_as_its_message(m in any_message()) {
        if let Message::Arrive { .. } = m {
            return Ok(());
        }
        let note: Note = m.map(|_| unreachable!("only Arrive carries a thread"));
        let (tag, words) = note.encode();
        prop_assert_eq!((tag, words), m.encode());
        // SAFETY: as above.
        prop_assert_eq!(unsafe { Message::<u64>::decode(tag, &words) }, Ok(m));
    }

    #[test]
    fn a_report_is_a_load_message(origin in any::<usize>(), length in any::<u64>(), seq in any::<u64>(),
                                  online in any::<bool>(), forward in any::<bool>()) {
        let m = Report { origin, length, seq, online }.message(forward);
        prop_assert_eq!(m, Message::Load { length, seq, online, origin, forward });
    }
}

#[test]
fn an_arrival_does_not_decode_as_a_note() {
    let (tag, words) = Message::Arrive { thread: 7u64 }.encode();
    // SAFETY: made by `encode` just above, decoded once.
    assert_eq!(unsafe { Note::decode(tag, &words) }, Err(Malformed::BadField));
}
