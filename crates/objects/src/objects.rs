//! The share system calls of Corey Figure 5 on one core's objects: `share_alloc`,
//! `share_addobj`, `share_delobj`, `self_drop`, `obj_get_name`, the allocation half of
//! `segment_alloc`/`ar_alloc`/`pcore_alloc`/`device_alloc`, and the share-set steps of
//! `pcore_run`. A share is itself an object whose payload is a [`Share`]; every other
//! object carries the kernel's payload `P`. Each operation checks its arguments against
//! the caller's [`ShareSet`] first and changes nothing when it fails. The reference rules
//! are in the crate docs.

use alloc::collections::BTreeSet;
use alloc::vec;
use alloc::vec::Vec;

use crate::id::{ObjName, ObjectId, ObjectKind};
use crate::share::{ObjRef, Share, ShareSet};
use crate::table::ObjectTable;
use crate::ObjError;

/// An object whose last reference went: the kernel frees what `payload` holds (frames of a
/// segment, ...). `payload` is `None` exactly for shares, whose entries this crate has
/// already released.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Freed<P> {
    /// The freed object's id; it is never issued again.
    pub id: ObjectId,
    /// Its kind.
    pub kind: ObjectKind,
    /// The kernel's data for it (`None` for a share).
    pub payload: Option<P>,
}

/// What `obj_get_name` tells about an object (Figure 5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObjInfo {
    /// The object's id.
    pub id: ObjectId,
    /// Its kind.
    pub kind: ObjectKind,
    /// The name given at allocation.
    pub name: ObjName,
    /// Its current number of holders.
    pub refcount: u32,
}

/// What a table entry carries: a share's contents, or the kernel's payload.
#[derive(Clone, Debug)]
enum Body<P> {
    Share(Share),
    Kernel(P),
}

/// One core's Corey objects (Corey §4.1, §4.2): the table of the objects it created,
/// shares included. Only its core touches it; objects of other cores are reached through
/// their owners (see [`ObjectId::core`]).
#[derive(Clone, Debug)]
pub struct Objects<P> {
    table: ObjectTable<Body<P>>,
}

impl<P> Objects<P> {
    /// No objects yet; ids will carry `core`.
    pub fn new(core: u16) -> Self {
        Objects { table: ObjectTable::new(core) }
    }

    /// The core these objects belong to.
    pub fn core(&self) -> u16 {
        self.table.core()
    }

    /// How many objects are live (shares included).
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether no object is live.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// The kind of `id`, if live. Not access-checked: for the kernel's own use.
    pub fn kind(&self, id: ObjectId) -> Option<ObjectKind> {
        self.table.get(id).map(|e| e.kind())
    }

    /// The number of holders of `id`, if live. Not access-checked.
    pub fn refcount(&self, id: ObjectId) -> Option<u32> {
        self.table.get(id).map(|e| e.refcount())
    }

    /// The contents of share `id`, if it is a live share. Not access-checked.
    pub fn share(&self, id: ObjectId) -> Option<&Share> {
        match &self.table.get(id)?.payload {
            Body::Share(s) => Some(s),
            Body::Kernel(_) => None,
        }
    }

    /// The payload of non-share `id`, if live. Not access-checked: for pointers the kernel
    /// holds a reference through (an address range's segments, ...).
    pub fn payload(&self, id: ObjectId) -> Option<&P> {
        match &self.table.get(id)?.payload {
            Body::Kernel(p) => Some(p),
            Body::Share(_) => None,
        }
    }

    /// The payload of non-share `id` for changing, if live. Not access-checked.
    pub fn payload_mut(&mut self, id: ObjectId) -> Option<&mut P> {
        match &mut self.table.get_mut(id)?.payload {
            Body::Kernel(p) => Some(p),
            Body::Share(_) => None,
        }
    }

    /// The access check (Corey §4.2, [`ShareSet::resolve`]): the object `r` names through
    /// `set`, or why `set` cannot name it.
    pub fn resolve(&self, set: &ShareSet, r: ObjRef) -> Result<ObjectId, ObjError> {
        set.resolve(&|id| self.share(id), r)
    }

    /// The payload of the object `r` names through `set`, which must be of `kind`
    /// (shares have no payload: [`ObjError::WrongKind`]). What a system call on a segment,
    /// address range, pcore or device does first.
    pub fn lookup(&self, set: &ShareSet, r: ObjRef, kind: ObjectKind) -> Result<&P, ObjError> {
        let id = self.resolve(set, r)?;
        match self.table.get(id).ok_or(ObjError::NoSuchObject)? {
            e if e.kind() != kind => Err(ObjError::WrongKind),
            e => match &e.payload {
                Body::Kernel(p) => Ok(p),
                Body::Share(_) => Err(ObjError::WrongKind),
            },
        }
    }

