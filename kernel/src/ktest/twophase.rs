//! Tests of two-phase commit between the monitors (Multikernel §4.7–§4.8; issue M9):
//! concurrent conflicting operations end in one order on every core, and a participant
//! that faulted makes an operation abort, not hang.

use super::{all_ok, JOB_TIMEOUT_US};
use crate::percpu::this_core;
use crate::twophase::{self, Operation, Register};
use crate::{kernel_test, println, smp};
use agreement::{CoreSet, Decision};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};

kernel_test!(
    HALTED_COORDINATOR,
    "twophase.a_halted_coordinator_hears_its_votes",
    2,
    Shared,
    halted_coordinator_hears_its_votes
);
kernel_test!(ONE_ORDER, "twophase.conflicting_operations_end_in_one_order", 2, Shared, one_order);
kernel_test!(
    DECISION_WAITS,
    "twophase.decision_waits_for_room_in_a_full_channel",
    2,
    Shared,
    decision_waits_for_room
);
kernel_test!(
    UNKNOWN_OPERATIONS,
    "twophase.votes_for_unknown_operations_are_refused",
    2,
    Shared,
    votes_for_unknown_operations_are_refused
);
kernel_test!(
    FAULTED_ABORTS,
    "twophase.faulted_participant_aborts",
    2,
    Alone,
    faulted_participant_aborts
);
kernel_test!(
    FAULTED_COORDINATOR,
    "twophase.faulted_coordinator_leaves_no_lock",
    3,
    Alone,
    faulted_coordinator_leaves_no_lock
);

/// (Run after `tlb.faulted_participant_does_not_hang` left a core faulted, run `tlbfault4`.)
/// An operation naming the faulted core as a participant aborts at once (a faulted core
/// cannot vote Yes), well inside the time limit, and the live participants release their
/// locks; one without it still commits.
fn faulted_participant_aborts() -> Result<(), String> {
    let cores = smp::online_cores();
    let victim = crate::percpu::all_cores()
        .find(|c| c.state() == crate::percpu::CoreState::Faulted)
        .map(|c| c.index)
        .ok_or("no faulted core: run after tlb.faulted_participant_does_not_hang")?;
    let live: CoreSet = cores.iter().copied().collect();
    let mut with_victim = live;
    with_victim.insert(victim);
    let start = crate::arch::cpu::rdtsc();
    let decision = twophase::commit(with_victim, reg(7, 1));
    let us = crate::arch::timer::us_since(start);
    if decision != Decision::Abort {
        return Err(format!("an operation with faulted core {victim} committed"));
    }
    if us >= crate::param::TWO_PHASE_TIMEOUT_US {
        return Err(format!("the abort took {us} us: it waited for the time limit"));
    }
    if twophase::commit(live, reg(7, 2)) != Decision::Commit {
        return Err("an operation among live cores aborted after the faulted one".into());
    }
    let locks = AtomicU64::new(0);
    let count = |_| -> Result<(), String> {
        locks.fetch_add(twophase::prepared_here() as u64, Ordering::Relaxed);
        Ok(())
    };
    all_ok(&cores, &smp::run_on(&cores, JOB_TIMEOUT_US, &count))?;
    if locks.load(Ordering::Relaxed) != 0 {
        return Err("a live core still holds a lock of the aborted operation".into());
    }
    println!("twophase: an operation with faulted core {victim} aborted in {us} us");
    Ok(())
}

