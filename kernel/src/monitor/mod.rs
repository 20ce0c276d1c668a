//! The monitor: the only code in a core's kernel that talks to other cores (Multikernel
//! §3.3, §4.4). It owns the core's ends of its URPC channels, one per ordered pair of
//! cores, and serves requests from them: ping, remote calls (split-phase, many in
//! flight), frames coming home to their owner, replicated settings, and benchmark traffic.
//!
//! Where each part is: this file (the monitor's state, reading its channels, serving its
//! own messages, dispatching the rest), [`handlers`] (the table that routes other layers'
//! tags), [`send`] (sending and the wake-up IPI), [`call`] (remote calls), [`frame_return`]
//! (freed frames going home), [`idle`] (poll, then halt), [`protocol`] (its own message
//! kinds), [`channels`] (the channel table), [`step`] (a long system call's service point).
//!
//! The monitor state is core-local. Handlers run with it *released* (a message is taken
//! out, then dispatched), so a handler may itself send, call and poll.
//!
//! Idle (Multikernel §5.2): a core with nothing to do polls its channels for a budget P,
//! then marks itself asleep and halts; a sender that finds the receiver asleep sends a
//! wake-up IPI. P is the measured cost C of that IPI (SKB), which makes polling-then-halting
//! 2-competitive with the best choice in hindsight.

mod call;
pub mod channels;
mod frame_return;
mod handlers;
mod idle;
pub mod protocol;
mod send;
mod step;

pub use call::*;
pub use frame_return::flush_frame_returns;
pub use handlers::{install_handlers, Handler, When};
pub use idle::*;
pub use send::*;

pub use step::step;

use crate::arch::{cpu, timer};
use crate::mem::frames;
use crate::param::{CHANNEL_SLOTS, DEFAULT_POLL_BUDGET};
use crate::percpu::{self, this_core, CoreState, PerCoreState};
use crate::tlb;
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::sync::atomic::Ordering;
use frame_return::send_full_frame_batches;
use handlers::handler_for;
use protocol::{MonitorMessage, Protocol, Rejection};
use protocol::{REPLY, REPLY_TEXT_MAX};
use urpc::{Message, Reassembler, Receiver, Sender, PAYLOAD_WORDS};

/// Bytes a reassembled message may have.
const REASSEMBLY_BYTES: usize = 16 + REPLY_TEXT_MAX;

/// A multicast this core aggregates: acks still expected before acking `source`.
struct Aggregation {
    round: u64,
    source: usize,
    remaining: usize,
}

/// Counters a test or the console can read (owner only).
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    /// Messages handled.
    pub received: u64,
    /// Messages rejected (unknown kind, not allowed, malformed).
    pub rejected: u64,
    /// `SEQUENCE` messages that arrived out of order.
    pub sequence_errors: u64,
    /// `SEQUENCE` messages received in order, from all cores.
    pub sequence_ok: u64,
    /// `BENCH_ACK`s received (not consumed by an aggregation).
    pub bench_acks: u64,
    /// Frames returned to this core by others.
    pub frames_returned: u64,
    /// Frames freed here that could not go home because their owner has faulted (its
    /// memory is lost with it); counted so the loss is visible.
    pub frames_stranded: u64,
    /// Calls this core made that got no answer within their time limit (`wait`'s
    /// `TimedOut`): how `kernel_command` tells a line that timed out from one refused.
    pub calls_timed_out: u64,
}

/// One core's monitor state.
pub struct Monitor {
    senders: Vec<Option<Sender<'static, CHANNEL_SLOTS>>>,
    receivers: Vec<Option<Receiver<'static, CHANNEL_SLOTS>>>,
    reassemblers: Vec<Reassembler<'static>>,
    next_receiver: usize,
    next_call: u64,
    calls: Vec<PendingCall>,
    sequence_next: Vec<u64>,
    /// Highest pong sequence number seen from each core.
    pongs: Vec<u64>,
    aggregations: Vec<Aggregation>,
    poll_budget: u64,
    stats: Stats,
    /// Calls and messages handled `When::BetweenThreads` (a program's start) that arrived
    /// while this core was inside a user context (its tick or a system call polled):
    /// served once the core is back in its idle loop or between threads.
    deferred: Vec<Incoming>,
}

