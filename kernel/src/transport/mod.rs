//! The channel transport (Multikernel §3.3, §4.6): how a message gets from one core's
//! kernel to another's. One URPC channel per ordered pair of cores; sending waits for room
//! (serving this core's own channels meanwhile) and wakes a halted receiver with the one
//! IPI; reading takes each complete message, round-robin over the channels, and hands it
//! to the layer that handles its kind, by the one handler table.
//!
//! Where each part is: this file (each core's ends of its channels, reading and
//! dispatching), [`channels`] (the channel table), [`handlers`] (the table of kinds and
//! their handlers, installed once at boot), [`send`] (sending and the wake-up IPI),
//! [`wait`] (poll for P, then block: every wait for a message).
//!
//! This layer knows no message kind. Every layer that talks to other cores declares its
//! kinds beside its code (`monitor::protocol::MonitorMessage`, `tlb::TlbMessage`,
//! `twophase::TwoPhaseMessage`, `sched::message::SchedMessage`, `user::StartMessage`) and
//! sends them here; `boot::MESSAGE_HANDLERS` names the handler of each. So `tlb` (below
//! the heap) and `twophase` (above the monitor) sit side by side on this one transport.
//!
//! The transport state is core-local. Handlers run with it *released* (a message is taken
//! out, then dispatched), so a handler may itself send and poll.

pub mod channels;
mod handlers;
mod send;
mod wait;

pub use handlers::{check_table, install_handlers, Handle, Handler, When, TAGS};
pub use send::*;
pub use wait::{poll_budget, set_poll_budget, sleep_unless, wait_stats, PollThenBlock};

use crate::param::{CHANNEL_SLOTS, LONG_MESSAGE_BYTES};
use crate::percpu::{this_core, PerCoreState};
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::sync::atomic::Ordering;
use handlers::handler_for;
use protocol::Rejection;
use urpc::{Message, Reassembler, Receiver, Sender, PAYLOAD_WORDS};

/// Counters a test or the console can read (owner only).
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    /// Messages read from this core's channels (each fragment counts).
    pub received: u64,
    /// Messages rejected (unknown kind, not allowed, malformed).
    pub rejected: u64,
}

/// One core's ends of its channels.
struct Transport {
    senders: Vec<Option<Sender<'static, CHANNEL_SLOTS>>>,
    receivers: Vec<Option<Receiver<'static, CHANNEL_SLOTS>>>,
    reassemblers: Vec<Reassembler<'static>>,
    next_receiver: usize,
    stats: Stats,
    /// Messages handled `When::BetweenThreads` (a remote call, a program's start) that
    /// arrived while this core was inside a user context (its tick or a system call
    /// polled): served once the core is back in its idle loop or between threads.
    deferred: Vec<(usize, u32, [u64; PAYLOAD_WORDS])>,
}

/// A message taken out of a channel, ready to dispatch. Small, since every turn of every
/// poll moves one: a reassembled message's bytes are boxed (a remote call's reply; a
/// 256-byte array here once cost every poll its copy, `bench polling`).
enum Incoming {
    /// A fragment of a message still being reassembled.
    Partial,
    /// A one-slot message: its sender, tag and words.
    Words(usize, u32, [u64; PAYLOAD_WORDS]),
    /// A reassembled message: its sender, tag, and bytes.
    Bytes(usize, u32, Box<[u8]>),
    /// A message that could not be taken (its fragments do not fit together).
    Rejected(usize, Rejection),
}

/// Every core's transport (touched only by its own core; set up after its heap).
static TRANSPORTS: PerCoreState<Option<Transport>> = crate::per_core_state!(None);

/// Runs `f` on this core's transport.
fn with<R>(f: impl FnOnce(&mut Transport) -> R) -> R {
    TRANSPORTS.with(|t| f(t.as_mut().expect("transport not initialised on this core")))
}

/// Runs `f` on this core's transport if it is open: before that (early in a core's
/// start), a send finds no channel and a poll finds nothing.
fn with_open<R>(f: impl FnOnce(&mut Transport) -> R) -> Option<R> {
    TRANSPORTS.with(|t| t.as_mut().map(f))
}

/// Opens this core's ends of the channel table (each core, once, after its heap).
pub fn init_this_core(cores: usize) {
    let me = this_core().index;
    let mut t = Transport {
        senders: Vec::with_capacity(cores),
        receivers: Vec::with_capacity(cores),
        reassemblers: Vec::with_capacity(cores),
        next_receiver: 0,
        stats: Stats::default(),
        // Sized at once: a first deferred start must not count as a test's heap growth.
        deferred: Vec::with_capacity(4),
    };
    for other in 0..cores {
        t.senders.push(channels::get(me, other).filter(|_| other != me).map(Sender::new));
        t.receivers.push(channels::get(other, me).filter(|_| other != me).map(Receiver::new));
        let buffer: &'static mut [u8] =
            Box::leak(alloc::vec![0u8; LONG_MESSAGE_BYTES].into_boxed_slice());
        t.reassemblers.push(Reassembler::new(buffer));
    }
    TRANSPORTS.with(|slot| *slot = Some(t));
}

