//! The scheduler's messages: the transport hands every `SCHED` message to [`on_message`],
//! which only files it in this core's [`Inbox`]; the scheduler reads the inbox between
//! threads and at every tick ([`read_inbox`]). Wake-ups, joins and reaps of parked
//! threads are here too.

use super::message::SchedMessage;
use super::running::{OnWake, Running};
use super::{last_level_cache_bytes, numa_policy, Scheduler};
use crate::arch::cpu;
use crate::corey::{self, Ptr};
use crate::monitor::protocol::{Protocol, Rejection};
use crate::percpu::{self, this_core, PerCoreState};
use crate::transport;
use abi::wait_result;
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::sync::atomic::Ordering;
use protocol::Carried;
use sched::{Message, WaitKey};
use urpc::PAYLOAD_WORDS;

/// Messages filed for the scheduler, read between threads and at every tick (what
/// filing keeps and what reading decides are `sched::inbox`'s, tested on the host).
pub(super) type Inbox = sched::Inbox<Box<Running>, { percpu::MAX_CORES }>;

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
    INBOX
        .with(|inbox| inbox.file(from, message.map(Carried::into_box)))
        .map_err(|_| Rejection::Malformed)
}

/// What the scheduler's state machines (`sched::inbox`, `sched::choose`) need of a thread.
impl sched::Thread for Box<Running> {
    type Space = Ptr;

    fn allowed_on(&self, core: usize) -> bool {
        self.shared.allowed_on(core)
    }

    fn stopping(&self) -> bool {
        self.program.stopping().is_some()
    }

    fn may_move_running(&self, from: usize, to: usize) -> bool {
        // AMPS §2.4.2: the NUMA policy in force, with the last-level cache the SKB knows.
        self.shared.may_move_running(from, to, numa_policy(), last_level_cache_bytes())
    }

    fn arrived(&mut self, core: usize) {
        self.shared.core.store(core as u64, Ordering::Relaxed);
    }

    fn woken(&mut self) {
        self.regs.rax = match &self.on_wake {
            Some(OnWake::Join(target)) => target.status(),
            _ => wait_result::WOKEN,
        };
        self.on_wake = None;
    }

    fn space(&self) -> Ptr {
        self.objects.root_ar.clone()
    }
}

/// Asks `cores` (bit i: core i; this one included) to end the threads of stopped
/// programs they hold off the CPU (`REAP`). This core does it at its next housekeeping.
pub fn reap_on(cores: u64) {
    let me = this_core().index;
    if me < 64 && cores & (1 << me) != 0 {
        let _ = INBOX.with(|i| i.file(me, Message::Reap {}));
    }
    for c in crate::smp::online_cores() {
        if c != me && c < 64 && cores & (1 << c) != 0 {
            let _ = transport::send(c, SchedMessage::Reap {});
        }
    }
}

/// Wakes up to `n` threads parked here on `key` (each returns from its call); returns
/// how many. An address space with no waiter left here loses this core's waiter bit.
pub(super) fn wake_here(s: &mut Scheduler, key: WaitKey, n: u64) -> u64 {
    let (count, emptied) = sched::inbox::wake(&mut s.queue, &mut s.waits, key, n);
    if let Some(root) = emptied {
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
