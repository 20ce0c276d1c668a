//! Share sets and the share system calls of Corey Figure 5 (Corey §3.3, §4.2, §4.4). A
//! pcore names objects through its share set: its private root share plus the shared
//! shares it was given. A reference to an object is ⟨share id, object id⟩ ([`ObjRef`]);
//! [`ShareSet::resolve`] is Atoll's access check: a core can use an object only through a
//! share in its set that holds the object's id.
//!
//! The root share is private to its pcore (Corey §3.3 "each of an application's cores
//! starts with one share (its root share)"), so it is a plain map that takes no lock and
//! is not an object: it cannot be put into another share. Shared shares are objects whose
//! table sits behind a scalable reader-writer lock, reachable from any core.
//!
//! An entry of a share is an id and the object it names. `share_addobj` and the `*_alloc`
//! calls enter an object under its own id; `share_dupobj` enters it again under a fresh id,
//! a *descriptor* (Corey §3.3: "shares could be used to implement file-descriptor-like
//! references to kernel objects"; the talk's `dup`). A descriptor is one more reference
//! to the object, costs one insert, and names it like its own id does until
//! `share_delobj` removes it: `dup` and `close` touch the table and the object's count,
//! nothing else.

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::sync::Arc;
use alloc::vec;
use alloc::vec::Vec;

use locks::McsLock;

use crate::id::{ObjName, ObjRef, ObjectId, ObjectKind, Revocation};
use crate::object::{
    insert_charged, release, release_one, remove_revoked, sync_charge, Body, Creator, Entry,
    ObjPtr, Object, Payload, ShareMap, ShareTable,
};
use crate::quota::{Charge, Quota};
use crate::ObjError;

/// What `obj_get_name` tells about an object (Figure 5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObjInfo {
    /// The object's id.
    pub id: ObjectId,
    /// Its kind.
    pub kind: ObjectKind,
    /// The name given at allocation.
    pub name: ObjName,
    /// Its number of holders.
    pub refcount: u32,
}

/// Serialises putting shares into shares, so two cores cannot each add one half of a
/// cycle between the check and the insert. Rare (most adds are of other kinds), so one
/// lock for the machine costs nothing in the common case.
static NESTING: McsLock<()> = McsLock::new(());

/// The shares one pcore may name objects through (Corey §4.2: "applications specify which
/// shares are available on which cores by passing a core's share set to `pcore_run`").
pub struct ShareSet<P: Payload> {
    /// The core the pcore runs on: its reader slot in shared shares' locks.
    core: usize,
    root_id: ObjectId,
    root: ShareMap<P>,
    shared: BTreeMap<ObjectId, ObjPtr<P>>,
    /// The revocations the root share is caught up with ([`crate::revoke`]).
    root_seen: u64,
    /// The revocations every share it reaches was last caught up with.
    shares_seen: u64,
    /// The kernel memory of the program it belongs to: the objects its calls make through
    /// the set, and the tables of the shares they make, are charged here.
    quota: Arc<Quota>,
    /// The root share's table, charged to that quota as it grows and shrinks.
    root_charge: Charge,
}

impl<P: Payload> ShareSet<P> {
    /// A set with an empty root share (its id from `creator`) and no shared shares, for a
    /// pcore on `core`.
    /// What it makes is charged to `quota`, its program's kernel memory.
    pub fn new(core: usize, creator: &mut Creator, quota: Arc<Quota>) -> Result<Self, ObjError> {
        let root_id = creator.next_id()?;
        let root_charge = quota.charge(0)?;
        Ok(ShareSet {
            core,
            root_id,
            root: ShareMap::new(),
            shared: BTreeMap::new(),
            root_seen: 0,
            shares_seen: 0,
            quota,
            root_charge,
        })
    }

    /// Its program's kernel-memory quota.
    pub fn quota(&self) -> &Arc<Quota> {
        &self.quota
    }

    /// Counts the (fresh) root share caught up with the first `committed` revocations: it
    /// holds nothing older. The shares the set reaches are still checked at the next
    /// [`catch_up`](Self::catch_up).
    pub fn start_at(&mut self, committed: u64) {
        self.root_seen = committed;
    }

    /// Whether the set is caught up with the first `committed` revocations.
    pub fn is_caught_up(&self, committed: u64) -> bool {
        self.root_seen >= committed && self.shares_seen >= committed
    }

