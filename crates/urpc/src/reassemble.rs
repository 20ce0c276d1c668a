//! Receiver-side reassembly of byte strings sent with
//! [`Sender::try_send_bytes`](crate::Sender::try_send_bytes). The fragments of one string
//! arrive back to back on a channel (the ring is FIFO and the sender writes them all at
//! once), so anything else — a gap, a repeat, another string's fragment, a bad header — means
//! a buggy or hostile sender and comes out as an error value, never a panic.

use crate::Message;

/// Why [`Reassembler::push`] rejected a message. After any error the partial string is
/// dropped (the offending message with it), and reassembly starts again at the next first
/// fragment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReassemblyError {
    /// A plain message, not a fragment.
    NotFragment,
    /// The fragment's header bits are inconsistent (see [`Message::is_well_formed`]).
    Malformed,
    /// A fragment other than the expected next one: a gap, a repeat, or a middle fragment
    /// with no first.
    OutOfOrder,
    /// A new string's fragment (another first, or another tag) before the current string's
    /// last.
    Interleaved,
    /// The string is longer than the buffer.
    TooLong,
}

impl core::fmt::Display for ReassemblyError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            ReassemblyError::NotFragment => "not a fragment",
            ReassemblyError::Malformed => "malformed fragment header",
            ReassemblyError::OutOfOrder => "fragment out of order",
            ReassemblyError::Interleaved => "fragments of two messages interleaved",
            ReassemblyError::TooLong => "fragmented message longer than the buffer",
        })
    }
}

impl core::error::Error for ReassemblyError {}

/// Receiver-side reassembly of fragmented messages into a caller-provided buffer.
#[derive(Debug)]
pub struct Reassembler<'b> {
    /// Where the string is put together.
    buf: &'b mut [u8],
    /// Bytes of the current string collected so far.
    len: usize,
    /// The current string's tag and the index of the fragment expected next; `None`
    /// between strings.
    current: Option<(u32, usize)>,
}

impl<'b> Reassembler<'b> {
    /// A reassembler that collects strings of up to `buf.len()` bytes in `buf`.
    pub fn new(buf: &'b mut [u8]) -> Self {
        Reassembler { buf, len: 0, current: None }
    }

    /// Adds the next fragment received. Returns the tag and the whole string when `m` was
    /// its last fragment, `None` while more are expected, or an error (dropping the partial
    /// string) when `m` does not fit the string being collected.
    pub fn push(&mut self, m: &Message) -> Result<Option<(u32, &[u8])>, ReassemblyError> {
        match self.take(m) {
            Err(e) => {
                self.reset();
                Err(e)
            }
            Ok(None) => Ok(None),
            Ok(Some((tag, len))) => {
                self.reset();
                Ok(Some((tag, &self.buf[..len])))
            }
        }
    }

    /// Whether part of a string has been collected and its last fragment is awaited.
    pub fn in_progress(&self) -> bool {
        self.current.is_some()
    }

    /// Drops any partial string.
    pub fn reset(&mut self) {
        self.len = 0;
        self.current = None;
    }

    /// Checks `m` against the string in progress and copies its bytes in; on the last
    /// fragment returns the tag and the string's length.
    fn take(&mut self, m: &Message) -> Result<Option<(u32, usize)>, ReassemblyError> {
        if !m.is_fragment() {
            return Err(ReassemblyError::NotFragment);
        }
        if !m.is_well_formed() {
            return Err(ReassemblyError::Malformed);
        }
        let expected = match self.current {
            None if m.is_first() => 0,
            None => return Err(ReassemblyError::OutOfOrder),
            Some((tag, _)) if m.is_first() || tag != m.tag => {
                return Err(ReassemblyError::Interleaved)
            }
            Some((_, next)) => next,
        };
        if m.fragment_index() != expected {
            return Err(ReassemblyError::OutOfOrder);
        }
        let len = m.fragment_len();
        let end = self.len + len;
        if end > self.buf.len() {
            return Err(ReassemblyError::TooLong);
        }
        self.buf[self.len..end].copy_from_slice(&m.payload_bytes()[..len]);
        self.len = end;
        if m.is_last() {
            return Ok(Some((m.tag, end)));
        }
        self.current = Some((m.tag, expected + 1));
        Ok(None)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::message::pack;

    fn frag(tag: u32, index: usize, bytes: &[u8], first: bool, last: bool) -> Message {
        let header = Message::fragment_header(tag, index, bytes.len(), first, last);
        Message::from_raw(header, pack(bytes))
    }

    #[test]
    fn two_fragments_make_a_string() {
        let mut buf = [0; 100];
        let mut r = Reassembler::new(&mut buf);
        let a = [1u8; 56];
        assert_eq!(r.push(&frag(4, 0, &a, true, false)), Ok(None));
        assert!(r.in_progress());
        let (tag, s) = r.push(&frag(4, 1, b"xyz", false, true)).unwrap().unwrap();
        assert_eq!((tag, s.len(), &s[56..]), (4, 59, &b"xyz"[..]));
        assert!(!r.in_progress());
    }

    #[test]
    fn errors_drop_the_partial_string() {
        let mut buf = [0; 56];
        let mut r = Reassembler::new(&mut buf);
        let a = [1u8; 56];
        let plain = Message::new(1, [0; 7]);
        assert_eq!(r.push(&plain), Err(ReassemblyError::NotFragment));
        assert_eq!(r.push(&frag(1, 1, &a, false, false)), Err(ReassemblyError::OutOfOrder));
        r.push(&frag(1, 0, &a, true, false)).unwrap();
        assert_eq!(r.push(&frag(1, 0, &a, true, false)), Err(ReassemblyError::Interleaved));
        assert!(!r.in_progress());
        r.push(&frag(1, 0, &a, true, false)).unwrap();
        assert_eq!(r.push(&frag(2, 1, b"x", false, true)), Err(ReassemblyError::Interleaved));
        r.push(&frag(1, 0, &a, true, false)).unwrap();
        assert_eq!(r.push(&frag(1, 2, b"x", false, true)), Err(ReassemblyError::OutOfOrder));
        r.push(&frag(1, 0, &a, true, false)).unwrap();
        assert_eq!(r.push(&frag(1, 1, b"x", false, true)), Err(ReassemblyError::TooLong));
        let bad = Message::from_raw(frag(1, 0, b"x", true, false).raw_header(), [0; 7]);
        assert_eq!(r.push(&bad), Err(ReassemblyError::Malformed));
        // Resynchronises at the next first fragment.
        assert_eq!(r.push(&frag(9, 0, b"ok", true, true)), Ok(Some((9, &b"ok"[..]))));
    }
}
