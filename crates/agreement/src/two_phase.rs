//! Two-phase commit, the coordinator's side (Multikernel §4.7): capability retype and revoke
//! change what a region of memory is, and "all cores must agree on a single ordering of the
//! operations to preserve safety". Phase one collects votes, phase two tells everyone the
//! decision and collects acknowledgements. The participants' side is [`crate::Participant`].

use crate::{CoreSet, ProtocolError};

/// Names one 2PC operation, unique across the machine: `(initiator core << 48) | sequence`,
/// the initiator counting its own operations so no counter is shared (see [`op_id`]).
pub type OpId = u64;

/// The bits of an [`OpId`] that hold its sequence number.
const SEQUENCE_MASK: u64 = (1 << 48) - 1;

/// The [`OpId`] of the `sequence`-th operation started by core `initiator` (the sequence
/// keeps its low 48 bits).
pub fn op_id(initiator: usize, sequence: u64) -> OpId {
    ((initiator as u64) << 48) | (sequence & SEQUENCE_MASK)
}

/// The core that started operation `op`.
pub fn op_initiator(op: OpId) -> usize {
    (op >> 48) as usize
}

/// The sequence number of operation `op` among its initiator's.
pub fn op_sequence(op: OpId) -> u64 {
    op & SEQUENCE_MASK
}

/// Whether `op` is an operation core `initiator` has started, if it numbers its operations
/// from 1 and its next one is `next`. A vote or acknowledgement naming one that is no
/// longer running is late (the operation is over); one naming an operation this says was
/// never started is an error. (Once the sequence has wrapped, every number was used.)
pub fn op_started_by(op: OpId, initiator: usize, next: u64) -> bool {
    let sequence = op_sequence(op);
    op_initiator(op) == initiator && sequence != 0 && (sequence < next || next > SEQUENCE_MASK)
}

/// A participant's answer to *prepare*.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vote {
    /// The operation can be applied here, and its objects are now locked for it.
    Yes,
    /// It cannot (the local check failed, or another operation holds an object).
    No,
}

/// The coordinator's decision, sent to every participant in phase two.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Everyone voted Yes: apply the operation.
    Commit,
    /// Someone voted No, failed, or did not vote in time: drop it.
    Abort,
}

/// Where a [`TwoPhase`] operation stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TwoPhaseStatus {
    /// Collecting votes.
    Preparing,
    /// Decided; the decision must now be sent to every participant in
    /// [`TwoPhase::to_tell`] and their acks awaited.
    Decided(Decision),
    /// Every live participant acknowledged the decision: done. `failed` were declared failed
    /// on the way.
    Finished {
        /// What was decided.
        decision: Decision,
        /// Participants declared failed that never acknowledged the decision.
        failed: CoreSet,
    },
}

/// The phase, with the decision once there is one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Preparing,
    Decided(Decision),
    Finished(Decision),
}

/// The coordinator of one 2PC operation. It never waits forever: a vote missing at the
/// deadline counts as No, and an acknowledgement of the decision missing at a second
/// deadline declares its participant failed (see [`TwoPhase::tick`]).
#[derive(Clone, Debug)]
pub struct TwoPhase {
    op: OpId,
    participants: CoreSet,
    voted_yes: CoreSet,
    acked: CoreSet,
    failed: CoreSet,
    phase: Phase,
    /// While preparing, when voting closes; once decided, when acknowledgements must be in.
    deadline: u64,
    timeout: u64,
}

impl TwoPhase {
    /// Starts operation `op` at time `now`, having sent *prepare* to `participants`; voting
    /// closes at `now + timeout`. With no participants it commits at once.
    pub fn new(op: OpId, participants: CoreSet, now: u64, timeout: u64) -> TwoPhase {
        let mut tp = TwoPhase {
            op,
            participants,
            voted_yes: CoreSet::EMPTY,
            acked: CoreSet::EMPTY,
            failed: CoreSet::EMPTY,
            phase: Phase::Preparing,
            deadline: now.saturating_add(timeout),
            timeout,
        };
        tp.settle();
        tp
    }