    /// Revocation (see [`crate::revoke`]): takes every entry `revocations` remove out of
    /// the root share and out of every share the set reaches (in the set, in the root
    /// share, or inside those, however deep), and counts the set caught up with
    /// `committed`. `revocations` must hold every one after the set's own numbers whose
    /// object may still be alive. Returns the references taken out, for the caller to
    /// release where that is safe.
    pub fn catch_up(&mut self, revocations: &[Revocation], committed: u64) -> Vec<ObjPtr<P>> {
        self.catch_up_in_steps(revocations, committed, &mut || {})
    }

    /// [`catch_up`](Self::catch_up), calling `step` after the root share and after each
    /// share it scrubs: the work grows with the shares the set reaches, so a kernel lets
    /// the rest of the machine in between (issue M14: a core catching up with interrupts
    /// off once went silent long enough to be declared failed). `step` must not touch this
    /// set; revocations committed meanwhile wait for the next catch-up.
    pub fn catch_up_in_steps(
        &mut self,
        revocations: &[Revocation],
        committed: u64,
        step: &mut dyn FnMut(),
    ) -> Vec<ObjPtr<P>> {
        let mut removed = Vec::new();
        if self.root_seen < committed {
            let root = self.root_id;
            removed.extend(remove_revoked(&mut self.root, root, revocations, self.root_seen));
            sync_charge(&self.root, Some(&self.root_charge));
            self.root_seen = committed;
            step();
        }
        if self.shares_seen < committed {
            let mut work: Vec<ObjPtr<P>> = self.shared.values().cloned().collect();
            work.extend(
                self.root
                    .keys()
                    .filter_map(|k| self.root.get(k))
                    .filter(|e| e.ptr().kind() == ObjectKind::Share)
                    .map(|e| e.ptr().clone()),
            );
            let mut visited = BTreeSet::new();
            while let Some(share) = work.pop() {
                let Some(table) = share.share() else { continue };
                if !visited.insert(share.id()) {
                    continue;
                }
                removed.extend(table.catch_up(share.id(), revocations, committed));
                work.extend(table.child_shares(self.core));
                step();
            }
            self.shares_seen = committed;
        }
        removed
    }

    /// The id of the private root share.
    pub fn root_id(&self) -> ObjectId {
        self.root_id
    }

    /// The core whose reader slot this set uses.
    pub fn core(&self) -> usize {
        self.core
    }

    /// The ids of the shared shares in the set.
    pub fn shared_ids(&self) -> Vec<ObjectId> {
        self.shared.keys().copied().collect()
    }

    /// Whether `share` is in the set (the root share included).
    pub fn contains_share(&self, share: ObjectId) -> bool {
        share == self.root_id || self.shared.contains_key(&share)
    }

    /// How many objects the root share holds.
    pub fn root_len(&self) -> usize {
        self.root.len()
    }

    /// The access check (Corey §4.2): the object `r` names, or why this set cannot name
    /// it: its share is not in the set ([`ObjError::NotInShareSet`]) or does not hold it
    /// ([`ObjError::NotInShare`]).
    pub fn resolve(&self, r: ObjRef) -> Result<ObjPtr<P>, ObjError> {
        if r.share == self.root_id {
            return self.root.get(&r.object).map(|e| e.ptr().clone()).ok_or(ObjError::NotInShare);
        }
        let share = self.shared.get(&r.share).ok_or(ObjError::NotInShareSet)?;
        let table = share.share().ok_or(ObjError::WrongKind)?;
        table.get(self.core, r.object).ok_or(ObjError::NotInShare)
    }

    /// [`ShareSet::resolve`], and the object must be of `kind`.
    pub fn lookup(&self, r: ObjRef, kind: ObjectKind) -> Result<ObjPtr<P>, ObjError> {
        let ptr = self.resolve(r)?;
        if ptr.kind() != kind {
            return Err(ObjError::WrongKind);
        }
        Ok(ptr)
    }

    /// Puts `ptr` into `share` (in the set) under its own id, handing it that reference.
    fn place(&mut self, share: ObjectId, ptr: ObjPtr<P>) -> Result<(), ObjError> {
        let id = ptr.id();
        self.place_entry(share, id, Entry::object(ptr))
    }