/// This core's counters.
pub fn stats() -> Stats {
    with(|t| t.stats)
}

impl Transport {
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
            return Some(self.reassemble(from, &msg));
        }
        None
    }

    /// A one-slot message as it is; a fragment joins the others from its sender.
    fn reassemble(&mut self, from: usize, msg: &Message) -> Incoming {
        if !msg.is_fragment() {
            return Incoming::Words(from, msg.tag, msg.payload);
        }
        match self.reassemblers[from].push(msg) {
            Ok(None) => Incoming::Partial,
            Ok(Some((tag, bytes))) => Incoming::Bytes(from, tag, bytes.into()),
            Err(_) => Incoming::Rejected(from, Rejection::Malformed),
        }
    }

    /// Whether any channel has a message waiting (headers only).
    fn has_messages(&self) -> bool {
        self.receivers.iter().flatten().any(|rx| rx.has_message())
    }
}

/// Handles every message waiting now in this core's channels, and (outside a user
/// context) the ones deferred until the core is free. Returns whether there was any
/// message.
pub fn poll() -> bool {
    let mut any = false;
    while let Some(incoming) = with_open(|t| t.take_message()).flatten() {
        any = true;
        dispatch(incoming);
    }
    if !this_core().in_context.load(Ordering::Acquire) {
        while let Some((from, tag, words)) =
            with_open(|t| (!t.deferred.is_empty()).then(|| t.deferred.remove(0))).flatten()
        {
            any = true;
            handle_words(handler_for(tag), from, tag, &words);
        }
    }
    any
}

/// Counts and reports a message this core will not act on.
pub fn reject(from: usize, why: Rejection) {
    with(|t| t.stats.rejected += 1);
    this_core().count_rejected();
    crate::println!(
        "transport: core {} rejected a message from core {}: {:?}",
        this_core().index,
        from,
        why
    );
}

fn dispatch(incoming: Incoming) {
    match incoming {
        Incoming::Partial => {}
        Incoming::Rejected(from, why) => reject(from, why),
        Incoming::Words(from, tag, words) => {
            let handler = handler_for(tag);
            // Work that needs this core (a remote call, a user context to start) cannot run
            // while a thread is on the CPU: keep it for the scheduler's loop (between
            // threads; the tick ends the thread's slice when such work waits) or the idle
            // loop.
            let needs_the_core = handler.is_some_and(|h| h.when == When::BetweenThreads);
            if needs_the_core && this_core().in_context.load(Ordering::Acquire) {
                with(|t| t.deferred.push((from, tag, words)));
                return;
            }
            handle_words(handler, from, tag, &words);
        }
        Incoming::Bytes(from, tag, bytes) => {
            let outcome = match handler_for(tag).map(|h| h.handle) {
                Some(Handle::Bytes(handle)) => handle(from, tag, &bytes),
                Some(Handle::Words(_)) => Err(Rejection::Malformed),
                None => Err(Rejection::UnknownKind),
            };
            if let Err(why) = outcome {
                reject(from, why);
            }
        }
    }
}

/// Hands a one-slot message to `handler`, the handler of its kind.
fn handle_words(handler: Option<&Handler>, from: usize, tag: u32, words: &[u64; PAYLOAD_WORDS]) {
    let outcome = match handler.map(|h| h.handle) {
        Some(Handle::Words(handle)) => handle(from, tag, words),
        Some(Handle::Bytes(_)) => Err(Rejection::Malformed),
        None => Err(Rejection::UnknownKind),
    };
    if let Err(why) = outcome {
        reject(from, why);
    }
}

/// Whether work that needs this core waits for its running thread to leave it (the
/// scheduler then ends the thread's slice at the next tick).
pub fn has_deferred() -> bool {
    with(|t| !t.deferred.is_empty())
}

/// Whether core `from`'s channel to this core has a message waiting (headers only). Once a
/// faulted core's channel says no, every message it ever sent here has been read.
pub fn has_messages_from(from: usize) -> bool {
    with(|t| t.receivers.get(from).and_then(Option::as_ref).is_some_and(|rx| rx.has_message()))
}

/// Whether any of this core's channels has a message waiting (headers only; none before
/// its channels are open).
pub fn has_messages() -> bool {
    with_open(|t| t.has_messages()).unwrap_or(false)
}
