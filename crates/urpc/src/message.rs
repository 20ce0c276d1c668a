//! The message type and the header word's bit layout (see the crate documentation for the
//! picture). Decoding never panics: a malformed header is carried as it is and reported by
//! [`Message::is_well_formed`], so the receiving core can count and reject it.

use crate::{PAYLOAD_BYTES, PAYLOAD_WORDS};

/// Bits 0..32: the caller's tag.
const TAG_MASK: u64 = 0xffff_ffff;
/// Bits 32..38: payload bytes used by a fragment.
const LEN_SHIFT: u32 = 32;
const LEN_MASK: u64 = 0x3f;
/// Bit 38: first fragment of a byte string.
const FIRST: u64 = 1 << 38;
/// Bit 39: last fragment of a byte string.
const LAST: u64 = 1 << 39;
/// Bit 40: the message is a fragment.
const FRAGMENT: u64 = 1 << 40;
/// Bits 41..57: fragment index within its byte string.
const INDEX_SHIFT: u32 = 41;
const INDEX_MASK: u64 = 0xffff;
/// Bits 57..63: reserved, zero.
const RESERVED: u64 = 0x3f << 57;
/// Bit 63: the epoch, owned by the ring (not part of a [`Message`]).
pub(crate) const EPOCH: u64 = 1 << 63;

/// One received (or to-be-sent) message: a 32-bit tag, 56 bytes of payload and, for pieces
/// of a byte string, the fragment bookkeeping from the header word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message {
    /// The caller's type information, carried in the header word untouched.
    pub tag: u32,
    /// The seven payload words.
    pub payload: [u64; PAYLOAD_WORDS],
    /// Header bits 32..63 (fragment flags, length, index, reserved), as they arrived.
    info: u32,
}

impl Message {
    /// A plain (unfragmented) message, as [`Sender::try_send`](crate::Sender::try_send)
    /// sends it.
    pub const fn new(tag: u32, payload: [u64; PAYLOAD_WORDS]) -> Self {
        Message { tag, payload, info: 0 }
    }

    /// A message from a raw header word, as it sits in a slot; the epoch bit is ignored.
    /// Any bit pattern is accepted (tests use it to forge malformed messages).
    pub const fn from_raw(header: u64, payload: [u64; PAYLOAD_WORDS]) -> Self {
        Message { tag: (header & TAG_MASK) as u32, payload, info: ((header & !EPOCH) >> 32) as u32 }
    }

    /// The header word for this message, without the epoch bit.
    pub const fn raw_header(&self) -> u64 {
        ((self.info as u64) << 32) | self.tag as u64
    }

    /// A well-formed fragment header: `index` of a byte string, using `len` payload bytes.
    pub(crate) const fn fragment_header(
        tag: u32,
        index: usize,
        len: usize,
        first: bool,
        last: bool,
    ) -> u64 {
        let mut header = FRAGMENT
            | (((index as u64) & INDEX_MASK) << INDEX_SHIFT)
            | (((len as u64) & LEN_MASK) << LEN_SHIFT)
            | tag as u64;
        if first {
            header |= FIRST;
        }
        if last {
            header |= LAST;
        }
        header
    }

    /// Whether this is one fragment of a byte string (feed it to a
    /// [`Reassembler`](crate::Reassembler)).
    pub const fn is_fragment(&self) -> bool {
        self.raw_header() & FRAGMENT != 0
    }

    /// Whether this is the first fragment of a byte string.
    pub const fn is_first(&self) -> bool {
        self.is_fragment() && self.raw_header() & FIRST != 0
    }

    /// Whether this is the last fragment of a byte string.
    pub const fn is_last(&self) -> bool {
        self.is_fragment() && self.raw_header() & LAST != 0
    }

    /// The fragment's index within its byte string (0 for the first); 0 for a plain message.
    pub const fn fragment_index(&self) -> usize {
        ((self.raw_header() >> INDEX_SHIFT) & INDEX_MASK) as usize
    }

    /// How many payload bytes the fragment uses, as the header claims it (may exceed 56 in a
    /// malformed header; check [`is_well_formed`](Self::is_well_formed)).
    pub const fn fragment_len(&self) -> usize {
        ((self.raw_header() >> LEN_SHIFT) & LEN_MASK) as usize
    }

