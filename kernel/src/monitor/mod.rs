//! The monitor: the only code in a core's kernel that talks to other cores (Multikernel
//! §3.3, §4.4). It owns the core's ends of its URPC channels, one per ordered pair of
//! cores, and serves requests from them: ping, remote calls (split-phase, many in
//! flight), frames coming home to their owner, replicated settings, and benchmark traffic.
//!
//! The monitor state is core-local. Handlers run with it *released* (a message is taken
//! out, then dispatched), so a handler may itself send, call and poll.
//!
//! Idle (Multikernel §5.2): a core with nothing to do polls its channels for a budget P,
//! then marks itself asleep and halts; a sender that finds the receiver asleep sends a
//! wake-up IPI. P is the measured cost C of that IPI (SKB), which makes polling-then-halting
//! 2-competitive with the best choice in hindsight.

pub mod channels;
pub mod protocol;
mod step;

pub use step::step;

use crate::arch::{apic, cpu, timer, trap};
use crate::mem::frames;
use crate::param::{CHANNEL_SLOTS, DEFAULT_POLL_BUDGET, SEND_TIMEOUT_US};
use crate::percpu::{self, this_core, CoreState, PerCore, PerCoreState};
use crate::tlb;
use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{fence, AtomicU8, Ordering};
use protocol::{Lent, MonitorMessage, Protocol, Rejection, FRAMES_PER_RETURN};
use protocol::{REPLY, REPLY_TEXT_MAX};
use urpc::{Message, Reassembler, Receiver, Sender, PAYLOAD_WORDS};

/// Bytes a reassembled message may have.
const REASSEMBLY_BYTES: usize = 16 + REPLY_TEXT_MAX;

/// What a job returns: `Err` carries the reason it failed.
pub type JobResult = Result<(), String>;

/// Work that runs on a core: gets the core's index.
pub type Work<'a> = dyn Fn(usize) -> JobResult + Sync + 'a;

/// How a job ended on one core.
#[derive(Debug)]
pub enum Outcome {
    /// The work returned.
    Done(JobResult),
    /// The core took exception `vector` while running it (and is now stopped).
    Faulted(u8),
    /// No answer within the time limit.
    TimedOut,
    /// The core is not online.
    NotOnline,
}

impl Outcome {
    /// Whether the work ran and returned `Ok`.
    pub fn is_ok(&self) -> bool {
        matches!(self, Outcome::Done(Ok(())))
    }
}

/// Identifies a remote call in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallId(u64);

/// Why a send failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendError {
    /// No channel to that core (out of range, or itself).
    NoChannel,
    /// The channel stayed full for [`SEND_TIMEOUT_US`] (the receiver is not draining it).
    Timeout,
    /// The channel is full now (a send that does not wait).
    Full,
}

/// What the lent memory of a call holds: the work to run.
struct CallBody<'a> {
    work: &'a Work<'a>,
    /// [`CALL_PENDING`] until the target starts the work ([`CALL_RUNNING`]) or the caller
    /// gives up on it first ([`CALL_CANCELLED`]); whoever moves it first decides. The work
    /// (and what it borrows from the caller's stack) is run only if the target won, and a
    /// caller whose target won waits for the reply, however long: the caller never
    /// returns while the target may still run its work.
    state: AtomicU8,
}

/// A call not started yet.
const CALL_PENDING: u8 = 0;
/// A call the target is running.
const CALL_RUNNING: u8 = 1;
/// A call its caller gave up on before it started: the target frees the body, unrun.
const CALL_CANCELLED: u8 = 2;

/// A call this core made and waits for.
struct PendingCall {
    id: u64,
    target: usize,
    body: *const CallBody<'static>,
    result: Option<JobResult>,
}

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

/// When a layer's messages may be handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    /// As soon as they are read, even in a tick while a thread runs (they need no core of
    /// their own: a wake-up, a vote, a shootdown).
    AtOnce,
    /// Only between threads or when idle: they take the core (a program's start).
    BetweenThreads,
}

/// How a layer handles one of its messages: it decodes the words with its own enum
/// (`protocol::Protocol::decode`) and acts, or says why not.
pub type HandleFn =
    fn(from: usize, tag: u32, words: &[u64; PAYLOAD_WORDS]) -> Result<(), Rejection>;

/// One layer's messages in the handler table: its kinds (its enum's `KINDS`), the function
/// that handles them, and when.
pub struct Handler {
    /// The layer (for messages about the table).
    pub layer: &'static str,
    /// Its kinds: tags and names.
    pub kinds: &'static [(u32, &'static str)],
    /// Its handler.
    pub handle: HandleFn,
    /// When its messages may run.
    pub when: When,
}