    /// The operation's id.
    pub fn op(&self) -> OpId {
        self.op
    }

    /// `Ok` if a message naming `op` belongs to this operation, else
    /// [`ProtocolError::UnknownOperation`].
    pub fn check_op(&self, op: OpId) -> Result<(), ProtocolError> {
        if op == self.op {
            Ok(())
        } else {
            Err(ProtocolError::UnknownOperation)
        }
    }

    /// Records `from`'s vote. The first No decides Abort at once; the last Yes decides
    /// Commit. A vote after the decision is [`ProtocolError::WrongPhase`]: after an early
    /// Abort the other participants' votes are still in flight, so the caller should expect
    /// these and ignore them.
    pub fn vote(&mut self, from: usize, vote: Vote) -> Result<(), ProtocolError> {
        if !self.participants.contains(from) {
            return Err(ProtocolError::NotAParticipant);
        }
        if self.phase != Phase::Preparing {
            return Err(ProtocolError::WrongPhase);
        }
        if self.voted_yes.contains(from) {
            return Err(ProtocolError::Duplicate);
        }
        match vote {
            Vote::Yes => self.voted_yes.insert(from),
            Vote::No => self.decide_by_message(Decision::Abort),
        }
        self.settle();
        Ok(())
    }

    /// Records `from`'s acknowledgement of the decision ([`ProtocolError::WrongPhase`] before
    /// there is one). A late acknowledgement from a core declared failed still counts and
    /// clears the failure.
    pub fn ack(&mut self, from: usize) -> Result<(), ProtocolError> {
        if !self.participants.contains(from) {
            return Err(ProtocolError::NotAParticipant);
        }
        if self.phase == Phase::Preparing {
            return Err(ProtocolError::WrongPhase);
        }
        if self.acked.contains(from) {
            return Err(ProtocolError::Duplicate);
        }
        self.acked.insert(from);
        self.failed.remove(from);
        self.settle();
        Ok(())
    }

    /// Declares participant `core` failed. While preparing this forces Abort (a faulted core
    /// cannot vote Yes, and its replica can no longer apply the operation); once decided, the
    /// operation stops waiting for its acknowledgement. Idempotent; ignores non-participants
    /// and cores that already acknowledged the decision.
    pub fn fail(&mut self, core: usize) {
        if !self.participants.contains(core) || self.acked.contains(core) {
            return;
        }
        self.failed.insert(core);
        self.settle();
    }

    /// Advances on time (Multikernel §4.7 gives no timeouts; Atoll adds them so a faulted or
    /// wedged core cannot hang a retype). One step per call:
    /// - Preparing at or past the deadline: Abort (a missing vote is a No). The
    ///   acknowledgements then get `timeout` more cycles, from `now`.
    /// - Decided at or past the acknowledgement deadline: the participants that have not
    ///   acknowledged ([`TwoPhase::stragglers`]) are declared failed and the operation
    ///   finishes. A straggler that is merely slow still holds its locks until the decision
    ///   reaches it, so the global order is kept; the caller must treat a core it declared
    ///   failed as gone.
    pub fn tick(&mut self, now: u64) {
        if now < self.deadline {
            return;
        }
        match self.phase {
            Phase::Preparing => {
                self.phase = Phase::Decided(Decision::Abort);
                self.deadline = now.saturating_add(self.timeout);
            }
            Phase::Decided(_) => self.failed = self.failed.union(self.stragglers()),
            Phase::Finished(_) => {}
        }
        self.settle();
    }

    /// Where the operation stands (as of the last message or [`TwoPhase::tick`]).
    pub fn status(&self) -> TwoPhaseStatus {
        match self.phase {
            Phase::Preparing => TwoPhaseStatus::Preparing,
            Phase::Decided(d) => TwoPhaseStatus::Decided(d),
            Phase::Finished(d) => TwoPhaseStatus::Finished { decision: d, failed: self.failed },
        }
    }