    /// [`Objects::lookup`] for changing the payload.
    pub fn lookup_mut(
        &mut self,
        set: &ShareSet,
        r: ObjRef,
        kind: ObjectKind,
    ) -> Result<&mut P, ObjError> {
        self.lookup(set, r, kind)?;
        self.payload_mut(r.object).ok_or(ObjError::NoSuchObject)
    }

    /// A new share held by `set` itself: a pcore's private root share (Corey §3.3 "each of
    /// an application's cores starts with one share (its root share)").
    pub fn root_share(&mut self, set: &mut ShareSet, name: ObjName) -> Result<ObjectId, ObjError> {
        let id = self.new_share(name)?;
        set.add_share(id)?; // a fresh id cannot be present
        Ok(id)
    }

    /// `share_alloc(shareid, name, memid)`: a new, empty share whose id goes into share
    /// `parent`, which must be in `set`. The new share's one reference is `parent`'s.
    /// (`memid`, the free list for the metadata, is the kernel's business.)
    pub fn share_alloc(
        &mut self,
        set: &ShareSet,
        parent: ObjectId,
        name: ObjName,
    ) -> Result<ObjectId, ObjError> {
        self.held_share(set, parent)?;
        let id = self.new_share(name)?;
        self.share_mut(parent)?.add(id)?;
        Ok(id)
    }

    /// The table half of `segment_alloc`, `ar_alloc`, `pcore_alloc`, `device_alloc`: a new
    /// object of `kind` (not a share: use [`Objects::share_alloc`]) whose id goes into
    /// share `parent`, which must be in `set`; its one reference is `parent`'s. On an
    /// error `payload` comes back, so the kernel can free its frames.
    pub fn alloc(
        &mut self,
        set: &ShareSet,
        parent: ObjectId,
        kind: ObjectKind,
        name: ObjName,
        payload: P,
    ) -> Result<ObjectId, (ObjError, P)> {
        if kind == ObjectKind::Share {
            return Err((ObjError::WrongKind, payload));
        }
        if let Err(e) = self.held_share(set, parent) {
            return Err((e, payload));
        }
        let id = match self.table.next_id() {
            Ok(id) => id,
            Err(e) => return Err((e, payload)),
        };
        self.table.insert_at(id, kind, Body::Kernel(payload));
        self.name_and_place(id, name, parent);
        Ok(id)
    }

    /// `share_addobj(shareid, obj)`: puts the object `obj` names (through `set`) into share
    /// `share` (in `set`), one more reference to it. Refused if the share already holds it
    /// ([`ObjError::AlreadyPresent`]) or if `obj` is a share from which `share` is
    /// reachable, itself included ([`ObjError::ShareCycle`]).
    pub fn share_addobj(
        &mut self,
        set: &ShareSet,
        share: ObjectId,
        obj: ObjRef,
    ) -> Result<(), ObjError> {
        self.held_share(set, share)?;
        let id = self.resolve(set, obj)?;
        if self.share(share).is_some_and(|s| s.contains(id)) {
            return Err(ObjError::AlreadyPresent);
        }
        if self.kind(id) == Some(ObjectKind::Share) && self.reaches(id, share) {
            return Err(ObjError::ShareCycle);
        }
        self.table.add_ref(id)?;
        self.share_mut(share)?.add(id)
    }

    /// `share_delobj(obj)`: takes the object `r` names out of `r.share`, one reference
    /// fewer. Returns what that freed (the object, and if it was a share, whatever went
    /// with it).
    pub fn share_delobj(&mut self, set: &ShareSet, r: ObjRef) -> Result<Vec<Freed<P>>, ObjError> {
        let id = self.resolve(set, r)?;
        self.share_mut(r.share)?.remove(id)?;
        self.release(id)
    }

    /// `self_drop(shareid)`: takes `share` out of `set` and drops the set's reference to
    /// it. Returns what that freed.
    pub fn self_drop(
        &mut self,
        set: &mut ShareSet,
        share: ObjectId,
    ) -> Result<Vec<Freed<P>>, ObjError> {
        self.held_share(set, share)?;
        set.remove_share(share)?;
        self.release(share)
    }

    /// `obj_get_name(obj)`: the kind, name and count of the object `r` names through `set`.
    pub fn obj_get_name(&self, set: &ShareSet, r: ObjRef) -> Result<ObjInfo, ObjError> {
        let id = self.resolve(set, r)?;
        let e = self.table.get(id).ok_or(ObjError::NoSuchObject)?;
        Ok(ObjInfo { id, kind: e.kind(), name: e.name, refcount: e.refcount() })
    }

    /// Makes the share `r` names through `set` directly nameable: adds it to `set`, one
    /// more reference. How a core takes up a share another core put in a shared share
    /// (Corey §3.3: "they create a share and add the share's ID to their private root
    /// share"). Returns the share's id.
    pub fn set_add_share(&mut self, set: &mut ShareSet, r: ObjRef) -> Result<ObjectId, ObjError> {
        let id = self.resolve(set, r)?;
        if self.kind(id) != Some(ObjectKind::Share) {
            return Err(ObjError::WrongKind);
        }
        if set.contains_share(id) {
            return Err(ObjError::AlreadyPresent);
        }
        self.table.add_ref(id)?;
        set.add_share(id)?;
        Ok(id)
    }

