//! One-phase commit, the initiator's side (Multikernel §4.7): used for unmap and rights
//! reduction, where every core that may cache the mapping must drop it (TLB shootdown, §5.1)
//! before the initiator may act on the change, e.g. free the frames.

use crate::{CoreSet, ProtocolError};

/// The initiator's side of one 1PC operation: it sent the operation to `participants`; each
/// applies it and acknowledges; the operation is complete when every participant has
/// acknowledged or has been declared failed. Never waits forever: past its deadline it is
/// [`OnePhaseStatus::TimedOut`].
#[derive(Clone, Debug)]
pub struct OnePhase {
    participants: CoreSet,
    acked: CoreSet,
    failed: CoreSet,
    deadline: u64,
}

/// Where a [`OnePhase`] operation stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnePhaseStatus {
    /// Some live participant has not acknowledged yet, and the deadline has not passed.
    Pending,
    /// Everyone acknowledged.
    Complete,
    /// Everyone still alive acknowledged; these were declared failed (faulted cores).
    CompleteWithFailures(CoreSet),
    /// The deadline passed: these live participants never answered. The caller must treat
    /// the operation as NOT done everywhere (e.g. must not free frames).
    TimedOut(CoreSet),
}

impl OnePhase {
    /// Starts tracking an operation just sent to `participants` at time `now`; it times out
    /// at `now + timeout` (cycles). With no participants it is complete at once.
    pub fn new(participants: CoreSet, now: u64, timeout: u64) -> OnePhase {
        OnePhase {
            participants,
            acked: CoreSet::EMPTY,
            failed: CoreSet::EMPTY,
            deadline: now.saturating_add(timeout),
        }
    }

    /// Records `from`'s acknowledgement. An acknowledgement from a core already declared
    /// failed still counts (it proves the core applied the operation) and clears the failure.
    pub fn ack(&mut self, from: usize) -> Result<(), ProtocolError> {
        if !self.participants.contains(from) {
            return Err(ProtocolError::NotAParticipant); // includes cores >= 64
        }
        self.ack_many(CoreSet::single(from))
    }

    /// Records an acknowledgement for several cores at once: a multicast aggregator answers
    /// for its whole package (Multikernel §5.1). All or nothing: if any core in `from` is not
    /// a participant, or already acknowledged, nothing is recorded. An empty `from`
    /// acknowledges nobody and is accepted.
    pub fn ack_many(&mut self, from: CoreSet) -> Result<(), ProtocolError> {
        if !from.is_subset(self.participants) {
            return Err(ProtocolError::NotAParticipant);
        }
        if !from.intersection(self.acked).is_empty() {
            return Err(ProtocolError::Duplicate);
        }
        self.acked = self.acked.union(from);
        self.failed = self.failed.minus(from);
        Ok(())
    }

    /// Declares participant `core` failed (its kernel faulted): the operation no longer
    /// waits for it. Idempotent; ignores non-participants and cores that already
    /// acknowledged (they did the work before failing).
    pub fn fail(&mut self, core: usize) {
        self.fail_many(CoreSet::single(core));
    }

    /// [`OnePhase::fail`] for every core in `cores` (e.g. the failed set an aggregator
    /// reported).
    pub fn fail_many(&mut self, cores: CoreSet) {
        let newly = cores.intersection(self.participants).minus(self.acked);
        self.failed = self.failed.union(newly);
    }

    /// Where the operation stands at time `now`. Completion wins over the deadline: an
    /// operation whose last acknowledgement arrived is complete however late it is asked.
    /// It times out when `now >= deadline` with some live participant still silent.
    pub fn status(&self, now: u64) -> OnePhaseStatus {
        let waiting = self.waiting_for();
        if waiting.is_empty() {
            if self.failed.is_empty() {
                OnePhaseStatus::Complete
            } else {
                OnePhaseStatus::CompleteWithFailures(self.failed)
            }
        } else if now >= self.deadline {
            OnePhaseStatus::TimedOut(waiting)
        } else {
            OnePhaseStatus::Pending
        }
    }

    /// The live participants that have not acknowledged.
    pub fn waiting_for(&self) -> CoreSet {
        self.participants.minus(self.acked).minus(self.failed)
    }

    /// The cores the operation was sent to.
    pub fn participants(&self) -> CoreSet {
        self.participants
    }

    /// The participants that acknowledged.
    pub fn acked(&self) -> CoreSet {
        self.acked
    }

    /// The participants declared failed that never acknowledged.
    pub fn failed(&self) -> CoreSet {
        self.failed
    }

