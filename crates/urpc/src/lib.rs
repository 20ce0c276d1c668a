//! URPC channels: how Atoll's cores talk. A channel is a single-writer / single-reader ring of
//! 64-byte messages in memory both cores can see (Multikernel §4.6, "a region of shared memory
//! is used as a channel to transfer cache-line-sized messages point-to-point between single
//! writer and reader cores"; the layout follows Barrelfish's UMP channels before 2017).
//!
//! # Protocol
//! - The ring is `SLOTS` 64-byte slots (one cache line each) followed by one credit line.
//! - **Sending** message number `n` (counting from 0) writes slot `n % SLOTS`: first the seven
//!   payload words, then the header word (word 7, the last of the line) with `Release`. The
//!   receiver polls only that header word, with `Acquire`, so once it sees the new header it
//!   also sees the whole payload; it can never take a half-written message (§4.6: "the
//!   receiver polls on the last word of the line").
//! - **Epochs** tell a new message from a stale one without the receiver ever writing a slot:
//!   bit 63 of the header is the pass over the ring, flipping on every wrap. Pass 0 writes
//!   epoch 1, pass 1 writes 0, and so on, so all-zero memory is a valid empty channel (the
//!   kernel places channels in zeroed frames).
//! - **Credits**: the receiver counts the messages it has consumed and publishes the count on
//!   the credit line with `Release`, every `SLOTS / 2` messages by default (see
//!   [`Receiver::with_credit_batch`]) and whenever it polls an empty ring while holding
//!   unpublished credits. The sender caches the last count it read and reads the credit line
//!   (`Acquire`) only when its cached view says there is not enough room, so it never
//!   overwrites an unread message and rarely touches the receiver's line.
//! - So every cache line has exactly one writer: slot lines are written only by the sender,
//!   the credit line only by the receiver. In the common case a message costs two
//!   interconnect transactions: the sender's write invalidates the receiver's copy of the
//!   slot line, and the receiver's poll fetches it back (§4.6).
//!
//! # Header word
//! ```text
//!  63  62..57    56..41          40    39    38     37..32      31..0
//! +---+--------+---------------+-----+-----+------+----------+-----------+
//! | E | zero   | frag index    | FRG | LST | FST  | frag len | tag (u32) |
//! +---+--------+---------------+-----+-----+------+----------+-----------+
//! ```
//! - `E` (bit 63): epoch, see above. Not part of [`Message`].
//! - `tag` (bits 0..32): the caller's type information, carried untouched.
//! - `FRG` (bit 40): the message is one fragment of a byte string sent with
//!   [`Sender::try_send_bytes`]; `FST` (38) / `LST` (39) mark its first / last fragment;
//!   `frag len` (32..38) is how many payload bytes it uses (0..=56, exactly 56 unless last);
//!   `frag index` (41..57) numbers the fragments of one string from 0.
//! - A plain message ([`Sender::try_send`]) has bits 32..63 all zero. Any other combination is
//!   malformed: it is still delivered (a message is never dropped silently), and
//!   [`Message::is_well_formed`] and [`Reassembler::push`] reject it as a value.
//!
//! # Tests
//! `cargo test -p urpc` runs the unit tests, the fragmentation property tests and a
//! two-thread stress test. The loom model (a sender and a receiver around a ring of 2 slots,
//! every interleaving, and of 4 slots, up to 7 preemptions) runs with
//! `RUSTFLAGS="--cfg loom" cargo test -p urpc --release --test loom` (about 10 s; it fails
//! if the header store is weakened to `Relaxed`).
#![no_std]
#![forbid(unsafe_code)]

#[cfg(test)]
extern crate std;

mod channel;
mod message;
mod reassemble;

pub use channel::{Full, Receiver, SendBytesError, Sender};
pub use message::Message;
pub use reassemble::{Reassembler, ReassemblyError};

