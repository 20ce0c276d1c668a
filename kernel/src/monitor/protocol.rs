//! The monitor protocol: the kinds of message cores exchange, how each is laid out in a
//! URPC message, and who may send it. A message that does not decode, or comes from a core
//! not allowed to send it, is rejected and counted, never acted on.

use urpc::PAYLOAD_WORDS;

/// Slots in each core-to-core channel (one 64-byte message each). 32 slots and the credit
/// line fit one 4 KiB frame; credits come back every 16 messages.
pub const CHANNEL_SLOTS: usize = 32;

/// Message kinds (the URPC tag).
pub mod kind {
    /// `[seq]`: answer with `PONG [seq]`.
    pub const PING: u32 = 1;
    /// `[seq]`: the answer to a ping.
    pub const PONG: u32 = 2;
    /// `[call id, body]`: run the work the caller lends at `body`, answer with `REPLY`.
    pub const CALL: u32 = 3;
    /// Bytes `[call id: 8][status: 1][error text]`: the result of a `CALL`.
    pub const REPLY: u32 = 4;
    /// `[count, frame...]`: frames the receiver owns, freed by the sender.
    pub const FRAME_RETURN: u32 = 5;
    /// `[cycles]`: how long to poll before halting (boot core only: a replicated setting).
    pub const SET_POLL_BUDGET: u32 = 6;
    /// `[n]`: the sender's n-th sequence message to this core (tests check the order).
    pub const SEQUENCE: u32 = 7;
    /// `[round]`: benchmark request; answer `BENCH_ACK [round]`.
    pub const BENCH_REQUEST: u32 = 8;
    /// `[round]`: benchmark acknowledgement.
    pub const BENCH_ACK: u32 = 9;
    /// `[round, source, limit]`: multicast-tree request to an aggregator; it forwards
    /// `BENCH_REQUEST` to its package's cores below `limit`, collects their acks, then
    /// sends `BENCH_ACK` to `source`.
    pub const MULTICAST: u32 = 10;
    /// `[job]`: start a user context (`pcore_run`, `program_run`); the receiver takes
    /// ownership of the boxed job at kernel address `job` and answers nothing (the pcore
    /// object carries the outcome).
    pub const START: u32 = 11;
    /// `[op, words...]`: the scheduler's traffic (a thread arriving, a wake-up, a load
    /// report, a pull); the user layer's handler decodes `op` (see `user::sched`).
    pub const SCHED: u32 = 12;
    /// `[id, start, pages, global, members]`: invalidate these TLB entries (Multikernel
    /// §4.7, a one-phase commit); acknowledge with `TLB_ACK`, or, when `members` (a core
    /// mask) is not empty, forward to them and acknowledge once all have (§5.1 multicast).
    pub const TLB_INVALIDATE: u32 = 13;
    /// `[id, acked, failed]`: the cores (masks) that invalidated for operation `id`, and
    /// those that faulted before they could.
    pub const TLB_ACK: u32 = 14;
    /// `[kind, op, words...]`: two-phase commit traffic (prepare, vote, decide, ack); the
    /// handler the boot installs (`twophase::on_message`) decodes it.
    pub const TWO_PHASE: u32 = 15;
}

/// Frames in one `FRAME_RETURN` message.
pub const FRAMES_PER_RETURN: usize = PAYLOAD_WORDS - 1;

/// The lowest address of the kernel half; pointers in `CALL` must lie above it.
const KERNEL_HALF: u64 = 0xffff_8000_0000_0000;

/// A decoded, validated request.
#[derive(Clone, Copy, Debug)]
pub enum Request {
    /// Echo `seq` back.
    Ping(u64),
    /// A ping's answer.
    Pong(u64),
    /// Run the work described at kernel address `body` (lent by the caller); answer
    /// under `id`.
    Call { id: u64, body: u64 },
    /// Frames to put back on this core's list.
    FrameReturn { frames: [u64; FRAMES_PER_RETURN], count: usize },
    /// New idle poll budget in TSC cycles.
    SetPollBudget(u64),
    /// Sequence number `n` from the sender.
    Sequence(u64),
    /// Benchmark request for `round`.
    Bench(u64),
    /// Benchmark ack for `round`.
    BenchAck(u64),
    /// Multicast request for `round` from `source`, to cores below `limit`.
    Multicast { round: u64, source: usize, limit: usize },
    /// Start the user context boxed at kernel address `job` (ownership passes).
    Start { job: u64 },
    /// Scheduler traffic, decoded by the scheduler.
    Sched([u64; PAYLOAD_WORDS]),
    /// Invalidate `pages` pages from `start` (0 pages: all; `global`: kernel entries too)
    /// for shootdown `id`; aggregate for the cores in the mask `members`.
    TlbInvalidate { id: u64, start: u64, pages: u64, global: bool, members: u64 },
    /// Cores (masks) that invalidated for shootdown `id`, and cores that faulted.
    TlbAck { id: u64, acked: u64, failed: u64 },
    /// Two-phase commit traffic, decoded by its handler.
    TwoPhase([u64; PAYLOAD_WORDS]),
}

