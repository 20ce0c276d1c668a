//! Kernel objects and their reference counts (Corey §4.1, §4.2). An object lives in kernel
//! memory that every core can reach; a holder keeps an [`ObjPtr`] (a counted pointer) to
//! it, so "the kernel counts references to each object, freeing the object's memory when
//! the count is zero" is the pointer's count. The kernel's per-kind data is a [`Payload`];
//! a share's body is a [`ShareTable`] behind a scalable reader-writer lock. A share maps
//! entry ids to [`Entry`]s: an object's own id, or a descriptor id that `share_dupobj`
//! made for it (the talk's file descriptors: several ids, one object).

use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicIsize, AtomicU64, Ordering};

use locks::RwLock;

use crate::id::Revocation;
use crate::id::{IdAllocator, ObjName, ObjectId, ObjectKind};
use crate::idmap::{IdMap, Refused};
use crate::quota::Charge;
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

/// Rows a [`Census`] keeps: one per core that may change it (cores past this share rows).
pub const CENSUS_ROWS: usize = 64;

/// Which core runs now and how many there are: what a [`Census`] needs to give each core a
/// row of its own (the kernel's per-core block; a host test's thread number).
#[derive(Clone, Copy, Debug)]
pub struct Cores {
    /// The calling core's index.
    pub here: fn() -> usize,
    /// How many cores there are (rows past this are never written, so never read).
    pub count: fn() -> usize,
}

impl Cores {
    /// One core (host tests, and a census only one core changes).
    pub const ONE: Cores = Cores { here: || 0, count: || 1 };
}

/// One core's row of a census: on a cache line of its own.
#[derive(Debug, Default)]
#[repr(align(64))]
struct CensusRow(AtomicIsize);

/// Counts the live objects and descriptor entries one core created, so the kernel can cap
/// them (their metadata is kernel memory a program must not exhaust). A create counts +1
/// in the creating core's row, a free -1 in the freeing core's row, and `live` adds the
/// rows up (Multikernel §3.3, Corey §1: per-core operations write no line another core
/// writes; issue M10 item 7: counters are per core, summed when read).
#[derive(Debug)]
pub struct Census {
    rows: [CensusRow; CENSUS_ROWS],
    cores: Cores,
}

impl Census {
    /// No objects yet, one row for everyone (usable in a `static`).
    pub const fn new() -> Self {
        Census::per_core(Cores::ONE)
    }

    /// No objects yet, a row per core of `cores` (usable in a `static`).
    pub const fn per_core(cores: Cores) -> Self {
        Census { rows: [const { CensusRow(AtomicIsize::new(0)) }; CENSUS_ROWS], cores }
    }

    /// How many objects this census counts now: every core's row added up (exact once
    /// changes stop; 0 for a snapshot that catches a free before its create).
    pub fn live(&self) -> usize {
        let rows = &self.rows[..(self.cores.count)().clamp(1, CENSUS_ROWS)];
        // Relaxed: a statistic and a soft cap; nothing is published through it.
        let total: isize = rows.iter().map(|r| r.0.load(Ordering::Relaxed)).sum();
        usize::try_from(total).unwrap_or(0)
    }

    /// Core `core`'s row: what it created minus what it freed (0 past the rows).
    pub fn row(&self, core: usize) -> isize {
        self.rows.get(core).map_or(0, |r| r.0.load(Ordering::Relaxed))
    }

    /// Adds `delta` in the calling core's row.
    fn add(&self, delta: isize) {
        let row = (self.cores.here)() % CENSUS_ROWS;
        // Relaxed: see `live`.
        self.rows[row].0.fetch_add(delta, Ordering::Relaxed);
    }
}

impl Default for Census {
    fn default() -> Self {
        Census::new()
    }
}

/// Where a core's new objects come from: its own id counter (no shared counter, Corey
/// §4.2) and its census. Only its core uses it.
#[derive(Debug)]
pub struct Creator {
    ids: IdAllocator,
    census: &'static Census,
    /// Reader slots of the shares it makes (the machine's cores).
    readers: usize,
}

