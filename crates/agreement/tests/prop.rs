//! Property tests of the agreement protocols.
//!
//! Two-phase commit: several concurrent operations from different coordinators, over random
//! object sets at random participants, with messages delivered in an order proptest picks
//! (each pair of endpoints is a FIFO channel, as URPC is; Multikernel §4.6). Checked against
//! the sequential model §4.7 asks for: every core applies the committed operations in one
//! global order, every operation finishes, and every lock is released.
//!
//! One-phase commit: random acknowledgements, failures and clock steps, checked against a
//! model of who has answered: never complete while a live participant is silent, never
//! timed out before the deadline.

use std::collections::{BTreeMap, VecDeque};

use agreement::{
    op_id, CoreSet, Decision, OnePhase, OnePhaseStatus, OpId, Participant, ProtocolError, TwoPhase,
    TwoPhaseStatus, Vote,
};
use proptest::prelude::*;

// ---------------------------------------------------------------- two-phase commit model

/// Voting timeout of every simulated operation; a clock step advances half of it.
const TIMEOUT: u64 = 100;

/// One operation to run: who takes part, what it touches, and where its local check passes.
#[derive(Clone, Debug)]
struct OpSpec {
    coordinator: usize,
    participants: CoreSet,
    objects: Vec<u8>,
    can_apply: CoreSet,
}

/// An endpoint: a coordinator (by operation index) or a participant (by core).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum End {
    Coord(usize),
    Part(usize),
}

#[derive(Clone, Copy, Debug)]
enum Msg {
    Prepare(OpId),
    Vote(OpId, usize, Vote),
    Decide(OpId, Decision),
    Ack(OpId, usize),
}

/// Something that can happen next.
#[derive(Clone, Copy, Debug)]
enum Event {
    Start(usize),
    Deliver(End, End),
    Tick,
}

/// The whole machine: coordinators, participants and the messages in flight.
struct Sim {
    specs: Vec<OpSpec>,
    coords: Vec<Option<TwoPhase>>,
    told: Vec<bool>,
    parts: Vec<Participant<u8>>,
    channels: BTreeMap<(End, End), VecDeque<Msg>>,
    /// Per core, the committed operations in the order that core applied them.
    applied: Vec<Vec<usize>>,
    now: u64,
    step: usize,
    started_at: Vec<usize>,
    finished_at: Vec<usize>,
}

/// Operation `i`'s id: the coordinator's core in the high bits, `i` as the sequence.
fn id(spec: &OpSpec, i: usize) -> OpId {
    op_id(spec.coordinator, i as u64)
}

fn index(op: OpId) -> usize {
    (op & ((1 << 48) - 1)) as usize
}

impl Sim {
    fn new(cores: usize, specs: Vec<OpSpec>) -> Sim {
        let n = specs.len();
        Sim {
            specs,
            coords: vec![None; n],
            told: vec![false; n],
            parts: (0..cores).map(|_| Participant::new()).collect(),
            channels: BTreeMap::new(),
            applied: vec![Vec::new(); cores],
            now: 0,
            step: 0,
            started_at: vec![usize::MAX; n],
            finished_at: vec![usize::MAX; n],
        }
    }

    fn send(&mut self, from: End, to: End, m: Msg) {
        self.channels.entry((from, to)).or_default().push_back(m);
    }

    fn enabled(&self, with_time: bool) -> Vec<Event> {
        let mut events: Vec<Event> =
            (0..self.specs.len()).filter(|&i| self.coords[i].is_none()).map(Event::Start).collect();
        for (&(from, to), q) in &self.channels {
            if !q.is_empty() {
                events.push(Event::Deliver(from, to));
            }
        }
        let waiting = self.coords.iter().flatten().any(|c| !is_finished(c));
        if with_time && waiting {
            events.push(Event::Tick);
        }
        events
    }