/// A message taken out of a channel, ready to dispatch.
enum Incoming {
    /// A fragment of a message still being reassembled.
    Partial,
    /// One of the monitor's own messages.
    Request(usize, MonitorMessage),
    /// A message of another layer: its tag and words, for that layer's handler.
    Layer(usize, u32, [u64; PAYLOAD_WORDS]),
    Reply(usize, u64, JobResult),
    Rejected(usize, Rejection),
}

/// Builds this core's monitor from the channel table (each core, once, after its heap).
pub fn init_this_core(cores: usize) {
    let me = this_core().index;
    let mut m = Monitor {
        senders: Vec::with_capacity(cores),
        receivers: Vec::with_capacity(cores),
        reassemblers: Vec::with_capacity(cores),
        next_receiver: 0,
        next_call: 1,
        // Sized at once, as `deferred`: a core's first call (or its most in flight so far)
        // must not count as a test's heap growth. In flight at most: one to every other
        // core (`smp::run_on`), and as many again from a call it serves meanwhile.
        calls: Vec::with_capacity(2 * cores),
        sequence_next: alloc::vec![0; cores],
        pongs: alloc::vec![0; cores],
        aggregations: Vec::new(),
        poll_budget: DEFAULT_POLL_BUDGET,
        stats: Stats::default(),
        // Sized at once: a first deferred start must not count as a test's heap growth.
        deferred: Vec::with_capacity(4),
    };
    for other in 0..cores {
        m.senders.push(channels::get(me, other).filter(|_| other != me).map(Sender::new));
        m.receivers.push(channels::get(other, me).filter(|_| other != me).map(Receiver::new));
        let buffer: &'static mut [u8] =
            Box::leak(alloc::vec![0u8; REASSEMBLY_BYTES].into_boxed_slice());
        m.reassemblers.push(Reassembler::new(buffer));
    }
    MONITORS.with(|slot| *slot = Some(m));
    tlb::init_this_core();
}

/// Every core's monitor (touched only by its own core; set up after its heap).
static MONITORS: PerCoreState<Option<Monitor>> = crate::per_core_state!(None);

/// Runs `f` on this core's monitor.
fn with<R>(f: impl FnOnce(&mut Monitor) -> R) -> R {
    MONITORS.with(|m| f(m.as_mut().expect("monitor not initialised on this core")))
}

/// This core's counters.
pub fn stats() -> Stats {
    with(|m| m.stats)
}

/// `BENCH_ACK`s received so far (benchmarks count acks against this).
pub fn bench_acks() -> u64 {
    with(|m| m.stats.bench_acks)
}

impl Monitor {
    /// Takes the next complete message from any channel, round-robin.
    fn take_message(&mut self) -> Option<Incoming> {
        let n = self.receivers.len();
        for step in 0..n {
            let from = (self.next_receiver + step) % n;
            let Some(rx) = self.receivers[from].as_mut() else {
                continue;
            };
            let Some(msg) = rx.try_recv() else { continue };
            self.next_receiver = (from + 1) % n;
            self.stats.received += 1;
            return Some(self.decode(from, &msg));
        }
        None
    }

    fn decode(&mut self, from: usize, msg: &Message) -> Incoming {
        if msg.is_fragment() {
            return match self.reassemblers[from].push(msg) {
                Ok(None) => Incoming::Partial,
                Ok(Some((REPLY, bytes))) => match protocol::decode_reply(bytes) {
                    Ok((id, result)) => Incoming::Reply(from, id, result),
                    Err(r) => Incoming::Rejected(from, r),
                },
                Ok(Some(_)) => Incoming::Rejected(from, Rejection::UnknownKind),
                Err(_) => Incoming::Rejected(from, Rejection::Malformed),
            };
        }
        if !MonitorMessage::has_kind(msg.tag) {
            return Incoming::Layer(from, msg.tag, msg.payload);
        }
        match protocol::decode(from, msg.tag, &msg.payload) {
            Ok(request) => Incoming::Request(from, request),
            Err(r) => Incoming::Rejected(from, r),
        }
    }