/// (Run after the shootdown test, in `tlbfault4`.) A coordinator prepares an operation on
/// every live core and faults before it decides. Its participants, each holding the lock,
/// ask each other (`agreement::Termination`), find all uncertain and abort: every lock goes,
/// no replica applied the operation, and a new operation on the same register commits.
fn faulted_coordinator_leaves_no_lock() -> Result<(), String> {
    let me = this_core().index;
    let live = smp::online_cores();
    let coordinator = *live.iter().rev().find(|&&c| c != me).ok_or("no other core")?;
    let others: Vec<usize> = live.iter().copied().filter(|&c| c != coordinator).collect();
    if others.len() < 2 {
        return Err(format!("needs 3 live cores, {} are", live.len()));
    }
    let all: CoreSet = live.iter().copied().collect();
    let register = 5_000_000 + this_core().ticks();
    let crash = |_| -> Result<(), String> {
        let _ = twophase::start(all, reg(register, 1));
        super::fault_this_core()
    };
    let call = crate::monitor::call_async(coordinator, &crash).map_err(|e| format!("{e:?}"))?;
    let start = crate::arch::cpu::rdtsc();
    let faulted = || {
        crate::percpu::core(coordinator).map(|c| c.state())
            == Some(crate::percpu::CoreState::Faulted)
    };
    // Until the coordinator is dead, everything it sent here read (its prepare among it),
    // and this core no longer prepared: meanwhile this core serves its channels and
    // terminates what it holds (the others do so when idle).
    while !faulted()
        || crate::transport::has_messages_from(coordinator)
        || twophase::prepared_here() != 0
    {
        if crate::arch::timer::us_since(start) > crate::param::TWO_PHASE_TIMEOUT_US {
            return Err(format!(
                "core {me} still holds {} prepared operations (coordinator faulted: {})",
                twophase::prepared_here(),
                faulted()
            ));
        }
        crate::monitor::poll();
        twophase::resolve_orphans();
        core::hint::spin_loop();
    }
    let _ = crate::monitor::wait(call, JOB_TIMEOUT_US);
    let waited_us = crate::arch::timer::us_since(start);
    // Every other participant ended it too, the same way.
    let ended = |core: usize| -> Result<(), String> {
        let begin = crate::arch::cpu::rdtsc();
        while twophase::prepared_here() != 0 {
            if crate::arch::timer::us_since(begin) > crate::param::TWO_PHASE_TIMEOUT_US {
                return Err(format!("core {core} still holds the faulted coordinator's lock"));
            }
            crate::monitor::poll();
            twophase::resolve_orphans();
            core::hint::spin_loop();
        }
        match twophase::register(register).applied {
            0 => Ok(()),
            n => Err(format!("core {core} applied the undecided operation {n} times")),
        }
    };
    all_ok(&others, &smp::run_on(&others, JOB_TIMEOUT_US, &ended))?;
    let survivors: CoreSet = others.iter().copied().collect();
    if twophase::commit(survivors, reg(register, 2)) != Decision::Commit {
        return Err("an operation on the register aborted after the termination".into());
    }
    println!("twophase: coordinator {coordinator} faulted undecided; its participants aborted in {waited_us} us");
    Ok(())
}

/// Operations all cores run on the shared register together (each core its share, at least
/// 2): 40 conflicting operations at every size, each with every core as participant.
const OPERATIONS: u64 = 40;

/// Every core runs its share of [`OPERATIONS`] at once on the same register, each with every
/// core as participant, retrying when a conflict aborts it. Afterwards every core's replica
/// of the register has applied every operation (none lost, none twice) in the same order
/// (their order-sensitive digests agree), and no core holds a lock. A second register that
/// each core updates alone (no conflicts) shows operations on different objects commit
/// without retries.
fn one_order() -> Result<(), String> {
    let cores = smp::online_cores();
    let all: CoreSet = cores.iter().copied().collect();
    // A fresh register per run (tests may run again on the same boot).
    let shared = 1_000 + this_core().ticks() * 1_000;
    let attempts = AtomicU64::new(0);
    let per_core = (OPERATIONS / cores.len() as u64).max(2);
    let run = |core: usize| -> Result<(), String> {
        for i in 0..per_core {
            let value = ((core as u64) << 32) | i;
            let tries = twophase::commit_retrying(all, reg(shared, value), 500)
                .ok_or_else(|| format!("core {core}: operation {i} never committed"))?;
            attempts.fetch_add(u64::from(tries), Ordering::Relaxed);
        }
        // Its own register: nobody else's operation conflicts.
        match twophase::commit(all, reg(shared + 1 + core as u64, core as u64)) {
            Decision::Commit => Ok(()),
            Decision::Abort => Err(format!("core {core}: an operation without conflict aborted")),
        }
    };
    all_ok(&cores, &smp::run_on(&cores, JOB_TIMEOUT_US, &run))?;
    // Every replica, read on its own core.
    let replicas: Vec<spin::Mutex<(Register, usize)>> =
        cores.iter().map(|_| spin::Mutex::new((Register::default(), 0))).collect();
    let read = |core: usize| -> Result<(), String> {
        let i = cores.iter().position(|&c| c == core).ok_or("not a test core")?;
        *replicas[i].lock() = (twophase::register(shared), twophase::prepared_here());
        Ok(())
    };
    all_ok(&cores, &smp::run_on(&cores, JOB_TIMEOUT_US, &read))?;
    let want = per_core * cores.len() as u64;
    let first = replicas[0].lock().0;
    for (i, r) in replicas.iter().enumerate() {
        let (reg, locks) = *r.lock();
        if reg.applied != want {
            return Err(format!("core {}: applied {} of {want} operations", cores[i], reg.applied));
        }
        if reg.digest != first.digest {
            return Err(format!("core {} applied the operations in another order", cores[i]));
        }
        if locks != 0 {
            return Err(format!("core {} still holds {locks} prepared operations", cores[i]));
        }
    }
    println!(
        "twophase: {want} conflicting operations on {} cores committed in one order ({} attempts)",
        cores.len(),
        attempts.load(Ordering::Relaxed)
    );
    Ok(())
}

