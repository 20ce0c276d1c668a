//! Loom model of two-phase commit under the message delivery orders loom reaches within a
//! preemption bound (set per model below: exhaustive search does not end). Each thread is one
//! core's monitor, as in Atoll: it may coordinate an operation and it serves as a participant,
//! taking messages from one mailbox (`Mutex<VecDeque<..>>` with a `Condvar`; one queue per
//! receiver keeps each sender's messages in order, as a URPC channel does). Two coordinators
//! each run a 2PC on the same object. Checked: each operation finishes, every participant
//! applies the committed operations in the same order, no two operations hold a
//! participant's lock at once (so two conflicting operations never both commit
//! concurrently), and every lock is free at the end. Across all executions, both outcomes
//! occur: a conflict (something aborts) and a serial run (both commit).
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p agreement --release --test loom` (about
//! 10 s).
#![cfg(loom)]

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};

use agreement::{op_id, CoreSet, Decision, OpId, Participant, TwoPhase, TwoPhaseStatus, Vote};
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;

/// The object both operations touch.
const OBJECT: u32 = 7;

#[derive(Clone, Copy, Debug)]
enum Msg {
    /// To a participant: prepare `op`, coordinated by core `.1`.
    Prepare(OpId, usize),
    /// To a participant: the decision on `op`, coordinated by core `.2`.
    Decide(OpId, Decision, usize),
    /// To a coordinator: participant `.0`'s vote.
    Vote(usize, Vote),
    /// To a coordinator: participant `.0` applied the decision.
    Ack(usize),
}

/// What a participant did, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Trace {
    VotedYes(OpId),
    VotedNo(OpId),
    Applied(OpId),
    Dropped(OpId),
}

/// One mailbox per core. A receiver sleeps on the condition variable rather than polling
/// (the kernel polls URPC channels, but a polling loop would multiply the schedules loom
/// explores without adding any message order).
struct Net {
    boxes: Vec<(Mutex<VecDeque<Msg>>, Condvar)>,
}

impl Net {
    fn new(cores: usize) -> Net {
        Net { boxes: (0..cores).map(|_| (Mutex::new(VecDeque::new()), Condvar::new())).collect() }
    }

    fn send(&self, to: usize, m: Msg) {
        let (queue, ready) = &self.boxes[to];
        let mut q = queue.lock().unwrap();
        q.push_back(m);
        // Only a receiver that found the queue empty can be asleep.
        if q.len() == 1 {
            ready.notify_one();
        }
    }

    fn recv(&self, me: usize) -> Msg {
        let (queue, ready) = &self.boxes[me];
        let mut q = queue.lock().unwrap();
        loop {
            if let Some(m) = q.pop_front() {
                return m;
            }
            q = ready.wait(q).unwrap();
        }
    }
}

/// What one core's monitor ended with.
struct End {
    decision: Option<Decision>,
    trace: Vec<Trace>,
    state: Participant<u32>,
}

/// Core `me`'s monitor: serves `to_serve` participant messages (a prepare and a decision
/// per operation it takes part in) and, once it has served `start_after` of them, starts
/// coordinating `op` over its participants if given.
fn monitor(
    net: &Net,
    me: usize,
    op: Option<(OpId, CoreSet)>,
    start_after: usize,
    to_serve: usize,
) -> End {
    let mut to_start = op;
    let mut coord: Option<TwoPhase> = None;
    let (mut told, mut served) = (false, 0);
    let mut state = Participant::new();
    let mut trace = Vec::new();
    loop {
        if served >= start_after {
            if let Some((op, parts)) = to_start.take() {
                // No clock in the model: the deadline is never reached.
                coord = Some(TwoPhase::new(op, parts, 0, u64::MAX));
                for p in parts.iter() {
                    net.send(p, Msg::Prepare(op, me));
                }
            }
        }
        if let Some(tp) = &coord {
            if let (Some(d), false) = (tp.decision(), told) {
                told = true;
                for p in tp.to_tell().iter() {
                    net.send(p, Msg::Decide(tp.op(), d, me));
                }
            }
        }
        let finished = |tp: &TwoPhase| matches!(tp.status(), TwoPhaseStatus::Finished { .. });
        if to_start.is_none() && coord.as_ref().is_none_or(finished) && served == to_serve {
            break;
        }
        match net.recv(me) {
            Msg::Prepare(op, from) => {
                served += 1;
                let vote = state.prepare(op, &[OBJECT], true);
                trace.push(if vote == Vote::Yes {
                    Trace::VotedYes(op)
                } else {
                    Trace::VotedNo(op)
                });
                net.send(from, Msg::Vote(me, vote));
            }
            Msg::Decide(op, d, from) => {
                served += 1;
                let held = state.decide(op, d);
                if d == Decision::Commit {
                    assert_eq!(held, [OBJECT], "committed without the lock");
                    trace.push(Trace::Applied(op));
                } else {
                    trace.push(Trace::Dropped(op));
                }
                net.send(from, Msg::Ack(me));
            }
            // After an early No the other vote may still arrive: refused, harmless.
            Msg::Vote(from, v) => {
                let tp = coord.as_mut().expect("vote to a core coordinating nothing");
                let r = tp.vote(from, v);
                assert!(r.is_ok() || tp.decision().is_some(), "{r:?}");
            }
            Msg::Ack(from) => coord.as_mut().expect("stray ack").ack(from).unwrap(),
        }
    }
    let decision = coord.map(|tp| match tp.status() {
        TwoPhaseStatus::Finished { decision, failed } => {
            assert_eq!(failed, CoreSet::EMPTY);
            decision
        }
        s => panic!("unfinished: {s:?}"),
    });
    End { decision, trace, state }
}

/// The committed operations in the order a participant applied them.
fn applied(trace: &[Trace]) -> Vec<OpId> {
    trace.iter().filter_map(|t| if let Trace::Applied(op) = t { Some(*op) } else { None }).collect()
}

/// No two operations held the lock at once: between an operation's Yes and its decision,
/// no other Yes.
fn check_serial(trace: &[Trace]) {
    let mut holder = None;
    for &t in trace {
        match t {
            Trace::VotedYes(op) => {
                assert_eq!(holder, None, "{op:#x} locked while held: {trace:?}");
                holder = Some(op);
            }
            Trace::Applied(op) | Trace::Dropped(op) if holder == Some(op) => holder = None,
            _ => {}
        }
    }
    assert_eq!(holder, None, "lock left held: {trace:?}");
}

/// How many executions of one model committed both operations, and how many aborted at
/// least one (plain std atomics, outside loom's view: loom runs executions one by one).
#[derive(Default)]
struct Outcomes {
    both_committed: AtomicUsize,
    some_aborted: AtomicUsize,
}

/// `cores` monitors, one thread each (core 0 on the model's own thread); cores 0 and 1
/// coordinate an operation on `OBJECT` over `parts`, core 1 starting its own only after it
/// has served `start_after` participant messages (when it is a participant, a coordinator
/// that started at once would always find the other operation's prepare queued behind its
/// own, so the two could never run one after the other).
fn model(cores: usize, parts: CoreSet, start_after: usize, outcomes: &Outcomes) {
    let net = Arc::new(Net::new(cores));
    let ops = [op_id(0, 1), op_id(1, 1)];
    let run = move |net: &Net, c: usize| {
        let op = ops.get(c).map(|&op| (op, parts));
        let to_serve = if parts.contains(c) { 2 * ops.len() } else { 0 };
        let start_after = if c == 1 { start_after.min(to_serve) } else { 0 };
        monitor(net, c, op, start_after, to_serve)
    };
    let threads: Vec<_> = (1..cores)
        .map(|c| {
            let net = net.clone();
            thread::spawn(move || run(&net, c))
        })
        .collect();
    let mut ends = vec![run(&net, 0)];
    ends.extend(threads.into_iter().map(|t| t.join().unwrap()));

    let mut committed = Vec::new();
    for (c, end) in ends.iter().enumerate() {
        check_serial(&end.trace);
        assert_eq!(end.state.holder(OBJECT), None, "core {c}: lock not released");
        assert_eq!(end.state.prepared(), 0);
        if end.decision == Some(Decision::Commit) {
            committed.push(ops[c]);
        }
    }
    // One global order: every participant applied exactly the committed operations, all in
    // the same order.
    let first = applied(&ends[parts.iter().next().unwrap()].trace);
    for p in parts.iter() {
        let mut order = applied(&ends[p].trace);
        assert_eq!(order, first, "participants applied different orders");
        order.sort();
        assert_eq!(order, committed);
    }
    let counter = if committed.len() == ops.len() {
        &outcomes.both_committed
    } else {
        &outcomes.some_aborted
    };
    counter.fetch_add(1, Ordering::Relaxed);
}

/// Runs `model` under `builder` and checks both outcomes occurred.
fn check(builder: loom::model::Builder, cores: usize, parts: CoreSet, start_after: usize) {
    let outcomes = std::sync::Arc::new(Outcomes::default());
    let seen = outcomes.clone();
    builder.check(move || model(cores, parts, start_after, &seen));
    let both = outcomes.both_committed.load(Ordering::Relaxed);
    let aborted = outcomes.some_aborted.load(Ordering::Relaxed);
    std::eprintln!("both committed {both}, some aborted {aborted}");
    assert!(both > 0, "never ran serially ({aborted} executions had an abort)");
    assert!(aborted > 0, "never conflicted ({both} executions committed both)");
}

/// Two monitors, each coordinating one operation and each a participant of both, so each
/// operation can win one participant's lock and both abort. Up to 5 preemptions (about 3 s
/// in release mode; every bound from 2 to 7 was tried when this was written).
#[test]
fn two_monitors_both_participants() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(5);
    check(builder, 2, CoreSet::first(2), 1);
}

/// Two coordinating monitors and a third core that is the only participant. Up to 3
/// preemptions (about 3 s).
#[test]
fn two_coordinators_one_participant() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    check(builder, 3, CoreSet::single(2), 0);
}

/// Three monitors, all participants, two of them coordinating. Up to 2 preemptions (about
/// 3 s; 3 takes minutes).
#[test]
fn three_monitors_all_participants() {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(2);
    check(builder, 3, CoreSet::first(3), 1);
}