/// The handler table: which layer handles each tag that is not the monitor's own. Written
/// once, at boot, before any other core runs (`install_handlers`).
static HANDLERS: spin::Once<&'static [Handler]> = spin::Once::new();

/// Installs the handler table (the boot core, once). Refused if two layers, or a layer and
/// the monitor, claim one tag: each kind of message has one handler.
pub fn install_handlers(table: &'static [Handler]) -> Result<(), String> {
    let mut claimed: Vec<(u32, &str)> =
        MonitorMessage::KINDS.iter().map(|&(t, _)| (t, "monitor")).collect();
    claimed.push((REPLY, "monitor"));
    for handler in table {
        for &(tag, name) in handler.kinds {
            if let Some((_, owner)) = claimed.iter().find(|(t, _)| *t == tag) {
                return Err(alloc::format!(
                    "{}::{name} takes tag {tag}, which {owner} has",
                    handler.layer
                ));
            }
            claimed.push((tag, handler.layer));
        }
    }
    HANDLERS.call_once(|| table);
    Ok(())
}

/// The layer that handles `tag`, if any.
fn handler_for(tag: u32) -> Option<&'static Handler> {
    HANDLERS.get()?.iter().find(|h| h.kinds.iter().any(|&(t, _)| t == tag))
}

/// A reply to one of this core's calls: recorded for [`wait`].
fn complete_call(from: usize, id: u64, result: JobResult) {
    let known = with(|m| match m.calls.iter_mut().find(|c| c.id == id && c.target == from) {
        Some(call) => {
            call.result = Some(result);
            true
        }
        None => false,
    });
    if !known {
        reject(from, Rejection::Malformed);
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

/// A remote call: runs the caller's work here and replies with its result.
fn run_call(from: usize, id: u64, raw: *mut CallBody<'static>) {
    // SAFETY: the caller lends this `CallBody` until it gets our reply, sees this core
    // faulted, or cancels it (then it is ours to free, below); `decode` checked the
    // pointer lies in the kernel half.
    let body = unsafe { &*raw };
    let claim = body.state.compare_exchange(
        CALL_PENDING,
        CALL_RUNNING,
        Ordering::AcqRel,
        Ordering::Acquire,
    );
    if claim.is_err() {
        // The caller gave up before we started: its work may borrow memory that is gone.
        // SAFETY: made by `Box::into_raw` in `call_async`; a cancelled caller forgot it.
        drop(unsafe { Box::from_raw(raw) });
        return;
    }
    let result = (body.work)(this_core().index);
    let mut bytes = [0u8; 9 + REPLY_TEXT_MAX];
    let len = protocol::encode_reply(id, &result, &mut bytes);
    let _ = send_bytes(from, REPLY, &bytes[..len]);
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

/// Work the idle loop runs before it polls: the scheduler runs this core's ready threads
/// (installed at boot by the user layer, which sits above this one). Returns whether it
/// ran any.
static IDLE_WORK: spin::Once<fn() -> bool> = spin::Once::new();

/// Installs the idle loop's work (once, at boot).
pub fn set_idle_work(work: fn() -> bool) {
    IDLE_WORK.call_once(|| work);
}

/// What the upper layers do before this core sleeps (let go of revocation log entries of
/// objects that are gone; terminate two-phase operations whose coordinator faulted;
/// installed at boot).
static IDLE_HOUSEKEEPING: spin::Once<fn()> = spin::Once::new();

/// Installs what the upper layers do before the core sleeps (once, at boot).
pub fn set_idle_housekeeping(work: fn()) {
    IDLE_HOUSEKEEPING.call_once(|| work);
}

/// Whether calls or starts wait for this core's running thread to leave it (the
/// scheduler then ends the thread's slice at the next tick).
pub fn has_deferred() -> bool {
    with(|m| !m.deferred.is_empty())
}

/// Sends core `core` the wake-up IPI (§5.2), the only interrupt one core sends another.
fn send_wake(core: &PerCore) {
    apic::send_ipi(&this_core().icr_destination, core.apic_id, trap::VECTOR_WAKE);
}

/// Interrupts core `to` with the wake-up vector whether or not it sleeps: a core running
/// a thread then reads its messages at once (the scheduler's pull of a running thread).
pub fn kick(to: usize) {
    if let Some(core) = percpu::core(to) {
        send_wake(core);
    }
}

/// Makes core `to` read its messages soon (after one was placed in its channel, or a
/// broadcast line names it): a halted core is woken, and a core running user code is
/// kicked (it would otherwise read them only at its next tick). A core in its kernel polls
/// anyway. Both are the same wake-up IPI (§5.2); nothing else rides on an interrupt.
pub fn notify(to: usize) {
    fence(Ordering::SeqCst);
    if let Some(core) = percpu::core(to) {
        if core.is_asleep() || core.in_context.load(Ordering::Acquire) {
            send_wake(core);
        }
    }
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

/// Sends a TLB shootdown's message (the `tlb` layer's transport, installed at boot).
pub fn send_tlb(to: usize, message: tlb::TlbMessage) -> bool {
    send(to, message).is_ok()
}

/// Wakes core `to` if it is asleep (after a message was placed in its channel).
fn wake_if_asleep(to: usize) {
    // Pairs with the fence in `idle_once`: either the receiver sees our message before it
    // halts, or we see its asleep flag and send the IPI.
    fence(Ordering::SeqCst);
    if let Some(core) = percpu::core(to) {
        if core.is_asleep() {
            send_wake(core);
        }
    }
}

/// Sends one message to core `to`, waiting (and serving our own channels) while its
/// channel is full.
pub fn send<M: Protocol>(to: usize, message: M) -> Result<(), Unsent<M>> {
    let (tag, payload) = message.encode();
    send_raw(to, tag, &payload).map_err(|error| Unsent::back(error, tag, &payload))
}

/// A message that could not be sent, and why: what it carried is the caller's again.
#[derive(Debug)]
pub struct Unsent<M> {
    /// Why it did not go.
    pub error: SendError,
    /// The message, with whatever it carries.
    pub message: M,
}

impl<M: Protocol> Unsent<M> {
    /// The message `encode` made `payload` of, taken back.
    fn back(error: SendError, tag: u32, payload: &[u64; PAYLOAD_WORDS]) -> Unsent<M> {
        // SAFETY: `payload` is what `encode` made of the message just now, and it was not
        // sent: this is the one decoding of it.
        let message = unsafe { M::decode(tag, payload) };
        match message {
            Ok(message) => Unsent { error, message },
            // `decode` reverses `encode` for every kind (the protocol crate's tests).
            Err(_) => unreachable!("a message that was just encoded decodes"),
        }
    }
}

impl<M> From<Unsent<M>> for SendError {
    fn from(unsent: Unsent<M>) -> SendError {
        unsent.error
    }
}

/// Sends a raw message (tests use it to send malformed ones).
pub fn send_raw(to: usize, tag: u32, payload: &[u64; PAYLOAD_WORDS]) -> Result<(), SendError> {
    send_with(to, |tx| tx.try_send(tag, payload).is_ok())
}

/// Sends bytes (fragmented as needed) to core `to`.
pub fn send_bytes(to: usize, tag: u32, bytes: &[u8]) -> Result<(), SendError> {
    send_with(to, |tx| tx.try_send_bytes(tag, bytes).is_ok())
}

/// Sends one message to core `to` if its channel has room now; `Full` otherwise (the
/// caller keeps what it wanted to send and tries again later).
pub fn try_send<M: Protocol>(to: usize, message: M) -> Result<(), Unsent<M>> {
    let (tag, payload) = message.encode();
    let sent = with(|m| match m.senders.get_mut(to).and_then(Option::as_mut) {
        Some(tx) => Ok(tx.try_send(tag, &payload).is_ok()),
        None => Err(SendError::NoChannel),
    });
    let error = match sent {
        Ok(true) => None,
        Ok(false) => Some(SendError::Full),
        Err(e) => Some(e),
    };
    if !matches!(error, Some(SendError::NoChannel)) {
        wake_if_asleep(to);
    }
    match error {
        None => Ok(()),
        Some(error) => Err(Unsent::back(error, tag, &payload)),
    }
}

fn send_with(
    to: usize,
    mut attempt: impl FnMut(&mut Sender<'static, CHANNEL_SLOTS>) -> bool,
) -> Result<(), SendError> {
    let start = cpu::rdtsc();
    loop {
        let sent = with(|m| match m.senders.get_mut(to).and_then(Option::as_mut) {
            Some(tx) => Ok(attempt(tx)),
            None => Err(SendError::NoChannel),
        })?;
        if sent {
            wake_if_asleep(to);
            return Ok(());
        }
        // Full: the receiver is behind. Serve our own channels meanwhile, so two cores
        // sending to each other cannot deadlock.
        wake_if_asleep(to);
        poll();
        if timer::us_since(start) > SEND_TIMEOUT_US {
            return Err(SendError::Timeout);
        }
        cpu::pause();
    }
}

/// Starts `work` on core `target` and returns at once (split phase). The caller must keep
/// `work` alive until [`wait`] returns for this call.
pub fn call_async(target: usize, work: &Work<'_>) -> Result<CallId, SendError> {
    // The pending table holds the body with its lifetime erased; `wait` frees it before
    // the caller's borrow of `work` ends (or leaks it if the target may still read it).
    let body: *const CallBody<'static> =
        Box::into_raw(Box::new(CallBody { work, state: AtomicU8::new(CALL_PENDING) })).cast();
    let id = with(|m| {
        let id = m.next_call;
        m.next_call += 1;
        m.calls.push(PendingCall { id, target, body, result: None });
        id
    });
    let Some(body) = Lent::new(body) else { return Err(SendError::NoChannel) };
    if let Err(unsent) = send(target, MonitorMessage::Call { id, body }) {
        forget_call(id, true);
        return Err(unsent.error);
    }
    Ok(CallId(id))
}

/// Drops a call's record; frees its body unless the target may still read it.
fn forget_call(id: u64, free_body: bool) -> Option<PendingCall> {
    let call = with(|m| m.calls.iter().position(|c| c.id == id).map(|i| m.calls.swap_remove(i)))?;
    if free_body {
        // SAFETY: made by `Box::into_raw` in `call_async`; the target is done with it.
        drop(unsafe { Box::from_raw(call.body as *mut CallBody<'static>) });
    }
    Some(call)
}

/// Waits for a call to finish, serving our own channels meanwhile. A call whose target
/// faulted ends `Faulted`; one the target has not started within `timeout_us` is
/// cancelled and ends `TimedOut` (the target will not run it). One the target has started
/// is waited for however long it takes: its work may borrow the caller's memory.
pub fn wait(id: CallId, timeout_us: u64) -> Outcome {
    wait_for_call(id, timeout_us, false)
}

/// [`wait`], but once the poll budget has passed the caller's core sleeps until a message
/// (or a tick) comes (Multikernel §5.2: poll for P, then block). For a long call whose
/// cost is what is measured (a core's compute speed): a spinning caller would take a
/// host CPU from the target when the cores are vCPUs. A caller with interrupts off (it
/// may hold what a handler takes) never sleeps: it waits as [`wait`] does.
pub fn wait_sleeping(id: CallId, timeout_us: u64) -> Outcome {
    wait_for_call(id, timeout_us, cpu::interrupts_enabled())
}

/// [`wait`], sleeping past the poll budget if `may_sleep`.
fn wait_for_call(id: CallId, timeout_us: u64, may_sleep: bool) -> Outcome {
    let start = cpu::rdtsc();
    loop {
        poll();
        // Kernel code waiting here (outside any thread) lends the core to its threads: a
        // thread placed on this core must not wait for the kernel's wait to end.
        let mut lent = false;
        if !this_core().in_context.load(Ordering::Acquire) {
            lent = IDLE_WORK.get().is_some_and(|work| work());
        }
        let (done, target) = with(|m| match m.calls.iter_mut().find(|c| c.id == id.0) {
            Some(c) => (c.result.take(), c.target),
            None => (Some(Err("unknown call".into())), usize::MAX),
        });
        if let Some(result) = done {
            forget_call(id.0, true);
            return Outcome::Done(result);
        }
        if let Some(vector) = percpu::core(target).and_then(|c| c.fault_vector()) {
            forget_call(id.0, false);
            return Outcome::Faulted(vector);
        }
        if timer::us_since(start) > timeout_us && cancel(id.0) {
            forget_call(id.0, false); // the target frees the body when it sees it
            with(|m| m.stats.calls_timed_out += 1);
            return Outcome::TimedOut;
        }
        if !may_sleep || lent || cpu::rdtsc() - start < poll_budget() {
            cpu::pause();
            continue;
        }
        // As in `idle_once`: the reply's sender sees the flag and wakes us, or we see its
        // message before halting.
        let core = this_core();
        cpu::disable_interrupts();
        core.set_asleep(true);
        fence(Ordering::SeqCst);
        if has_messages() {
            cpu::enable_interrupts();
        } else {
            cpu::enable_and_halt();
        }
        core.set_asleep(false);
    }
}

/// Tries to cancel call `id` before its target starts it; `false` if the target is running
/// it already (then the caller must wait for its reply).
fn cancel(id: u64) -> bool {
    let Some(body) = with(|m| m.calls.iter().find(|c| c.id == id).map(|c| c.body)) else {
        return true;
    };
    // SAFETY: the body lives until the call is forgotten (below, by our caller) and then
    // until the target frees it.
    let state = unsafe { &(*body).state };
    state
        .compare_exchange(CALL_PENDING, CALL_CANCELLED, Ordering::AcqRel, Ordering::Acquire)
        .is_ok()
}

/// Sends the frames this core freed for `owner` home (Multikernel: memory is given back
/// by message), in batches of [`FRAMES_PER_RETURN`]: the full batches, or (`all`) every
/// frame. A send never waits: if the owner's channel is full (the owner is behind), the
/// frames go back into the queue for the next try (the next poll, tick or idle pass), so
/// none is ever dropped and the freeing core never blocks on a busy owner. Only a faulted
/// owner's frames stay away, counted as stranded.
fn send_frames_home(owner: usize, all: bool) {
    let at_least = if all { 1 } else { FRAMES_PER_RETURN };
    let mut frames = [0u64; FRAMES_PER_RETURN];
    loop {
        let count = frames::take_for_home(owner, &mut frames, at_least);
        if count == 0 {
            break;
        }
        if percpu::core(owner).is_some_and(|c| c.state() == CoreState::Faulted) {
            with(|m| m.stats.frames_stranded += count as u64);
            continue;
        }
        if try_send(owner, MonitorMessage::FrameReturn { count, frames }).is_err() {
            frames::queue_for_home(owner, &frames[..count]);
            break;
        }
    }
}

/// Sends every frame this core freed for another core home now (those whose send fails
/// stay queued).
pub fn flush_frame_returns() {
    for owner in 0..percpu::core_count() {
        send_frames_home(owner, true);
    }
}

/// Sends the full batches of freed frames home (from every poll: an owner gets its frames
/// back while the freeing core is busy, not only when it goes idle).
fn send_full_frame_batches() {
    if frames::queued_for_home() < FRAMES_PER_RETURN {
        return;
    }
    for owner in 0..percpu::core_count() {
        send_frames_home(owner, false);
    }
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

/// Polls for up to the poll budget; if nothing came, sends partial frame batches home,
/// marks the core asleep and halts until an interrupt.
pub fn idle_once(core: &PerCore) {
    if IDLE_WORK.get().is_some_and(|work| work()) {
        return;
    }
    let start = cpu::rdtsc();
    let budget = poll_budget();
    while cpu::rdtsc() - start < budget {
        if poll() {
            return;
        }
        cpu::pause();
    }
    flush_frame_returns();
    // Before sleeping, the upper layers' housekeeping (what they hold lazily goes,
    // operations orphaned by a faulted core end), then the heap's free top goes back to
    // the frame list.
    if let Some(work) = IDLE_HOUSEKEEPING.get() {
        work();
    }
    crate::mem::heap::trim_this_core();
    cpu::disable_interrupts();
    core.set_asleep(true);
    fence(Ordering::SeqCst);
    if with(|m| m.has_messages()) || crate::tlb::broadcast_pending() {
        core.set_asleep(false);
        cpu::enable_interrupts();
        return;
    }
    cpu::enable_and_halt();
    core.set_asleep(false);
    core.count_wakeup();
}

/// An application processor's life after start-up: serve messages, halt when idle.
pub fn idle_loop(core: &'static PerCore) -> ! {
    loop {
        idle_once(core);
    }
}

/// Runs `work` on each core in `cores` at once (inline on the calling core if listed) and
/// waits up to `timeout_us` for each. Outcomes are in the order of `cores`.
pub fn run_on(cores: &[usize], timeout_us: u64, work: &Work<'_>) -> Vec<Outcome> {
    let me = this_core().index;
    let mut calls = Vec::with_capacity(cores.len());
    for &c in cores {
        let online = percpu::core(c).is_some_and(|c| c.state() == CoreState::Online);
        calls.push(match c {
            _ if c == me => None,
            _ if !online => Some(Err(SendError::NoChannel)),
            _ => Some(call_async(c, work)),
        });
    }
    let local = cores.contains(&me).then(|| work(me));
    let mut local = local;
    calls
        .into_iter()
        .map(|call| match call {
            None => Outcome::Done(local.take().unwrap_or(Ok(()))),
            Some(Err(_)) => Outcome::NotOnline,
            Some(Ok(id)) => wait(id, timeout_us),
        })
        .collect()
}
