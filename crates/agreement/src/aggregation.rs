//! A multicast aggregation node's side of one-phase commit (Multikernel §5.1, the
//! *Multicast* protocol): the initiator sends one message to the first core of each package,
//! which forwards it to the cores sharing its L3 cache and answers the initiator once for all
//! of them, so packages work in parallel and the interconnect carries one message each way.

use crate::{CoreSet, ProtocolError};

/// A multicast aggregator's side (Multikernel §5.1): it received the operation for a set of
/// `members` (its package) on behalf of `source`, applied it itself, forwarded it to the
/// members, and acknowledges the source once (for itself and every member) when all members
/// acked or failed. It has no deadline of its own: the source's [`crate::OnePhase`] deadline
/// bounds the whole operation, and the caller drops the aggregation when it gives up.
#[derive(Clone, Debug)]
pub struct Aggregation {
    source: usize,
    me: usize,
    members: CoreSet,
    acked: CoreSet,
    failed: CoreSet,
}

impl Aggregation {
    /// Starts aggregating for `members` on behalf of `source`. `me` has already applied the
    /// operation, so it counts as acknowledged and is never waited for (it is removed from
    /// `members` if listed there).
    pub fn new(source: usize, me: usize, members: CoreSet) -> Aggregation {
        let mut members = members;
        members.remove(me);
        Aggregation { source, me, members, acked: CoreSet::EMPTY, failed: CoreSet::EMPTY }
    }

    /// Records member `from`'s acknowledgement. `me` acknowledged when it applied the
    /// operation, so an ack from `me` is a [`ProtocolError::Duplicate`]. A late ack from a
    /// member declared failed still counts, as in [`crate::OnePhase::ack`].
    pub fn ack(&mut self, from: usize) -> Result<(), ProtocolError> {
        if from == self.me || self.acked.contains(from) {
            return Err(ProtocolError::Duplicate);
        }
        if !self.members.contains(from) {
            return Err(ProtocolError::NotAParticipant);
        }
        self.acked.insert(from);
        self.failed.remove(from);
        Ok(())
    }

    /// Declares member `core` failed. Idempotent; ignores non-members, `me`, and members that
    /// already acknowledged.
    pub fn fail(&mut self, core: usize) {
        if self.members.contains(core) && !self.acked.contains(core) {
            self.failed.insert(core);
        }
    }

    /// When finished: the set to report to the source as acknowledged (`me` and the members
    /// that acked), and the failed set. `None` while some live member has not answered. The
    /// caller sends one report (to [`crate::OnePhase::ack_many`] and
    /// [`crate::OnePhase::fail_many`]) and then drops the aggregation.
    pub fn finished(&self) -> Option<(CoreSet, CoreSet)> {
        if self.waiting_for().is_empty() {
            Some((self.acked.union(CoreSet::single(self.me)), self.failed))
        } else {
            None
        }
    }

    /// The live members that have not acknowledged.
    pub fn waiting_for(&self) -> CoreSet {
        self.members.minus(self.acked).minus(self.failed)
    }

    /// The core that started the operation, to which the report goes.
    pub fn source(&self) -> usize {
        self.source
    }

    /// The members the operation was forwarded to (never including `me`).
    pub fn members(&self) -> CoreSet {
        self.members
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{OnePhase, OnePhaseStatus};

    fn cores(list: &[usize]) -> CoreSet {
        list.iter().copied().collect()
    }

    #[test]
    fn reports_once_everyone_acked() {
        let mut agg = Aggregation::new(0, 4, cores(&[4, 5, 6, 7]));
        assert_eq!(agg.source(), 0);
        assert_eq!(agg.members(), cores(&[5, 6, 7]));
        assert_eq!(agg.finished(), None);
        agg.ack(5).unwrap();
        agg.ack(7).unwrap();
        assert_eq!(agg.finished(), None);
        assert_eq!(agg.waiting_for(), cores(&[6]));
        agg.ack(6).unwrap();
        assert_eq!(agg.finished(), Some((cores(&[4, 5, 6, 7]), CoreSet::EMPTY)));
    }

    #[test]
    fn alone_it_is_finished_at_once() {
        let agg = Aggregation::new(0, 4, CoreSet::EMPTY);
        assert_eq!(agg.finished(), Some((cores(&[4]), CoreSet::EMPTY)));
    }

    #[test]
    fn bad_acks_are_refused() {
        let mut agg = Aggregation::new(0, 4, cores(&[5, 6]));
        assert_eq!(agg.ack(4), Err(ProtocolError::Duplicate));
        assert_eq!(agg.ack(0), Err(ProtocolError::NotAParticipant));
        assert_eq!(agg.ack(99), Err(ProtocolError::NotAParticipant));
        agg.ack(5).unwrap();
        assert_eq!(agg.ack(5), Err(ProtocolError::Duplicate));
        assert_eq!(agg.finished(), None);
    }

    #[test]
    fn failed_members_are_reported_not_waited_for() {
        let mut agg = Aggregation::new(0, 4, cores(&[5, 6, 7]));
        agg.ack(5).unwrap();
        agg.fail(6);
        agg.fail(4); // me: alive by definition
        agg.fail(5); // already acknowledged
        agg.fail(9); // not a member
        assert_eq!(agg.finished(), None);
        agg.fail(7);
        assert_eq!(agg.finished(), Some((cores(&[4, 5]), cores(&[6, 7]))));
    }

    #[test]
    fn feeds_the_initiator() {
        // Two packages of two cores, initiator core 0 in the first: it sends to 1 directly and
        // to aggregator 2, which forwards to 3.
        let mut op = OnePhase::new(cores(&[1, 2, 3]), 0, 100);
        let mut agg = Aggregation::new(0, 2, cores(&[2, 3]));
        op.ack(1).unwrap();
        agg.fail(3);
        let (acked, failed) = agg.finished().unwrap();
        op.ack_many(acked).unwrap();
        op.fail_many(failed);
        assert_eq!(op.status(1), OnePhaseStatus::CompleteWithFailures(cores(&[3])));
    }
}
