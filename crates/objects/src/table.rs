//! One core's object table (Corey §4.1 "object metadata", §4.2): id → kind, name,
//! reference count and the kernel's per-kind payload `P` (a segment's frames, an address
//! range's mappings, ...). Only its core touches it, so it takes no lock. Counts here are
//! plain numbers; [`crate::Objects`] decides who holds the references (see the crate docs).

use alloc::collections::BTreeMap;

use crate::id::{IdAllocator, ObjName, ObjectId, ObjectKind};
use crate::ObjError;

/// One object's metadata (Corey §4.1). The kind and count are read-only from outside, so
/// only the table's own operations can change them.
#[derive(Clone, Debug)]
pub struct ObjectEntry<P> {
    kind: ObjectKind,
    refcount: u32,
    /// The name given at allocation (Figure 5 `obj_get_name`).
    pub name: ObjName,
    /// The kernel's data for this object.
    pub payload: P,
}

impl<P> ObjectEntry<P> {
    /// What kind of object this is.
    pub fn kind(&self) -> ObjectKind {
        self.kind
    }

    /// How many holders the object has (at least 1 while it is in a table).
    pub fn refcount(&self) -> u32 {
        self.refcount
    }
}

/// The objects one core created, keyed by id (Corey §4.2: the kernel maps an id to the
/// address of the object's metadata). Ids come from the table's own [`IdAllocator`].
#[derive(Clone, Debug)]
pub struct ObjectTable<P> {
    ids: IdAllocator,
    entries: BTreeMap<ObjectId, ObjectEntry<P>>,
}

impl<P> ObjectTable<P> {
    /// An empty table for `core`; its ids carry `core` in their high bits.
    pub fn new(core: u16) -> Self {
        ObjectTable { ids: IdAllocator::new(core), entries: BTreeMap::new() }
    }

    /// The core this table belongs to.
    pub fn core(&self) -> u16 {
        self.ids.core()
    }

    /// Adds an object with a fresh id, no name and reference count 1: the reference belongs
    /// to the caller, who must hand it to a holder. If the core's ids are used up the
    /// payload comes back with the error, so the caller can free what it holds.
    pub fn insert(&mut self, kind: ObjectKind, payload: P) -> Result<ObjectId, (ObjError, P)> {
        match self.next_id() {
            Ok(id) => {
                self.insert_at(id, kind, payload);
                Ok(id)
            }
            Err(e) => Err((e, payload)),
        }
    }

    /// Takes a fresh id from the table's counter, for [`ObjectTable::insert_at`].
    pub(crate) fn next_id(&mut self) -> Result<ObjectId, ObjError> {
        self.ids.next_id()
    }

    /// Adds an object under `id`, fresh from [`ObjectTable::next_id`], with count 1.
    pub(crate) fn insert_at(&mut self, id: ObjectId, kind: ObjectKind, payload: P) {
        let entry = ObjectEntry { kind, refcount: 1, name: ObjName::default(), payload };
        self.entries.insert(id, entry);
    }

    /// The object `id`, if it is live here.
    pub fn get(&self, id: ObjectId) -> Option<&ObjectEntry<P>> {
        self.entries.get(&id)
    }

    /// The object `id` for changing its name or payload, if it is live here.
    pub fn get_mut(&mut self, id: ObjectId) -> Option<&mut ObjectEntry<P>> {
        self.entries.get_mut(&id)
    }

    /// Counts one more holder of `id`; returns the new count.
    pub fn add_ref(&mut self, id: ObjectId) -> Result<u32, ObjError> {
        let entry = self.entries.get_mut(&id).ok_or(ObjError::NoSuchObject)?;
        entry.refcount = entry.refcount.checked_add(1).ok_or(ObjError::RefcountOverflow)?;
        Ok(entry.refcount)
    }

    /// Counts one holder of `id` fewer. At zero the object leaves the table and its kind
    /// and payload are returned, so the caller can free what the payload holds.
    pub fn drop_ref(&mut self, id: ObjectId) -> Result<Option<(ObjectKind, P)>, ObjError> {
        let entry = self.entries.get_mut(&id).ok_or(ObjError::NoSuchObject)?;
        entry.refcount = entry.refcount.saturating_sub(1); // live entries have at least 1
        if entry.refcount > 0 {
            return Ok(None);
        }
        Ok(self.entries.remove(&id).map(|e| (e.kind, e.payload)))
    }

    /// How many objects are live here.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no object is live here.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The live objects in id order.
    pub fn iter(&self) -> impl Iterator<Item = (ObjectId, &ObjectEntry<P>)> {
        self.entries.iter().map(|(id, e)| (*id, e))
    }

    /// Sets a count directly, for tests of the overflow path.
    #[cfg(test)]
    pub(crate) fn force_refcount(&mut self, id: ObjectId, count: u32) {
        if let Some(e) = self.entries.get_mut(&id) {
            e.refcount = count;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_get_and_count_down_to_free() {
        let mut t = ObjectTable::new(2);
        let a = t.insert(ObjectKind::Segment, "frames").unwrap();
        assert_eq!(a.core(), 2);
        assert_eq!(t.get(a).map(|e| (e.kind(), e.refcount())), Some((ObjectKind::Segment, 1)));
        assert_eq!(t.add_ref(a), Ok(2));
        assert_eq!(t.drop_ref(a), Ok(None));
        assert_eq!(t.drop_ref(a), Ok(Some((ObjectKind::Segment, "frames"))));
        assert!(t.get(a).is_none() && t.is_empty());
        assert_eq!(t.drop_ref(a), Err(ObjError::NoSuchObject));
        assert_eq!(t.add_ref(a), Err(ObjError::NoSuchObject));
    }

    #[test]
    fn get_mut_changes_payload_and_name() {
        let mut t = ObjectTable::new(0);
        let a = t.insert(ObjectKind::Pcore, 1u32).unwrap();
        let e = t.get_mut(a).unwrap();
        e.payload = 5;
        e.name = ObjName::new(b"core0").unwrap();
        assert_eq!(t.get(a).unwrap().payload, 5);
        assert_eq!(t.get(a).unwrap().name.as_bytes(), b"core0");
        assert_eq!(t.len(), 1);
        assert_eq!(t.iter().map(|(id, _)| id).collect::<alloc::vec::Vec<_>>(), [a]);
    }

    #[test]
    fn refcount_overflow_is_an_error_and_changes_nothing() {
        let mut t = ObjectTable::new(0);
        let a = t.insert(ObjectKind::Device, ()).unwrap();
        t.force_refcount(a, u32::MAX);
        assert_eq!(t.add_ref(a), Err(ObjError::RefcountOverflow));
        assert_eq!(t.get(a).unwrap().refcount(), u32::MAX);
    }

    #[test]
    fn ids_are_never_reused() {
        let mut t = ObjectTable::new(1);
        let a = t.insert(ObjectKind::Share, ()).unwrap();
        assert!(t.drop_ref(a).unwrap().is_some());
        let b = t.insert(ObjectKind::Share, ()).unwrap();
        assert_ne!(a, b);
    }
}
