//! Two-phase commit's cooperative termination (Bernstein, Hadzilacos and Goodman, §7.4): a
//! participant that voted Yes and holds its locks, whose coordinator then faulted, asks
//! the other participants what they know of the operation instead of holding the locks
//! forever (Multikernel §4.7: the protocol must never wait forever on a failed core).
//!
//! The rule, for a coordinator that stays dead (a faulted core never runs again):
//! - someone applied a Commit: commit (the coordinator decided so);
//! - someone aborted it, or never voted Yes: abort (the coordinator cannot have committed);
//! - every other live participant is as uncertain: abort. Nobody applied a decision and
//!   none can come any more, so aborting everywhere is one outcome for all.
//!
//! An answer counts only once the answering core has read every message the dead
//! coordinator sent it (the kernel checks its channel is empty before answering), so a
//! decision on its way cannot arrive after an "uncertain" answer.

use crate::{CoreSet, Decision, OpId};

/// What a participant knows of an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Knowledge {
    /// It applied a Commit.
    Committed,
    /// It applied an Abort.
    Aborted,
    /// It voted Yes and holds the locks, with no decision.
    Uncertain,
    /// It never voted Yes (it voted No, or never heard of the operation).
    NeverPrepared,
}

impl Knowledge {
    /// The code a message carries.
    pub fn code(self) -> u64 {
        match self {
            Knowledge::Committed => 1,
            Knowledge::Aborted => 2,
            Knowledge::Uncertain => 3,
            Knowledge::NeverPrepared => 4,
        }
    }

    /// The knowledge a message's code names.
    pub fn from_code(code: u64) -> Option<Knowledge> {
        Some(match code {
            1 => Knowledge::Committed,
            2 => Knowledge::Aborted,
            3 => Knowledge::Uncertain,
            4 => Knowledge::NeverPrepared,
            _ => return None,
        })
    }
}

/// One uncertain participant's termination of operation `op`.
#[derive(Clone, Debug)]
pub struct Termination {
    op: OpId,
    /// The other participants it still needs an answer from.
    waiting: CoreSet,
    decision: Option<Decision>,
}

impl Termination {
    /// Participant `me` of `op`, whose participants were `participants`, asks the others
    /// (the coordinator is dead: it is not asked).
    pub fn new(op: OpId, participants: CoreSet, me: usize, coordinator: usize) -> Termination {
        let mut waiting = participants;
        waiting.remove(me);
        waiting.remove(coordinator);
        let decision = waiting.is_empty().then_some(Decision::Abort);
        Termination { op, waiting, decision }
    }

    /// The operation.
    pub fn op(&self) -> OpId {
        self.op
    }

    /// The participants it still needs an answer from.
    pub fn waiting(&self) -> CoreSet {
        self.waiting
    }

    /// Core `from` answered; the decision, once there is one. Answers from cores it does
    /// not wait for (again, or never asked) change nothing.
    pub fn answer(&mut self, from: usize, knows: Knowledge) -> Option<Decision> {
        if self.decision.is_none() && self.waiting.contains(from) {
            self.waiting.remove(from);
            self.decision = match knows {
                Knowledge::Committed => Some(Decision::Commit),
                Knowledge::Aborted | Knowledge::NeverPrepared => Some(Decision::Abort),
                Knowledge::Uncertain => self.waiting.is_empty().then_some(Decision::Abort),
            };
        }
        self.decision
    }

    /// Participant `core` faulted too: no answer will come from it.
    pub fn fail(&mut self, core: usize) -> Option<Decision> {
        if self.decision.is_none() && self.waiting.contains(core) {
            self.waiting.remove(core);
            if self.waiting.is_empty() {
                self.decision = Some(Decision::Abort);
            }
        }
        self.decision
    }

    /// The decision, once there is one.
    pub fn decision(&self) -> Option<Decision> {
        self.decision
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(cores: &[usize]) -> CoreSet {
        cores.iter().copied().collect()
    }

    #[test]
    fn a_commit_anywhere_decides_commit() {
        let mut t = Termination::new(7, set(&[0, 1, 2, 3]), 1, 0);
        assert_eq!(t.waiting(), set(&[2, 3]));
        assert_eq!(t.answer(2, Knowledge::Uncertain), None);
        assert_eq!(t.answer(3, Knowledge::Committed), Some(Decision::Commit));
        // Later answers change nothing.
        assert_eq!(t.answer(3, Knowledge::Aborted), Some(Decision::Commit));
    }

    #[test]
    fn an_abort_or_a_no_vote_decides_abort() {
        for knows in [Knowledge::Aborted, Knowledge::NeverPrepared] {
            let mut t = Termination::new(7, set(&[0, 1, 2, 3]), 1, 0);
            assert_eq!(t.answer(2, knows), Some(Decision::Abort));
        }
    }

    #[test]
    fn all_uncertain_or_failed_decides_abort() {
        let mut t = Termination::new(7, set(&[0, 1, 2, 3]), 1, 0);
        assert_eq!(t.answer(2, Knowledge::Uncertain), None);
        assert_eq!(t.answer(2, Knowledge::Uncertain), None, "one answer per core");
        assert_eq!(t.answer(5, Knowledge::Committed), None, "not a participant");
        assert_eq!(t.fail(3), Some(Decision::Abort));
        // Alone with the dead coordinator: nobody to ask.
        assert_eq!(Termination::new(7, set(&[0, 1]), 1, 0).decision(), Some(Decision::Abort));
    }

    #[test]
    fn codes_round_trip() {
        for k in [
            Knowledge::Committed,
            Knowledge::Aborted,
            Knowledge::Uncertain,
            Knowledge::NeverPrepared,
        ] {
            assert_eq!(Knowledge::from_code(k.code()), Some(k));
        }
        assert_eq!(Knowledge::from_code(0), None);
    }
}