    /// The decision, once made.
    pub fn decision(&self) -> Option<Decision> {
        match self.phase {
            Phase::Preparing => None,
            Phase::Decided(d) | Phase::Finished(d) => Some(d),
        }
    }

    /// The cores the operation was sent to.
    pub fn participants(&self) -> CoreSet {
        self.participants
    }

    /// Who must be sent the decision: every participant not declared failed, including
    /// those whose vote has not arrived (they may hold locks once it does).
    pub fn to_tell(&self) -> CoreSet {
        self.participants.minus(self.failed)
    }

    /// The live participants the current phase still waits for: those that have not voted
    /// while preparing, those that have not acknowledged once decided; empty when finished.
    pub fn stragglers(&self) -> CoreSet {
        let answered = match self.phase {
            Phase::Preparing => self.voted_yes,
            Phase::Decided(_) => self.acked,
            Phase::Finished(_) => return CoreSet::EMPTY,
        };
        self.participants.minus(answered).minus(self.failed)
    }

    /// The participants declared failed that never acknowledged the decision.
    pub fn failed(&self) -> CoreSet {
        self.failed
    }

    /// When the current phase times out (cycles): the caller should [`TwoPhase::tick`] at or
    /// after it.
    pub fn deadline(&self) -> u64 {
        self.deadline
    }

    /// Decides on a message (a vote or a failure), which carries no time: the
    /// acknowledgements get until one `timeout` past the voting deadline, which is at least
    /// `timeout` after now because the decision came before the deadline.
    fn decide_by_message(&mut self, d: Decision) {
        self.phase = Phase::Decided(d);
        self.deadline = self.deadline.saturating_add(self.timeout);
    }

