//! Kernel objects and their reference counts (Corey §4.1, §4.2). An object lives in kernel
//! memory that every core can reach; a holder keeps an [`ObjPtr`] (a counted pointer) to
//! it, so "the kernel counts references to each object, freeing the object's memory when
//! the count is zero" is the pointer's count. The kernel's per-kind data is a [`Payload`];
//! a share's body is a [`ShareTable`] behind a scalable reader-writer lock.

use alloc::collections::BTreeMap;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicUsize, Ordering};

use locks::RwLock;

use crate::id::{IdAllocator, ObjName, ObjectId, ObjectKind};
use crate::ObjError;

/// A counted pointer to an object: one per holder (see the crate docs).
pub type ObjPtr<P> = Arc<Object<P>>;

/// What the kernel keeps in a non-share object (a segment's pages, an address range's
/// mappings and page tables, a pcore's state). It is freed by its own `Drop` when the last
/// reference goes, on whichever core drops it.
pub trait Payload: Send + Sync + Sized {
    /// Takes out the references this payload holds to other objects (an address range
    /// holds its segments and nested ranges). Called once, as the object is freed, so a
    /// long chain of holders is released by a worklist rather than by recursion.
    fn take_held(&mut self) -> Vec<ObjPtr<Self>> {
        Vec::new()
    }
}

/// Counts the live objects one core created, so the kernel can cap them (object metadata
/// is kernel memory a program must not exhaust). Decremented by whichever core frees.
#[derive(Debug, Default)]
pub struct Census {
    live: AtomicUsize,
}

impl Census {
    /// No objects yet (usable in a `static`).
    pub const fn new() -> Self {
        Census { live: AtomicUsize::new(0) }
    }

    /// How many objects this census counts now.
    pub fn live(&self) -> usize {
        // Relaxed: a statistic and a soft cap; nothing is published through it.
        self.live.load(Ordering::Relaxed)
    }
}

/// Where a core's new objects come from: its own id counter (no shared counter, Corey
/// §4.2) and its census. Only its core uses it.
#[derive(Debug)]
pub struct Creator {
    ids: IdAllocator,
    census: &'static Census,
}

impl Creator {
    /// The creator of `core`'s objects, counted in `census`.
    pub fn new(core: u16, census: &'static Census) -> Self {
        Creator { ids: IdAllocator::new(core), census }
    }

    /// How many objects this core created are live.
    pub fn live(&self) -> usize {
        self.census.live()
    }

    /// A fresh id (for a private root share, which is not an object).
    pub fn next_id(&mut self) -> Result<ObjectId, ObjError> {
        self.ids.next_id()
    }

    /// A new object with a fresh id and one reference (the returned pointer).
    pub fn make<P: Payload>(
        &mut self,
        kind: ObjectKind,
        name: ObjName,
        body: Body<P>,
    ) -> Result<ObjPtr<P>, ObjError> {
        let id = self.ids.next_id()?;
        // Relaxed: see `Census::live`.
        self.census.live.fetch_add(1, Ordering::Relaxed);
        Ok(Arc::new(Object { id, kind, name, census: self.census, body }))
    }
}

/// A share's contents: object id → pointer (Corey §3.3 "a share maps application-visible
/// identifiers to kernel data pointers"). Each id is in a share at most once.
pub type ShareMap<P> = BTreeMap<ObjectId, ObjPtr<P>>;

/// A shared share's table behind its lock (Corey §4.1: "a scalable read-write lock
/// implementation inspired by the MCS lock"): lookups take a read lock in the reading
/// core's own slot, adds and removes the writer lock.
pub struct ShareTable<P: Payload> {
    map: RwLock<ShareMap<P>>,
}

impl<P: Payload> ShareTable<P> {
    /// An empty table.
    pub fn new() -> Self {
        ShareTable { map: RwLock::new(BTreeMap::new()) }
    }

