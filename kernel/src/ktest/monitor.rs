//! Layer 6 tests: monitors and URPC channels (Multikernel §4.6): ordered delivery between
//! every pair, remote calls all-to-all, idle wake-up by message, and rejection of
//! malformed or unauthorised messages.

use super::{all_ok, JOB_TIMEOUT_US};
use crate::arch::{cpu, timer};
use crate::monitor::protocol::{MonitorMessage, Protocol, REPLY};
use crate::monitor::{self, CallId};
use crate::percpu::{self, this_core};
use crate::sched::message::SchedMessage;
use crate::transport;
use crate::{kernel_test, smp};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};

kernel_test!(ALL_PAIRS, "monitor.all_pairs_in_order", 2, Shared, all_pairs_in_order);
kernel_test!(CALLS, "monitor.calls_all_to_all", 2, Shared, calls_all_to_all);
kernel_test!(WAKE, "monitor.wakes_idle_core", 2, Shared, wakes_idle_core);
kernel_test!(BROADCAST, "monitor.broadcast_reaches_all", 2, Shared, broadcast_reaches_all);
kernel_test!(REJECT, "monitor.rejects_bad_messages", 2, Shared, rejects_bad_messages);
kernel_test!(FIRST_CALLS, "monitor.first_calls_grow_no_heap", 2, Shared, first_calls_grow_no_heap);
kernel_test!(CANCEL, "monitor.abandoned_call_never_runs", 2, Shared, abandoned_call_never_runs);
kernel_test!(
    TABLE,
    "transport.handler_table_refuses_conflicts",
    1,
    Shared,
    table_refuses_conflicts
);

/// The handler table refuses a tag claimed by two layers (naming both), and a handler of
/// bytes that would wait for the core; it takes distinct tags.
fn table_refuses_conflicts() -> Result<(), String> {
    fn words(_: usize, _: u32, _: &[u64; urpc::PAYLOAD_WORDS]) -> Result<(), protocol::Rejection> {
        Ok(())
    }
    fn bytes(_: usize, _: u32, _: &[u8]) -> Result<(), protocol::Rejection> {
        Ok(())
    }
    let entry = |layer, kinds, handle, when| transport::Handler { layer, kinds, handle, when };
    let a: &[(u32, &str)] = &[(1, "One"), (2, "Two")];
    let b: &[(u32, &str)] = &[(3, "Three"), (2, "Deux")];
    let c: &[(u32, &str)] = &[(3, "Three")];
    let (w, by) = (transport::Handle::Words(words), transport::Handle::Bytes(bytes));
    let (now, later) = (transport::When::AtOnce, transport::When::BetweenThreads);
    transport::check_table(&[entry("a", a, w, now), entry("c", c, w, later)])
        .map_err(|e| format!("distinct tags refused: {e}"))?;
    match transport::check_table(&[entry("a", a, w, now), entry("b", b, w, now)]) {
        Err(e) if e.contains("b::Deux") && e.contains("a has") => {}
        other => return Err(format!("tag 2 claimed twice: {other:?}")),
    }
    if transport::check_table(&[entry("c", c, by, later)]).is_ok() {
        return Err("a bytes handler that waits for the core was accepted".into());
    }
    let past: &[(u32, &str)] = &[(transport::TAGS as u32, "Past")];
    if transport::check_table(&[entry("p", past, w, now)]).is_ok() {
        return Err("a tag past the table was accepted".into());
    }
    Ok(())
}

/// Messages each core sends to each other core.
const MESSAGES: u64 = 300;

/// Every core sends numbered messages to every other core at once (more than a channel
/// holds, so senders wait for credits); every receiver sees each sender's numbers in order,
/// none lost or repeated.
fn all_pairs_in_order() -> Result<(), String> {
    let cores = smp::online_cores();
    let before = sequence_counts(&cores)?;
    let send_all = |index: usize| -> Result<(), String> {
        for n in 0..MESSAGES {
            for &to in cores.iter().filter(|&&to| to != index) {
                transport::send(to, MonitorMessage::Sequence { n })
                    .map_err(|e| format!("to core {to}: {e:?}"))?;
            }
        }
        Ok(())
    };
    all_ok(&cores, &smp::run_on(&cores, JOB_TIMEOUT_US, &send_all))?;
    let after = sequence_counts(&cores)?;
    let expected = MESSAGES * (cores.len() as u64 - 1);
    for (i, &c) in cores.iter().enumerate() {
        let got = after[i] - before[i];
        if got != expected {
            return Err(format!("core {c} received {got} messages in order, expected {expected}"));
        }
    }
    Ok(())
}

/// Each core's count of in-order sequence messages (after handling what is waiting);
/// fails if any arrived out of order.
fn sequence_counts(cores: &[usize]) -> Result<Vec<u64>, String> {
    let counts: Vec<AtomicU64> = cores.iter().map(|_| AtomicU64::new(0)).collect();
    let read = |index: usize| -> Result<(), String> {
        monitor::poll();
        let stats = monitor::stats();
        if stats.sequence_errors > 0 {
            return Err(format!("{} messages out of order", stats.sequence_errors));
        }
        let slot = cores.iter().position(|&c| c == index).ok_or("not a test core")?;
        counts[slot].store(stats.sequence_ok, Ordering::Relaxed);
        Ok(())
    };
    all_ok(cores, &smp::run_on(cores, JOB_TIMEOUT_US, &read))?;
    Ok(counts.iter().map(|c| c.load(Ordering::Relaxed)).collect())
}