    /// Whether any channel has a message waiting (headers only).
    fn has_messages(&self) -> bool {
        self.receivers.iter().flatten().any(|rx| rx.has_message())
    }
}

/// Handles every message waiting now (and the TLB broadcasts that name this core), and
/// sends full batches of freed frames home. Returns whether there was any of either.
pub fn poll() -> bool {
    send_full_frame_batches();
    // A broadcast carried out is work as a message is: the idle loop polls on afresh.
    let mut any = crate::tlb::poll_broadcasts();
    while let Some(incoming) = with(|m| m.take_message()) {
        any = true;
        dispatch(incoming);
    }
    if !this_core().in_context.load(Ordering::Acquire) {
        while let Some(incoming) = with(|m| (!m.deferred.is_empty()).then(|| m.deferred.remove(0)))
        {
            any = true;
            dispatch(incoming);
        }
    }
    any
}

/// From the timer tick while a user context runs on this core: serves the messages that
/// need no core of their own (frame returns, pings, acks) and sends home the frames freed
/// here, so other cores never wait on a busy one; calls and starts wait (see `dispatch`).
pub fn poll_at_tick() {
    poll();
    flush_frame_returns();
}

fn reject(from: usize, why: Rejection) {
    with(|m| m.stats.rejected += 1);
    percpu::this_core().count_rejected();
    crate::println!(
        "monitor: core {} rejected a message from core {}: {:?}",
        this_core().index,
        from,
        why
    );
}

fn dispatch(incoming: Incoming) {
    // Work that needs this core (a remote call, a user context to start) cannot run while
    // a thread is on the CPU: keep it for the scheduler's loop (between threads; the tick
    // ends the thread's slice when such work waits) or the idle loop.
    let needs_the_core = match &incoming {
        Incoming::Request(_, MonitorMessage::Call { .. }) => true,
        Incoming::Layer(_, tag, _) => {
            handler_for(*tag).is_some_and(|h| h.when == When::BetweenThreads)
        }
        _ => false,
    };
    if needs_the_core && this_core().in_context.load(Ordering::Acquire) {
        with(|m| m.deferred.push(incoming));
        return;
    }
    match incoming {
        Incoming::Partial => {}
        Incoming::Rejected(from, why) => reject(from, why),
        Incoming::Reply(from, id, result) => complete_call(from, id, result),
        Incoming::Request(from, request) => serve(from, request),
        Incoming::Layer(from, tag, words) => match handler_for(tag) {
            Some(handler) => {
                if let Err(why) = (handler.handle)(from, tag, &words) {
                    reject(from, why);
                }
            }
            None => reject(from, Rejection::UnknownKind),
        },
    }
}

/// Serves one request from core `from`.
fn serve(from: usize, request: MonitorMessage) {
    match request {
        MonitorMessage::Ping { seq } => {
            let _ = send(from, MonitorMessage::Pong { seq });
        }
        MonitorMessage::Pong { seq } => with(|m| m.pongs[from] = m.pongs[from].max(seq)),
        MonitorMessage::Call { id, body } => run_call(from, id, body.as_ptr()),
        MonitorMessage::FrameReturn { frames: list, count } => {
            let mut forwarded = false;
            for &pa in &list[..count] {
                match frames::take_back(pa) {
                    Ok(sent_on) => {
                        forwarded |= sent_on;
                        with(|m| m.stats.frames_returned += 1);
                    }
                    Err(_) => reject(from, Rejection::Malformed),
                }
            }
            // Frames of a block retyped away go on to their owner now, not in a batch.
            if forwarded {
                flush_frame_returns();
            }
        }
        MonitorMessage::SetPollBudget { cycles } => with(|m| m.poll_budget = cycles.max(1000)),
        MonitorMessage::Sequence { n } => with(|m| {
            // 0 starts a new series (each test run starts again from 0).
            if n == m.sequence_next[from] || n == 0 {
                m.stats.sequence_ok += 1;
            } else {
                m.stats.sequence_errors += 1;
            }
            m.sequence_next[from] = n + 1;
        }),
        MonitorMessage::Bench { round } => {
            let _ = send(from, MonitorMessage::BenchAck { round });
        }
        MonitorMessage::BenchAck { round } => bench_ack(round),
        MonitorMessage::Multicast { round, source, limit } => {
            forward_multicast(round, source, limit)
        }
    }
}