impl Creator {
    /// The creator of `core`'s objects, counted in `census`.
    pub fn new(core: u16, census: &'static Census) -> Self {
        Creator { ids: IdAllocator::new(core), census, readers: locks::rwlock::READER_SLOTS }
    }

    /// The same, making shares whose locks have `readers` reader slots (the number of
    /// cores that may read them): a write to a share then closes that many cache lines.
    pub fn with_readers(mut self, readers: usize) -> Self {
        self.readers = readers;
        self
    }

    /// A new, empty share table sized for this creator's readers.
    pub fn share_table<P: Payload>(&self) -> ShareTable<P> {
        ShareTable::with_readers(self.readers)
    }

    /// How many objects this core created are live.
    pub fn live(&self) -> usize {
        self.census.live()
    }

    /// A fresh id (for a private root share, which is not an object).
    pub fn next_id(&mut self) -> Result<ObjectId, ObjError> {
        self.ids.next_id()
    }

    /// A fresh entry id for a descriptor (`share_dupobj`), counted in this core's census
    /// until the returned token is dropped.
    pub fn entry_id(&mut self) -> Result<(ObjectId, CensusToken), ObjError> {
        let id = self.ids.next_id()?;
        Ok((id, CensusToken::count(self.census)))
    }

    /// A new object with a fresh id and one reference (the returned pointer); its
    /// metadata paid for by `charge`, if a program asked for it.
    pub fn make<P: Payload>(
        &mut self,
        kind: ObjectKind,
        name: ObjName,
        body: Body<P>,
        charge: Option<Charge>,
    ) -> Result<ObjPtr<P>, ObjError> {
        let id = self.ids.next_id()?;
        self.census.add(1);
        Ok(Arc::new(Object { id, kind, name, census: self.census, body, charge }))
    }
}

