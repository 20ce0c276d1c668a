//! Sending: a typed message into a channel (waiting for room, or not), and the wake-up
//! IPI that makes a halted or busy receiver read it (Multikernel §5.2).

use super::poll;
use super::with_open;
use crate::arch::{apic, cpu, timer, trap};
use crate::param::{CHANNEL_SLOTS, SEND_TIMEOUT_US};
use crate::percpu::{self, this_core, PerCore};
use core::sync::atomic::{fence, Ordering};
use protocol::Protocol;
use urpc::{Sender, PAYLOAD_WORDS};

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

/// Wakes core `to` if it is asleep (after a message was placed in its channel).
fn wake_if_asleep(to: usize) {
    // Pairs with the fence in `monitor::sleep`: either the receiver sees our message before it
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
    let sent = with_open(|m| match m.senders.get_mut(to).and_then(Option::as_mut) {
        Some(tx) => Ok(tx.try_send(tag, &payload).is_ok()),
        None => Err(SendError::NoChannel),
    })
    .unwrap_or(Err(SendError::NoChannel));
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
        let sent = with_open(|m| match m.senders.get_mut(to).and_then(Option::as_mut) {
            Some(tx) => Ok(attempt(tx)),
            None => Err(SendError::NoChannel),
        })
        .unwrap_or(Err(SendError::NoChannel))?;
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