/// A benchmark ack: counted, or one of a multicast this core aggregates (the last one
/// acks the source).
fn bench_ack(round: u64) {
    let finished = with(|m| {
        let Some(i) = m.aggregations.iter().position(|a| a.round == round) else {
            m.stats.bench_acks += 1;
            return None;
        };
        m.aggregations[i].remaining -= 1;
        (m.aggregations[i].remaining == 0).then(|| m.aggregations.swap_remove(i).source)
    });
    if let Some(source) = finished {
        let _ = send(source, MonitorMessage::BenchAck { round });
    }
}

/// A multicast this core aggregates for `source` (Multikernel §5.1): forwards it within
/// its own package and acks the source once all have acked (at once if alone).
fn forward_multicast(round: u64, source: usize, limit: usize) {
    let members = package_members(source, limit);
    if members.is_empty() {
        let _ = send(source, MonitorMessage::BenchAck { round });
        return;
    }
    with(|m| m.aggregations.push(Aggregation { round, source, remaining: members.len() }));
    for member in members {
        let _ = send(member, MonitorMessage::Bench { round });
    }
}

/// The other online cores of this core's package below `limit`, but not `source`: where
/// a multicast aggregator forwards (Multikernel §5.1; the source chose this core as its
/// package's aggregator from the SKB's tree).
fn package_members(source: usize, limit: usize) -> Vec<usize> {
    let me = this_core();
    percpu::all_cores()
        .filter(|c| c.location.package == me.location.package && c.state() == CoreState::Online)
        .map(|c| c.index)
        .filter(|&c| c != me.index && c != source && c < limit)
        .collect()
}

/// Whether calls or starts wait for this core's running thread to leave it (the
/// scheduler then ends the thread's slice at the next tick).
pub fn has_deferred() -> bool {
    with(|m| !m.deferred.is_empty())
}

/// Whether core `from`'s channel to this core has a message waiting (headers only). Once a
/// faulted core's channel says no, every message it ever sent here has been read.
pub fn has_messages_from(from: usize) -> bool {
    with(|m| m.receivers.get(from).and_then(Option::as_ref).is_some_and(|rx| rx.has_message()))
}

/// Whether this core has a message waiting (headers only) or a broadcast to read.
pub fn has_messages() -> bool {
    with(|m| m.has_messages()) || crate::tlb::broadcast_pending()
}

/// Pings core `to` and waits for its pong. Returns the round-trip time in TSC cycles.
pub fn ping(to: usize, timeout_us: u64) -> Option<u64> {
    let seq = with(|m| m.pongs.get(to).copied())? + 1;
    let start = cpu::rdtsc();
    send(to, MonitorMessage::Ping { seq }).ok()?;
    loop {
        poll();
        if with(|m| m.pongs[to] >= seq) {
            return Some(cpu::rdtsc() - start);
        }
        if timer::us_since(start) > timeout_us {
            return None;
        }
        cpu::pause();
    }
}

/// Sends `request` to every other online core, one channel each. Returns how many cores
/// it reached; the first failure ends the broadcast.
pub fn broadcast(message: MonitorMessage) -> Result<usize, SendError> {
    let me = this_core().index;
    let mut reached = 0;
    for c in 0..percpu::core_count() {
        if c != me && percpu::core(c).is_some_and(|c| c.state() == CoreState::Online) {
            send(c, message)?;
            reached += 1;
        }
    }
    Ok(reached)
}

/// Sets the idle poll budget here and, by broadcast, on every other core (boot core: the
/// other cores accept this replicated setting only from it).
pub fn broadcast_poll_budget(cycles: u64) {
    with(|m| m.poll_budget = cycles.max(1000));
    let _ = broadcast(MonitorMessage::SetPollBudget { cycles });
}

/// This core's poll budget (cycles of polling before halting).
pub fn poll_budget() -> u64 {
    with(|m| m.poll_budget)
}