/// The atomics of the channel: loom's under `cfg(loom)`, so the model checker sees every
/// access to shared memory.
mod sync {
    #[cfg(loom)]
    pub use loom::sync::atomic::AtomicU64;

    #[cfg(not(loom))]
    pub use core::sync::atomic::AtomicU64;
}

use sync::AtomicU64;

/// Words in one message: one 64-byte cache line.
pub const MESSAGE_WORDS: usize = 8;

/// Payload words in one message (56 bytes); the eighth word is the header.
pub const PAYLOAD_WORDS: usize = 7;

/// Payload bytes in one message.
pub const PAYLOAD_BYTES: usize = PAYLOAD_WORDS * 8;

/// The most fragments one byte string may have: the fragment index has 16 bits.
pub const MAX_FRAGMENTS: usize = 1 << 16;

/// The longest byte string the header format can describe. A channel can carry at most
/// [`Sender::MAX_BYTES`] of it at once, which is less for rings under 65536 slots.
pub const MAX_FRAGMENTED_BYTES: usize = MAX_FRAGMENTS * PAYLOAD_BYTES;

/// Index of the header word within a slot: the last word, the one the receiver polls.
const HEADER_WORD: usize = MESSAGE_WORDS - 1;

/// One message slot: a cache line written only by the sender.
#[repr(C, align(64))]
struct Slot {
    /// Payload words 0..7, then the header word.
    words: [AtomicU64; MESSAGE_WORDS],
}

/// The credit line: a cache line written only by the receiver.
#[repr(C, align(64))]
struct CreditLine {
    /// How many messages the receiver has consumed since the channel was made (wrapping).
    consumed: AtomicU64,
}

/// The shared memory of one channel: `SLOTS` 64-byte slots, then the credit line.
///
/// `SLOTS` must be a power of two, at least 2 (checked at compile time when a [`Sender`] or
/// [`Receiver`] is made). All-zero memory is a valid empty channel, so a zeroed frame can be
/// used as one. Make exactly one [`Sender`] and one [`Receiver`] per channel, while it is
/// still empty.
///
/// ```compile_fail
/// let mem = urpc::ChannelMemory::<3>::new(); // not a power of two
/// ```
#[repr(C, align(64))]
pub struct ChannelMemory<const SLOTS: usize> {
    /// The ring, written by the sender only.
    slots: [Slot; SLOTS],
    /// Credits, written by the receiver only.
    credit: CreditLine,
}

impl<const SLOTS: usize> ChannelMemory<SLOTS> {
    /// Fails the build for a ring size the epoch scheme cannot use: the slot and epoch come
    /// from the message counter's low bits, which only works for a power of two.
    const VALID: () =
        assert!(SLOTS >= 2 && SLOTS.is_power_of_two(), "urpc: SLOTS must be a power of two >= 2");

    /// An empty channel (all zero; usable in a `static`).
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::VALID;
        // A `const` item, so the array repeat below may copy it (atomics are not Copy).
        #[allow(clippy::declare_interior_mutable_const)]
        const ZERO_SLOT: Slot = Slot { words: [const { AtomicU64::new(0) }; MESSAGE_WORDS] };
        ChannelMemory {
            slots: [ZERO_SLOT; SLOTS],
            credit: CreditLine { consumed: AtomicU64::new(0) },
        }
    }

    /// An empty channel (loom's atomics cannot be built in a `const fn`).
    #[cfg(loom)]
    pub fn new() -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::VALID;
        ChannelMemory {
            slots: core::array::from_fn(|_| Slot {
                words: core::array::from_fn(|_| AtomicU64::new(0)),
            }),
            credit: CreditLine { consumed: AtomicU64::new(0) },
        }
    }
}

impl<const SLOTS: usize> Default for ChannelMemory<SLOTS> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const SLOTS: usize> core::fmt::Debug for ChannelMemory<SLOTS> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ChannelMemory").field("slots", &SLOTS).finish_non_exhaustive()
    }
}
