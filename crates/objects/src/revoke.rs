//! Revocation (Multikernel §4.8: Barrelfish revokes a capability by two-phase commit, so
//! that it happens in one order on every core; issue M9). `obj_revoke(⟨share, obj⟩)`
//! takes object `obj` back from every share and share set on every core, except the
//! caller's own entry ⟨share, obj⟩, which it keeps.
//!
//! The kernel runs the agreement; this module is what each core does with its outcome:
//! 1. Every core keeps a [`RevokeLog`], its replica of the revocations committed so far.
//!    Revocations are serialised machine-wide (they all lock one key), so every replica
//!    lists them in the same order and numbers them alike: revocation `n` is the same on
//!    every core.
//! 2. Holders catch up lazily. A share set records how far its root share and the shares
//!    it reaches are caught up; a shared share records its own number ([`ShareTable`]'s
//!    `seen`). Before a system call names any object, the kernel brings the caller's set
//!    up to date with its core's log ([`ShareSet::catch_up`]): revoked entries leave its
//!    root share and every share it can reach. A thread in flight between cores, or
//!    asleep, is caught up when it next makes a call; a share is scrubbed once, by the
//!    first core that reaches it.
//! 3. While a revocation is prepared on a core (its participant holds the lock), calls
//!    there that would make a new entry wait for the decision, so no entry of the object
//!    can appear behind a core's scrub.
//!
//! Why a late scrub can never remove an entry made after the revocation: an entry made
//! on a core after it committed revocation `n` lands in a share (or root) already caught
//! up to `n` on that core (the call caught up first), and a new share or share set starts
//! at its creating core's number; so revocation `n` never visits it again.
//!
//! A log entry can go once its object is gone (nothing can hold it then); until then it
//! costs a few words. The log is bounded ([`MAX_REVOCATIONS`]): a revocation that would
//! overflow a core's log is refused by that core's vote.
//!
//! [`ShareTable`]: crate::ShareTable
//! [`ShareSet::catch_up`]: crate::ShareSet::catch_up

use alloc::sync::Weak;
use alloc::vec::Vec;

use crate::id::ObjectId;
use crate::id::{ObjRef, Revocation};
use crate::object::{Object, Payload};

/// Most revocations of live objects one core's log holds.
pub const MAX_REVOCATIONS: usize = 1024;

/// One core's replica of the revocations committed so far, in the machine-wide order.
pub struct RevokeLog<P: Payload> {
    /// Revocations whose object may still be alive, oldest first, each with a weak
    /// pointer to the object (`None`: not known, kept for good).
    entries: Vec<(Revocation, Option<Weak<Object<P>>>)>,
    /// Revocations committed (the last one's `seq`).
    committed: u64,
}

impl<P: Payload> RevokeLog<P> {
    /// No revocation yet (`const`, for a kernel's per-core statics).
    pub const fn new() -> Self {
        RevokeLog { entries: Vec::new(), committed: 0 }
    }

    /// How many revocations were committed: the number holders catch up to.
    pub fn committed(&self) -> u64 {
        self.committed
    }

    /// Drops the entries whose object is gone (and the memory of an emptied log): no holder
    /// can need them.
    pub fn prune(&mut self) {
        self.entries.retain(|(_, weak)| weak.as_ref().is_none_or(|w| w.strong_count() > 0));
        if self.entries.is_empty() {
            self.entries = Vec::new();
        }
    }

    /// Whether another revocation fits, after [`prune`](Self::prune).
    pub fn has_room(&mut self) -> bool {
        self.prune();
        self.entries.len() < MAX_REVOCATIONS
    }

    /// Records the next revocation, of `object` keeping `keep` (`weak` lets the entry go
    /// with the object); its number.
    pub fn append(&mut self, object: ObjectId, keep: ObjRef, weak: Option<Weak<Object<P>>>) -> u64 {
        self.committed += 1;
        self.entries.push((Revocation { seq: self.committed, object, keep }, weak));
        self.committed
    }

    /// The revocations after number `seen` whose objects may be alive, oldest first.
    pub fn since(&self, seen: u64) -> Vec<Revocation> {
        self.entries.iter().map(|(r, _)| *r).filter(|r| r.seq > seen).collect()
    }

