//! The monitor's protocol: its own kinds of message (declared once with
//! `protocol::messages!`), who may send them, and the bytes of a call's reply. A message
//! that does not decode, or comes from a core not allowed to send it, is rejected and
//! counted, never acted on.

use super::CallBody;
pub use ::protocol::{Lent, Protocol, Rejection};
use urpc::PAYLOAD_WORDS;

/// The tag of a reply to a `Call`: its bytes, fragmented (`[call id: 8][status: 1][error
/// text]`), outside every enum (a reply is bytes, not words).
pub const REPLY: u32 = 4;

/// The reply's kind, for the handler table.
pub const REPLY_KINDS: &[(u32, &str)] = &[(REPLY, "Reply")];

/// Frames in one `FrameReturn` message.
pub const FRAMES_PER_RETURN: usize = PAYLOAD_WORDS - 1;

::protocol::messages! {
    /// The monitor's own messages. The other layers declare theirs beside their code
    /// (`tlb::TlbMessage`, `twophase::TwoPhaseMessage`, `sched::SchedMessage`,
    /// `user::StartMessage`); the boot core's handler table routes each tag to its layer.
    /// Handled as soon as read.
    #[derive(Clone, Copy, Debug)]
    pub enum MonitorMessage {
        /// Answer with `Pong { seq }`.
        Ping { seq: u64 } = 1,
        /// A ping's answer.
        Pong { seq: u64 } = 2,
        /// `count` frames the receiver owns, freed by the sender (`count` in 1..=6).
        FrameReturn { count: usize, frames: [u64; FRAMES_PER_RETURN] } = 5,
        /// How long to poll before halting, in TSC cycles (boot core only: a replicated
        /// setting).
        SetPollBudget { cycles: u64 } = 6,
        /// The sender's `n`-th sequence message to this core (tests check the order).
        Sequence { n: u64 } = 7,
        /// Benchmark request for `round`; answer `BenchAck { round }`.
        Bench { round: u64 } = 8,
        /// Benchmark acknowledgement.
        BenchAck { round: u64 } = 9,
        /// Multicast-tree request to an aggregator: it forwards `Bench` to its package's
        /// cores below `limit`, collects their acks, then sends `BenchAck` to `source`.
        Multicast { round: u64, source: usize, limit: usize } = 10,
    }
}

::protocol::messages! {
    /// A remote call (`call::call_async`): it takes the core, so it waits for the core to
    /// be between threads (`transport::When::BetweenThreads`); its answer is a `REPLY`.
    #[derive(Clone, Copy, Debug)]
    pub enum CallMessage {
        /// Run the work the caller lends at `body`; answer with a reply under `id`.
        Call { id: u64, body: Lent<CallBody<'static>> } = 3,
    }
}

/// Decodes and validates one of the monitor's own messages from core `from`.
pub fn decode(
    from: usize,
    tag: u32,
    p: &[u64; PAYLOAD_WORDS],
) -> Result<MonitorMessage, Rejection> {
    // SAFETY: the monitor hands each message it reads from a channel here once, as the
    // sender's `encode` wrote it (channels are kernel memory only the kernel writes).
    let message = unsafe { MonitorMessage::decode(tag, p) }?;
    match message {
        MonitorMessage::FrameReturn { count, .. } if count == 0 || count > FRAMES_PER_RETURN => {
            Err(Rejection::Malformed)
        }
        MonitorMessage::SetPollBudget { .. } if from != 0 => Err(Rejection::NotAllowed),
        _ => Ok(message),
    }
}

/// Most bytes of error text a reply carries.
pub const REPLY_TEXT_MAX: usize = 200;

const _: () = assert!(9 + REPLY_TEXT_MAX <= crate::param::LONG_MESSAGE_BYTES);

/// A reply: call id, then `Ok` or the error text.
pub fn encode_reply(
    id: u64,
    result: &Result<(), alloc::string::String>,
    out: &mut [u8; 9 + REPLY_TEXT_MAX],
) -> usize {
    out[..8].copy_from_slice(&id.to_le_bytes());
    match result {
        Ok(()) => {
            out[8] = 0;
            9
        }
        Err(text) => {
            out[8] = 1;
            let n = text.len().min(REPLY_TEXT_MAX);
            out[9..9 + n].copy_from_slice(&text.as_bytes()[..n]);
            9 + n
        }
    }
}

/// Decodes a reply's bytes.
pub fn decode_reply(bytes: &[u8]) -> Result<(u64, Result<(), alloc::string::String>), Rejection> {
    if bytes.len() < 9 {
        return Err(Rejection::Malformed);
    }
    let id = u64::from_le_bytes(bytes[..8].try_into().map_err(|_| Rejection::Malformed)?);
    match bytes[8] {
        0 if bytes.len() == 9 => Ok((id, Ok(()))),
        1 => {
            let text = core::str::from_utf8(&bytes[9..]).map_err(|_| Rejection::Malformed)?;
            Ok((id, Err(text.into())))
        }
        _ => Err(Rejection::Malformed),
    }
}