    fn run(&mut self, event: Event) {
        self.step += 1;
        match event {
            Event::Start(i) => {
                let spec = &self.specs[i];
                let op = id(spec, i);
                let parts = spec.participants;
                self.coords[i] = Some(TwoPhase::new(op, parts, self.now, TIMEOUT));
                self.started_at[i] = self.step;
                for p in parts.iter() {
                    self.send(End::Coord(i), End::Part(p), Msg::Prepare(op));
                }
            }
            Event::Deliver(from, to) => {
                let m = self.channels.get_mut(&(from, to)).unwrap().pop_front().unwrap();
                self.deliver(to, m);
            }
            Event::Tick => {
                self.now += TIMEOUT / 2;
                for c in self.coords.iter_mut().flatten() {
                    c.tick(self.now);
                }
            }
        }
        self.after_step();
    }

    fn deliver(&mut self, to: End, m: Msg) {
        match (to, m) {
            (End::Part(p), Msg::Prepare(op)) => {
                let i = index(op);
                let spec = &self.specs[i];
                let vote = self.parts[p].prepare(op, &spec.objects, spec.can_apply.contains(p));
                self.send(to, End::Coord(i), Msg::Vote(op, p, vote));
            }
            (End::Part(p), Msg::Decide(op, d)) => {
                let i = index(op);
                let held = self.parts[p].decide(op, d);
                if d == Decision::Commit {
                    // Commit needs p's Yes, so p must hold every object until now.
                    let mut want = self.specs[i].objects.clone();
                    want.sort();
                    want.dedup();
                    let mut got = held;
                    got.sort();
                    assert_eq!(got, want, "op {i} committed at core {p} without its locks");
                    self.applied[p].push(i);
                }
                self.send(to, End::Coord(i), Msg::Ack(op, p));
            }
            (End::Coord(i), Msg::Vote(op, from, vote)) => {
                let c = self.coords[i].as_mut().unwrap();
                match c.vote(from, vote) {
                    Ok(()) => {}
                    // Votes still in flight when an early No or the deadline decided.
                    Err(ProtocolError::WrongPhase) => assert!(c.decision().is_some()),
                    Err(e) => panic!("op {op:#x}: vote from {from} refused: {e:?}"),
                }
            }
            (End::Coord(i), Msg::Ack(op, from)) => {
                let c = self.coords[i].as_mut().unwrap();
                c.check_op(op).unwrap();
                c.ack(from).unwrap();
            }
            (to, m) => panic!("message {m:?} delivered to {to:?}"),
        }
    }

    /// Coordinators that have decided send the decision, once; record finishing times.
    fn after_step(&mut self) {
        for i in 0..self.specs.len() {
            let Some(c) = &self.coords[i] else { continue };
            if let (Some(d), false) = (c.decision(), self.told[i]) {
                let (op, to_tell) = (c.op(), c.to_tell());
                self.told[i] = true;
                for p in to_tell.iter() {
                    self.send(End::Coord(i), End::Part(p), Msg::Decide(op, d));
                }
            }
            let c = self.coords[i].as_ref().unwrap();
            if is_finished(c) && self.finished_at[i] == usize::MAX {
                self.finished_at[i] = self.step;
            }
        }
    }

    /// Runs proptest's choices, then delivers everything left in a fixed order.
    fn run_all(&mut self, choices: &[u16], with_time: bool) {
        for &choice in choices {
            let events = self.enabled(with_time);
            if events.is_empty() {
                break;
            }
            self.run(events[choice as usize % events.len()]);
        }
        // Drain: no more clock steps are needed, since every message arrives.
        for _ in 0..100_000 {
            match self.enabled(false).first() {
                Some(&e) => self.run(e),
                None => return,
            }
        }
        panic!("simulation did not quiesce");
    }

    fn committed(&self, i: usize) -> bool {
        matches!(
            self.coords[i].as_ref().unwrap().status(),
            TwoPhaseStatus::Finished { decision: Decision::Commit, .. }
        )
    }

    fn conflict(&self, a: usize, b: usize) -> bool {
        let (sa, sb) = (&self.specs[a], &self.specs[b]);
        !sa.participants.intersection(sb.participants).is_empty()
            && sa.objects.iter().any(|o| sb.objects.contains(o))
    }