/// Why a message was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rejection {
    /// The tag names no message kind.
    UnknownKind,
    /// The sender may not send this kind.
    NotAllowed,
    /// The payload does not make sense (bad count, pointer outside the kernel, bad bytes).
    Malformed,
    /// A two-phase vote or acknowledgement for an operation the receiver never coordinated.
    UnknownOperation,
}

/// Who may send a message kind: the boot core only for replicated settings, anyone else.
fn allowed(kind: u32, from: usize) -> bool {
    match kind {
        kind::SET_POLL_BUDGET => from == 0,
        _ => true,
    }
}

/// Decodes and validates a single-slot message from core `from`.
pub fn decode(from: usize, tag: u32, p: &[u64; PAYLOAD_WORDS]) -> Result<Request, Rejection> {
    let request = match tag {
        kind::PING => Request::Ping(p[0]),
        kind::PONG => Request::Pong(p[0]),
        kind::CALL => {
            if p[1] < KERNEL_HALF || !p[1].is_multiple_of(8) {
                return Err(Rejection::Malformed);
            }
            Request::Call { id: p[0], body: p[1] }
        }
        kind::START => {
            if p[0] < KERNEL_HALF || !p[0].is_multiple_of(8) {
                return Err(Rejection::Malformed);
            }
            Request::Start { job: p[0] }
        }
        kind::FRAME_RETURN => {
            let count = p[0] as usize;
            if count == 0 || count > FRAMES_PER_RETURN {
                return Err(Rejection::Malformed);
            }
            let mut frames = [0; FRAMES_PER_RETURN];
            frames.copy_from_slice(&p[1..]);
            Request::FrameReturn { frames, count }
        }
        kind::SET_POLL_BUDGET => Request::SetPollBudget(p[0]),
        kind::SEQUENCE => Request::Sequence(p[0]),
        kind::BENCH_REQUEST => Request::Bench(p[0]),
        kind::BENCH_ACK => Request::BenchAck(p[0]),
        kind::MULTICAST => {
            Request::Multicast { round: p[0], source: p[1] as usize, limit: p[2] as usize }
        }
        kind::SCHED => Request::Sched(*p),
        kind::TLB_INVALIDATE => {
            if p[3] > 1 {
                return Err(Rejection::Malformed);
            }
            Request::TlbInvalidate {
                id: p[0],
                start: p[1],
                pages: p[2],
                global: p[3] == 1,
                members: p[4],
            }
        }
        kind::TLB_ACK => Request::TlbAck { id: p[0], acked: p[1], failed: p[2] },
        kind::TWO_PHASE => Request::TwoPhase(*p),
        kind::REPLY => return Err(Rejection::Malformed), // replies come as bytes
        _ => return Err(Rejection::UnknownKind),
    };
    if !allowed(tag, from) {
        return Err(Rejection::NotAllowed);
    }
    Ok(request)
}

/// Encodes a request as (tag, payload).
pub fn encode(request: &Request) -> (u32, [u64; PAYLOAD_WORDS]) {
    let mut p = [0u64; PAYLOAD_WORDS];
    let tag = match *request {
        Request::Ping(seq) => {
            p[0] = seq;
            kind::PING
        }
        Request::Pong(seq) => {
            p[0] = seq;
            kind::PONG
        }
        Request::Call { id, body } => {
            p[..2].copy_from_slice(&[id, body]);
            kind::CALL
        }
        Request::FrameReturn { frames, count } => {
            p[0] = count as u64;
            p[1..].copy_from_slice(&frames);
            kind::FRAME_RETURN
        }
        Request::SetPollBudget(c) => {
            p[0] = c;
            kind::SET_POLL_BUDGET
        }
        Request::Sequence(n) => {
            p[0] = n;
            kind::SEQUENCE
        }
        Request::Bench(r) => {
            p[0] = r;
            kind::BENCH_REQUEST
        }
        Request::BenchAck(r) => {
            p[0] = r;
            kind::BENCH_ACK
        }
        Request::Multicast { round, source, limit } => {
            p[..3].copy_from_slice(&[round, source as u64, limit as u64]);
            kind::MULTICAST
        }
        Request::Start { job } => {
            p[0] = job;
            kind::START
        }
        Request::Sched(words) => {
            p = words;
            kind::SCHED
        }
        Request::TlbInvalidate { id, start, pages, global, members } => {
            p[..5].copy_from_slice(&[id, start, pages, global as u64, members]);
            kind::TLB_INVALIDATE
        }
        Request::TlbAck { id, acked, failed } => {
            p[..3].copy_from_slice(&[id, acked, failed]);
            kind::TLB_ACK
        }
        Request::TwoPhase(words) => {
            p = words;
            kind::TWO_PHASE
        }
    };
    (tag, p)
}

/// Most bytes of error text a reply carries.
pub const REPLY_TEXT_MAX: usize = 200;

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
