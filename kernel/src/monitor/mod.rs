//! The monitor (Multikernel §3.3, §4.4): each core's kernel agent for the rest of the
//! machine. It sends and handles its own kinds of message over the channel transport
//! (`crate::transport`), beside the other layers' kinds: ping, remote calls (split-phase,
//! many in flight), frames coming home to their owner, replicated settings, and
//! benchmark traffic; and it keeps the core's poll budget P.
//!
//! Where each part is: this file (the monitor's state, serving its own messages, `poll`),
//! [`call`] (remote calls and their replies), [`frame_return`] (freed frames going home),
//! [`idle`] (poll for P, then halt), [`protocol`] (its own message kinds), [`step`] (a
//! long system call's service point).
//!
//! The monitor state is core-local. Handlers run with it *released* (the transport takes
//! a message out, then dispatches it), so a handler may itself send, call and poll.
//!
//! Idle (Multikernel §5.2): a core with nothing to do polls its channels for a budget P,
//! then marks itself asleep and halts; a sender that finds the receiver asleep sends a
//! wake-up IPI. P is the measured cost C of that IPI (SKB), which makes polling-then-halting
//! 2-competitive with the best choice in hindsight.

mod call;
mod frame_return;
mod idle;
pub mod protocol;
mod step;

pub use call::*;
pub use frame_return::flush_frame_returns;
pub use idle::*;

pub use step::step;

use crate::arch::{cpu, timer};
use crate::mem::frames;
use crate::param::DEFAULT_POLL_BUDGET;
use crate::percpu::{self, this_core, CoreState, PerCoreState};
use crate::tlb;
use crate::transport::{self, send, SendError};
use alloc::vec::Vec;
use frame_return::send_full_frame_batches;
use protocol::{MonitorMessage, Rejection};
use urpc::PAYLOAD_WORDS;

/// A multicast this core aggregates: acks still expected before acking `source`.
struct Aggregation {
    round: u64,
    source: usize,
    remaining: usize,
}

/// Counters a test or the console can read (owner only).
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
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
    next_call: u64,
    calls: Vec<PendingCall>,
    sequence_next: Vec<u64>,
    /// Highest pong sequence number seen from each core.
    pongs: Vec<u64>,
    aggregations: Vec<Aggregation>,
    poll_budget: u64,
    stats: Stats,
}

/// Builds this core's monitor (each core, once, after its heap), and opens its ends of
/// the channels.
pub fn init_this_core(cores: usize) {
    transport::init_this_core(cores);
    let m = Monitor {
        next_call: 1,
        // Sized at once: a core's first call (or its most in flight so far) must not count
        // as a test's heap growth. In flight at most: one to every other core
        // (`smp::run_on`), and as many again from a call it serves meanwhile.
        calls: Vec::with_capacity(2 * cores),
        sequence_next: alloc::vec![0; cores],
        pongs: alloc::vec![0; cores],
        aggregations: Vec::new(),
        poll_budget: DEFAULT_POLL_BUDGET,
        stats: Stats::default(),
    };
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

/// Serves this core whole once: sends full batches of freed frames home, carries out the
/// TLB broadcasts that name it, and handles every message waiting in its channels.
/// Returns whether there was any of these.
pub fn poll() -> bool {
    send_full_frame_batches();
    // A broadcast carried out is work as a message is: the idle loop polls on afresh.
    let broadcasts = tlb::poll_broadcasts();
    transport::poll() | broadcasts
}

/// From the timer tick while a user context runs on this core: serves the messages that
/// need no core of their own (frame returns, pings, acks) and sends home the frames freed
/// here, so other cores never wait on a busy one; calls and starts wait (see
/// `transport::When`).
pub fn poll_at_tick() {
    poll();
    flush_frame_returns();
}

/// One of the monitor's own messages from core `from` (the handler table routes their
/// tags here): decoded, checked, served.
pub fn on_message(from: usize, tag: u32, words: &[u64; PAYLOAD_WORDS]) -> Result<(), Rejection> {
    serve(from, protocol::decode(from, tag, words)?);
    Ok(())
}

/// Serves one request from core `from`.
fn serve(from: usize, request: MonitorMessage) {
    match request {
        MonitorMessage::Ping { seq } => {
            let _ = send(from, MonitorMessage::Pong { seq });
        }
        MonitorMessage::Pong { seq } => with(|m| m.pongs[from] = m.pongs[from].max(seq)),
        MonitorMessage::FrameReturn { frames: list, count } => {
            let mut forwarded = false;
            for &pa in &list[..count] {
                match frames::take_back(pa) {
                    Ok(sent_on) => {
                        forwarded |= sent_on;
                        with(|m| m.stats.frames_returned += 1);
                    }
                    Err(_) => transport::reject(from, Rejection::Malformed),
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

/// Whether this core has a message waiting (headers only) or a broadcast to read.
pub fn has_messages() -> bool {
    transport::has_messages() || tlb::broadcast_pending()
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