    /// How many entries it holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl<P: Payload> Default for RevokeLog<P> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{release, Census, Creator, ObjName, ObjectKind, Quota, ShareSet};
    use alloc::boxed::Box;
    use alloc::sync::Arc;

    struct Seg;
    impl Payload for Seg {}

    fn creator(core: u16) -> Creator {
        Creator::new(core, Box::leak(Box::new(Census::new())))
    }

    fn name() -> ObjName {
        ObjName::new(b"r").unwrap()
    }

    fn r(share: ObjectId, object: ObjectId) -> ObjRef {
        ObjRef { share, object }
    }

    /// Brings `set` up to date with `log`, releasing what it takes out.
    fn catch_up(set: &mut ShareSet<Seg>, log: &RevokeLog<Seg>) {
        release(set.catch_up(&log.since(0), log.committed()));
    }

    /// A world: set `a` holds segment `seg` in its root, a descriptor of it there, and
    /// share `s` (in its set) holding `seg` and a nested share `n` holding `seg` too; set
    /// `b`, on another core, has `s` in its set.
    struct World {
        c: Creator,
        a: ShareSet<Seg>,
        b: ShareSet<Seg>,
        seg: ObjectId,
        desc: ObjectId,
        s: ObjectId,
        n: ObjectId,
    }

    fn world() -> World {
        let mut c = creator(1);
        let mut a = ShareSet::new(0, &mut c, Quota::new(u64::MAX, None)).unwrap();
        let mut b = ShareSet::new(1, &mut c, Quota::new(u64::MAX, None)).unwrap();
        let root = a.root_id();
        let seg = a.alloc(&mut c, root, ObjectKind::Segment, name(), Seg).unwrap();
        let desc = a.share_dupobj(&mut c, root, r(root, seg)).unwrap();
        let s = a.share_alloc(&mut c, root, name()).unwrap();
        a.add_share(r(root, s)).unwrap();
        a.share_addobj(s, r(root, seg)).unwrap();
        let n = a.share_alloc(&mut c, s, name()).unwrap();
        a.add_share(r(s, n)).unwrap();
        a.share_addobj(n, r(root, seg)).unwrap();
        b.add_share_ptr(a.shared_share(s).unwrap()).unwrap();
        World { c, a, b, seg, desc, s, n }
    }

    fn refcount(set: &ShareSet<Seg>, obj: ObjRef) -> u32 {
        set.obj_get_name(obj).unwrap().refcount
    }

    #[test]
    fn revoke_keeps_one_entry_and_takes_every_other() {
        let mut w = world();
        let root = w.a.root_id();
        assert_eq!(refcount(&w.a, r(root, w.seg)), 4);
        assert!(w.b.resolve(r(w.s, w.seg)).is_ok());
        let mut log = RevokeLog::new();
        let weak = Arc::downgrade(&w.a.resolve(r(root, w.seg)).unwrap());
        log.append(w.seg, r(root, w.seg), Some(weak));
        // The other core's set first: the shared shares lose it, however deep.
        assert!(!w.b.is_caught_up(1));
        catch_up(&mut w.b, &log);
        assert!(w.b.is_caught_up(1));
        assert_eq!(w.b.resolve(r(w.s, w.seg)).err(), Some(crate::ObjError::NotInShare));
        assert_eq!(w.a.resolve(r(w.n, w.seg)).err(), Some(crate::ObjError::NotInShare));
        // The revoker's descriptor goes when its own set catches up; its kept entry stays.
        assert!(w.a.resolve(r(root, w.desc)).is_ok());
        catch_up(&mut w.a, &log);
        assert_eq!(w.a.resolve(r(root, w.desc)).err(), Some(crate::ObjError::NotInShare));
        assert_eq!(refcount(&w.a, r(root, w.seg)), 1);
        // Catching up again changes nothing.
        catch_up(&mut w.a, &log);
        assert_eq!(refcount(&w.a, r(root, w.seg)), 1);
    }