    /// Takes every step the recorded answers allow: a failure while preparing aborts, all Yes
    /// commits, and a decided operation with no one left to wait for finishes.
    fn settle(&mut self) {
        if self.phase == Phase::Preparing {
            if !self.failed.is_empty() {
                self.decide_by_message(Decision::Abort);
            } else if self.voted_yes == self.participants {
                self.decide_by_message(Decision::Commit);
            }
        }
        if let Phase::Decided(d) = self.phase {
            if self.stragglers().is_empty() {
                self.phase = Phase::Finished(d);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cores(list: &[usize]) -> CoreSet {
        list.iter().copied().collect()
    }

    fn finished(decision: Decision, failed: &[usize]) -> TwoPhaseStatus {
        TwoPhaseStatus::Finished { decision, failed: cores(failed) }
    }

    #[test]
    fn op_ids_name_their_initiator() {
        let op = op_id(5, 17);
        assert_eq!(op, (5 << 48) | 17);
        assert_eq!(op_initiator(op), 5);
        assert_eq!(op_initiator(op_id(63, u64::MAX)), 63);
        assert_ne!(op_id(1, 0), op_id(2, 0));
        assert_eq!(op_sequence(op), 17);
    }

    #[test]
    fn only_ids_an_initiator_gave_count_as_started() {
        // Core 3 has started operations 1..=9 (its next is 10).
        for seq in 1..10 {
            assert!(op_started_by(op_id(3, seq), 3, 10), "operation {seq}");
        }
        assert!(!op_started_by(op_id(3, 10), 3, 10), "not yet started");
        assert!(!op_started_by(op_id(3, 1_000), 3, 10));
        assert!(!op_started_by(op_id(3, 0), 3, 10), "sequences start at 1");
        assert!(!op_started_by(op_id(4, 5), 3, 10), "another core's");
        assert!(!op_started_by(op_id(3, 1), 3, 1), "none started yet");
        // Past the 48 bits every number has been used.
        assert!(op_started_by(op_id(3, 12345), 3, SEQUENCE_MASK + 2));
    }

    #[test]
    fn all_yes_commits_then_finishes_on_acks() {
        let mut tp = TwoPhase::new(op_id(0, 1), cores(&[1, 2]), 0, 100);
        assert_eq!(tp.op(), op_id(0, 1));
        assert_eq!(tp.status(), TwoPhaseStatus::Preparing);
        tp.vote(1, Vote::Yes).unwrap();
        assert_eq!(tp.stragglers(), cores(&[2]));
        tp.vote(2, Vote::Yes).unwrap();
        assert_eq!(tp.status(), TwoPhaseStatus::Decided(Decision::Commit));
        assert_eq!(tp.to_tell(), cores(&[1, 2]));
        assert_eq!(tp.stragglers(), cores(&[1, 2]));
        tp.ack(2).unwrap();
        tp.ack(1).unwrap();
        assert_eq!(tp.status(), finished(Decision::Commit, &[]));
        assert_eq!(tp.stragglers(), CoreSet::EMPTY);
    }

    #[test]
    fn no_participants_commits_at_once() {
        let tp = TwoPhase::new(1, CoreSet::EMPTY, 0, 0);
        assert_eq!(tp.status(), finished(Decision::Commit, &[]));
    }

    #[test]
    fn one_no_aborts_at_once() {
        let mut tp = TwoPhase::new(1, cores(&[1, 2, 3]), 0, 100);
        tp.vote(1, Vote::Yes).unwrap();
        tp.vote(2, Vote::No).unwrap();
        assert_eq!(tp.status(), TwoPhaseStatus::Decided(Decision::Abort));
        // Core 3's vote was in flight: refused, and it must still be told.
        assert_eq!(tp.vote(3, Vote::Yes), Err(ProtocolError::WrongPhase));
        assert_eq!(tp.to_tell(), cores(&[1, 2, 3]));
        for c in [1, 2, 3] {
            tp.ack(c).unwrap();
        }
        assert_eq!(tp.status(), finished(Decision::Abort, &[]));
    }

    #[test]
    fn bad_votes_and_acks_are_refused() {
        let mut tp = TwoPhase::new(1, cores(&[1, 2]), 0, 100);
        assert_eq!(tp.check_op(1), Ok(()));
        assert_eq!(tp.check_op(2), Err(ProtocolError::UnknownOperation));
        assert_eq!(tp.vote(7, Vote::Yes), Err(ProtocolError::NotAParticipant));
        assert_eq!(tp.vote(64, Vote::Yes), Err(ProtocolError::NotAParticipant));
        assert_eq!(tp.ack(1), Err(ProtocolError::WrongPhase)); // before the decision
        tp.vote(1, Vote::Yes).unwrap();
        assert_eq!(tp.vote(1, Vote::Yes), Err(ProtocolError::Duplicate));
        assert_eq!(tp.vote(1, Vote::No), Err(ProtocolError::Duplicate));
        assert_eq!(tp.status(), TwoPhaseStatus::Preparing);
        tp.vote(2, Vote::Yes).unwrap();
        assert_eq!(tp.vote(2, Vote::Yes), Err(ProtocolError::WrongPhase)); // after it
        assert_eq!(tp.ack(7), Err(ProtocolError::NotAParticipant));
        tp.ack(1).unwrap();
        assert_eq!(tp.ack(1), Err(ProtocolError::Duplicate));
        tp.ack(2).unwrap();
        assert_eq!(tp.vote(2, Vote::No), Err(ProtocolError::WrongPhase)); // after finishing
        assert_eq!(tp.status(), finished(Decision::Commit, &[]));
    }

    #[test]
    fn missing_vote_at_the_deadline_aborts() {
        let mut tp = TwoPhase::new(1, cores(&[1, 2]), 1_000, 100);
        tp.vote(1, Vote::Yes).unwrap();
        tp.tick(1_099);
        assert_eq!(tp.status(), TwoPhaseStatus::Preparing);
        tp.tick(1_100);
        assert_eq!(tp.status(), TwoPhaseStatus::Decided(Decision::Abort));
        // The acknowledgements get a full timeout from the tick that decided.
        assert_eq!(tp.deadline(), 1_200);
        assert_eq!(tp.vote(2, Vote::Yes), Err(ProtocolError::WrongPhase));
        tp.ack(1).unwrap();
        tp.ack(2).unwrap();
        assert_eq!(tp.status(), finished(Decision::Abort, &[]));
    }

    #[test]
    fn a_late_tick_does_not_skip_the_acknowledgements() {
        let mut tp = TwoPhase::new(1, cores(&[1]), 0, 100);
        tp.tick(5_000); // long after the deadline: abort, but do not fail anyone yet
        assert_eq!(tp.status(), TwoPhaseStatus::Decided(Decision::Abort));
        assert_eq!(tp.failed(), CoreSet::EMPTY);
        tp.tick(5_099);
        assert_eq!(tp.status(), TwoPhaseStatus::Decided(Decision::Abort));
        tp.tick(5_100);
        assert_eq!(tp.status(), finished(Decision::Abort, &[1]));
    }

    #[test]
    fn unacknowledged_decision_declares_stragglers_failed() {
        let mut tp = TwoPhase::new(1, cores(&[1, 2, 3]), 0, 100);
        for c in [1, 2, 3] {
            tp.vote(c, Vote::Yes).unwrap();
        }
        assert_eq!(tp.deadline(), 200); // decided by message: one timeout past voting
        tp.ack(1).unwrap();
        tp.tick(150);
        assert_eq!(tp.status(), TwoPhaseStatus::Decided(Decision::Commit));
        assert_eq!(tp.stragglers(), cores(&[2, 3]));
        tp.tick(200);
        assert_eq!(tp.status(), finished(Decision::Commit, &[2, 3]));
        // A straggler that was only slow still counts when it answers.
        tp.ack(3).unwrap();
        assert_eq!(tp.status(), finished(Decision::Commit, &[2]));
    }

    #[test]
    fn failure_while_preparing_aborts() {
        let mut tp = TwoPhase::new(1, cores(&[1, 2, 3]), 0, 100);
        tp.vote(1, Vote::Yes).unwrap();
        tp.vote(2, Vote::Yes).unwrap();
        tp.fail(3);
        assert_eq!(tp.status(), TwoPhaseStatus::Decided(Decision::Abort));
        assert_eq!(tp.to_tell(), cores(&[1, 2]));
        assert_eq!(tp.vote(3, Vote::Yes), Err(ProtocolError::WrongPhase));
        tp.ack(1).unwrap();
        tp.ack(2).unwrap();
        assert_eq!(tp.status(), finished(Decision::Abort, &[3]));
    }

    #[test]
    fn failure_after_the_decision_stops_the_wait() {
        let mut tp = TwoPhase::new(1, cores(&[1, 2]), 0, 100);
        tp.vote(1, Vote::Yes).unwrap();
        tp.vote(2, Vote::Yes).unwrap();
        tp.ack(1).unwrap();
        tp.fail(1); // already acknowledged: ignored
        tp.fail(9); // not a participant: ignored
        assert_eq!(tp.status(), TwoPhaseStatus::Decided(Decision::Commit));
        tp.fail(2);
        tp.fail(2);
        assert_eq!(tp.status(), finished(Decision::Commit, &[2]));
    }

    #[test]
    fn everyone_failing_finishes() {
        let mut tp = TwoPhase::new(1, cores(&[1, 2]), 0, 100);
        tp.fail(1);
        tp.fail(2);
        assert_eq!(tp.status(), finished(Decision::Abort, &[1, 2]));
        assert_eq!(tp.to_tell(), CoreSet::EMPTY);
    }
}
