//! Corey's objects for user programs (Corey §3–§4, Figure 5): shares, segments, address
//! ranges, pcores and devices, named by ⟨share, object⟩ references resolved through the
//! running pcore's share set, and the soft page fault that fills a page of a segment
//! mapped by the pcore's root address range.
//!
//! The object model (ids, shares, share sets, reference counts), the range maps and the
//! memory logic (segment pages, copy-on-write, what each range's tables map, the fault,
//! copy and edit decisions) are the hardware-neutral `objects`, `addrrange` and `vm`
//! crates; this file is the glue: the frames, the x86 page tables behind `vm::PageTables`,
//! the locks, TLB shootdown and the system calls. Objects live in kernel memory any core
//! can reach (Corey §4.1), each guarded by its own lock, so a segment or range one core
//! made can be used on every core its share reaches.
//!
//! Memory safety across cores rests on counted frames: a segment page is an
//! `Arc<Frame>`, and every page-table entry that maps it holds a clone (`vm::RangeState`),
//! so a frame is freed only after the last mapping of it is gone, whoever changed the
//! segment.
//!
//! Address ranges come in two kinds (`abi::ar_kind`), and each owns its page tables. A
//! root range (the user half) owns a PML4: every context running on it uses that as its
//! CR3, so they share one address space. A slot range (1 GiB) owns a page directory,
//! linked into every root that splices it (`ar_set_ar`). A page is mapped in the tables of
//! the range that maps its segment, so a page one core faults in is mapped for every core
//! using that range without a fault of their own (Corey §3.1, §4.3). Removing mappings
//! from a range, or making a segment's pages copy-on-write, unmaps them in every range
//! that mapped them and shoots down the TLBs of the cores that may hold them.

use super::space::{AddressSpace, RootTables};
use crate::arch::paging::{self, phys_to_virt};
use crate::mem::frames;
use crate::percpu::{self, this_core, PerCoreState};
use abi::{map, ArSetAr, ArSetSeg, Error, MappingInfo};
use addrrange::{AddressRange, ArError, Perms, Target};
use alloc::sync::Arc;
use alloc::vec;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use locks::McsLock;
use objects::{
    Census, Charge, Creator, ObjError, ObjName, ObjPtr, ObjRef, ObjectId, ObjectKind, Quota,
    ShareSet,
};
use vm::{RangeState, SegmentState, VmError};
use x86_64::structures::paging::PageTableFlags as PageFlags;

const PAGE: u64 = 4096;
/// Span of a root address range: the user half.
const ROOT_SPAN: u64 = crate::arch::paging::USER_END;
/// Span of a slot range and the granularity at which ranges nest (Corey: 1 GiB).
const GRANULARITY: u64 = 1 << 30;
/// Most live objects one core's programs may create (their metadata is kernel heap: a
/// program must not be able to exhaust it).
const MAX_OBJECTS_PER_CORE: usize = 16_384;
/// Free frames a core keeps back from calls that grow kernel memory (2 MiB: room for the
/// kernel heap), or a quarter of a small core's frames, but never fewer than
/// [`RESERVE_FRAMES_MIN`] (see [`reserve_frames`]).
const RESERVE_FRAMES: u64 = 512;
/// The least a core keeps back (1 MiB): more than any one call's kernel allocation.
const RESERVE_FRAMES_MIN: u64 = 256;

/// What this core keeps back from calls that grow kernel memory: [`RESERVE_FRAMES`], or on
/// a core with little memory (a 64 MiB VM of 16 cores has 4 MiB each) a quarter of its
/// frames, at least [`RESERVE_FRAMES_MIN`]. A fixed 2 MiB left such a core half its memory.
fn reserve_frames() -> u64 {
    let (_, total) = frames::counts_here();
    (total / 4).clamp(RESERVE_FRAMES_MIN, RESERVE_FRAMES)
}
/// Free frames the kernel keeps back when it loads a program (less than programs may use,
/// so a program that took objects up to the reserve does not stop the next from loading).
const LOAD_RESERVE_FRAMES: u64 = 64;
/// Free frames below which a soft page fault is refused (the program is stopped with a
/// page fault, reported as out of memory) rather than filled: what is left is for the
/// kernel heap, whose allocations must not fail.
pub const FAULT_RESERVE_FRAMES: u64 = 64;
/// Most mappings one address range holds (`ar_set_seg` past it: `NoResources`): each is
/// a node of the range's tree in the kernel heap, like an entry of a share (whose cap,
/// `objects::SHARE_MAX`, is the same).
pub const MAX_MAPPINGS: usize = 16_384;
/// Largest segment (in pages) one call may create or grow to.
const MAX_SEGMENT_PAGES: u64 = 1 << 20;

/// Live objects per creating core.
static CENSUS: [Census; crate::percpu::MAX_CORES] =
    [const { Census::new() }; crate::percpu::MAX_CORES];

/// Live objects made by core `core`'s programs (tests check they come back to a baseline).
pub fn live_objects(core: usize) -> usize {
    CENSUS.get(core).map_or(0, |c| c.live())
}

/// A physical frame; freed (sent home to its owner) when the last holder drops it.
pub struct Frame(u64, Option<(Arc<super::sched::Resident>, usize)>);

/// The resident-page counters of the thread whose fault this core is serving: frames
/// filled meanwhile are charged to it (AMPS §3.3).
static CHARGE_TO: PerCoreState<Option<Arc<super::sched::Resident>>> = crate::per_core_state!(None);

/// Runs `f` (a soft fault) with the frames it fills charged to `resident`.
pub fn charging<R>(resident: &Arc<super::sched::Resident>, f: impl FnOnce() -> R) -> R {
    CHARGE_TO.with(|c| *c = Some(resident.clone()));
    let r = f();
    CHARGE_TO.with(|c| *c = None);
    r
}

/// A fresh frame of this core, zeroed; its physical address.
fn zeroed_frame() -> Option<u64> {
    let pa = frames::alloc()?;
    // SAFETY: a fresh frame of this core's own, reached through the direct map.
    unsafe { core::ptr::write_bytes(phys_to_virt(pa) as *mut u8, 0, PAGE as usize) };
    Some(pa)
}

impl Frame {
    /// Frame `pa` of this core, charged to the thread whose fault is being served, if any.
    fn new(pa: u64) -> Arc<Frame> {
        let node = this_core().node as usize;
        let charged = CHARGE_TO.with(|c| c.clone()).map(|r| {
            r.charge(node);
            (r, node)
        });
        Arc::new(Frame(pa, charged))
    }

    /// A fresh frame of this core, zeroed.
    fn zeroed() -> Option<Arc<Frame>> {
        Some(Frame::new(zeroed_frame()?))
    }

    /// A fresh frame of this core holding a copy of `self`.
    fn copy(&self) -> Option<Arc<Frame>> {
        let pa = frames::alloc()?;
        // SAFETY: `self.0` is a live frame (we hold it), `pa` a fresh one; both are reached
        // through the direct map and do not overlap.
        unsafe {
            core::ptr::copy_nonoverlapping(
                phys_to_virt(self.0) as *const u8,
                phys_to_virt(pa) as *mut u8,
                PAGE as usize,
            )
        };
        Some(Frame::new(pa))
    }
}

