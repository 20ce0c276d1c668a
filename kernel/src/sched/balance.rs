//! Load balancing by message (AMPS §2.2–§2.3 in a multikernel): each core reports its
//! run-queue length to the others along the SKB's multicast tree, pulls a thread when its
//! replica says so, and ships threads by pointer. Placement and dedication (Corey §4.4)
//! are here too.

use super::message::SchedMessage;
use super::running::Running;
use super::{policy, with_sched, PULL_PATIENCE_TICKS, REPORT_EVERY_TICKS};
use crate::percpu::{self, this_core, CoreState};
use crate::thread::ThreadShared;
use crate::transport;
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::sync::atomic::Ordering;
use protocol::Carried;
use sched::Report;

/// Sends thread `t` to core `to` (a migration: counted). If the message cannot go, the
/// thread stays here.
pub(super) fn ship(t: Box<Running>, to: usize) {
    t.shared.migrations.fetch_add(1, Ordering::Relaxed);
    undedicate(&t.shared);
    send_thread(t, to, true);
}

/// Sends thread `t` to core `to`'s monitor; `moved` counts it as a migration out.
pub(super) fn send_thread(t: Box<Running>, to: usize, moved: bool) {
    let thread = Carried::new(t);
    if let Err(unsent) = transport::send(to, SchedMessage::Arrive { thread }) {
        // Not sent: the thread is still ours, and stays here.
        if let SchedMessage::Arrive { thread } = unsent.message {
            with_sched(|s| s.queue.push(thread.into_box()));
        }
        return;
    }
    with_sched(|s| {
        if moved {
            s.stats.migrations_out += 1;
        }
        // Until its report comes, count the thread on its new core.
        let length = s.table.get(to).map_or(0, |c| c.length);
        s.table.set_length(to, length + 1);
    });
}

/// Sends this core's run-queue length to every other online core when it changed (at
/// most once a tick, except to or from empty) and every [`REPORT_EVERY_TICKS`]. A full
/// channel skips that core this time (the next report corrects it).
pub(super) fn report_load() {
    let now = this_core().ticks();
    let me = this_core().index;
    let report = with_sched(|s| {
        let length = s.queue.len() as u64;
        s.table.set_length(me, length);
        let due = match s.reported {
            None => true,
            // A core with no threads repeats nothing: idle cores stay asleep.
            Some((last, at)) => {
                (last != length && (at != now || (last == 0) != (length == 0)))
                    || (length > 0 && now >= at + REPORT_EVERY_TICKS)
            }
        };
        if !due {
            return None;
        }
        s.reported = Some((length, now));
        s.seq += 1;
        s.stats.reports += 1;
        Some((length, s.seq, s.dedicated.is_none()))
    });
    let Some((length, seq, taking)) = report else { return };
    send_load(length, seq, taking);
}

/// Sends this core's load report to every other online core (`taking`: false while the
/// core is dedicated to one context and takes no threads).
pub(super) fn send_load(length: u64, seq: u64, taking: bool) {
    let me = this_core().index;
    // Along the SKB's multicast tree (Multikernel §5.1): one message per other package,
    // to its aggregator, which passes it on within its package; this package directly.
    let report = Report { origin: me, length, seq, online: taking };
    let online = |c: usize| percpu::core(c).is_some_and(|c| c.state() == CoreState::Online);
    match crate::skb_replica::get().map(|skb| skb.multicast_tree(me)) {
        Some(tree) if !tree.aggregators.is_empty() => {
            for branch in &tree.aggregators {
                if branch.core != me && online(branch.core) {
                    let _ = transport::try_send(branch.core, report.message(true));
                } else {
                    for &c in branch.members.iter().filter(|&&c| online(c)) {
                        let _ = transport::try_send(c, report.message(false));
                    }
                }
            }
        }
        _ => {
            for c in (0..percpu::core_count()).filter(|&c| c != me && online(c)) {
                let _ = transport::try_send(c, report.message(false));
            }
        }
    }
}

/// An aggregator's part of a load report's tree: the report of `report.origin` goes on
/// to the other online cores of this core's package.
pub(super) fn forward_load(report: Report) {
    let me = this_core();
    let origin = report.origin;
    for c in percpu::all_cores() {
        let member = c.location.package == me.location.package
            && c.index != me.index
            && c.index != origin
            && c.state() == CoreState::Online;
        if member {
            let _ = transport::try_send(c.index, report.message(false));
        }
    }
}