    /// Every check on a quiescent machine.
    fn check(&self) {
        let n = self.specs.len();
        for (i, c) in self.coords.iter().enumerate() {
            let c = c.as_ref().expect("every operation starts");
            assert!(is_finished(c), "op {i} did not finish: {:?}", c.status());
        }
        for (p, part) in self.parts.iter().enumerate() {
            assert_eq!(part.prepared(), 0, "core {p} still holds prepared operations");
            for o in 0..8 {
                assert_eq!(part.holder(o), None, "core {p} still locks object {o}");
            }
        }
        // A committed operation is applied exactly once at each of its participants, an
        // aborted one nowhere.
        for i in 0..n {
            for (p, list) in self.applied.iter().enumerate() {
                let times = list.iter().filter(|&&x| x == i).count();
                let want = usize::from(self.committed(i) && self.specs[i].participants.contains(p));
                assert_eq!(times, want, "op {i} applied {times} times at core {p}");
            }
        }
        // Per object, any two cores applied the committed operations they share in the same
        // order.
        for o in 0..8u8 {
            let history = |p: usize, q: usize| -> Vec<usize> {
                let both = |&&i: &&usize| {
                    self.specs[i].objects.contains(&o) && self.specs[i].participants.contains(q)
                };
                self.applied[p].iter().filter(both).copied().collect()
            };
            for p in 0..self.parts.len() {
                for q in p + 1..self.parts.len() {
                    assert_eq!(history(p, q), history(q, p), "cores {p}, {q} disagree on {o}");
                }
            }
        }
        // And the order is one global order: "a before b somewhere, on a shared object"
        // has no cycle (Kahn's algorithm empties the graph).
        let mut before = vec![vec![false; n]; n];
        for list in &self.applied {
            for (k, &a) in list.iter().enumerate() {
                for &b in &list[k + 1..] {
                    if self.conflict(a, b) {
                        before[a][b] = true;
                    }
                }
            }
        }
        let mut done = vec![false; n];
        for _ in 0..n {
            let free = (0..n).find(|&b| !done[b] && (0..n).all(|a| done[a] || !before[a][b]));
            let b = free.expect("applied orders form a cycle: no global order");
            done[b] = true;
        }
    }
}

fn is_finished(c: &TwoPhase) -> bool {
    matches!(c.status(), TwoPhaseStatus::Finished { .. })
}

fn mask(bits: u64, cores: usize) -> CoreSet {
    CoreSet(bits & CoreSet::first(cores).0)
}

/// Random operations over `cores` cores and objects `0..8`.
fn specs(cores: usize, max_ops: usize) -> impl Strategy<Value = Vec<OpSpec>> {
    let one = (
        0..cores,
        1u64..(1 << cores),
        proptest::collection::vec(0u8..8, 1..4),
        proptest::collection::vec(proptest::bool::weighted(0.9), cores),
    )
        .prop_map(move |(coordinator, parts, objects, ok)| OpSpec {
            coordinator,
            participants: mask(parts, cores),
            objects,
            can_apply: (0..cores).filter(|&c| ok[c]).collect(),
        });
    proptest::collection::vec(one, 1..=max_ops)
}

fn machine() -> impl Strategy<Value = (usize, Vec<OpSpec>)> {
    (2usize..=4).prop_flat_map(|cores| (Just(cores), specs(cores, 5)))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Concurrent 2PC operations in any delivery order: one global order of conflicting
    /// commits, every operation finishes, every lock is released. An operation that ran
    /// alone (no conflicting operation in flight at any point of its life), passed every
    /// local check and met no clock commits.
    #[test]
    fn two_phase_commit_gives_one_global_order(
        (cores, specs) in machine(),
        choices in proptest::collection::vec(any::<u16>(), 0..400),
        with_time in any::<bool>(),
    ) {
        let mut sim = Sim::new(cores, specs);
        sim.run_all(&choices, with_time);
        sim.check();
        if !with_time {
            for i in 0..sim.specs.len() {
                let alone = (0..sim.specs.len()).all(|j| {
                    j == i
                        || !sim.conflict(i, j)
                        || sim.finished_at[j] < sim.started_at[i]
                        || sim.started_at[j] > sim.finished_at[i]
                });
                let ok = sim.specs[i].participants.is_subset(sim.specs[i].can_apply);
                prop_assert!(!(alone && ok) || sim.committed(i), "op {} ran alone but aborted", i);
            }
        }
    }

    /// Operations on disjoint objects never get in each other's way: all commit, however
    /// their messages interleave.
    #[test]
    fn disjoint_operations_all_commit(
        (cores, specs) in machine(),
        choices in proptest::collection::vec(any::<u16>(), 0..400),
    ) {
        let specs: Vec<OpSpec> = specs
            .into_iter()
            .enumerate()
            .map(|(i, s)| OpSpec { objects: vec![i as u8], can_apply: CoreSet::first(cores), ..s })
            .collect();
        let mut sim = Sim::new(cores, specs);
        sim.run_all(&choices, false);
        sim.check();
        for i in 0..sim.specs.len() {
            prop_assert!(sim.committed(i), "op {} aborted with no conflict", i);
        }
    }
}

