//! The two ends of a channel. Each end keeps its own counters in its own (core-local) memory
//! and touches shared memory only as the protocol in the crate documentation says: the
//! sender writes slots and reads the credit line, the receiver reads slots and writes the
//! credit line (Multikernel §4.6).

use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};

use crate::message::{pack, EPOCH};
use crate::{ChannelMemory, Message, HEADER_WORD, MAX_FRAGMENTED_BYTES, PAYLOAD_BYTES};
use crate::{MAX_FRAGMENTS, PAYLOAD_WORDS};

/// The ring has no room for the message now; try again after the receiver has caught up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Full;

/// Why [`Sender::try_send_bytes`] sent nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendBytesError {
    /// Not enough free slots for all the fragments now; try again later.
    Full,
    /// Longer than [`Sender::MAX_BYTES`]: this channel can never carry it in one piece.
    TooLong,
}

impl From<Full> for SendBytesError {
    fn from(_: Full) -> Self {
        SendBytesError::Full
    }
}

impl core::fmt::Display for Full {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("urpc channel full")
    }
}

impl core::fmt::Display for SendBytesError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SendBytesError::Full => f.write_str("urpc channel full"),
            SendBytesError::TooLong => f.write_str("message longer than the channel can carry"),
        }
    }
}

impl core::error::Error for Full {}
impl core::error::Error for SendBytesError {}

/// The header's epoch bit for message number `n`: pass `n / SLOTS` over the ring writes
/// epoch 1 on even passes and 0 on odd ones, so the zeroed ring (epoch 0) reads as empty.
fn epoch_bit<const SLOTS: usize>(n: u64) -> u64 {
    if (n / SLOTS as u64) & 1 == 0 {
        EPOCH
    } else {
        0
    }
}

/// The slot of message number `n`.
fn slot_index<const SLOTS: usize>(n: u64) -> usize {
    (n % SLOTS as u64) as usize
}

/// How many fragments a byte string of `len` bytes takes (an empty string takes one).
fn fragments(len: usize) -> usize {
    len.div_ceil(PAYLOAD_BYTES).max(1)
}

/// The sending end of a channel, owned by the sending core.
#[derive(Debug)]
pub struct Sender<'a, const SLOTS: usize> {
    /// The shared ring.
    mem: &'a ChannelMemory<SLOTS>,
    /// Messages sent so far (wrapping); the next one goes to slot `sent % SLOTS`.
    sent: u64,
    /// The receiver's consumed count as last read from the credit line (wrapping).
    acked: u64,
}

impl<'a, const SLOTS: usize> Sender<'a, SLOTS> {
    /// The longest byte string [`try_send_bytes`](Self::try_send_bytes) takes on this
    /// channel: all its fragments must fit in the ring at once.
    pub const MAX_BYTES: usize =
        if SLOTS < MAX_FRAGMENTS { SLOTS * PAYLOAD_BYTES } else { MAX_FRAGMENTED_BYTES };

    /// The sending end of `mem`, which must be an empty channel with no other sender.
    pub fn new(mem: &'a ChannelMemory<SLOTS>) -> Self {
        #[allow(clippy::let_unit_value)]
        let () = ChannelMemory::<SLOTS>::VALID;
        Sender { mem, sent: 0, acked: 0 }
    }

    /// Sends one message: `tag` is 32 bits of user type information carried in the header.
    /// Fails with [`Full`] (sending nothing) when all slots hold unread messages.
    pub fn try_send(&mut self, tag: u32, payload: &[u64; PAYLOAD_WORDS]) -> Result<(), Full> {
        if !self.has_room(1) {
            return Err(Full);
        }
        self.write(tag as u64, payload);
        Ok(())
    }

    /// Sends `bytes` (up to [`MAX_BYTES`](Self::MAX_BYTES)) as consecutive fragments under
    /// one `tag`; the receiver puts them back together with a
    /// [`Reassembler`](crate::Reassembler). All or nothing: it checks there is room for every
    /// fragment before writing the first, so a receiver never waits on half a string.
    pub fn try_send_bytes(&mut self, tag: u32, bytes: &[u8]) -> Result<(), SendBytesError> {
        if bytes.len() > Self::MAX_BYTES {
            return Err(SendBytesError::TooLong);
        }
        let count = fragments(bytes.len());
        if !self.has_room(count) {
            return Err(SendBytesError::Full);
        }
        for index in 0..count {
            let chunk = &bytes[index * PAYLOAD_BYTES..bytes.len().min((index + 1) * PAYLOAD_BYTES)];
            let header =
                Message::fragment_header(tag, index, chunk.len(), index == 0, index + 1 == count);
            self.write(header, &pack(chunk));
        }
        Ok(())
    }