/// One count in a [`Census`], given back when dropped (a descriptor entry's share of the
/// cap on kernel metadata).
#[derive(Debug)]
pub struct CensusToken(&'static Census);

impl CensusToken {
    /// One more count in `census`, given back when the token is dropped.
    pub fn count(census: &'static Census) -> CensusToken {
        census.add(1);
        CensusToken(census)
    }
}

impl Drop for CensusToken {
    fn drop(&mut self) {
        self.0.add(-1);
    }
}

/// One entry of a share: a counted pointer to the object, and, for a descriptor entry
/// (an id other than the object's own, made by `share_dupobj`), the census count that
/// entry holds. The entry holds one reference to the object, whatever its id.
pub struct Entry<P: Payload> {
    ptr: ObjPtr<P>,
    token: Option<CensusToken>,
}

impl<P: Payload> Entry<P> {
    /// The entry of an object under its own id.
    pub fn object(ptr: ObjPtr<P>) -> Self {
        Entry { ptr, token: None }
    }

    /// A descriptor entry: another id for `ptr`, counted by `token`.
    pub fn descriptor(ptr: ObjPtr<P>, token: CensusToken) -> Self {
        Entry { ptr, token: Some(token) }
    }

    /// The object.
    pub fn ptr(&self) -> &ObjPtr<P> {
        &self.ptr
    }

    /// Gives the census count back and returns the reference.
    pub fn into_ptr(self) -> ObjPtr<P> {
        let Entry { ptr, token } = self;
        drop(token);
        ptr
    }
}

/// Most entries one share holds. Each core's object cap bounds what it makes, but a
/// shared share collects the entries of every core; this bound keeps its hash table, which
/// grows in one allocation, at most 768 KiB (32,768 slots of 24 bytes), below the memory
/// the kernel keeps back for itself when a call may allocate.
pub const SHARE_MAX: usize = 16_384;

/// Adds `entry` under `id` to `map` unless the id is there or the map is full.
pub(crate) fn insert_bounded<P: Payload>(
    map: &mut ShareMap<P>,
    id: ObjectId,
    entry: Entry<P>,
) -> Result<(), (ObjError, Entry<P>)> {
    if map.len() >= SHARE_MAX {
        return Err((ObjError::ShareFull, entry));
    }
    map.insert_new(id, entry).map_err(|(why, e)| match why {
        Refused::Present => (ObjError::AlreadyPresent, e),
        Refused::NoMemory => (ObjError::OutOfMemory, e),
    })
}

/// [`insert_bounded`], the table's growth charged to `charge` first (issue M14: a share's
/// table is kernel memory its maker pays for); refused with [`ObjError::QuotaExceeded`]
/// when the quota cannot take it. Afterwards the charge is what the table takes.
pub(crate) fn insert_charged<P: Payload>(
    map: &mut ShareMap<P>,
    id: ObjectId,
    entry: Entry<P>,
    charge: Option<&Charge>,
) -> Result<(), (ObjError, Entry<P>)> {
    if let Some(c) = charge {
        if let Err(e) = c.resize(map.bytes_with_one_more().max(c.bytes())) {
            return Err((e, entry));
        }
    }
    let inserted = insert_bounded(map, id, entry);
    sync_charge(map, charge);
    inserted
}

/// Makes `charge` what `map`'s table takes now (after a removal: never more than before).
pub(crate) fn sync_charge<P: Payload>(map: &ShareMap<P>, charge: Option<&Charge>) {
    if let Some(c) = charge {
        // Shrinking cannot be refused; the table never outgrows its charge.
        let _ = c.resize(map.bytes().min(c.bytes()));
    }
}

/// A share's contents: entry id → [`Entry`] (Corey §3.3 "a share maps application-visible
/// identifiers to kernel data pointers"). Each id is in a share at most once; an object is
/// under its own id, and under any descriptor ids `share_dupobj` gave it.
pub type ShareMap<P> = IdMap<Entry<P>>;

/// A shared share's table behind its lock (Corey §4.1: "a scalable read-write lock
/// implementation inspired by the MCS lock"): lookups take a read lock in the reading
/// core's own slot, adds and removes the writer lock.
pub struct ShareTable<P: Payload> {
    map: RwLock<ShareMap<P>>,
    /// The revocations it is caught up with ([`crate::revoke`]); written under the writer
    /// lock, read without it to skip a share that is up to date.
    seen: AtomicU64,
    /// Its table's memory, charged to the program that made the share (resized under the
    /// writer lock as the table grows and shrinks).
    charge: Option<Charge>,
}

impl<P: Payload> ShareTable<P> {
    /// An empty table.
    pub fn new() -> Self {
        ShareTable { map: RwLock::new(IdMap::new()), seen: AtomicU64::new(0), charge: None }
    }

    /// An empty table whose lock has `readers` reader slots ([`RwLock::with_readers`]).
    pub fn with_readers(readers: usize) -> Self {
        ShareTable {
            map: RwLock::with_readers(IdMap::new(), readers),
            seen: AtomicU64::new(0),
            charge: None,
        }
    }

    /// The same, its table's memory charged to `charge` as it grows.
    pub fn charged(mut self, charge: Charge) -> Self {
        self.charge = Some(charge);
        self
    }

    /// The same, caught up with the first `seen` revocations (a new share holds nothing
    /// older than its creating core's log).
    pub fn caught_up_to(self, seen: u64) -> Self {
        self.seen.store(seen, Ordering::Relaxed);
        self
    }

    /// The revocations it is caught up with.
    pub fn seen(&self) -> u64 {
        // Acquire: pairs with the Release in `catch_up`.
        self.seen.load(Ordering::Acquire)
    }

    /// Takes out the entries `revocations` (those after its own number) remove, and counts
    /// it caught up with `committed`; the references taken out, for the caller to release.
    /// `id` is this share's own id (a revocation keeps one ⟨share, entry⟩).
    pub fn catch_up(
        &self,
        id: ObjectId,
        revocations: &[Revocation],
        committed: u64,
    ) -> Vec<ObjPtr<P>> {
        if self.seen() >= committed {
            return Vec::new();
        }
        self.map.write(|m| {
            // Another core may have scrubbed it meanwhile.
            let seen = self.seen.load(Ordering::Relaxed);
            if seen >= committed {
                return Vec::new();
            }
            let removed = remove_revoked(m, id, revocations, seen);
            sync_charge(m, self.charge.as_ref());
            // Release: a core that reads the number sees the entries gone.
            self.seen.store(committed, Ordering::Release);
            removed
        })
    }

    /// The shares among its entries, read in reader slot `core`.
    pub fn child_shares(&self, core: usize) -> Vec<ObjPtr<P>> {
        self.map.read(core, |m| {
            m.keys()
                .filter_map(|k| m.get(k))
                .filter(|e| e.ptr.kind() == ObjectKind::Share)
                .map(|e| e.ptr.clone())
                .collect()
        })
    }

    /// The pointer for entry `id`, read in reader slot `core`.
    pub fn get(&self, core: usize, id: ObjectId) -> Option<ObjPtr<P>> {
        self.map.read(core, |m| m.get(&id).map(|e| e.ptr.clone()))
    }

    /// Whether `id` is in the table.
    pub fn contains(&self, core: usize, id: ObjectId) -> bool {
        self.map.read(core, |m| m.contains_key(&id))
    }

    /// Adds `entry` under `id`, or gives it back with [`ObjError::AlreadyPresent`].
    /// A table that holds [`SHARE_MAX`] entries refuses with [`ObjError::ShareFull`].
    pub fn insert(&self, id: ObjectId, entry: Entry<P>) -> Result<(), (ObjError, Entry<P>)> {
        self.map.write(|m| insert_charged(m, id, entry, self.charge.as_ref()))
    }

    /// Removes entry `id` and returns its pointer (the caller drops it, which may free it).
    pub fn remove(&self, id: ObjectId) -> Result<ObjPtr<P>, ObjError> {
        let removed = self.map.write(|m| {
            let removed = m.remove(&id);
            sync_charge(m, self.charge.as_ref());
            removed
        });
        removed.map(Entry::into_ptr).ok_or(ObjError::NotInShare)
    }

    /// The entry ids in the table, read in reader slot `core`.
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
        let all = self.map.write(|m| {
            let all = core::mem::take(m);
            sync_charge(m, self.charge.as_ref());
            all
        });
        all.into_values().map(Entry::into_ptr).collect()
    }
}