/// Every core calls every other core at once, with all its calls in flight together
/// (split phase); every call runs on its target and every reply comes back.
fn calls_all_to_all() -> Result<(), String> {
    let cores = smp::online_cores();
    let n = percpu::core_count();
    let ran: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
    let count = |index: usize| -> Result<(), String> {
        ran[index].fetch_add(1, Ordering::Relaxed);
        Ok(())
    };
    let fail_on_odd = |index: usize| -> Result<(), String> {
        if index % 2 == 1 {
            Err(format!("core {index} says no"))
        } else {
            Ok(())
        }
    };
    let caller = |index: usize| -> Result<(), String> {
        let targets: Vec<usize> = cores.iter().copied().filter(|&c| c != index).collect();
        let ids: Vec<CallId> = targets
            .iter()
            .map(|&t| monitor::call_async(t, &count).map_err(|e| format!("call to {t}: {e:?}")))
            .collect::<Result<_, _>>()?;
        for (id, &t) in ids.into_iter().zip(&targets) {
            let outcome = monitor::wait(id, JOB_TIMEOUT_US);
            if !outcome.is_ok() {
                return Err(format!("call to core {t}: {outcome:?}"));
            }
        }
        // An error travels back as text through a fragmented reply.
        for &t in &targets {
            let id = monitor::call_async(t, &fail_on_odd).map_err(|e| format!("{e:?}"))?;
            match (t % 2, monitor::wait(id, JOB_TIMEOUT_US)) {
                (0, smp::Outcome::Done(Ok(()))) => {}
                (1, smp::Outcome::Done(Err(text))) if text == format!("core {t} says no") => {}
                (_, other) => return Err(format!("call to core {t}: unexpected {other:?}")),
            }
        }
        Ok(())
    };
    all_ok(&cores, &smp::run_on(&cores, JOB_TIMEOUT_US, &caller))?;
    for &c in &cores {
        let got = ran[c].load(Ordering::Relaxed);
        if got != cores.len() as u64 - 1 {
            return Err(format!("core {c} ran {got} calls, expected {}", cores.len() - 1));
        }
    }
    Ok(())
}

/// Waits until core `target` halts idle, then pings it: the message (and the IPI the
/// sender adds because the core is asleep) wakes it, and it answers. A ping can land in
/// the instant between the core marking itself asleep and halting (it then sees the message
/// and never halts), so the test needs 3 observed wake-ups in at most 10 tries.
fn wakes_idle_core() -> Result<(), String> {
    let target = *smp::online_cores().last().ok_or("no cores")?;
    let core = percpu::core(target).ok_or("no such core")?;
    let mut woken = 0;
    for attempt in 0..10 {
        let start = cpu::rdtsc();
        while !core.is_asleep() {
            monitor::poll();
            if timer::us_since(start) > 5_000_000 {
                return Err(format!("core {target} never went to sleep (attempt {attempt})"));
            }
        }
        let wakeups = core.wakeups();
        monitor::ping(target, 5_000_000).ok_or_else(|| format!("core {target} did not answer"))?;
        if core.wakeups() > wakeups {
            woken += 1;
            if woken == 3 {
                return Ok(());
            }
        }
    }
    Err(format!("core {target} woke up {woken} times in 10 pings while asleep"))
}