impl Drop for Frame {
    fn drop(&mut self) {
        if let Some((resident, node)) = self.1.take() {
            resident.uncharge(node);
        }
        let _ = frames::free(self.0);
    }
}

/// This kernel as the `vm` crate's host: its frames, page tables, objects, locks and TLB
/// shootdown.
struct Kernel;

impl vm::Host for Kernel {
    type Frame = Arc<Frame>;
    type Tables = Tables;
    type Object = objects::Object<Payload>;

    fn addr(frame: &Arc<Frame>) -> u64 {
        frame.0
    }

    fn id(object: &Self::Object) -> u64 {
        object.id().0
    }

    fn with_segment<R>(
        &self,
        object: &Self::Object,
        f: impl FnOnce(&mut SegmentState<Kernel>) -> R,
    ) -> Option<R> {
        match object.payload()? {
            Payload::Segment(s) => Some(s.state.with(f)),
            _ => None,
        }
    }

    fn with_range<R>(
        &self,
        object: &Self::Object,
        f: impl FnOnce(&mut RangeState<Kernel>) -> R,
    ) -> Option<R> {
        match object.payload()? {
            Payload::Range(r) => Some(r.state.with(f)),
            _ => None,
        }
    }

    fn zeroed(&self) -> Option<Arc<Frame>> {
        Frame::zeroed()
    }

    fn copy(&self, frame: &Arc<Frame>) -> Option<Arc<Frame>> {
        frame.copy()
    }

    fn shootdown(&self, range: &Self::Object) -> bool {
        match range.payload() {
            Some(Payload::Range(r)) => {
                crate::tlb::shootdown(r.cores.load(Ordering::Acquire)).is_ok()
            }
            _ => true,
        }
    }
}

/// A segment (Corey §4.3): pages filled on first touch (`vm::SegmentState`).
pub struct Segment {
    state: McsLock<SegmentState<Kernel>>,
    /// Its page map, charged to its maker's kernel-memory quota at every resize.
    charge: Charge,
}

/// An address range (Corey §3.1, §4.3): its mappings, held objects, page tables and
/// mapped pages (`vm::RangeState`).
pub struct Range {
    state: McsLock<RangeState<Kernel>>,
    /// Cores whose page tables may hold this range's mappings: for a root range, the
    /// cores running a context on it; for a slot range, every core that ever ran a root it
    /// is spliced into. A shootdown goes to them.
    cores: AtomicU64,
    /// Cores with a thread waiting (`wait`) on a word of this root range's address space:
    /// where a `wake` must look besides its own core.
    waiters: AtomicU64,
    /// For a slot range, where roots have spliced it (its address in their address
    /// spaces), so a shootdown can name the pages it changed; an address stays after an
    /// unsplice (invalidating it again costs little). `None`: more than [`MOST_SPLICES`]
    /// places, and a shootdown flushes everything.
    splices: McsLock<Option<Vec<u64>>>,
    /// Its state and mappings, charged to its maker's kernel-memory quota at every edit.
    charge: Charge,
}

/// Root ranges that went with a waiter bit still set, by the core that dropped them. No
/// thread can be parked on a range that goes (a parked thread holds its root), so each is
/// a bit a `wait` left behind (issue M14); the tests check the count stays put.
static STALE_WAITER_BITS: [AtomicU64; percpu::MAX_CORES] =
    [const { AtomicU64::new(0) }; percpu::MAX_CORES];

/// Root ranges core `core` dropped with a waiter bit still set (see [`STALE_WAITER_BITS`]).
pub fn stale_waiter_bits(core: usize) -> u64 {
    STALE_WAITER_BITS.get(core).map_or(0, |n| n.load(Ordering::Relaxed))
}

