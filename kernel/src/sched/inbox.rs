//! The scheduler's messages: the monitor hands every `SCHED` message to [`on_message`],
//! which only files it in this core's [`Inbox`]; the scheduler reads the inbox between
//! threads and at every tick ([`read_inbox`]). Wake-ups, joins and reaps of parked
//! threads are here too.

use super::message::SchedMessage;
use super::running::{OnWake, Running};
use super::{Scheduler, SLEEP_SPACE};
use crate::arch::cpu;
use crate::corey::{self, Ptr};
use crate::monitor::{self, protocol::Protocol, protocol::Rejection};
use crate::percpu::{self, this_core, PerCoreState};
use abi::wait_result;
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::sync::atomic::Ordering;
use sched::WaitKey;
use urpc::PAYLOAD_WORDS;

/// Messages filed for the scheduler, read between threads and at every tick. Load
/// reports and pulls keep the latest per sender in place (no allocation: they come and
/// go while no thread exists).
// A thread is one box that moves between cores by pointer; the inbox keeps it boxed.
#[allow(clippy::vec_box)]
pub(super) struct Inbox {
    pub(super) arrivals: Vec<Box<Running>>,
    pub(super) wakes: Vec<(WaitKey, u64, u64)>,
    pub(super) joined: Vec<u64>,
    /// Per reporting core: its latest load report (length, seq, online), and whether this
    /// core is to pass it on within its package.
    pub(super) loads: [Option<(u64, u64, bool, bool)>; percpu::MAX_CORES],
    /// Per sender: its pull, and whether it may take the running thread.
    pub(super) pulls: [Option<bool>; percpu::MAX_CORES],
    /// A program was stopped: look for its threads here.
    pub(super) reap: bool,
    /// Whether anything above is filed.
    pub(super) any: bool,
}

impl Inbox {
    pub(super) const fn new() -> Inbox {
        Inbox {
            arrivals: Vec::new(),
            wakes: Vec::new(),
            joined: Vec::new(),
            loads: [None; percpu::MAX_CORES],
            pulls: [None; percpu::MAX_CORES],
            reap: false,
            any: false,
        }
    }
}

pub(super) static INBOX: PerCoreState<Inbox> = crate::per_core_state!(Inbox::new());

/// A scheduler message from core `from` (the monitor's handler table routes its tags
/// here, in any context): decoded, then filed only.
pub fn on_message(from: usize, tag: u32, words: &[u64; PAYLOAD_WORDS]) -> Result<(), Rejection> {
    if from >= percpu::MAX_CORES {
        return Err(Rejection::NotAllowed);
    }
    // SAFETY: the monitor hands over each message it read once, as the sender's `encode`
    // wrote it: an `Arrive`'s thread was given up by its sender (`send_thread`).
    let message = unsafe { SchedMessage::decode(tag, words) }?;
    INBOX.with(|inbox| {
        inbox.any = true;
        match message {
            SchedMessage::Arrive { thread } => inbox.arrivals.push(thread.into_box()),
            SchedMessage::Wake { space, addr, n, cores } => {
                inbox.wakes.push(((space, addr), n, cores))
            }
            SchedMessage::Joined { uid } => inbox.joined.push(uid),
            SchedMessage::Load { length, seq, online, origin, forward } => {
                if origin >= percpu::MAX_CORES {
                    return Err(Rejection::Malformed);
                }
                if inbox.loads[origin].is_none_or(|(_, newest, _, _)| newest < seq) {
                    inbox.loads[origin] = Some((length, seq, online, forward));
                }
            }
            SchedMessage::Pull { may_take_running } => inbox.pulls[from] = Some(may_take_running),
            SchedMessage::NoneToGive {} => {}
            SchedMessage::Reap {} => inbox.reap = true,
        }
        Ok(())
    })
}

/// Takes out every thread parked or queued here whose program was stopped.
// Threads stay in their boxes: each moves between queues and cores by pointer.
#[allow(clippy::vec_box)]
pub(super) fn take_stopped(s: &mut Scheduler) -> Vec<Box<Running>> {
    let mut stopped = Vec::new();
    while let Some(t) = s.waits.remove(|t| t.program.stopping().is_some()) {
        stopped.push(t);
    }
    while let Some(t) = s.queue.remove(|t| t.program.stopping().is_some()) {
        stopped.push(t);
    }
    stopped
}

/// Asks `cores` (bit i: core i; this one included) to end the threads of stopped
/// programs they hold off the CPU (`REAP`). This core does it at its next housekeeping.
pub fn reap_on(cores: u64) {
    let me = this_core().index;
    if me < 64 && cores & (1 << me) != 0 {
        INBOX.with(|i| {
            i.reap = true;
            i.any = true;
        });
    }
    for c in crate::smp::online_cores() {
        if c != me && c < 64 && cores & (1 << c) != 0 {
            let _ = monitor::send(c, SchedMessage::Reap {});
        }
    }
}

/// The lowest core in `cores` other than `me`.
pub(super) fn next_core(cores: u64, me: usize) -> Option<usize> {
    let rest = cores & !(1u64 << me);
    (rest != 0).then(|| rest.trailing_zeros() as usize)
}

/// Wakes up to `n` threads parked here on `key` (each returns from its call); returns
/// how many. An address space with no waiter left here loses this core's waiter bit.
pub(super) fn wake_here(s: &mut Scheduler, key: WaitKey, n: u64) -> u64 {
    let woken = s.waits.wake(key, usize::try_from(n).unwrap_or(usize::MAX));
    let count = woken.len() as u64;
    let root = woken.first().map(|t| t.objects.root_ar.clone());
    for mut t in woken {
        t.regs.rax = match &t.on_wake {
            Some(OnWake::Join(target)) => target.status(),
            _ => wait_result::WOKEN,
        };
        t.on_wake = None;
        s.queue.push(t);
    }
    if let Some(root) = root.filter(|_| key.0 < SLEEP_SPACE && !s.waits.has_space(key.0)) {
        clear_waiter_bit(&root);
    }
    count
}

/// Clears this core's bit in root range `root`'s waiter mask (none of its threads waits
/// here any more).
pub(super) fn clear_waiter_bit(root: &Ptr) {
    if let Some(mask) = corey::range_waiters(root) {
        mask.fetch_and(!(1u64 << this_core().index), Ordering::AcqRel);
    }
}

/// Threads whose deadline passed return from `wait` (timed out) or `sleep`; those whose
/// program's time limit passed (a park never outlasts it) are returned, to be ended.
// Threads stay in their boxes: each moves between queues and cores by pointer.
#[allow(clippy::vec_box)]
pub(super) fn expire_deadlines(s: &mut Scheduler) -> Vec<Box<Running>> {
    let mut stopped = Vec::new();
    if s.waits.is_empty() {
        return stopped;
    }
    let expired = s.waits.expire(cpu::rdtsc());
    // Their address spaces may have no waiter left here: those lose this core's bit.
    let roots: Vec<Ptr> = expired.iter().map(|t| t.objects.root_ar.clone()).collect();
    for mut t in expired {
        if t.program.stopping().is_some() {
            stopped.push(t);
            continue;
        }
        t.regs.rax = match t.on_wake {
            Some(OnWake::Wait) => wait_result::TIMED_OUT,
            _ => 0,
        };
        t.on_wake = None;
        s.queue.push(t);
    }
    for root in roots {
        if !s.waits.has_space(root.id().0) {
            clear_waiter_bit(&root);
        }
    }
    stopped
}