/// Asks the core the policy names for one thread, if this core's replica says to
/// (AMPS §2.3: pull-based, on the tick and when idle).
pub(super) fn balance() {
    let now = this_core().ticks();
    let me = this_core().index;
    let pull = with_sched(|s| {
        if now < s.pull_until {
            return None;
        }
        let m = policy().pull_from(&s.table, me)?;
        s.pull_until = now + PULL_PATIENCE_TICKS;
        s.stats.pulls += 1;
        Some(m)
    });
    if let Some(m) = pull {
        let pull = SchedMessage::Pull { may_take_running: m.may_take_running };
        let sent = transport::try_send(m.from, pull);
        if sent.is_ok() && m.may_take_running {
            // The source's running thread may be the one to move: it answers now, not at
            // its next tick (AMPS §3.2: "at once on an IPI").
            transport::kick(m.from);
        }
    }
}

/// Puts `pcore_run`'s context `t` on this core's run queue and dedicates the core to it
/// (Corey §4.4: a pcore runs one context; cores are space-multiplexed). Until the context
/// ends or leaves, the core reports that it takes no threads, so no core places or moves
/// one here, and the ready threads it holds go where the policy places them now. Threads
/// whose affinity allows this core alone stay and share it with the context.
pub fn enqueue_dedicated(t: Box<Running>) {
    dedicate(t.shared.uid, Some(t));
}

/// Dedicates this core to a kernel core (Corey §4.4): as [`enqueue_dedicated`], with no
/// context; the idle loop polls its devices until it ends.
pub fn dedicate_to_kernel_core() {
    dedicate(KERNEL_CORE_UID, None);
}

/// What `dedicated` holds while the core is a kernel core (no thread has this uid).
pub(super) const KERNEL_CORE_UID: u64 = u64::MAX;

/// Dedicates this core to `uid` and queues `t`, if any: the ready threads that may run
/// elsewhere go where the policy places them now.
fn dedicate(uid: u64, t: Option<Box<Running>>) {
    let me = this_core().index;
    let evicted = with_sched(|s| {
        s.dedicated = Some(uid);
        s.table.set_online(me, false);
        s.reported = None; // the next report says so at once
        let mut evicted = Vec::new();
        while let Some(x) =
            s.queue.take_ready(|x| x.shared.affinity.load(Ordering::Relaxed) & !(1 << me) != 0)
        {
            evicted.push(x);
        }
        if let Some(t) = t {
            s.queue.push(t);
        }
        evicted
    });
    for x in evicted {
        match place(&x.shared) {
            Some(to) if to != me => ship(x, to),
            _ => enqueue(x),
        }
    }
    report_load();
}

/// Ends this core's dedication if `shared` is the context it is dedicated to (it ended,
/// or it moved away by changing its own affinity).
pub(super) fn undedicate(shared: &ThreadShared) {
    undedicate_uid(shared.uid);
}

/// Ends this core's dedication to `uid`, if it is dedicated to it.
pub(super) fn undedicate_uid(uid: u64) {
    let me = this_core().index;
    with_sched(|s| {
        if s.dedicated == Some(uid) {
            s.dedicated = None;
            s.table.set_online(me, true);
            s.reported = None;
        }
    });
}

/// The cores that, by this core's replica, are dedicated to one context (bit i: core i).
pub(super) fn dedicated_mask() -> u64 {
    let mut mask = 0;
    for c in crate::smp::online_cores().into_iter().filter(|&c| c < 64) {
        if with_sched(|s| s.table.get(c).is_some_and(|l| !l.online)) {
            mask |= 1 << c;
        }
    }
    mask
}

/// The core a thread should start on (or move to): the policy's placement among the
/// online cores its affinity allows, by this core's replica.
pub(super) fn place(shared: &ThreadShared) -> Option<usize> {
    with_sched(|s| policy().place(&s.table, |c| shared.allowed_on(c)))
}

/// Starts `t` on core `to`: here, or shipped (not counted as a migration).
pub fn start_on(t: Box<Running>, to: usize) {
    let me = this_core().index;
    if to == me {
        with_sched(|s| {
            s.queue.push(t);
            // Counted at once, so a burst of creations spreads by the replica.
            s.table.set_length(me, s.queue.len() as u64);
        });
    } else {
        send_thread(t, to, false);
    }
}

/// Puts `t` on this core's run queue (a new thread started here).
pub fn enqueue(t: Box<Running>) {
    with_sched(|s| s.queue.push(t));
}