    /// The pointer for `id`, read in reader slot `core`.
    pub fn get(&self, core: usize, id: ObjectId) -> Option<ObjPtr<P>> {
        self.map.read(core, |m| m.get(&id).cloned())
    }

    /// Whether `id` is in the table.
    pub fn contains(&self, core: usize, id: ObjectId) -> bool {
        self.map.read(core, |m| m.contains_key(&id))
    }

    /// Adds `ptr` under its id, or gives it back with [`ObjError::AlreadyPresent`].
    pub fn insert(&self, ptr: ObjPtr<P>) -> Result<(), (ObjError, ObjPtr<P>)> {
        self.map.write(|m| {
            if m.contains_key(&ptr.id) {
                return Err((ObjError::AlreadyPresent, ptr));
            }
            m.insert(ptr.id, ptr);
            Ok(())
        })
    }

    /// Removes `id` and returns its pointer (the caller drops it, which may free it).
    pub fn remove(&self, id: ObjectId) -> Result<ObjPtr<P>, ObjError> {
        self.map.write(|m| m.remove(&id)).ok_or(ObjError::NotInShare)
    }

    /// The ids in the table, read in reader slot `core`.
    pub fn ids(&self, core: usize) -> Vec<ObjectId> {
        self.map.read(core, |m| m.keys().copied().collect())
    }

    /// How many ids the table holds.
    pub fn len(&self, core: usize) -> usize {
        self.map.read(core, |m| m.len())
    }

    /// Whether the table holds nothing.
    pub fn is_empty(&self, core: usize) -> bool {
        self.len(core) == 0
    }

    fn take_all(&self) -> Vec<ObjPtr<P>> {
        self.map.write(core::mem::take).into_values().collect()
    }
}

impl<P: Payload> Default for ShareTable<P> {
    fn default() -> Self {
        Self::new()
    }
}

/// What an object is: a share (its table) or a kernel object (the kernel's payload).
pub enum Body<P: Payload> {
    /// A shared share.
    Share(alloc::boxed::Box<ShareTable<P>>),
    /// A segment, address range, pcore or device.
    Kernel(P),
}

/// One kernel object (Corey §4.1 "object metadata").
pub struct Object<P: Payload> {
    id: ObjectId,
    kind: ObjectKind,
    name: ObjName,
    census: &'static Census,
    body: Body<P>,
}

impl<P: Payload> Object<P> {
    /// Its id.
    pub fn id(&self) -> ObjectId {
        self.id
    }

    /// Its kind.
    pub fn kind(&self) -> ObjectKind {
        self.kind
    }

    /// The name given at allocation.
    pub fn name(&self) -> ObjName {
        self.name
    }

    /// Its table, if it is a share.
    pub fn share(&self) -> Option<&ShareTable<P>> {
        match &self.body {
            Body::Share(t) => Some(t),
            Body::Kernel(_) => None,
        }
    }

    /// Its payload, if it is not a share.
    pub fn payload(&self) -> Option<&P> {
        match &self.body {
            Body::Kernel(p) => Some(p),
            Body::Share(_) => None,
        }
    }

    fn take_held(&mut self) -> Vec<ObjPtr<P>> {
        match &mut self.body {
            Body::Share(t) => t.take_all(),
            Body::Kernel(p) => p.take_held(),
        }
    }
}

impl<P: Payload> Drop for Object<P> {
    fn drop(&mut self) {
        // Relaxed: see `Census::live`.
        self.census.live.fetch_sub(1, Ordering::Relaxed);
        release(self.take_held());
    }
}

/// Drops `work`'s references; every object whose last reference that was is freed, and
/// what it held is released in turn — a worklist, so a deep chain of shares or ranges
/// cannot overflow the kernel stack.
pub fn release<P: Payload>(mut work: Vec<ObjPtr<P>>) {
    while let Some(ptr) = work.pop() {
        if let Some(mut object) = Arc::into_inner(ptr) {
            work.extend(object.take_held());
            // `object` drops here with nothing left to hold: no recursion.
        }
    }
}
