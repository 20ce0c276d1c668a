//! The scheduler's messages: the monitor hands every `SCHED` message to [`on_message`],
//! which only files it in this core's [`Inbox`]; the scheduler reads the inbox between
//! threads and at every tick ([`read_inbox`]). Wake-ups, joins and reaps of parked
//! threads are here too.

use super::running::{OnWake, Running};
use super::{Scheduler, SLEEP_SPACE};
use crate::arch::cpu;
use crate::corey::{self, Ptr};
use crate::monitor::{self, protocol::Request};
use crate::percpu::{self, this_core, PerCoreState};
use abi::wait_result;
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::sync::atomic::Ordering;
use sched::WaitKey;

/// Scheduler message operations (word 0 of a `SCHED` message).
pub(super) mod op {
    /// `[ARRIVE, box]`: a thread for this core; the box at kernel address `box` is ours.
    pub const ARRIVE: u64 = 1;
    /// `[WAKE, space, addr, n, cores]`: wake up to `n` waiters on the word, then pass the
    /// rest on to the lowest core in `cores`.
    pub const WAKE: u64 = 2;
    /// `[JOINED, uid]`: thread `uid` ended; wake its joiners here.
    pub const JOINED: u64 = 3;
    /// `[LOAD, length, seq, online, origin + 1, forward]`: core `origin`'s run-queue length
    /// (origin 0: the sender); with `forward` the receiver, its package's aggregator in
    /// the SKB's multicast tree, passes it on within its package.
    pub const LOAD: u64 = 4;
    /// `[PULL, may_take_running]`: the sender asks for one thread.
    pub const PULL: u64 = 5;
    /// `[NONE]`: the answer to a pull that found nothing to give (the puller waits out its
    /// patience before it asks again: a source whose extra threads are pinned would
    /// otherwise be asked at every turn).
    pub const NONE: u64 = 6;
    /// `[REAP]`: a program was stopped (its main thread ended, its pcore was halted):
    /// end the threads of stopped programs parked or queued here (issue M14).
    pub const REAP: u64 = 7;
}

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

/// Lowest address of the kernel half: an `ARRIVE` pointer must lie above it.
pub(super) const KERNEL_HALF: u64 = 0xffff_8000_0000_0000;

/// A `SCHED` message from core `from` (from the monitor, in any context): filed only.
pub fn on_message(from: usize, w: [u64; urpc::PAYLOAD_WORDS]) -> Result<(), ()> {
    if from >= percpu::MAX_CORES {
        return Err(());
    }
    INBOX.with(|inbox| {
        inbox.any = true;
        match w[0] {
            op::ARRIVE => {
                if w[1] < KERNEL_HALF || !w[1].is_multiple_of(8) {
                    return Err(());
                }
                // SAFETY: `ship` made this pointer with `Box::into_raw` and sent it to us
                // alone; it no longer touches the box.
                inbox.arrivals.push(unsafe { Box::from_raw(w[1] as *mut Running) });
            }
            op::WAKE => inbox.wakes.push(((w[1], w[2]), w[3], w[4])),
            op::JOINED => inbox.joined.push(w[1]),
            op::LOAD => {
                let origin = match w[4] {
                    0 => from,
                    n => usize::try_from(n - 1).map_err(|_| ())?,
                };
                if origin >= percpu::MAX_CORES {
                    return Err(());
                }
                if inbox.loads[origin].is_none_or(|(_, seq, _, _)| seq < w[2]) {
                    inbox.loads[origin] = Some((w[1], w[2], w[3] != 0, w[5] != 0));
                }
            }
            op::PULL => inbox.pulls[from] = Some(w[1] != 0),
            op::NONE => {}
            op::REAP => inbox.reap = true,
            _ => return Err(()),
        }
        Ok(())
    })
}

pub(super) fn message(words: &[u64]) -> Request {
    let mut w = [0u64; urpc::PAYLOAD_WORDS];
    w[..words.len()].copy_from_slice(words);
    Request::Sched(w)
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
            let _ = monitor::send(c, &message(&[op::REAP]));
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