    /// How many messages can be sent now. Reads the credit line only when the cached view
    /// says the ring is full, so a sender with room never touches the receiver's line.
    pub fn free_slots(&mut self) -> usize {
        self.has_room(1);
        self.cached_free()
    }

    /// Free slots according to the last credits read.
    fn cached_free(&self) -> usize {
        SLOTS - self.sent.wrapping_sub(self.acked) as usize
    }

    /// Whether `count` slots are free, refreshing the credits from the receiver's line only
    /// if the cached view is short (a sender of byte strings asks for a whole string's
    /// fragments before it commits to sending it).
    pub fn has_room(&mut self, count: usize) -> bool {
        if self.cached_free() < count {
            // Acquire pairs with the receiver's Release store of its count: the receiver's
            // reads of the slots it consumed happen before our next writes to them, so we
            // never overwrite a message it is still copying.
            let consumed = self.mem.credit.consumed.load(Acquire);
            // Take it only if it is a count we could have produced (between the last credits
            // and what we have sent); a garbage credit line must not let us overrun the ring.
            if consumed.wrapping_sub(self.acked) <= self.sent.wrapping_sub(self.acked) {
                self.acked = consumed;
            }
        }
        self.cached_free() >= count
    }

    /// Writes the next slot: payload first, header last (the caller checked for room).
    fn write(&mut self, header: u64, payload: &[u64; PAYLOAD_WORDS]) {
        let slot = &self.mem.slots[slot_index::<SLOTS>(self.sent)];
        // Relaxed: the payload is published by the header's Release store below.
        for (word, &value) in slot.words.iter().zip(payload) {
            word.store(value, Relaxed);
        }
        // Release: a receiver whose Acquire load sees this header sees the payload above
        // too, so it never takes a torn message (§4.6: the header is written last).
        slot.words[HEADER_WORD].store(header | epoch_bit::<SLOTS>(self.sent), Release);
        self.sent = self.sent.wrapping_add(1);
    }
}

/// The receiving end of a channel, owned by the receiving core.
#[derive(Debug)]
pub struct Receiver<'a, const SLOTS: usize> {
    /// The shared ring.
    mem: &'a ChannelMemory<SLOTS>,
    /// Messages consumed so far (wrapping); the next one is in slot `received % SLOTS`.
    received: u64,
    /// The consumed count last published on the credit line.
    credited: u64,
    /// Publish credits once this many messages have been consumed since the last time.
    batch: u64,
}

impl<'a, const SLOTS: usize> Receiver<'a, SLOTS> {
    /// Credits are returned every `SLOTS / 2` messages unless the receiver is made with
    /// [`with_credit_batch`](Self::with_credit_batch).
    pub const DEFAULT_CREDIT_BATCH: usize = SLOTS / 2;

    /// The receiving end of `mem`, which must be an empty channel with no other receiver.
    pub fn new(mem: &'a ChannelMemory<SLOTS>) -> Self {
        Self::with_credit_batch(mem, Self::DEFAULT_CREDIT_BATCH)
    }

    /// Like [`new`](Self::new), returning credits every `batch` messages (clamped to
    /// `1..=SLOTS`). Larger batches mean fewer writes to the credit line, which the sender
    /// must fetch, but a sender that fills the ring waits longer for room.
    pub fn with_credit_batch(mem: &'a ChannelMemory<SLOTS>, batch: usize) -> Self {
        #[allow(clippy::let_unit_value)]
        let () = ChannelMemory::<SLOTS>::VALID;
        Receiver { mem, received: 0, credited: 0, batch: batch.clamp(1, SLOTS) as u64 }
    }

    /// Whether a message is waiting: one Acquire load of the next slot's header, nothing
    /// written. Cheap to poll, since the line stays in this core's cache until the sender
    /// writes it (§4.6).
    pub fn has_message(&self) -> bool {
        self.next_header().is_some()
    }

    /// Takes the next message, if one has arrived. Credits go back to the sender every
    /// `batch` messages, and also when the ring is found empty with credits still held, so a
    /// sender waiting for room for several fragments never waits on this end.
    ///
    /// The message is returned whatever its header bits; check
    /// [`Message::is_well_formed`] before trusting a message from another core.
    pub fn try_recv(&mut self) -> Option<Message> {
        let Some(header) = self.next_header() else {
            self.return_credits();
            return None;
        };
        let slot = &self.mem.slots[slot_index::<SLOTS>(self.received)];
        let mut payload = [0; PAYLOAD_WORDS];
        // Relaxed: the header's Acquire load ordered the sender's payload writes before these
        // reads, and the sender will not write this slot again until we return its credit.
        for (value, word) in payload.iter_mut().zip(&slot.words) {
            *value = word.load(Relaxed);
        }
        self.received = self.received.wrapping_add(1);
        if self.received.wrapping_sub(self.credited) >= self.batch {
            self.return_credits();
        }
        Some(Message::from_raw(header, payload))
    }