/// The operation applying `value` to register `register`.
/// A coordinator (another core) commits an operation; then this core sends it votes and
/// acknowledgements as raw `TWO_PHASE` messages: for that operation, over already (late:
/// accepted, as a vote after an early abort is), and for operations it never started (a
/// sequence number it has not reached, another core's id): each of those is refused and
/// counted as rejected by the coordinator's monitor. (They used to be taken silently as
/// "over already".)
fn votes_for_unknown_operations_are_refused() -> Result<(), String> {
    use crate::monitor;
    use twophase::{MessageError, TwoPhaseMessage};
    let me = this_core().index;
    let cores = smp::online_cores();
    let coordinator = *cores.iter().rev().find(|&&c| c != me).ok_or("needs 2 cores")?;
    let all: CoreSet = cores.iter().copied().collect();
    let register = 7_000_000 + this_core().ticks();
    let finished = AtomicU64::new(0);
    let coordinate = |_| -> Result<(), String> {
        let op = twophase::start(all, reg(register, 1));
        if twophase::finish(op) != Decision::Commit {
            return Err("the operation aborted".into());
        }
        finished.store(op, Ordering::Relaxed);
        Ok(())
    };
    all_ok(&[coordinator], &smp::run_on(&[coordinator], JOB_TIMEOUT_US, &coordinate))?;
    let done = finished.load(Ordering::Relaxed);
    let seq = agreement::op_sequence(done);
    let never = agreement::op_id(coordinator, seq + 1_000);
    let not_its_own = agreement::op_id(me, seq);
    let victim = crate::percpu::core(coordinator).ok_or("no such core")?;
    let rejected_after = |message: TwoPhaseMessage| -> Result<u64, String> {
        let before = victim.rejected();
        crate::transport::send(coordinator, message).map_err(|e| format!("{:?}", e.error))?;
        monitor::ping(coordinator, 5_000_000).ok_or("the coordinator stopped answering")?;
        Ok(victim.rejected() - before)
    };
    let vote = |op, yes| TwoPhaseMessage::Vote { op, yes };
    let ack = |op| TwoPhaseMessage::Ack { op };
    for (what, message, want) in [
        ("a late vote for its finished operation", vote(done, true), 0),
        ("a late acknowledgement of it", ack(done), 0),
        ("a vote for a sequence number it never reached", vote(never, true), 1),
        ("an acknowledgement of it", ack(never), 1),
        ("a vote for another core's operation", vote(not_its_own, false), 1),
        ("an acknowledgement of it", ack(not_its_own), 1),
    ] {
        let got = rejected_after(message)?;
        if got != want {
            return Err(format!("{what} ({message:?}): {got} messages rejected, want {want}"));
        }
    }
    // The same on this core, handed straight to the handler: the reason is precise.
    let mine = twophase::start(all, reg(register, 2));
    if twophase::finish(mine) != Decision::Commit {
        return Err("this core's operation aborted".into());
    }
    let unknown = agreement::op_id(me, agreement::op_sequence(mine) + 1);
    for (message, want) in [
        (vote(mine, true), Ok(())),
        (ack(mine), Ok(())),
        (vote(unknown, true), Err(MessageError::UnknownOperation)),
        (ack(unknown), Err(MessageError::UnknownOperation)),
        (vote(done, true), Err(MessageError::UnknownOperation)),
    ] {
        let got = twophase::handle(coordinator, message);
        if got != want {
            return Err(format!("{message:?} here: {got:?}, want {want:?}"));
        }
    }
    println!("twophase: votes and acks for operations core {coordinator} never started refused");
    Ok(())
}