    /// Puts `entry` into `share` (in the set) under `id`; on an error the entry is dropped.
    fn place_entry(
        &mut self,
        share: ObjectId,
        id: ObjectId,
        entry: Entry<P>,
    ) -> Result<(), ObjError> {
        if share == self.root_id {
            let charge = Some(&self.root_charge);
            return insert_charged(&mut self.root, id, entry, charge).map_err(|(e, entry)| {
                release_one(entry.into_ptr());
                e
            });
        }
        let Some(holder) = self.shared.get(&share) else {
            release_one(entry.into_ptr());
            return Err(ObjError::NotInShareSet);
        };
        let Some(table) = holder.share() else {
            release_one(entry.into_ptr());
            return Err(ObjError::WrongKind);
        };
        table.insert(id, entry).map_err(|(e, entry)| {
            release_one(entry.into_ptr());
            e
        })
    }

    /// Checks that `share` is in the set.
    fn check_share(&self, share: ObjectId) -> Result<(), ObjError> {
        if self.contains_share(share) {
            Ok(())
        } else {
            Err(ObjError::NotInShareSet)
        }
    }

    /// Puts `ptr` into the root share and returns its id: an object one context hands
    /// another when it starts it (`program_run`'s `give`, the machine device `init` gets).
    pub fn give(&mut self, ptr: ObjPtr<P>) -> Result<ObjectId, ObjError> {
        let id = ptr.id();
        let root = self.root_id;
        self.place(root, ptr)?;
        Ok(id)
    }

    /// The table half of `segment_alloc`, `ar_alloc`, `pcore_alloc`, `device_alloc`: a new
    /// object of `kind` made by `creator` whose one reference goes into share `parent`
    /// (in the set). On an error the payload is dropped (its `Drop` frees what it holds).
    pub fn alloc(
        &mut self,
        creator: &mut Creator,
        parent: ObjectId,
        kind: ObjectKind,
        name: ObjName,
        payload: P,
    ) -> Result<ObjectId, ObjError> {
        if kind == ObjectKind::Share {
            return Err(ObjError::WrongKind);
        }
        self.check_share(parent)?;
        let charge = self.quota.charge(Object::<P>::BYTES)?;
        let ptr = creator.make(kind, name, Body::Kernel(payload), Some(charge))?;
        let id = ptr.id();
        self.place(parent, ptr)?;
        Ok(id)
    }

    /// `share_alloc(shareid, name, memid)`: a new, empty shared share placed in `parent`.
    pub fn share_alloc(
        &mut self,
        creator: &mut Creator,
        parent: ObjectId,
        name: ObjName,
    ) -> Result<ObjectId, ObjError> {
        self.check_share(parent)?;
        // It holds nothing older than the set's revocations.
        let bytes = Object::<P>::BYTES + core::mem::size_of::<ShareTable<P>>() as u64;
        let charge = self.quota.charge(bytes)?;
        // Its table grows on its maker's account, whoever adds to it (Corey §3.3: a share
        // is handed to others like any object).
        let table =
            creator.share_table().caught_up_to(self.root_seen).charged(self.quota.charge(0)?);
        let table = alloc::boxed::Box::new(table);
        let ptr = creator.make(ObjectKind::Share, name, Body::Share(table), Some(charge))?;
        let id = ptr.id();
        self.place(parent, ptr)?;
        Ok(id)
    }

    /// `share_addobj(shareid, obj)`: puts the object `obj` names into `share`, one more
    /// reference to it. Refused if the share holds it already ([`ObjError::AlreadyPresent`])
    /// or if `obj` is a share from which `share` is reachable ([`ObjError::ShareCycle`]).
    pub fn share_addobj(&mut self, share: ObjectId, obj: ObjRef) -> Result<(), ObjError> {
        self.check_share(share)?;
        let ptr = self.resolve(obj)?;
        if ptr.kind() != ObjectKind::Share || share == self.root_id {
            // The root share is in no share, so nothing placed in it can close a cycle.
            return self.place(share, ptr);
        }
        let core = self.core;
        NESTING.with(|_| {
            if reaches(core, &ptr, share) {
                release(vec![ptr]);
                return Err(ObjError::ShareCycle);
            }
            self.place(share, ptr)
        })
    }

    /// `share_dupobj(share, obj)`: enters the object `obj` names into `share` (in the set)
    /// again, under a fresh id from `creator` (a descriptor, counted in its census while it
    /// lives), one more reference; returns the id. One insert: no object is made or copied.
    /// Shares are refused ([`ObjError::WrongKind`]): a share is named by its own id in a
    /// share set, and a second id for it would let a share set hold it twice.
    pub fn share_dupobj(
        &mut self,
        creator: &mut Creator,
        share: ObjectId,
        obj: ObjRef,
    ) -> Result<ObjectId, ObjError> {
        self.check_share(share)?;
        let ptr = self.resolve(obj)?;
        if ptr.kind() == ObjectKind::Share {
            release_one(ptr);
            return Err(ObjError::WrongKind);
        }
        let (id, token) = match creator.entry_id() {
            Ok(t) => t,
            Err(e) => {
                release_one(ptr);
                return Err(e);
            }
        };
        self.place_entry(share, id, Entry::descriptor(ptr, token))?;
        Ok(id)
    }