impl Drop for Range {
    fn drop(&mut self) {
        if *self.waiters.get_mut() != 0 {
            STALE_WAITER_BITS[this_core().index].fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Most splice addresses a slot range tracks (see `Range::splices`).
const MOST_SPLICES: usize = 4;

impl Range {
    /// What a shootdown after an edit that unmapped the offsets `span` must invalidate:
    /// those pages at the range's address (a root: its own; a slot: where its one root
    /// splices it), else everything.
    fn flush_for(&self, span: Option<(u64, u64)>, root: bool) -> crate::tlb::Flush {
        let everything = crate::tlb::Flush::everything(false);
        let Some((start, end)) = span else { return everything };
        let base = if root {
            0
        } else {
            match self.splices.with(|s| s.as_ref().and_then(|v| (v.len() == 1).then(|| v[0]))) {
                Some(base) => base,
                None => return everything,
            }
        };
        crate::tlb::Flush { start: base + start, pages: (end - start) / PAGE, global: false }
    }
}

/// A range's page tables (Corey §3.1: an address range is a page-table subtree that
/// several cores' tables include).
enum Tables {
    /// A root range's PML4: every context on the range runs on it (its CR3).
    Root(RootTables),
    /// A slot range's page directory, linked into every root that splices it.
    Slot(Directory),
}

impl vm::PageTables for Tables {
    fn map(&mut self, offset: u64, addr: u64, perms: Perms) -> Result<(), VmError> {
        let flags = PageFlags::USER_ACCESSIBLE | rights(perms);
        match self {
            Tables::Root(t) => t.map(offset, addr, flags),
            // SAFETY: the range's own directory, under its lock; tables come from this core.
            Tables::Slot(d) => unsafe {
                paging::map_in_directory(d.pd, offset, addr, flags, &mut frames::alloc)
            },
        }
        .ok_or(VmError::NoMemory)
    }

    fn unmap(&mut self, offset: u64) {
        match self {
            Tables::Root(t) => t.unmap(offset),
            Tables::Slot(d) => paging::unmap_in_directory(d.pd, offset),
        }
    }

    fn translate(&self, offset: u64) -> Option<(u64, Perms)> {
        let (pa, flags) = match self {
            Tables::Root(t) => t.translate(offset),
            Tables::Slot(d) => paging::translate_in_directory(d.pd, offset),
        }?;
        let write = flags.contains(PageFlags::WRITABLE);
        Some((pa, Perms { write, exec: !flags.contains(PageFlags::NO_EXECUTE) }))
    }

    fn unlink(&mut self, offset: u64) {
        if let Tables::Root(t) = self {
            t.remove_slot(offset);
        }
    }
}

/// The x86 entry bits for `perms` (`WRITABLE`, `NO_EXECUTE`).
fn rights(perms: Perms) -> PageFlags {
    let mut flags = PageFlags::empty();
    if perms.write {
        flags |= PageFlags::WRITABLE;
    }
    if !perms.exec {
        flags |= PageFlags::NO_EXECUTE;
    }
    flags
}

/// A slot range's page directory.
struct Directory {
    pd: u64,
}

impl Directory {
    /// A fresh, empty directory, owned from now on (freed in `Drop`).
    fn new() -> Option<Directory> {
        Some(Directory { pd: zeroed_frame()? })
    }
}

impl Drop for Directory {
    fn drop(&mut self) {
        let mut tables = Vec::new();
        paging::directory_tables(self.pd, &mut |t| tables.push(t));
        for pa in tables.into_iter().chain([self.pd]) {
            let _ = frames::free(pa);
        }
    }
}

/// A physical core (Corey §4.4). One live pcore object per core.
pub struct Pcore {
    /// The core's index.
    pub core: usize,
    /// What its context is doing (`abi::pcore_status`).
    /// Shared so the core that ran the context can publish the outcome after it let go of
    /// the pcore object: whoever sees the status may then free and reallocate it at once.
    pub status: Arc<AtomicU64>,
    /// Set by `pcore_halt`; the core stops its context at its next tick.
    pub halt: AtomicBool,
    /// Time-slice period in Hz (`pcore_set_interval`).
    pub hz: AtomicU64,
}

impl Drop for Pcore {
    fn drop(&mut self) {
        if let Some(c) = percpu::core(self.core) {
            c.pcore_claimed.store(false, Ordering::Release);
        }
    }
}

/// A device object (Corey §4.4 `device_alloc`): names one of `devices::list()`.
pub struct Device {
    /// The device's hardware id.
    pub hwid: u64,
}

/// What a kernel object owns, by kind.
pub enum Payload {
    /// A segment.
    Segment(Segment),
    /// An address range.
    Range(Range),
    /// A pcore.
    Pcore(Pcore),
    /// A device.
    Device(Device),
    /// A thread (what every core knows of it; the thread itself moves between cores).
    Thread(Arc<super::sched::ThreadShared>),
}

impl objects::Payload for Payload {
    fn take_held(&mut self) -> Vec<Ptr> {
        match self {
            Payload::Range(r) => r.state.with(|s| s.take_held()),
            _ => Vec::new(),
        }
    }
}

/// A counted pointer to a kernel object.
pub type Ptr = ObjPtr<Payload>;

fn segment(p: &Ptr) -> Option<&Segment> {
    match p.payload()? {
        Payload::Segment(s) => Some(s),
        _ => None,
    }
}

fn range(p: &Ptr) -> Option<&Range> {
    match p.payload()? {
        Payload::Range(r) => Some(r),
        _ => None,
    }
}

/// The pcore payload of `p`, if it is one.
pub fn pcore(p: &Ptr) -> Option<&Pcore> {
    match p.payload()? {
        Payload::Pcore(c) => Some(c),
        _ => None,
    }
}

/// The thread `p` names, if it is one.
pub fn thread(p: &Ptr) -> Option<&Arc<super::sched::ThreadShared>> {
    match p.payload()? {
        Payload::Thread(t) => Some(t),
        _ => None,
    }
}

/// `thread_create`'s object: `shared`, placed in `share`.
pub fn thread_alloc(
    p: &mut ProgramObjects,
    share: u64,
    shared: Arc<super::sched::ThreadShared>,
) -> Result<u64, Error> {
    alloc(p, share, ObjectKind::Thread, Payload::Thread(shared))
}

/// The cores with a thread waiting on a word of root range `ar`'s address space.
pub fn range_waiters(ar: &Ptr) -> Option<&AtomicU64> {
    range(ar).map(|r| &r.waiters)
}

/// Whether this core has room for a new thread (the object cap, the memory reserve).
pub fn room_for_thread() -> Result<(), Error> {
    room()
}

/// A running context's view of the objects: its share set and its root range.
pub struct ProgramObjects {
    /// The shares it can name objects through (its private root share first).
    pub set: ShareSet<Payload>,
    /// Its root address range (page faults resolve through it; its tables are the CR3).
    pub root_ar: Ptr,
    /// Soft page faults taken.
    pub fault_count: u64,
}

fn to_abi(e: ObjError) -> Error {
    match e {
        ObjError::NoSuchObject | ObjError::NotInShareSet | ObjError::NotInShare => {
            Error::NoSuchObject
        }
        ObjError::IdsExhausted
        | ObjError::ShareFull
        | ObjError::OutOfMemory
        | ObjError::QuotaExceeded => Error::NoResources,
        ObjError::RootShare => Error::NotPermitted,
        _ => Error::InvalidArgument,
    }
}

fn ar_error(_: ArError) -> Error {
    Error::InvalidArgument
}

fn name() -> ObjName {
    ObjName::new(b"").expect("the empty name fits")
}

pub(super) fn reference(share: u64, object: u64) -> ObjRef {
    ObjRef { share: ObjectId(share), object: ObjectId(object) }
}

fn perms(flags: u64) -> Perms {
    Perms { write: flags & map::WRITE != 0, exec: flags & map::EXEC != 0 }
}

/// Where each core's new objects get their ids (made on first use).
static CREATORS: PerCoreState<Option<Creator>> = crate::per_core_state!(None);

/// Runs `f` with this core's object creator (made on first use).
fn with_creator<R>(f: impl FnOnce(&mut Creator) -> R) -> R {
    let index = this_core().index;
    CREATORS.with(|slot| {
        f(slot.get_or_insert_with(|| {
            // Shares' locks get a reader slot per online core (Corey §4.1), up to the lock's
            // 16, not always 16: a write (`dup`, `close` in a shared table) closes every
            // slot in use. (Above 16 cores, cores 16 apart share a slot.)
            let cores = crate::smp::online_cores().last().map_or(1, |&c| c + 1);
            Creator::new(index as u16, &CENSUS[index]).with_readers(cores)
        }))
    })
}

/// `NoResources` when this core's programs already keep [`MAX_OBJECTS_PER_CORE`] objects,
/// or it has fewer than [`reserve_frames`] free frames left for its own heap.
fn room() -> Result<(), Error> {
    room_above(reserve_frames())
}

/// `NoResources` at the object cap or with fewer than `reserve` frames to spare: free
/// frames, plus the kernel heap's own free space (the heap gives frames back only when
/// the core goes idle, but
/// what it holds free serves new metadata just as well).
fn room_above(reserve: u64) -> Result<(), Error> {
    let me = this_core();
    let live = CENSUS[me.index].live();
    let (mapped, used) = crate::mem::heap::stats_this_core();
    let spare = me.free_frames() + mapped.saturating_sub(used) / PAGE;
    // The heap's free space may be in pieces too small for the next block, which then
    // needs fresh frames: a quarter of the reserve stays as frames whatever the heap holds
    // free (issue M14: at 256 MiB a core, `exhaust kernel` drained the frames while the
    // heap still counted 2 MiB free, and the next allocation stopped the core).
    if live >= MAX_OBJECTS_PER_CORE || spare < reserve || me.free_frames() < reserve / 4 {
        return Err(Error::NoResources);
    }
    Ok(())
}

/// Makes a new object of `kind` in `share` of `p`'s set; returns its id.
fn alloc(
    p: &mut ProgramObjects,
    share: u64,
    kind: ObjectKind,
    payload: Payload,
) -> Result<u64, Error> {
    room()?;
    alloc_unchecked(p, share, kind, payload)
}

/// [`alloc`] without the room check (the caller made it).
fn alloc_unchecked(
    p: &mut ProgramObjects,
    share: u64,
    kind: ObjectKind,
    payload: Payload,
) -> Result<u64, Error> {
    with_creator(|c| p.set.alloc(c, ObjectId(share), kind, name(), payload))
        .map(|id| id.0)
        .map_err(to_abi)
}

fn new_range(root: bool, quota: &Arc<Quota>) -> Result<Range, Error> {
    let charge = quota.charge(RANGE_BYTES).map_err(to_abi)?;
    let (span, tables) = if root {
        (ROOT_SPAN, Tables::Root(RootTables::new()?))
    } else {
        (GRANULARITY, Tables::Slot(Directory::new().ok_or(Error::NoResources)?))
    };
    let map = AddressRange::new(span, GRANULARITY).map_err(ar_error)?;
    Ok(Range {
        state: McsLock::new(RangeState::new(map, tables)),
        cores: AtomicU64::new(0),
        waiters: AtomicU64::new(0),
        splices: McsLock::new(Some(Vec::new())),
        charge,
    })
}

/// Kernel bytes of a range before its mappings (charged to its maker's quota).
const RANGE_BYTES: u64 = core::mem::size_of::<Range>() as u64;

/// Live kernel-memory quotas (one per program, kept until the last thing it made goes),
/// by the core that made them: the balance check sees every program's memory come back.
static QUOTAS: [Census; crate::percpu::MAX_CORES] =
    [const { Census::new() }; crate::percpu::MAX_CORES];

/// Live program quotas made on `core`.
pub fn live_quotas(core: usize) -> usize {
    QUOTAS.get(core).map_or(0, |c| c.live())
}

/// The smallest kernel-memory quota a program gets, whatever its core's memory.
const QUOTA_MIN_BYTES: u64 = 2 << 20;
/// The largest: 64 MiB of kernel metadata maps 4 M pages (16 GiB) of segments, or about
/// 450,000 mappings.
const QUOTA_MAX_BYTES: u64 = 64 << 20;

/// A new program's kernel-memory quota (issue M14): a quarter of its core's memory,
/// within [`QUOTA_MIN_BYTES`] and [`QUOTA_MAX_BYTES`], so one program cannot take all of
/// it from the others there; the core's reserve ([`room`]) is checked besides.
/// `kquota=PERCENT` chose it as that share of the core's memory, with no upper bound;
/// `kquota=off`, none (only the core's reserve limits a program).
pub fn new_quota() -> Arc<Quota> {
    let (_, total) = frames::counts_here();
    let me = this_core().index;
    let bytes = match QUOTA_PERCENT.load(Ordering::Relaxed) {
        0 => (total * PAGE / 4).clamp(QUOTA_MIN_BYTES, QUOTA_MAX_BYTES),
        QUOTA_OFF => u64::MAX,
        percent => (total * PAGE / 100 * percent).max(QUOTA_MIN_BYTES),
    };
    Quota::new(bytes, QUOTAS.get(me))
}

/// The share of its core's memory a program's quota is, in percent, if `kquota=` chose
/// one (0: the default, a quarter within the bounds; [`QUOTA_OFF`]: no quota).
static QUOTA_PERCENT: AtomicU64 = AtomicU64::new(0);

/// [`QUOTA_PERCENT`] for `kquota=off`.
const QUOTA_OFF: u64 = u64::MAX;

/// Sets every later program's kernel-memory quota to `percent` (1-100) of its core's
/// memory, or to none for `None` (`kquota=` at boot; `off` lets one program reach the
/// core's reserve, as the reserve's own test needs, and shows what the quota prevents).
pub fn choose_quota_percent(percent: Option<u64>) {
    let word = percent.map_or(QUOTA_OFF, |p| p.clamp(1, 100));
    QUOTA_PERCENT.store(word, Ordering::Relaxed);
}

/// A context's objects: a fresh root share plus `shares`, running on `root_ar`.
/// What it makes is charged to `quota`: a new program's ([`new_quota`]) for a `pcore_run`
/// context, its program's for a thread.
pub fn new_context(
    root_ar: Ptr,
    shares: Vec<Ptr>,
    quota: Arc<Quota>,
) -> Result<ProgramObjects, Error> {
    let core = this_core().index;
    let mut set = with_creator(|c| ShareSet::new(core, c, quota)).map_err(to_abi)?;
    set.start_at(super::revocation::revocations_committed());
    for share in shares {
        set.add_share_ptr(share).map_err(to_abi)?;
    }
    Ok(ProgramObjects { set, root_ar, fault_count: 0 })
}

/// A new program's objects: a root share holding a fresh root address range.
pub fn new_program() -> Result<ProgramObjects, Error> {
    let core = this_core().index;
    let quota = new_quota();
    let mut set: ShareSet<Payload> =
        with_creator(|c| ShareSet::new(core, c, quota.clone())).map_err(to_abi)?;
    set.start_at(super::revocation::revocations_committed());
    let root = set.root_id();
    room_above(LOAD_RESERVE_FRAMES)?;
    let id = with_creator(|c| {
        let range = new_range(true, &quota)?;
        set.alloc(c, root, ObjectKind::AddressRange, name(), Payload::Range(range)).map_err(to_abi)
    })?;
    let root_ar = set.resolve(ObjRef { share: root, object: id }).map_err(to_abi)?;
    Ok(ProgramObjects { set, root_ar, fault_count: 0 })
}

/// A segment of `pages` pages holding each `(offset, bytes)` piece at that byte offset
/// (the loader's program image; untouched pages are filled with zeroes on first touch),
/// A segment of `pages` pages holding each `(offset, bytes)` piece at that byte offset
/// (the loader's program image; untouched pages are filled with zeroes on first touch),
/// placed in the root share and mapped at `va` in the root range.
pub fn load_segment(
    p: &mut ProgramObjects,
    va: u64,
    pages: u64,
    pieces: &[(usize, &[u8])],
    flags: u64,
) -> Result<(), Error> {
    let state = filled_segment(pages * PAGE, pieces)?;
    let root = p.set.root_id().0;
    room_above(LOAD_RESERVE_FRAMES)?;
    let seg = new_segment(p, state)?;
    let seg = alloc_unchecked(p, root, ObjectKind::Segment, seg)?;
    let args = ArSetSeg {
        ar: [root, p.root_ar.id().0],
        va,
        seg: [root, seg],
        first_page: 0,
        pages,
        flags,
    };
    set_seg(p, args)
}

/// A segment of `nbytes` bytes holding each `(offset, bytes)` piece at that byte offset:
/// the pages a piece touches get fresh zeroed frames with its bytes copied in; the others
/// stay untouched (filled with zeroes on first touch).
fn filled_segment(nbytes: u64, pieces: &[(usize, &[u8])]) -> Result<SegmentState<Kernel>, Error> {
    let mut state = segment_state(nbytes)?;
    for &(offset, data) in pieces {
        let mut at = offset;
        let end = offset + data.len();
        while at < end {
            let index = (at / PAGE as usize) as u64;
            let in_page = at % PAGE as usize;
            let n = (PAGE as usize - in_page).min(end - at);
            super::step();
            if state.frame(index).is_none() {
                let frame = Frame::zeroed().ok_or(Error::NoResources)?;
                state.set_frame(index, frame).map_err(|_| Error::InvalidArgument)?;
            }
            let frame = state.frame(index).ok_or(Error::InvalidArgument)?;
            // SAFETY: a fresh frame of this core; the copy stays inside its page.
            unsafe {
                core::ptr::copy_nonoverlapping(
                    data[at - offset..at - offset + n].as_ptr(),
                    (phys_to_virt(frame.0) + in_page as u64) as *mut u8,
                    n,
                )
            };
            at += n;
        }
    }
    Ok(state)
}

/// A segment object's payload for `state`, its page map charged to `p`'s quota.
fn new_segment(p: &ProgramObjects, state: SegmentState<Kernel>) -> Result<Payload, Error> {
    let bytes = segment_bytes(state.nbytes());
    let charge = p.set.quota().charge(bytes).map_err(to_abi)?;
    Ok(Payload::Segment(Segment { state: McsLock::new(state), charge }))
}

/// Kernel bytes of a segment of `nbytes` bytes: its page map, touched or not.
fn segment_bytes(nbytes: u64) -> u64 {
    nbytes.div_ceil(PAGE) * SegmentState::<Kernel>::PAGE_SLOT_BYTES
}

/// An untouched segment of `nbytes` bytes, or `NoResources`: a segment may not be larger
/// than the free memory of this core, and the kernel's own allocation must not fail.
fn segment_state(nbytes: u64) -> Result<SegmentState<Kernel>, Error> {
    let pages = nbytes.div_ceil(PAGE);
    if pages > MAX_SEGMENT_PAGES || pages > this_core().free_frames() {
        return Err(Error::NoResources);
    }
    SegmentState::new(nbytes).map_err(vm_error)
}

fn vm_error(e: VmError) -> Error {
    match e {
        VmError::NoMemory => Error::NoResources,
        VmError::OutOfRange | VmError::WrongKind => Error::InvalidArgument,
    }
}

/// `share_alloc(parent)`.
pub fn share_alloc(p: &mut ProgramObjects, parent: u64) -> Result<u64, Error> {
    room()?;
    with_creator(|c| p.set.share_alloc(c, ObjectId(parent), name())).map(|id| id.0).map_err(to_abi)
}

/// `share_addobj(share, ⟨ref_share, ref_obj⟩)`. The share's table grows on this core's
/// heap: refused at the core's reserve, like a new object (issue M14).
pub fn share_addobj(p: &mut ProgramObjects, share: u64, rs: u64, ro: u64) -> Result<u64, Error> {
    room()?;
    p.set.share_addobj(ObjectId(share), reference(rs, ro)).map(|_| 0).map_err(to_abi)
}

/// `share_dupobj(share, ⟨ref_share, ref_obj⟩)`: another id for the object in `share` (a
/// descriptor), counted against this core's object cap.
pub fn share_dupobj(p: &mut ProgramObjects, share: u64, rs: u64, ro: u64) -> Result<u64, Error> {
    room()?;
    with_creator(|c| p.set.share_dupobj(c, ObjectId(share), reference(rs, ro)))
        .map(|id| id.0)
        .map_err(to_abi)
}

/// `share_delobj(⟨ref_share, ref_obj⟩)`.
pub fn share_delobj(p: &mut ProgramObjects, rs: u64, ro: u64) -> Result<u64, Error> {
    p.set.share_delobj(reference(rs, ro)).map(|_| 0).map_err(to_abi)
}

/// `self_drop(share)`.
pub fn self_drop(p: &mut ProgramObjects, share: u64) -> Result<u64, Error> {
    p.set.self_drop(ObjectId(share)).map(|_| 0).map_err(to_abi)
}

/// `set_add_share(⟨ref_share, ref_obj⟩)`: the set grows, so the core's reserve is checked.
pub fn set_add_share(p: &mut ProgramObjects, rs: u64, ro: u64) -> Result<u64, Error> {
    room()?;
    p.set.add_share(reference(rs, ro)).map(|id| id.0).map_err(to_abi)
}

/// `obj_get_name(⟨ref_share, ref_obj⟩)`: the kind as an `abi::ObjectKind` code.
pub fn obj_get_name(p: &ProgramObjects, rs: u64, ro: u64) -> Result<u64, Error> {
    p.set.obj_get_name(reference(rs, ro)).map(|i| i.kind as u64).map_err(to_abi)
}

/// The object ⟨rs, ro⟩ names, of any kind.
pub fn resolve(p: &ProgramObjects, rs: u64, ro: u64) -> Result<Ptr, Error> {
    p.set.resolve(reference(rs, ro)).map_err(to_abi)
}

/// The object ⟨rs, ro⟩ names, of `kind`.
pub fn lookup(p: &ProgramObjects, rs: u64, ro: u64, kind: ObjectKind) -> Result<Ptr, Error> {
    p.set.lookup(reference(rs, ro), kind).map_err(to_abi)
}

/// `segment_alloc(share, nbytes)`: frames are taken on first touch, on the touching core.
pub fn segment_alloc(p: &mut ProgramObjects, share: u64, nbytes: u64) -> Result<u64, Error> {
    let state = segment_state(nbytes)?;
    let seg = new_segment(p, state)?;
    alloc(p, share, ObjectKind::Segment, seg)
}

/// A segment holding the bytes `data` (an initrd file: `file_open`).
pub fn segment_from(p: &mut ProgramObjects, share: u64, data: &[u8]) -> Result<u64, Error> {
    let pages = (data.len() as u64).div_ceil(PAGE);
    if pages + reserve_frames() > this_core().free_frames() {
        return Err(Error::NoResources);
    }
    let state = filled_segment(data.len() as u64, &[(0, data)])?;
    let seg = new_segment(p, state)?;
    alloc(p, share, ObjectKind::Segment, seg)
}

/// `segment_copy(share, ⟨rs, ro⟩, mode)`: a plain copy copies every touched page now; a
/// copy-on-write copy shares the frames, both sides marked so their next write copies
/// (`vm::copy_on_write` takes back the source's writable mappings everywhere).
pub fn segment_copy(
    p: &mut ProgramObjects,
    share: u64,
    rs: u64,
    ro: u64,
    mode: u64,
) -> Result<u64, Error> {
    let source = lookup(p, rs, ro, ObjectKind::Segment)?;
    let seg = segment(&source).ok_or(Error::InvalidArgument)?;
    let copy = match mode {
        abi::copy_mode::COW => vm::copy_on_write(&Kernel, &source).map_err(vm_error)?,
        abi::copy_mode::PLAIN => {
            let (frames, nbytes, touched) = seg
                .state
                .with(|s| Ok::<_, VmError>((s.frames()?, s.nbytes(), s.touched())))
                .map_err(vm_error)?;
            if touched + reserve_frames() > this_core().free_frames() {
                return Err(Error::NoResources);
            }
            let mut copy = segment_state(nbytes)?;
            for (index, frame) in (0..).zip(&frames) {
                if let Some(frame) = frame {
                    super::step();
                    let fresh = frame.copy().ok_or(Error::NoResources)?;
                    copy.set_frame(index, fresh).map_err(vm_error)?;
                }
            }
            copy
        }
        _ => return Err(Error::InvalidArgument),
    };
    let seg = new_segment(p, copy)?;
    alloc(p, share, ObjectKind::Segment, seg)
}

/// `segment_get_nbytes(⟨rs, ro⟩)`.
pub fn segment_get_nbytes(p: &ProgramObjects, rs: u64, ro: u64) -> Result<u64, Error> {
    let s = lookup(p, rs, ro, ObjectKind::Segment)?;
    Ok(segment(&s).ok_or(Error::InvalidArgument)?.state.with(|s| s.nbytes()))
}

/// `segment_set_nbytes(⟨rs, ro⟩, nbytes)`: pages past the new end are let go (freed when
/// no mapping holds them any more).
pub fn segment_set_nbytes(
    p: &mut ProgramObjects,
    rs: u64,
    ro: u64,
    nbytes: u64,
) -> Result<u64, Error> {
    let pages = nbytes.div_ceil(PAGE);
    if pages > MAX_SEGMENT_PAGES || pages > this_core().free_frames() {
        return Err(Error::NoResources);
    }
    // Growing or shrinking edits the segment's page map on this core's heap, charged to
    // the segment's maker (issue M14).
    room()?;
    let s = lookup(p, rs, ro, ObjectKind::Segment)?;
    let seg = segment(&s).ok_or(Error::InvalidArgument)?;
    let old = seg.state.with(|st| st.nbytes());
    seg.charge.resize(segment_bytes(nbytes.max(old))).map_err(to_abi)?;
    let resized = vm::set_nbytes(&Kernel, &s, nbytes).map_err(vm_error);
    // The charge follows the size the page map has now (a resize racing this one may
    // have set it last).
    seg.state
        .with(|st| seg.charge.resize(segment_bytes(st.nbytes()).min(seg.charge.bytes())))
        .map_err(to_abi)?;
    resized.map(|_| 0)
}

/// `segment_read(⟨rs, ro⟩, offset, buf, len)`: copies segment bytes to user memory.
pub fn segment_read(
    p: &mut ProgramObjects,
    space: &mut AddressSpace,
    rs: u64,
    ro: u64,
    offset: u64,
    buf: u64,
    len: u64,
) -> Result<u64, Error> {
    let s = lookup(p, rs, ro, ObjectKind::Segment)?;
    let seg = segment(&s).ok_or(Error::InvalidArgument)?;
    let nbytes = seg.state.with(|s| s.nbytes());
    let end = offset.saturating_add(len).min(nbytes);
    fault_in(p, space, buf, end.saturating_sub(offset), true);
    space.check(buf, len.min(end.saturating_sub(offset)), true)?;
    let mut at = offset;
    let mut chunk = [0u8; PAGE as usize];
    while at < end {
        if at > offset {
            super::step();
        }
        let n = (PAGE - at % PAGE).min(end - at) as usize;
        let frame = seg.state.with(|s| s.frame(at / PAGE).cloned());
        match frame {
            // SAFETY: a live frame we hold a reference to; `n` bytes stay inside its page.
            Some(f) => unsafe {
                core::ptr::copy_nonoverlapping(
                    (phys_to_virt(f.0) + at % PAGE) as *const u8,
                    chunk.as_mut_ptr(),
                    n,
                )
            },
            None => chunk[..n].fill(0),
        }
        space.copy_out(buf + (at - offset), &chunk[..n])?;
        at += n as u64;
    }
    Ok(end.saturating_sub(offset))
}

/// `ar_alloc(share, kind)`.
pub fn ar_alloc(p: &mut ProgramObjects, share: u64, kind: u64) -> Result<u64, Error> {
    let r = match kind {
        abi::ar_kind::ROOT => new_range(true, p.set.quota())?,
        abi::ar_kind::SLOT => new_range(false, p.set.quota())?,
        _ => return Err(Error::InvalidArgument),
    };
    alloc(p, share, ObjectKind::AddressRange, Payload::Range(r))
}

/// A slot range to link into a root's tables where `ar_set_ar` splices it.
struct SlotLink<'a> {
    va: u64,
    /// The slot's page directory.
    pd: u64,
    rights: PageFlags,
    slot: &'a Range,
}

/// Applies `edit` to range `ar`, which maps `target` afterwards (`vm::RangeState::edit`:
/// the range's references, and the pages of every removed mapping unmapped from its
/// tables, removed slots unlinked; or `vm::RangeState::set_seg`'s rights change
/// in place), and links `link`'s slot into its tables, all under
/// the range's lock. The table the link needs is made before the edit, so a refusal
/// leaves everything as it was. The cores that may hold what was taken out are shot down
/// before any of it is freed, whatever happened after the edit.
fn edit_range(
    ar: &Ptr,
    target: Ptr,
    edit: impl FnOnce(&mut RangeState<Kernel>, Ptr) -> Result<vm::Edited<Kernel>, ArError>,
    link: Option<SlotLink>,
) -> Result<(), Error> {
    let r = range(ar).ok_or(Error::InvalidArgument)?;
    let (edited, linked, root) = r.state.with(|s| {
        let root = matches!(s.tables(), Tables::Root(_));
        if let Some(l) = &link {
            match s.tables_mut() {
                Tables::Root(t) => t.reserve_slot(l.va)?,
                Tables::Slot(_) => return Err(Error::InvalidArgument),
            }
        }
        // Room for the mappings an edit can add (a split leaves one more on each side),
        // charged to the range's maker first; after it, what the range holds (issue M14).
        let room_for = (s.map().len() as u64 + 3) * AddressRange::MAPPING_BYTES;
        r.charge.resize(RANGE_BYTES + room_for).map_err(to_abi)?;
        let edited = edit(s, target).map_err(ar_error);
        let held = s.map().len() as u64 * AddressRange::MAPPING_BYTES;
        let _ = r.charge.resize(RANGE_BYTES + held); // smaller: always given back
        let edited = edited?;
        let linked = match (&link, s.tables_mut()) {
            (Some(l), Tables::Root(t)) => {
                // Cores running this root reach the slot's pages, at `l.va`, from the
                // moment the link is in: recorded first, so a concurrent edit of the slot
                // shoots them down there.
                l.slot.cores.fetch_or(r.cores.load(Ordering::Acquire), Ordering::AcqRel);
                l.slot.splices.with(|s| {
                    if let Some(v) = s.as_mut().filter(|v| !v.contains(&l.va)) {
                        if v.len() < MOST_SPLICES {
                            v.push(l.va);
                        } else {
                            *s = None;
                        }
                    }
                });
                t.install_slot(l.va, l.pd, l.rights)
            }
            _ => Ok(Vec::new()),
        };
        Ok::<_, Error>((edited, linked, root))
    })?;
    let old_tables = linked.as_deref().unwrap_or(&[]);
    // Every core that may hold a translation through these tables (a removed slot's
    // pages included) forgets it before a frame or table is freed: just the pages the edit
    // unmapped when they are known (a whole-TLB flush costs more than the edit, and every
    // later access refills), everything when a link went too.
    let flush = if edited.unlinked || !old_tables.is_empty() {
        crate::tlb::Flush::everything(false)
    } else {
        r.flush_for(edited.span, root)
    };
    let cores = agreement::CoreSet(r.cores.load(Ordering::Acquire));
    if (edited.needs_shootdown() || !old_tables.is_empty())
        && crate::tlb::Shootdown::start_with(cores, flush, None).wait().is_err()
    {
        // A core never flushed (Multikernel §4.7: the agreement timed out): it may still
        // reach these frames and tables, so they are never reused.
        core::mem::forget(edited.unmapped);
        objects::release(edited.released);
        return Err(Error::TimedOut);
    }
    drop(edited.unmapped);
    for &pa in old_tables {
        let _ = frames::free(pa);
    }
    objects::release(edited.released);
    linked.map(|_| ())
}

/// `ar_set_seg(&ArSetSeg)`.
pub fn ar_set_seg(p: &mut ProgramObjects, a: ArSetSeg) -> Result<u64, Error> {
    set_seg(p, a).map(|_| 0)
}

fn set_seg(p: &mut ProgramObjects, a: ArSetSeg) -> Result<(), Error> {
    let ar = lookup(p, a.ar[0], a.ar[1], ObjectKind::AddressRange)?;
    let seg = lookup(p, a.seg[0], a.seg[1], ObjectKind::Segment)?;
    // Copy-on-write is a property of a segment's pages (`segment_copy` with `COW`), not
    // of a mapping: the flag is refused rather than ignored.
    if a.flags & !(map::WRITE | map::EXEC) != 0 {
        return Err(Error::InvalidArgument);
    }
    let (va, first, pages, perms) = (a.va, a.first_page, a.pages, perms(a.flags));
    // A new mapping is a node of the range's tree on this core's heap (issue M14): at
    // most `MAX_MAPPINGS` a range, and never past the core's reserve.
    room()?;
    let full = range(&ar).is_some_and(|r| r.state.with(|s| s.map().len() >= MAX_MAPPINGS));
    if full {
        return Err(Error::NoResources);
    }
    let edit =
        |s: &mut RangeState<Kernel>, target| s.set_seg(&Kernel, target, va, first, pages, perms);
    edit_range(&ar, seg, edit, None)
}

/// `ar_set_ar(&ArSetAr)`: splices a slot range into a root range; refuses anything else.
/// The slot's directory is linked into the root's tables at once, so every context
/// running on the root sees the slot's pages (Corey §4.3), within the splice's rights
/// (which the root's entry carries).
pub fn ar_set_ar(p: &mut ProgramObjects, a: ArSetAr) -> Result<u64, Error> {
    let ar = lookup(p, a.ar[0], a.ar[1], ObjectKind::AddressRange)?;
    let child = lookup(p, a.child[0], a.child[1], ObjectKind::AddressRange)?;
    // Ranges nest one level (a slot in a root), like Corey's 1 GiB splices, so the slot's
    // subtree sits directly under a page-directory-pointer entry of every root.
    let Some(slot) = range(&child) else {
        return Err(Error::InvalidArgument);
    };
    let Some(pd) = slot.state.with(|s| match s.tables() {
        Tables::Slot(d) => Some(d.pd),
        Tables::Root(_) => None,
    }) else {
        return Err(Error::InvalidArgument);
    };
    if !is_root_range(&ar) {
        return Err(Error::InvalidArgument);
    }
    let (id, va) = (child.id().0, a.va);
    let link = SlotLink { va, pd, rights: rights(perms(a.flags)), slot };
    let edit =
        |s: &mut RangeState<Kernel>, target| s.edit(target, |r| r.set_ar(va, id, perms(a.flags)));
    edit_range(&ar, child.clone(), edit, Some(link))?;
    Ok(0)
}

/// `ar_get(⟨rs, ro⟩, va)`: the id mapped at `va` in that range (0 if none).
pub fn ar_get(p: &ProgramObjects, rs: u64, ro: u64, va: u64) -> Result<u64, Error> {
    let ar = lookup(p, rs, ro, ObjectKind::AddressRange)?;
    let r = range(&ar).ok_or(Error::InvalidArgument)?;
    Ok(r.state.with(|s| s.map().get(va).map_or(0, |m| m.target.id())))
}

/// `ar_mappings(⟨rs, ro⟩, max)`: how many mappings the range has, and the first `max` of
/// them (Figure 5's `ar_get(ar)`); only those are collected (issue M14: all of them once
/// were, whatever `max` said).
pub fn ar_mappings(
    p: &ProgramObjects,
    rs: u64,
    ro: u64,
    max: usize,
) -> Result<(usize, Vec<MappingInfo>), Error> {
    let ar = lookup(p, rs, ro, ObjectKind::AddressRange)?;
    let r = range(&ar).ok_or(Error::InvalidArgument)?;
    r.state.with(|s| {
        let total = s.map().len();
        // Up to 16,384 mappings of 48 bytes: asked of the heap, not assumed (issue M14).
        let mut listed = Vec::new();
        listed.try_reserve_exact(total.min(max)).map_err(|_| Error::NoResources)?;
        listed.extend(s.map().mappings().take(max).map(|m| {
            let mut flags = 0;
            if m.perms.write {
                flags |= map::WRITE;
            }
            if m.perms.exec {
                flags |= map::EXEC;
            }
            let (first_page, kind) = match m.target {
                Target::Segment { first_page, .. } => (first_page, ObjectKind::Segment),
                Target::Range { .. } => (0, ObjectKind::AddressRange),
            };
            MappingInfo {
                va: m.start,
                pages: m.pages,
                target: m.target.id(),
                first_page,
                flags,
                kind: kind as u64,
            }
        }));
        Ok((total, listed))
    })
}

/// A context starts on this core: the core joins its root range's cores, and every slot
/// range spliced into the root, so shootdowns reach it. Returns the root's PML4 (the
/// context's CR3). The core is added to the root first and the slots are read under the
/// root's lock: a slot spliced meanwhile either sees this core in the root's cores or is
/// found here.
pub fn enter_root(p: &ProgramObjects) -> Result<u64, Error> {
    let root = range(&p.root_ar).ok_or(Error::InvalidArgument)?;
    let me = this_core().index;
    let bit = if me < 64 { 1 << me } else { 0 };
    root.cores.fetch_or(bit, Ordering::AcqRel);
    let (pml4, slots) = root.state.with(|s| match s.tables() {
        Tables::Root(t) => (Some(t.pml4()), s.nested()),
        Tables::Slot(_) => (None, Vec::new()),
    });
    for slot in &slots {
        if let Some(r) = range(slot) {
            r.cores.fetch_or(bit, Ordering::AcqRel);
        }
    }
    pml4.ok_or(Error::InvalidArgument)
}

/// A context on this core ended and the core no longer runs on its root's tables (CR3
/// switched away, which flushed its translations): shootdowns of the root need not reach
/// it. (Slot ranges keep the core in their set; a flush there is only wasted.)
fn leave_root(p: &ProgramObjects) {
    leave_root_range(&p.root_ar);
}

/// This core switched CR3 away from root range `ar`'s tables (which flushed their
/// translations): its shootdowns need not reach this core.
pub fn leave_root_range(ar: &Ptr) {
    let me = this_core().index;
    if let (Some(root), true) = (range(ar), me < 64) {
        root.cores.fetch_and(!(1 << me), Ordering::AcqRel);
    }
}

/// A page fault at `va` in user mode: if the root range maps it (directly, or through a
/// spliced slot range) to a segment page the access is allowed on, `vm::fault` fills that
/// page and maps it in the tables of the range that maps the segment, and this returns
/// `true` so the program retries. `present` says the page was mapped read-only (a write to
/// a copy-on-write page); the tables tell that too.
pub fn soft_fault(p: &mut ProgramObjects, va: u64, write: bool, present: bool) -> bool {
    let _ = present;
    // Out of memory is the program's fault report, never a failed kernel allocation.
    if this_core().free_frames() < FAULT_RESERVE_FRAMES {
        return false;
    }
    match vm::fault(&Kernel, &p.root_ar, va, write) {
        vm::Fault::Mapped => {
            p.fault_count += 1;
            true
        }
        // Another core mapped it meanwhile (or this core's TLB was stale).
        vm::Fault::Retry => {
            x86_64::instructions::tlb::flush(x86_64::VirtAddr::new(va & !(PAGE - 1)));
            true
        }
        vm::Fault::Refused => false,
    }
}

/// `pcore_alloc(share, core)`: the pcore object of `core`; one live per core.
pub fn pcore_alloc(p: &mut ProgramObjects, share: u64, core: u64) -> Result<u64, Error> {
    let index = usize::try_from(core).map_err(|_| Error::InvalidArgument)?;
    let c = percpu::core(index).ok_or(Error::InvalidArgument)?;
    if c.pcore_claimed.swap(true, Ordering::AcqRel) {
        return Err(Error::NotPermitted);
    }
    let pcore = Pcore {
        core: index,
        status: Arc::new(AtomicU64::new(abi::pcore_status::IDLE)),
        halt: AtomicBool::new(false),
        hz: AtomicU64::new(crate::arch::timer::tick_hz()),
    };
    // On failure the payload is dropped, and its Drop releases the claim.
    alloc(p, share, ObjectKind::Pcore, Payload::Pcore(pcore))
}

/// The device objects `device_alloc` makes. The machine device is a capability only the
/// kernel makes ([`capability_device`]): allocating it is `NotPermitted`.
pub fn device_alloc(p: &mut ProgramObjects, share: u64, hwid: u64) -> Result<u64, Error> {
    if !super::devices::exists(hwid) {
        return Err(Error::InvalidArgument);
    }
    // Capabilities only the kernel makes.
    if hwid == super::devices::MACHINE || hwid == super::devices::KEYBOARD {
        return Err(Error::NotPermitted);
    }
    alloc(p, share, ObjectKind::Device, Payload::Device(Device { hwid }))
}

/// A new device object of `hwid` that only the kernel makes: the machine device (the
/// capability for `kernel_command` and `poweroff`) or the keyboard (for `console_read`),
/// for the kernel to give the program it starts on the console (`init`).
pub fn capability_device(hwid: u64) -> Result<Ptr, Error> {
    room()?;
    let payload = Payload::Device(Device { hwid });
    with_creator(|c| c.make(ObjectKind::Device, name(), objects::Body::Kernel(payload), None))
        .map_err(to_abi)
}

/// Whether ⟨rs, ro⟩ names a device object of `hwid` in `p`'s share set (a capability).
pub fn holds_device(p: &ProgramObjects, rs: u64, ro: u64, hwid: u64) -> bool {
    device_hwid(p, rs, ro) == Ok(hwid)
}

/// Puts `ptr` into the program's root share (an object handed to it at start); its id.
pub fn give(p: &mut ProgramObjects, ptr: Ptr) -> Result<u64, Error> {
    p.set.give(ptr).map(|id| id.0).map_err(to_abi)
}

/// The hardware id of the device object ⟨rs, ro⟩.
pub fn device_hwid(p: &ProgramObjects, rs: u64, ro: u64) -> Result<u64, Error> {
    match lookup(p, rs, ro, ObjectKind::Device)?.payload() {
        Some(Payload::Device(d)) => Ok(d.hwid),
        _ => Err(Error::InvalidArgument),
    }
}

/// Takes a context's objects apart when it ends (its core has switched to other tables
/// already): the core leaves the root's cores, then the share set and range go.
pub fn end_context(p: ProgramObjects) {
    leave_root(&p);
    drop(p);
}

/// The shares of `ids`, which must be shared shares of `p`'s set (for `pcore_run`).
/// A share named twice is refused here, at the call: the new context's share set could
/// not hold it twice.
pub fn shares_for_child(p: &ProgramObjects, ids: &[u64]) -> Result<Vec<Ptr>, Error> {
    let mut out = vec![];
    for (i, &id) in ids.iter().enumerate() {
        if ids[..i].contains(&id) {
            return Err(Error::InvalidArgument);
        }
        out.push(p.set.shared_share(ObjectId(id)).map_err(to_abi)?);
    }
    Ok(out)
}

/// Whether `ar` is a root range (one a pcore can run on).
pub fn is_root_range(ar: &Ptr) -> bool {
    range(ar).is_some_and(|r| r.state.with(|s| matches!(s.tables(), Tables::Root(_))))
}

/// Most bytes `fault_in` fills ahead of a copy (a larger buffer must be touched first).
const FAULT_IN_MAX: u64 = 64 << 20;

/// Fills in the pages of `[va, va + len)` the root range maps but this context has not
/// touched yet, as the program's own accesses would: a system call may then copy to or
/// from a buffer the program has not touched. Pages that cannot be filled are left for the
/// copy's own check to refuse.
pub fn fault_in(p: &mut ProgramObjects, space: &mut AddressSpace, va: u64, len: u64, write: bool) {
    if len == 0 || len > FAULT_IN_MAX {
        return;
    }
    let Some(end) = va.checked_add(len) else { return };
    let mut page = va & !(PAGE - 1);
    while page < end && page < paging::USER_END {
        if page.is_multiple_of(16 * PAGE) {
            super::step();
        }
        match paging::translate(space.pml4(), page) {
            Some((_, flags))
                if !write
                    || flags.contains(x86_64::structures::paging::PageTableFlags::WRITABLE) => {}
            Some(_) => {
                soft_fault(p, page, true, true);
            }
            None => {
                soft_fault(p, page, write, false);
            }
        }
        page += PAGE;
    }
}