/// M15 item 4: with P forced to 1000 cycles, the coordinator's `finish` halts in every
/// operation, and the votes' and acknowledgements' IPIs must wake it. Its first version
/// read the channels after looking at the operation and then halted: the vote just read
/// was in hand, no IPI was coming, and every operation slept to the next tick (52M cycles
/// an operation under TCG, against 0.4M woken by the IPIs).
fn halted_coordinator_hears_its_votes() -> Result<(), String> {
    const OPS: u64 = 40;
    let cores: Vec<usize> = smp::online_cores().into_iter().take(2).collect();
    let participants: CoreSet = cores.iter().copied().collect();
    let (committed, waits) = super::with_poll_budget(&cores, 1000, || {
        (0..OPS).all(|i| twophase::commit(participants, reg(HALT_REGISTER, i)) == Decision::Commit)
    })?;
    if !committed {
        return Err("an operation without conflict aborted".into());
    }
    super::woken_by_their_messages("twophase", &waits)?;
    println!(
        "twophase: {OPS} operations at P = 1000: {} past P, {} halts, {} ended by the tick",
        waits.past_budget, waits.halts, waits.ended_by_tick
    );
    Ok(())
}

/// The register `halted_coordinator_hears_its_votes` writes (no other test's).
const HALT_REGISTER: u64 = 0x4a17;

fn reg(register: u64, value: u64) -> Operation {
    Operation::Register { register, value }
}

/// A participant that reads no messages for a while, its channel full when the decision
/// is made: the coordinator does not block on it, keeps the decision (one undelivered),
/// and delivers it once there is room; the operation commits on both cores and no lock is
/// left. (A blocking send gave up after its time limit, and the participant then held its
/// locks forever.)
fn decision_waits_for_room() -> Result<(), String> {
    let me = this_core().index;
    let other = smp::online_cores().into_iter().find(|&c| c != me).ok_or("needs two cores")?;
    let pair: CoreSet = [me, other].into_iter().collect();
    let op = twophase::start(pair, reg(11, 3));
    // Its answer comes after its vote (channels are FIFO): the vote is here once it is.
    let prepared = |_| -> Result<(), String> {
        match twophase::prepared_here() {
            1 => Ok(()),
            n => Err(format!("{n} operations prepared on core {}", this_core().index)),
        }
    };
    all_ok(&[other], &smp::run_on(&[other], JOB_TIMEOUT_US, &prepared))?;
    let deaf = |_| -> Result<(), String> {
        crate::arch::timer::spin_us(300_000);
        Ok(())
    };
    let call = crate::monitor::call_async(other, &deaf).map_err(|e| format!("{e:?}"))?;
    crate::arch::timer::spin_us(20_000); // `other` is spinning now
    let mut filled = 0;
    while crate::transport::try_send(
        other,
        crate::monitor::protocol::MonitorMessage::Ping { seq: 0 },
    )
    .is_ok()
    {
        filled += 1;
        if filled > 100_000 {
            return Err(format!("core {other}'s channel never filled"));
        }
    }
    let early = twophase::poll(op);
    let kept = twophase::undelivered_here();
    let decision = twophase::finish(op);
    all_ok(&[other], &[crate::monitor::wait(call, JOB_TIMEOUT_US)])?;
    if early.is_some() || kept != 1 || decision != Decision::Commit {
        return Err(format!(
            "with the channel full: poll gave {early:?}, {kept} decisions kept, then {decision:?}"
        ));
    }
    let expected = twophase::register(11);
    let left = AtomicU64::new(0);
    let check = |_| -> Result<(), String> {
        left.fetch_add(twophase::prepared_here() as u64, Ordering::Relaxed);
        if twophase::register(11) != expected {
            return Err(format!("core {}: register 11 differs", this_core().index));
        }
        Ok(())
    };
    all_ok(&[me, other], &smp::run_on(&[me, other], JOB_TIMEOUT_US, &check))?;
    if left.load(Ordering::Relaxed) != 0 || twophase::undelivered_here() != 0 {
        return Err("a lock or an undelivered decision was left".into());
    }
    println!(
        "twophase: a decision waited for room in a full channel ({filled} pings), then committed"
    );
    Ok(())
}