    #[test]
    fn entries_made_after_a_revocation_survive_late_catch_ups() {
        let mut w = world();
        let root = w.a.root_id();
        let mut log = RevokeLog::<Seg>::new();
        log.append(w.seg, r(root, w.seg), None);
        catch_up(&mut w.a, &log);
        // The keeper shares it again, in the old share and in a share made now.
        w.a.share_addobj(w.s, r(root, w.seg)).unwrap();
        let fresh = w.a.share_alloc(&mut w.c, root, name()).unwrap();
        w.a.add_share(r(root, fresh)).unwrap();
        w.a.share_addobj(fresh, r(root, w.seg)).unwrap();
        // A set that is behind (and one made on a core that is behind) reaches both now.
        w.b.add_share_ptr(w.a.shared_share(fresh).unwrap()).unwrap();
        let mut late = ShareSet::<Seg>::new(2, &mut w.c, Quota::new(u64::MAX, None)).unwrap();
        late.add_share_ptr(w.a.shared_share(w.s).unwrap()).unwrap();
        catch_up(&mut w.b, &log);
        catch_up(&mut late, &log);
        assert!(w.b.resolve(r(w.s, w.seg)).is_ok(), "a re-shared entry was revoked late");
        assert!(w.b.resolve(r(fresh, w.seg)).is_ok());
        assert!(late.resolve(r(w.s, w.seg)).is_ok());
    }

    #[test]
    fn a_set_behind_applies_every_revocation_in_order() {
        let mut w = world();
        let root = w.a.root_id();
        let mut log = RevokeLog::<Seg>::new();
        // First kept in `s`, then (by a holder of `s`) in `n`... which the first took.
        log.append(w.seg, r(w.s, w.seg), None);
        log.append(w.seg, r(w.n, w.seg), None);
        catch_up(&mut w.a, &log);
        catch_up(&mut w.b, &log);
        for at in [r(root, w.seg), r(root, w.desc), r(w.s, w.seg), r(w.n, w.seg)] {
            assert!(w.a.resolve(at).is_err(), "{at:?} survived both revocations");
        }
        // Another object is untouched.
        let other = w.a.alloc(&mut w.c, root, ObjectKind::Segment, name(), Seg).unwrap();
        catch_up(&mut w.a, &log);
        assert!(w.a.resolve(r(root, other)).is_ok());
    }

    #[test]
    fn catching_up_in_steps_steps_once_per_share_and_removes_the_same() {
        let mut w = world();
        let root = w.a.root_id();
        let mut log = RevokeLog::<Seg>::new();
        log.append(w.seg, r(root, w.seg), None);
        let mut steps = 0;
        let removed = w.b.catch_up_in_steps(&log.since(0), log.committed(), &mut || steps += 1);
        // Set `b`: its root share, then `s` and the share nested in it.
        assert_eq!(steps, 3);
        assert_eq!(removed.len(), 2, "the entries in `s` and `n`");
        release(removed);
        assert!(w.b.is_caught_up(1));
        assert!(w.b.resolve(r(w.s, w.seg)).is_err());
        // Caught up: no work, no step.
        let again = w.b.catch_up_in_steps(&log.since(0), log.committed(), &mut || steps += 1);
        assert!(again.is_empty() && steps == 3);
    }

    #[test]
    fn the_log_forgets_gone_objects_and_is_bounded() {
        let mut log = RevokeLog::<Seg>::new();
        let mut c = creator(3);
        let mut set = ShareSet::new(0, &mut c, Quota::new(u64::MAX, None)).unwrap();
        let root = set.root_id();
        let seg = set.alloc(&mut c, root, ObjectKind::Segment, name(), Seg).unwrap();
        let weak = Arc::downgrade(&set.resolve(r(root, seg)).unwrap());
        log.append(seg, r(root, seg), Some(weak));
        assert!(log.has_room() && log.len() == 1);
        set.share_delobj(r(root, seg)).unwrap(); // the last holder lets go
        assert!(log.has_room() && log.is_empty());
        assert_eq!(log.committed(), 1, "the numbering goes on");
        for _ in 0..MAX_REVOCATIONS {
            assert!(log.has_room());
            log.append(ObjectId(9), r(root, ObjectId(9)), None);
        }
        assert!(!log.has_room());
        assert_eq!(log.since(MAX_REVOCATIONS as u64).len(), 1);
    }
}