    /// Puts `share`, which is in `from`, into `into` as well, one more reference: how
    /// `pcore_run` and `cfork` (Corey §4.4, §5.1) build a new pcore's share set from the
    /// shares its parent chose.
    pub fn set_copy_share(
        &mut self,
        from: &ShareSet,
        share: ObjectId,
        into: &mut ShareSet,
    ) -> Result<(), ObjError> {
        self.held_share(from, share)?;
        if into.contains_share(share) {
            return Err(ObjError::AlreadyPresent);
        }
        self.table.add_ref(share)?;
        into.add_share(share)
    }

    /// Drops every reference `set` holds, as when its pcore halts. Returns what that freed.
    pub fn release_set(&mut self, set: ShareSet) -> Vec<Freed<P>> {
        let mut freed = Vec::new();
        for share in set.iter() {
            if let Ok(mut f) = self.release(share) {
                freed.append(&mut f);
            }
        }
        freed
    }

    /// Counts a holder the kernel keeps outside shares (see the crate docs).
    pub fn add_ref(&mut self, id: ObjectId) -> Result<(), ObjError> {
        self.table.add_ref(id).map(|_| ())
    }

    /// Gives back a reference taken with [`Objects::add_ref`]. Returns what that freed.
    pub fn drop_ref(&mut self, id: ObjectId) -> Result<Vec<Freed<P>>, ObjError> {
        self.release(id)
    }

    /// Drops one reference to `first`; every object whose count reaches 0 is freed, and a
    /// freed share's entries lose their reference in turn. A worklist, not recursion, so
    /// a deep chain of shares cannot overflow the kernel stack.
    fn release(&mut self, first: ObjectId) -> Result<Vec<Freed<P>>, ObjError> {
        if self.table.get(first).is_none() {
            return Err(ObjError::NoSuchObject);
        }
        let mut freed = Vec::new();
        let mut work = vec![first];
        while let Some(id) = work.pop() {
            // Every id in a live share is live (the share holds a reference), so this
            // cannot fail; a failure would leave the rest as it is.
            if let Ok(Some((kind, body))) = self.table.drop_ref(id) {
                let payload = match body {
                    Body::Share(s) => {
                        work.extend(s.iter());
                        None
                    }
                    Body::Kernel(p) => Some(p),
                };
                freed.push(Freed { id, kind, payload });
            }
        }
        Ok(freed)
    }

    /// Whether `target` can be reached from share `from` through share entries. Costs a
    /// walk of the shares below `from`, paid only when a share is put into a share.
    fn reaches(&self, from: ObjectId, target: ObjectId) -> bool {
        let mut seen = BTreeSet::from([from]);
        let mut work = vec![from];
        while let Some(share) = work.pop() {
            if share == target {
                return true;
            }
            for id in self.share(share).into_iter().flat_map(|s| s.iter()) {
                if self.kind(id) == Some(ObjectKind::Share) && seen.insert(id) {
                    work.push(id);
                }
            }
        }
        false
    }

    /// Checks that `share` is in `set` and is a live share.
    fn held_share(&self, set: &ShareSet, share: ObjectId) -> Result<(), ObjError> {
        if !set.contains_share(share) {
            return Err(ObjError::NotInShareSet);
        }
        match self.kind(share) {
            None => Err(ObjError::NoSuchObject),
            Some(ObjectKind::Share) => Ok(()),
            Some(_) => Err(ObjError::WrongKind),
        }
    }

    /// A new, empty share with `name` and count 1; the caller places the reference.
    fn new_share(&mut self, name: ObjName) -> Result<ObjectId, ObjError> {
        let id =
            self.table.insert(ObjectKind::Share, Body::Share(Share::new())).map_err(|(e, _)| e)?;
        if let Some(e) = self.table.get_mut(id) {
            e.name = name;
        }
        Ok(id)
    }

    /// Names the fresh object `id` and gives its reference to share `parent`.
    fn name_and_place(&mut self, id: ObjectId, name: ObjName, parent: ObjectId) {
        if let Some(e) = self.table.get_mut(id) {
            e.name = name;
        }
        if let Ok(s) = self.share_mut(parent) {
            let _ = s.add(id); // a fresh id cannot be present
        }
    }

    /// The contents of share `id` for changing.
    fn share_mut(&mut self, id: ObjectId) -> Result<&mut Share, ObjError> {
        match &mut self.table.get_mut(id).ok_or(ObjError::NoSuchObject)?.payload {
            Body::Share(s) => Ok(s),
            Body::Kernel(_) => Err(ObjError::WrongKind),
        }
    }
}

#[cfg(test)]
#[path = "ops_tests.rs"]
mod tests;