    /// Publishes every credit held now, e.g. before the receiving core goes to sleep.
    pub fn flush_credits(&mut self) {
        self.return_credits();
    }

    /// The header of the next message, if its epoch says it is new.
    fn next_header(&self) -> Option<u64> {
        let slot = &self.mem.slots[slot_index::<SLOTS>(self.received)];
        // Acquire pairs with the sender's Release header store (see `Sender::write`).
        let header = slot.words[HEADER_WORD].load(Acquire);
        // A stale header is from the previous pass (the other epoch) or the zeroed ring.
        (header & EPOCH == epoch_bit::<SLOTS>(self.received)).then_some(header)
    }

    /// Stores the consumed count on the credit line if it has changed.
    fn return_credits(&mut self) {
        if self.credited != self.received {
            // Release: our reads of the consumed slots happen before the sender's Acquire
            // load of this count, and so before it overwrites them.
            self.mem.credit.consumed.store(self.received, Release);
            self.credited = self.received;
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::MESSAGE_WORDS;
    use core::mem::{align_of, size_of};

    /// A payload derived from `n`, so a torn or stale message shows.
    fn payload(n: u64) -> [u64; PAYLOAD_WORDS] {
        core::array::from_fn(|i| n.wrapping_mul(31).wrapping_add(i as u64))
    }

    fn credits<const S: usize>(mem: &ChannelMemory<S>) -> u64 {
        mem.credit.consumed.load(Relaxed)
    }

    #[test]
    fn layout_is_slots_then_one_credit_line() {
        assert_eq!(size_of::<ChannelMemory<4>>(), 5 * 64);
        assert_eq!(align_of::<ChannelMemory<4>>(), 64);
        assert_eq!(size_of::<ChannelMemory<16>>(), 17 * 64);
        assert_eq!(MESSAGE_WORDS * 8, 64);
    }

    #[test]
    fn all_zero_memory_is_an_empty_channel() {
        let mem = ChannelMemory::<4>::new();
        let every_word_zero = mem.slots.iter().flat_map(|s| &s.words).all(|w| w.load(Relaxed) == 0);
        assert!(every_word_zero && credits(&mem) == 0);
        let mut rx = Receiver::new(&mem);
        assert!(!rx.has_message());
        assert_eq!(rx.try_recv(), None);
        assert_eq!(credits(&mem), 0, "an empty poll writes nothing");
        let mut tx = Sender::new(&mem);
        assert_eq!(tx.free_slots(), 4);
        // The first pass writes epoch 1, so the message is told apart from the zeroes.
        tx.try_send(9, &payload(0)).unwrap();
        assert!(rx.has_message());
        assert_eq!(rx.try_recv(), Some(Message::new(9, payload(0))));
    }

    #[test]
    fn wraps_around_many_times_in_order() {
        let mem = ChannelMemory::<4>::new();
        let (mut tx, mut rx) = (Sender::new(&mem), Receiver::new(&mem));
        let (mut sent, mut got) = (0u64, 0u64);
        // Bursts of varying length, so the ring wraps at every offset.
        for burst in (0..400).map(|i| 1 + i % 4) {
            for _ in 0..burst {
                tx.try_send(sent as u32, &payload(sent)).unwrap();
                sent += 1;
            }
            while let Some(m) = rx.try_recv() {
                assert_eq!(m, Message::new(got as u32, payload(got)));
                got += 1;
            }
            assert_eq!(got, sent);
            // The slots still hold last pass's headers; their epoch marks them stale.
            assert!(!rx.has_message());
        }
        assert!(sent > 100 * 4);
    }

    #[test]
    fn full_ring_refuses_until_credits_return() {
        let mem = ChannelMemory::<8>::new();
        let (mut tx, mut rx) = (Sender::new(&mem), Receiver::new(&mem));
        for n in 0..8 {
            tx.try_send(0, &payload(n)).unwrap();
        }
        assert_eq!(tx.try_send(0, &payload(8)), Err(Full));
        assert_eq!(tx.free_slots(), 0);
        // Three reads are below the batch of 4: no credit yet, the sender is still full.
        for n in 0..3 {
            assert_eq!(rx.try_recv().unwrap().payload, payload(n));
        }
        assert_eq!(tx.free_slots(), 0);
        assert_eq!(rx.try_recv().unwrap().payload, payload(3));
        assert_eq!(tx.free_slots(), 4);
        tx.try_send(0, &payload(8)).unwrap();
        // The unread messages 4..8 were not overwritten.
        for n in 4..9 {
            assert_eq!(rx.try_recv().unwrap().payload, payload(n));
        }
    }

    #[test]
    fn credits_are_batched() {
        let mem = ChannelMemory::<16>::new();
        let (mut tx, mut rx) = (Sender::new(&mem), Receiver::new(&mem));
        for n in 0..16 {
            tx.try_send(0, &payload(n)).unwrap();
        }
        let mut published = [0; 16];
        for p in &mut published {
            rx.try_recv().unwrap();
            *p = credits(&mem);
        }
        // Published only at multiples of SLOTS / 2 while the ring is busy.
        assert_eq!(published[..8], [0, 0, 0, 0, 0, 0, 0, 8]);
        assert_eq!(published[8..], [8, 8, 8, 8, 8, 8, 8, 16]);

        // A batch of 3 does not divide the ring: credits still come every 3 messages.
        let mem2 = ChannelMemory::<16>::new();
        let (mut tx, mut rx) = (Sender::new(&mem2), Receiver::with_credit_batch(&mem2, 3));
        for n in 0..7 {
            tx.try_send(0, &payload(n)).unwrap();
        }
        let seen: [u64; 7] = core::array::from_fn(|_| {
            rx.try_recv().unwrap();
            credits(&mem2)
        });
        assert_eq!(seen, [0, 0, 3, 3, 3, 6, 6]);
    }

    #[test]
    fn empty_poll_returns_held_credits() {
        let mem = ChannelMemory::<16>::new();
        let (mut tx, mut rx) = (Sender::new(&mem), Receiver::new(&mem));
        tx.try_send(0, &payload(0)).unwrap();
        rx.try_recv().unwrap();
        assert_eq!(credits(&mem), 0);
        assert_eq!(rx.try_recv(), None);
        assert_eq!(credits(&mem), 1);
        tx.try_send(0, &payload(1)).unwrap();
        rx.try_recv().unwrap();
        rx.flush_credits();
        assert_eq!(credits(&mem), 2);
    }

    #[test]
    fn credit_batch_is_clamped() {
        let mem = ChannelMemory::<4>::new();
        assert_eq!(Receiver::with_credit_batch(&mem, 0).batch, 1);
        assert_eq!(Receiver::with_credit_batch(&mem, 99).batch, 4);
        assert_eq!(Receiver::new(&mem).batch, 2);
    }

    #[test]
    fn garbage_credits_never_let_the_sender_overrun() {
        let mem = ChannelMemory::<4>::new();
        let mut tx = Sender::new(&mem);
        for n in 0..4 {
            tx.try_send(0, &payload(n)).unwrap();
        }
        for bogus in [5, 1000, u64::MAX] {
            mem.credit.consumed.store(bogus, Relaxed);
            assert_eq!(tx.free_slots(), 0);
            assert_eq!(tx.try_send(0, &payload(9)), Err(Full));
        }
        mem.credit.consumed.store(2, Relaxed);
        assert_eq!(tx.free_slots(), 2);
    }

    #[test]
    fn send_bytes_is_all_or_nothing() {
        let mem = ChannelMemory::<4>::new();
        let (mut tx, mut rx) = (Sender::new(&mem), Receiver::new(&mem));
        assert_eq!(Sender::<4>::MAX_BYTES, 4 * 56);
        let long = [7u8; 4 * 56 + 1];
        assert_eq!(tx.try_send_bytes(1, &long), Err(SendBytesError::TooLong));
        tx.try_send(0, &payload(0)).unwrap();
        assert_eq!(tx.try_send_bytes(1, &long[..4 * 56]), Err(SendBytesError::Full));
        // Nothing of the refused string was written.
        assert_eq!(rx.try_recv(), Some(Message::new(0, payload(0))));
        assert_eq!(rx.try_recv(), None);
        // Once the empty poll returned the credit, the whole ring is usable by one string.
        tx.try_send_bytes(1, &long[..4 * 56]).unwrap();
        let frags: [Message; 4] = core::array::from_fn(|_| rx.try_recv().unwrap());
        assert!(frags[0].is_first() && frags[3].is_last());
        assert!(frags.iter().all(|m| m.is_well_formed() && m.fragment_len() == 56));
    }

    #[test]
    fn empty_byte_string_is_one_fragment() {
        let mem = ChannelMemory::<2>::new();
        let (mut tx, mut rx) = (Sender::new(&mem), Receiver::new(&mem));
        tx.try_send_bytes(5, &[]).unwrap();
        let m = rx.try_recv().unwrap();
        assert!(m.is_first() && m.is_last() && m.is_well_formed());
        assert_eq!((m.tag, m.fragment_len()), (5, 0));
    }

    #[test]
    fn malformed_header_is_delivered_for_rejection() {
        let mem = ChannelMemory::<2>::new();
        let (mut tx, mut rx) = (Sender::new(&mem), Receiver::new(&mem));
        tx.write((1 << 57) | (1 << 38) | 3, &payload(0));
        let m = rx.try_recv().unwrap();
        assert_eq!(m.tag, 3);
        assert!(!m.is_well_formed());
    }
}