// ---------------------------------------------------------------- one-phase commit model

#[derive(Clone, Debug)]
enum OneEvent {
    Ack(usize),
    AckMany(u64),
    Fail(usize),
    Advance(u64),
}

fn one_event() -> impl Strategy<Value = OneEvent> {
    prop_oneof![
        4 => (0usize..10).prop_map(OneEvent::Ack),
        1 => any::<u8>().prop_map(|m| OneEvent::AckMany(u64::from(m))),
        1 => (0usize..10).prop_map(OneEvent::Fail),
        2 => (0u64..40).prop_map(OneEvent::Advance),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// 1PC against a model of who answered: every answer is refused exactly when it should
    /// be, the status is never Complete while a live participant is silent, and never
    /// TimedOut before the deadline.
    #[test]
    fn one_phase_matches_model(
        parts in any::<u8>(),
        start in 0u64..1_000,
        timeout in 0u64..100,
        events in proptest::collection::vec(one_event(), 0..40),
    ) {
        let participants = CoreSet(u64::from(parts));
        let mut op = OnePhase::new(participants, start, timeout);
        let deadline = start + timeout;
        let (mut acked, mut failed, mut now) = (CoreSet::EMPTY, CoreSet::EMPTY, start);
        for e in events {
            match e {
                OneEvent::Ack(c) => {
                    let want = if !participants.contains(c) {
                        Err(ProtocolError::NotAParticipant)
                    } else if acked.contains(c) {
                        Err(ProtocolError::Duplicate)
                    } else {
                        acked.insert(c);
                        failed.remove(c);
                        Ok(())
                    };
                    prop_assert_eq!(op.ack(c), want);
                }
                OneEvent::AckMany(m) => {
                    let from = CoreSet(m);
                    let want = if !from.is_subset(participants) {
                        Err(ProtocolError::NotAParticipant)
                    } else if !from.intersection(acked).is_empty() {
                        Err(ProtocolError::Duplicate)
                    } else {
                        acked = acked.union(from);
                        failed = failed.minus(from);
                        Ok(())
                    };
                    prop_assert_eq!(op.ack_many(from), want);
                }
                OneEvent::Fail(c) => {
                    if participants.contains(c) && !acked.contains(c) {
                        failed.insert(c);
                    }
                    op.fail(c);
                }
                OneEvent::Advance(dt) => now += dt,
            }
            let silent = participants.minus(acked).minus(failed);
            prop_assert_eq!(op.waiting_for(), silent);
            for probe in [now, start, deadline.saturating_sub(1), deadline] {
                match op.status(probe) {
                    OnePhaseStatus::Complete => {
                        prop_assert!(silent.is_empty() && failed.is_empty());
                    }
                    OnePhaseStatus::CompleteWithFailures(f) => {
                        prop_assert!(silent.is_empty());
                        prop_assert!(!f.is_empty());
                        prop_assert_eq!(f, failed);
                    }
                    OnePhaseStatus::TimedOut(w) => {
                        prop_assert!(probe >= deadline, "timed out at {} < {}", probe, deadline);
                        prop_assert_eq!(w, silent);
                        prop_assert!(!w.is_empty());
                    }
                    OnePhaseStatus::Pending => {
                        prop_assert!(probe < deadline && !silent.is_empty());
                    }
                }
            }
        }
    }
}