impl<P: Payload> Default for ShareTable<P> {
    fn default() -> Self {
        Self::new()
    }
}

/// Takes out of `map` (share `share`'s entries) every entry the revocations after number
/// `seen` remove; the references taken out.
pub(crate) fn remove_revoked<P: Payload>(
    map: &mut ShareMap<P>,
    share: ObjectId,
    revocations: &[Revocation],
    seen: u64,
) -> Vec<ObjPtr<P>> {
    let mut removed = Vec::new();
    for r in revocations.iter().filter(|r| r.seq > seen) {
        let doomed: Vec<ObjectId> = map
            .keys()
            .copied()
            .filter(|k| map.get(k).is_some_and(|e| r.removes(share, *k, e.ptr.id())))
            .collect();
        for k in doomed {
            if let Some(e) = map.remove(&k) {
                removed.push(e.into_ptr());
            }
        }
    }
    removed
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
    /// Its metadata, charged to the program that made it (none for what the kernel made
    /// for itself, such as the machine's device objects).
    charge: Option<Charge>,
}

impl<P: Payload> Object<P> {
    /// Kernel bytes one object's metadata takes (what `Quota` charges for it, besides
    /// what its payload grows: a share's table, a segment's pages, a range's mappings).
    pub const BYTES: u64 = core::mem::size_of::<Object<P>>() as u64 + 16;

    /// What its metadata is charged to, if anything.
    pub fn charge(&self) -> Option<&Charge> {
        self.charge.as_ref()
    }

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
        self.census.add(-1);
        release(self.take_held());
    }
}

/// Drops one reference: [`release`] without a worklist to allocate when it was not the
/// last (the common case of `share_delobj`, e.g. closing a `dup`ped descriptor).
pub fn release_one<P: Payload>(ptr: ObjPtr<P>) {
    if let Some(mut object) = Arc::into_inner(ptr) {
        release(object.take_held());
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
