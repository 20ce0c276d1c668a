//! Two-phase commit, a participant's side (Multikernel §4.7): the per-object locks that give
//! every core the same order of conflicting operations. A Yes vote locks the operation's
//! objects until its decision arrives; a prepare that finds an object locked votes No instead
//! of waiting, so no core ever waits for another (no deadlock) and the coordinator aborts.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use crate::{Decision, OpId, Vote};

/// A participant's side: per-object locks taken at prepare, released at commit/abort.
///
/// Conflicting concurrent 2PC operations on the same object are serialised: a participant
/// holding a prepared lock for op A on object O votes No to a prepare of op B on O (B's
/// coordinator aborts and may retry), so one aborts and never do both commit in conflicting
/// orders. Why that gives one global order: when A's coordinator decides Commit, every
/// participant of A holds A's locks. If B is applied after A somewhere, B locked there after
/// A's decision; so B's own decision came later still, and no core can apply B before A.
/// Deadlock-free: nothing ever waits.
#[derive(Clone, Debug)]
pub struct Participant<K: Ord + Copy> {
    /// Which prepared operation holds each locked object.
    locks: BTreeMap<K, OpId>,
    /// The objects each prepared operation holds, in the order it named them.
    ops: BTreeMap<OpId, Vec<K>>,
}

impl<K: Ord + Copy> Participant<K> {
    /// A participant holding no locks (`const`, so a kernel can keep one per core in a
    /// static).
    pub const fn new() -> Self {
        Participant { locks: BTreeMap::new(), ops: BTreeMap::new() }
    }

    /// Prepares `op` on `objects` (all-or-nothing): Yes and the locks are held, or No and
    /// nothing is held. `can_apply` is the local check (e.g. the object exists and the caller
    /// has the right). An object listed twice is locked once. A prepare re-sent for an `op`
    /// already prepared answers Yes again if it names no object `op` does not already hold.
    pub fn prepare(&mut self, op: OpId, objects: &[K], can_apply: bool) -> Vote {
        if let Some(held) = self.ops.get(&op) {
            return if objects.iter().all(|o| held.contains(o)) { Vote::Yes } else { Vote::No };
        }
        // Vote No rather than wait for the holder: waiting could deadlock two coordinators
        // that each hold a lock the other needs at another core.
        if !can_apply || objects.iter().any(|o| self.locks.contains_key(o)) {
            return Vote::No;
        }
        let mut held = Vec::with_capacity(objects.len());
        for &object in objects {
            if self.locks.insert(object, op).is_none() {
                held.push(object);
            }
        }
        self.ops.insert(op, held);
        Vote::Yes
    }

    /// Commits or aborts `op`: releases its locks and returns the objects it held (the caller
    /// applies a Commit to them; for an Abort it just drops them). An unknown `op` (one this
    /// core voted No to, or a re-sent decision) returns nothing, so a repeated decision is
    /// harmless.
    pub fn decide(&mut self, op: OpId, d: Decision) -> Vec<K> {
        // The decision only matters to the caller; the locks go either way.
        let _ = d;
        let held = self.ops.remove(&op).unwrap_or_default();
        for object in &held {
            self.locks.remove(object);
        }
        if self.ops.is_empty() {
            // A `BTreeMap` emptied by `remove` keeps its root node: a participant holding
            // nothing should hold no memory either, or a kernel's first operation on a
            // core shows as a leak in its balance check.
            self.locks = BTreeMap::new();
            self.ops = BTreeMap::new();
        }
        held
    }

    /// The prepared operation holding `object`'s lock, if any.
    pub fn holder(&self, object: K) -> Option<OpId> {
        self.locks.get(&object).copied()
    }

    /// How many operations are prepared (voted Yes, decision not yet received).
    pub fn prepared(&self) -> usize {
        self.ops.len()
    }
}

impl<K: Ord + Copy> Default for Participant<K> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn yes_locks_and_commit_releases() {
        let mut p = Participant::new();
        assert_eq!(p.prepare(1, &[10, 11], true), Vote::Yes);
        assert_eq!(p.holder(10), Some(1));
        assert_eq!(p.holder(11), Some(1));
        assert_eq!(p.prepared(), 1);
        assert_eq!(p.decide(1, Decision::Commit), vec![10, 11]);
        assert_eq!(p.holder(10), None);
        assert_eq!(p.prepared(), 0);
    }

    #[test]
    fn conflicting_prepare_votes_no_and_holds_nothing() {
        let mut p = Participant::new();
        assert_eq!(p.prepare(1, &[10], true), Vote::Yes);
        // Op 2 wants 11 (free) and 10 (held by 1): all or nothing.
        assert_eq!(p.prepare(2, &[11, 10], true), Vote::No);
        assert_eq!(p.holder(11), None);
        assert_eq!(p.prepared(), 1);
        // Op 2's coordinator aborts; the abort finds nothing held.
        assert_eq!(p.decide(2, Decision::Abort), Vec::<u32>::new());
        assert_eq!(p.holder(10), Some(1));
        // Once op 1 is decided, a retry of op 2 succeeds.
        p.decide(1, Decision::Abort);
        assert_eq!(p.prepare(3, &[11, 10], true), Vote::Yes);
    }

    #[test]
    fn failed_local_check_votes_no() {
        let mut p = Participant::new();
        assert_eq!(p.prepare(1, &[10], false), Vote::No);
        assert_eq!(p.holder(10), None);
        assert_eq!(p.prepared(), 0);
    }

    #[test]
    fn decisions_are_idempotent() {
        let mut p = Participant::new();
        p.prepare(1, &[10], true);
        assert_eq!(p.decide(1, Decision::Commit), vec![10]);
        assert_eq!(p.decide(1, Decision::Commit), Vec::<u32>::new());
        assert_eq!(p.decide(99, Decision::Abort), Vec::<u32>::new());
    }

    #[test]
    fn duplicates_and_resent_prepares() {
        let mut p = Participant::new();
        assert_eq!(p.prepare(1, &[10, 10, 12], true), Vote::Yes);
        assert_eq!(p.prepare(1, &[12, 10], true), Vote::Yes);
        assert_eq!(p.prepare(1, &[13], true), Vote::No);
        assert_eq!(p.holder(13), None);
        assert_eq!(p.decide(1, Decision::Commit), vec![10, 12]);
    }

    #[test]
    fn disjoint_operations_proceed_together() {
        let mut p = Participant::default();
        assert_eq!(p.prepare(1, &[1, 2], true), Vote::Yes);
        assert_eq!(p.prepare(2, &[3], true), Vote::Yes);
        assert_eq!(p.prepare(3, &[], true), Vote::Yes);
        assert_eq!(p.prepared(), 3);
        assert_eq!(p.decide(2, Decision::Commit), vec![3]);
        assert_eq!(p.decide(3, Decision::Commit), Vec::<u32>::new());
        assert_eq!(p.holder(1), Some(1));
    }
}