    /// The time (cycles) at which a still-waiting operation times out.
    pub fn deadline(&self) -> u64 {
        self.deadline
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cores(list: &[usize]) -> CoreSet {
        list.iter().copied().collect()
    }

    #[test]
    fn completes_when_everyone_acks() {
        let mut op = OnePhase::new(cores(&[1, 2, 3]), 100, 50);
        assert_eq!(op.status(100), OnePhaseStatus::Pending);
        op.ack(1).unwrap();
        op.ack(3).unwrap();
        assert_eq!(op.status(120), OnePhaseStatus::Pending);
        assert_eq!(op.waiting_for(), cores(&[2]));
        op.ack(2).unwrap();
        assert_eq!(op.status(120), OnePhaseStatus::Complete);
        // Completion wins over a deadline that passed before anyone asked.
        assert_eq!(op.status(1_000), OnePhaseStatus::Complete);
    }

    #[test]
    fn no_participants_is_complete_at_once() {
        let op = OnePhase::new(CoreSet::EMPTY, 0, 0);
        assert_eq!(op.status(0), OnePhaseStatus::Complete);
    }

    #[test]
    fn duplicate_and_foreign_acks_are_refused() {
        let mut op = OnePhase::new(cores(&[1, 2]), 0, 10);
        assert_eq!(op.ack(5), Err(ProtocolError::NotAParticipant));
        assert_eq!(op.ack(64), Err(ProtocolError::NotAParticipant));
        assert_eq!(op.ack(usize::MAX), Err(ProtocolError::NotAParticipant));
        op.ack(1).unwrap();
        assert_eq!(op.ack(1), Err(ProtocolError::Duplicate));
        assert_eq!(op.acked(), cores(&[1]));
        assert_eq!(op.status(0), OnePhaseStatus::Pending);
    }

    #[test]
    fn ack_many_is_all_or_nothing() {
        let mut op = OnePhase::new(cores(&[1, 2, 3, 4]), 0, 10);
        assert_eq!(op.ack_many(cores(&[1, 9])), Err(ProtocolError::NotAParticipant));
        assert_eq!(op.acked(), CoreSet::EMPTY);
        op.ack_many(cores(&[1, 2])).unwrap();
        assert_eq!(op.ack_many(cores(&[2, 3])), Err(ProtocolError::Duplicate));
        assert_eq!(op.acked(), cores(&[1, 2]));
        assert_eq!(op.ack_many(CoreSet::EMPTY), Ok(()));
        op.ack_many(cores(&[3, 4])).unwrap();
        assert_eq!(op.status(0), OnePhaseStatus::Complete);
    }

    #[test]
    fn times_out_at_the_deadline_naming_the_silent() {
        let mut op = OnePhase::new(cores(&[1, 2, 3]), 1_000, 500);
        op.ack(2).unwrap();
        assert_eq!(op.deadline(), 1_500);
        assert_eq!(op.status(1_499), OnePhaseStatus::Pending);
        assert_eq!(op.status(1_500), OnePhaseStatus::TimedOut(cores(&[1, 3])));
        // A failed core is not waited for, so it is not reported as silent.
        op.fail(3);
        assert_eq!(op.status(2_000), OnePhaseStatus::TimedOut(cores(&[1])));
    }

    #[test]
    fn deadline_saturates() {
        let op = OnePhase::new(cores(&[1]), u64::MAX - 1, 10);
        assert_eq!(op.status(u64::MAX - 1), OnePhaseStatus::Pending);
    }

    #[test]
    fn failed_participants_complete_with_failures() {
        let mut op = OnePhase::new(cores(&[1, 2, 3]), 0, 10);
        op.ack(1).unwrap();
        op.fail(2);
        op.fail(2); // idempotent
        op.fail(7); // not a participant: ignored
        op.fail(1); // already acknowledged: the work was done, ignored
        assert_eq!(op.failed(), cores(&[2]));
        assert_eq!(op.status(5), OnePhaseStatus::Pending);
        op.ack(3).unwrap();
        assert_eq!(op.status(5), OnePhaseStatus::CompleteWithFailures(cores(&[2])));
    }

    #[test]
    fn late_ack_from_a_failed_core_counts() {
        let mut op = OnePhase::new(cores(&[1, 2]), 0, 10);
        op.fail_many(cores(&[1, 2]));
        assert_eq!(op.status(0), OnePhaseStatus::CompleteWithFailures(cores(&[1, 2])));
        op.ack(2).unwrap();
        assert_eq!(op.status(0), OnePhaseStatus::CompleteWithFailures(cores(&[1])));
        op.ack(1).unwrap();
        assert_eq!(op.status(0), OnePhaseStatus::Complete);
    }
}