/// Messages with an unknown kind, bad contents, or from a core not allowed to send them
/// are counted and dropped; the receiver goes on serving.
fn rejects_bad_messages() -> Result<(), String> {
    let cores = smp::online_cores();
    let victim = *cores.last().ok_or("no cores")?;
    let victim_core = percpu::core(victim).ok_or("no such core")?;
    let before = victim_core.rejected();
    let send = |tag: u32, payload: [u64; 7]| {
        transport::send_raw(victim, tag, &payload).map_err(|e| format!("{e:?}"))
    };
    // Each kind's tag, from its declaration.
    let tag =
        |name: &str, kinds: &[(u32, &str)]| kinds.iter().find(|k| k.1 == name).map_or(0, |k| k.0);
    let frame_return = tag("FrameReturn", MonitorMessage::KINDS);
    let call = tag("Call", MonitorMessage::KINDS);
    let arrive = tag("Arrive", SchedMessage::KINDS);
    let load = tag("Load", SchedMessage::KINDS);
    send(999, [0; 7])?; // unknown kind
    send(frame_return, [0; 7])?; // zero frames
    send(frame_return, [9, 0, 0, 0, 0, 0, 0])?; // too many frames
    send(call, [1, 0x1000, 0, 0, 0, 0, 0])?; // a call pointing at user memory
    send(REPLY, [0; 7])?; // a reply that is not fragment-framed
    let own = crate::mem::frames::alloc().ok_or("no frame")?;
    send(frame_return, [1, own, 0, 0, 0, 0, 0])?; // a frame the receiver does not own
    send(arrive, [0x1000, 0, 0, 0, 0, 0, 0])?; // a thread "carried" in user memory
    send(load, [1, 1, 1, 9999, 0, 0, 0])?; // a load report from a core that cannot be
    send(load, [1, 1, 2, 0, 0, 0, 0])?; // a flag that is neither 0 nor 1
    monitor::ping(victim, 5_000_000).ok_or("the victim stopped answering")?;
    let rejected = victim_core.rejected() - before;
    crate::mem::frames::free(own).map_err(|e| format!("{e:?}"))?;
    if rejected != 9 {
        return Err(format!("core {victim} rejected {rejected} of 9 bad messages"));
    }

    // A replicated setting is accepted only from the boot core.
    let me = this_core().index;
    let budget_before = transport::poll_budget();
    let rejected_before = this_core().rejected();
    let from_other = |_| -> Result<(), String> {
        transport::send(me, MonitorMessage::SetPollBudget { cycles: 12345 })
            .map_err(|e| format!("{:?}", e.error))
    };
    all_ok(&[victim], &smp::run_on(&[victim], JOB_TIMEOUT_US, &from_other))?;
    monitor::poll();
    if this_core().rejected() != rejected_before + 1 || transport::poll_budget() != budget_before {
        return Err("a poll budget from a core other than the boot core was accepted".into());
    }
    Ok(())
}

/// A broadcast reaches every other online core once: each answers with one ack.
fn broadcast_reaches_all() -> Result<(), String> {
    let others = smp::online_cores().len() - 1;
    for round in 0..3 {
        let before = monitor::bench_acks();
        let reached =
            monitor::broadcast(MonitorMessage::Bench { round }).map_err(|e| format!("{e:?}"))?;
        if reached != others {
            return Err(format!("broadcast reached {reached} of {others} cores"));
        }
        let start = cpu::rdtsc();
        while monitor::bench_acks() < before + others as u64 {
            monitor::poll();
            if timer::us_since(start) > 5_000_000 {
                return Err(format!("{} of {others} acks", monitor::bench_acks() - before));
            }
        }
        monitor::poll();
        if monitor::bench_acks() != before + others as u64 {
            return Err("more acks than cores".into());
        }
    }
    Ok(())
}

/// Times the work of [`abandoned_call_never_runs`]'s second call ran.
static ABANDONED_RUNS: AtomicU64 = AtomicU64::new(0);

/// A call whose caller stopped waiting before the target started it is never run: its
/// work may borrow the caller's memory, gone by then. Core 1 is kept busy by a first call
/// while a second one times out; once core 1 gets to the second, it must drop it unrun.
fn abandoned_call_never_runs() -> Result<(), String> {
    let before = ABANDONED_RUNS.load(Ordering::Acquire);
    let busy = |_| -> Result<(), String> {
        timer::spin_us(300_000);
        Ok(())
    };
    let abandoned = |_| -> Result<(), String> {
        ABANDONED_RUNS.fetch_add(1, Ordering::AcqRel);
        Ok(())
    };
    let first = monitor::call_async(1, &busy).map_err(|e| format!("{e:?}"))?;
    let second = monitor::call_async(1, &abandoned).map_err(|e| format!("{e:?}"))?;
    match monitor::wait(second, 20_000) {
        smp::Outcome::TimedOut => {}
        other => return Err(format!("the second call ended {other:?} while core 1 was busy")),
    }
    all_ok(&[1], &[monitor::wait(first, JOB_TIMEOUT_US)])?;
    // Core 1 serves core 0's channel in order: a pong means it has seen the second call.
    monitor::ping(1, JOB_TIMEOUT_US).ok_or("core 1 did not answer a ping")?;
    let runs = ABANDONED_RUNS.load(Ordering::Acquire) - before;
    if runs != 0 {
        return Err(format!("the abandoned call ran {runs} time(s) after its caller gave up"));
    }
    Ok(())
}

/// A core's first remote calls grow no kernel heap, on the first run (no second run, as
/// `balanced` would allow): each core in turn calls every other core at once. The table of
/// a core's calls in flight is sized when its monitor starts; it grew at a core's first
/// call (192 bytes: room for 4), which `fuzz4` saw as heap growth on the cores whose console
/// lines or benchmarks made their first calls during its measured run.
fn first_calls_grow_no_heap() -> Result<(), String> {
    let cores = smp::online_cores();
    crate::mem::heap::give_back_this_core(JOB_TIMEOUT_US);
    let before = super::balance::steady_snapshot(&cores)?;
    for &core in &cores {
        let others: Vec<usize> = cores.iter().copied().filter(|&c| c != core).collect();
        let call_the_others =
            |_| all_ok(&others, &smp::run_on(&others, JOB_TIMEOUT_US, &|_| Ok(())));
        all_ok(&[core], &smp::run_on(&[core], JOB_TIMEOUT_US, &call_the_others))?;
    }
    super::balance::check(&cores, &before)
}
