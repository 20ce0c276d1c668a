//! Remote calls (split phase): work lent to another core's monitor, its reply, its
//! cancellation, and `run_on`, work on chosen cores.

use super::idle::IDLE_WORK;
use super::poll;
use super::protocol::{decode_reply, encode_reply};
use super::protocol::{CallMessage, Lent, Protocol, Rejection};
use super::protocol::{REPLY, REPLY_TEXT_MAX};
use super::with;
use crate::arch::{cpu, timer};
use crate::percpu::{self, this_core, CoreState};
use crate::tlb;
use crate::transport::{self, send, send_bytes, PollThenBlock, SendError};
use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU8, Ordering};
use urpc::PAYLOAD_WORDS;

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

/// What the lent memory of a call holds: the work to run.
pub(super) struct CallBody<'a> {
    pub(super) work: &'a Work<'a>,
    /// [`CALL_PENDING`] until the target starts the work ([`CALL_RUNNING`]) or the caller
    /// gives up on it first ([`CALL_CANCELLED`]); whoever moves it first decides. The work
    /// (and what it borrows from the caller's stack) is run only if the target won, and a
    /// caller whose target won waits for the reply, however long: the caller never
    /// returns while the target may still run its work.
    pub(super) state: AtomicU8,
}

/// A call not started yet.
pub(super) const CALL_PENDING: u8 = 0;
/// A call the target is running.
pub(super) const CALL_RUNNING: u8 = 1;
/// A call its caller gave up on before it started: the target frees the body, unrun.
pub(super) const CALL_CANCELLED: u8 = 2;

/// A call this core made and waits for.
pub(super) struct PendingCall {
    pub(super) id: u64,
    pub(super) target: usize,
    pub(super) body: *const CallBody<'static>,
    pub(super) result: Option<JobResult>,
}

/// A remote call from core `from` (the handler table routes its tag here, to run between
/// threads): runs its work and replies.
pub fn on_call(from: usize, tag: u32, words: &[u64; PAYLOAD_WORDS]) -> Result<(), Rejection> {
    // SAFETY: the transport hands each message it reads from a channel here once, as the
    // sender's `encode` wrote it (channels are kernel memory only the kernel writes).
    let CallMessage::Call { id, body } = unsafe { CallMessage::decode(tag, words) }?;
    run_call(from, id, body.as_ptr());
    Ok(())
}

/// A reply to one of this core's calls (the handler table routes its tag here).
pub fn on_reply(from: usize, _tag: u32, bytes: &[u8]) -> Result<(), Rejection> {
    let (id, result) = decode_reply(bytes)?;
    complete_call(from, id, result);
    Ok(())
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
        transport::reject(from, Rejection::Malformed);
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
    let len = encode_reply(id, &result, &mut bytes);
    let _ = send_bytes(from, REPLY, &bytes[..len]);
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
    if let Err(unsent) = send(target, CallMessage::Call { id, body }) {
        forget_call(id, true);
        return Err(unsent.error);
    }
    Ok(CallId(id))
}

/// Drops a call's record; frees its body unless the target may still read it.
pub(super) fn forget_call(id: u64, free_body: bool) -> Option<PendingCall> {
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
///
/// Poll, then block (Multikernel §5.2; `transport::PollThenBlock`): past the poll budget
/// P the caller's core halts until the reply's wake-up IPI (or a tick), so a long call
/// leaves the host CPU to its target when the cores are vCPUs (a caller with interrupts
/// off gets them back off). While it waits outside a thread, the core runs its ready
/// threads.
pub fn wait(id: CallId, timeout_us: u64) -> Outcome {
    let mut patience = PollThenBlock::new();
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
        if !lent {
            patience.pause(&tlb::broadcast_pending);
        }
    }
}

/// Tries to cancel call `id` before its target starts it; `false` if the target is running
/// it already (then the caller must wait for its reply).
pub(super) fn cancel(id: u64) -> bool {
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
