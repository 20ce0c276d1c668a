//! Shares and share sets (Corey §3.3, §4.2). A share is a lookup table of object ids that
//! an application creates and shares as it chooses; a reference to an object is the pair
//! ⟨share id, object id⟩ ([`ObjRef`]). A pcore's share set lists the shares it may name
//! objects through (its private root share plus those added, Corey §4.4 `pcore_run`).
//! [`ShareSet::resolve`] is Atoll's access check: a core can use an object only through a
//! share in its set that holds the object's id.
//!
//! These are plain sets: adding or removing ids here counts no references. The operations
//! of [`crate::Objects`] change sets and counts together; use those.

use alloc::collections::BTreeSet;

use crate::id::ObjectId;
use crate::ObjError;

/// A reference to an object as system calls take it (Figure 5: "share, seg, ar, pcore,
/// obj, and dev represent ⟨share ID, object ID⟩ pairs").
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjRef {
    /// The share to look the object up in; must be in the caller's share set.
    pub share: ObjectId,
    /// The object; must be in that share.
    pub object: ObjectId,
}

/// A share's contents: the set of object ids it holds (Corey §3.3 "a share maps
/// application-visible identifiers to kernel data pointers"; here to ids of the core's
/// [`crate::ObjectTable`]). Each id is in a share at most once.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Share {
    ids: BTreeSet<ObjectId>,
}

impl Share {
    /// An empty share.
    pub fn new() -> Self {
        Share::default()
    }

    /// Adds `id`, or [`ObjError::AlreadyPresent`].
    pub fn add(&mut self, id: ObjectId) -> Result<(), ObjError> {
        if self.ids.insert(id) {
            Ok(())
        } else {
            Err(ObjError::AlreadyPresent)
        }
    }

    /// Removes `id`, or [`ObjError::NotInShare`].
    pub fn remove(&mut self, id: ObjectId) -> Result<(), ObjError> {
        if self.ids.remove(&id) {
            Ok(())
        } else {
            Err(ObjError::NotInShare)
        }
    }

    /// Whether `id` is in the share.
    pub fn contains(&self, id: ObjectId) -> bool {
        self.ids.contains(&id)
    }

    /// How many ids the share holds.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether the share holds no id.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The ids in the share, in order.
    pub fn iter(&self) -> impl Iterator<Item = ObjectId> + '_ {
        self.ids.iter().copied()
    }
}

/// The shares a pcore may name objects through (Corey §4.2: "applications specify which
/// shares are available on which cores by passing a core's share set to `pcore_run`").
/// The set holds one reference on each of its shares (see the crate docs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShareSet {
    shares: BTreeSet<ObjectId>,
}

impl ShareSet {
    /// An empty share set (give it a root share with [`crate::Objects::root_share`]).
    pub fn new() -> Self {
        ShareSet::default()
    }

    /// Whether `share` is in the set.
    pub fn contains_share(&self, share: ObjectId) -> bool {
        self.shares.contains(&share)
    }

    /// Adds `share`, or [`ObjError::AlreadyPresent`]. A plain set operation: the
    /// reference is counted by [`crate::Objects::set_add_share`].
    pub fn add_share(&mut self, share: ObjectId) -> Result<(), ObjError> {
        if self.shares.insert(share) {
            Ok(())
        } else {
            Err(ObjError::AlreadyPresent)
        }
    }

    /// Removes `share`, or [`ObjError::NotInShareSet`]. A plain set operation: the
    /// reference is given back by [`crate::Objects::self_drop`].
    pub fn remove_share(&mut self, share: ObjectId) -> Result<(), ObjError> {
        if self.shares.remove(&share) {
            Ok(())
        } else {
            Err(ObjError::NotInShareSet)
        }
    }

    /// How many shares are in the set.
    pub fn len(&self) -> usize {
        self.shares.len()
    }

    /// Whether the set has no share (its pcore can name nothing).
    pub fn is_empty(&self) -> bool {
        self.shares.is_empty()
    }

    /// The shares in the set, in order.
    pub fn iter(&self) -> impl Iterator<Item = ObjectId> + '_ {
        self.shares.iter().copied()
    }

    /// The access check (Corey §4.2): `reference` names its object only if its share is in
    /// this set ([`ObjError::NotInShareSet`]), `shares` knows that share
    /// ([`ObjError::NoSuchObject`]) and the share holds the object
    /// ([`ObjError::NotInShare`]). `shares` looks a share's contents up by id.
    pub fn resolve<'a>(
        &self,
        shares: &impl Fn(ObjectId) -> Option<&'a Share>,
        reference: ObjRef,
    ) -> Result<ObjectId, ObjError> {
        if !self.contains_share(reference.share) {
            return Err(ObjError::NotInShareSet);
        }
        let share = shares(reference.share).ok_or(ObjError::NoSuchObject)?;
        if share.contains(reference.object) {
            Ok(reference.object)
        } else {
            Err(ObjError::NotInShare)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u64) -> ObjectId {
        ObjectId(n)
    }

    #[test]
    fn share_add_remove_contains() {
        let mut s = Share::new();
        assert!(s.is_empty());
        assert_eq!(s.add(id(5)), Ok(()));
        assert_eq!(s.add(id(3)), Ok(()));
        assert_eq!(s.add(id(5)), Err(ObjError::AlreadyPresent));
        assert!(s.contains(id(3)) && !s.contains(id(4)));
        assert_eq!(s.iter().collect::<alloc::vec::Vec<_>>(), [id(3), id(5)]);
        assert_eq!(s.remove(id(3)), Ok(()));
        assert_eq!(s.remove(id(3)), Err(ObjError::NotInShare));
        assert_eq!(s.len(), 1);
    }

    #[test]
    fn share_set_add_remove() {
        let mut set = ShareSet::new();
        assert_eq!(set.add_share(id(1)), Ok(()));
        assert_eq!(set.add_share(id(1)), Err(ObjError::AlreadyPresent));
        assert!(set.contains_share(id(1)) && set.len() == 1);
        assert_eq!(set.remove_share(id(1)), Ok(()));
        assert_eq!(set.remove_share(id(1)), Err(ObjError::NotInShareSet));
        assert!(set.is_empty() && set.iter().next().is_none());
    }

    #[test]
    fn resolve_checks_set_then_share() {
        let mut s = Share::new();
        s.add(id(9)).unwrap();
        let lookup = |i: ObjectId| (i == id(1)).then_some(&s);
        let mut set = ShareSet::new();
        let r = ObjRef { share: id(1), object: id(9) };
        assert_eq!(set.resolve(&lookup, r), Err(ObjError::NotInShareSet));
        set.add_share(id(1)).unwrap();
        set.add_share(id(2)).unwrap();
        assert_eq!(set.resolve(&lookup, r), Ok(id(9)));
        let missing = ObjRef { object: id(8), ..r };
        assert_eq!(set.resolve(&lookup, missing), Err(ObjError::NotInShare));
        let gone = ObjRef { share: id(2), ..r };
        assert_eq!(set.resolve(&lookup, gone), Err(ObjError::NoSuchObject));
    }
}