    /// Whether the header bits make sense: a plain message has bits 32..63 all zero; a
    /// fragment uses at most 56 bytes, exactly 56 unless it is the last, has index 0 exactly
    /// when it is the first, is empty only if it is the whole (empty) string, and leaves the
    /// reserved bits zero. A received message that is not well formed comes from a buggy or
    /// hostile sender and should be rejected.
    pub const fn is_well_formed(&self) -> bool {
        let h = self.raw_header();
        if h & FRAGMENT == 0 {
            return self.info == 0;
        }
        let len = self.fragment_len();
        h & RESERVED == 0
            && len <= PAYLOAD_BYTES
            && (h & LAST != 0 || len == PAYLOAD_BYTES)
            && (len > 0 || h & FIRST != 0)
            && (h & FIRST != 0) == (self.fragment_index() == 0)
    }

    /// The payload as bytes, little-endian word by word (the order fragments use).
    pub fn payload_bytes(&self) -> [u8; PAYLOAD_BYTES] {
        let mut bytes = [0; PAYLOAD_BYTES];
        for (chunk, word) in bytes.chunks_exact_mut(8).zip(&self.payload) {
            chunk.copy_from_slice(&word.to_le_bytes());
        }
        bytes
    }
}

/// Packs up to 56 bytes into payload words, little-endian, zero-padded.
pub(crate) fn pack(bytes: &[u8]) -> [u64; PAYLOAD_WORDS] {
    let mut payload = [0; PAYLOAD_WORDS];
    for (word, chunk) in payload.iter_mut().zip(bytes.chunks(8)) {
        let mut le = [0; 8];
        le[..chunk.len()].copy_from_slice(chunk);
        *word = u64::from_le_bytes(le);
    }
    payload
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn plain_message_round_trips_through_raw() {
        let m = Message::new(0xdead_beef, [1, 2, 3, 4, 5, 6, 7]);
        assert!(!m.is_fragment() && !m.is_first() && !m.is_last());
        assert!(m.is_well_formed());
        assert_eq!(m.raw_header(), 0xdead_beef);
        assert_eq!(Message::from_raw(m.raw_header() | EPOCH, m.payload), m);
    }

    #[test]
    fn fragment_fields_decode() {
        let h = Message::fragment_header(7, 3, 20, false, true);
        let m = Message::from_raw(h, [0; PAYLOAD_WORDS]);
        assert!(m.is_fragment() && !m.is_first() && m.is_last());
        assert_eq!((m.tag, m.fragment_index(), m.fragment_len()), (7, 3, 20));
        assert!(m.is_well_formed());
    }

    #[test]
    fn malformed_headers_are_reported_not_panicked() {
        let bad = [
            1 << 38,                                                     // FIRST on a plain message
            1 << 57,                                                     // reserved bit, plain
            Message::fragment_header(0, 0, 56, true, false) | (1 << 60), // reserved, fragment
            Message::fragment_header(0, 0, 57, true, true),              // 57 bytes
            Message::fragment_header(0, 1, 56, true, false),             // first with index 1
            Message::fragment_header(0, 0, 56, false, false),            // middle with index 0
            Message::fragment_header(0, 1, 10, false, false),            // short middle fragment
        ];
        for h in bad {
            assert!(!Message::from_raw(h, [0; 7]).is_well_formed(), "{h:#x}");
        }
        // Every bit pattern decodes without panicking.
        for bit in 0..64 {
            let m = Message::from_raw(u64::MAX ^ (1 << bit), [0; 7]);
            let _ = (m.is_well_formed(), m.fragment_len(), m.fragment_index());
        }
    }

    #[test]
    fn pack_is_little_endian_and_padded() {
        let p = pack(&[1, 2, 3, 4, 5, 6, 7, 8, 9]);
        assert_eq!(p[0], 0x0807_0605_0403_0201);
        assert_eq!(p[1], 9);
        assert_eq!(&p[2..], &[0; 5]);
        let m = Message::new(0, p);
        assert_eq!(&m.payload_bytes()[..9], &[1, 2, 3, 4, 5, 6, 7, 8, 9]);
    }
}