    /// `share_delobj(obj)`: takes the entry `r` names (an object's own id or a descriptor)
    /// out of `r.share`, one reference fewer; frees the object if that was the last.
    pub fn share_delobj(&mut self, r: ObjRef) -> Result<(), ObjError> {
        let removed = if r.share == self.root_id {
            let removed = self.root.remove(&r.object);
            sync_charge(&self.root, Some(&self.root_charge));
            removed.map(Entry::into_ptr).ok_or(ObjError::NotInShare)?
        } else {
            let holder = self.shared.get(&r.share).ok_or(ObjError::NotInShareSet)?;
            holder.share().ok_or(ObjError::WrongKind)?.remove(r.object)?
        };
        release_one(removed);
        Ok(())
    }

    /// `self_drop(shareid)`: takes shared share `share` out of the set and drops the set's
    /// reference. The root share cannot be dropped ([`ObjError::RootShare`]).
    pub fn self_drop(&mut self, share: ObjectId) -> Result<(), ObjError> {
        if share == self.root_id {
            return Err(ObjError::RootShare);
        }
        let removed = self.shared.remove(&share).ok_or(ObjError::NotInShareSet)?;
        release(vec![removed]);
        Ok(())
    }

    /// `obj_get_name(obj)`: kind, name and reference count of the object `r` names.
    pub fn obj_get_name(&self, r: ObjRef) -> Result<ObjInfo, ObjError> {
        let ptr = self.resolve(r)?;
        // Minus the reference `resolve` just took.
        let refcount = alloc::sync::Arc::strong_count(&ptr).saturating_sub(1) as u32;
        Ok(ObjInfo { id: ptr.id(), kind: ptr.kind(), name: ptr.name(), refcount })
    }

    /// Makes the share `r` names directly nameable: adds it to the set, one more reference
    /// (Corey §3.3: how a core takes up a share another core put in a shared share).
    pub fn add_share(&mut self, r: ObjRef) -> Result<ObjectId, ObjError> {
        let ptr = self.lookup(r, ObjectKind::Share)?;
        self.add_share_ptr(ptr)
    }

    /// Adds share `ptr` to the set.
    pub fn add_share_ptr(&mut self, ptr: ObjPtr<P>) -> Result<ObjectId, ObjError> {
        if ptr.kind() != ObjectKind::Share {
            return Err(ObjError::WrongKind);
        }
        let id = ptr.id();
        if self.contains_share(id) {
            return Err(ObjError::AlreadyPresent);
        }
        self.shared.insert(id, ptr);
        Ok(id)
    }

    /// The shared share `id` of this set (for `pcore_run`: the shares a new pcore gets).
    pub fn shared_share(&self, id: ObjectId) -> Result<ObjPtr<P>, ObjError> {
        if id == self.root_id {
            return Err(ObjError::RootShare);
        }
        self.shared.get(&id).cloned().ok_or(ObjError::NotInShareSet)
    }
}

impl<P: Payload> Drop for ShareSet<P> {
    fn drop(&mut self) {
        let mut held: Vec<ObjPtr<P>> =
            core::mem::take(&mut self.root).into_values().map(Entry::into_ptr).collect();
        held.extend(core::mem::take(&mut self.shared).into_values());
        release(held);
    }
}

/// Whether share `target` can be reached from share `from` through share entries (itself
/// included). Reads each share under its own read lock, one at a time.
fn reaches<P: Payload>(core: usize, from: &ObjPtr<P>, target: ObjectId) -> bool {
    let mut seen = BTreeSet::from([from.id()]);
    let mut work = vec![from.clone()];
    while let Some(share) = work.pop() {
        if share.id() == target {
            return true;
        }
        let Some(table) = share.share() else { continue };
        for id in table.ids(core) {
            if let Some(child) = table.get(core, id) {
                if child.kind() == ObjectKind::Share && seen.insert(child.id()) {
                    work.push(child);
                }
            }
        }
    }
    false
}
