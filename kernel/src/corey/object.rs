//! The kinds of Corey objects (Corey §3, §4.1: segments, address ranges, pcores, devices,
//! threads), how objects are made within each core's limits, and how a ⟨share, object⟩
//! reference names one through the caller's share set.

use super::frame::{zeroed_frame, Frame};
use super::space::RootTables;
use super::{reserve_frames, CENSUS, GRANULARITY, MAX_OBJECTS_PER_CORE, PAGE, ROOT_SPAN};
use crate::arch::paging::{self};
use crate::mem::frames;
use crate::percpu::{self, this_core, PerCoreState};
use abi::{map, Error};
use addrrange::{AddressRange, ArError, Perms};
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use locks::McsLock;
use objects::{
    Charge, Creator, ObjError, ObjName, ObjPtr, ObjRef, ObjectId, ObjectKind, Quota, ShareSet,
};
use vm::{RangeState, SegmentState, VmError};
use x86_64::structures::paging::PageTableFlags as PageFlags;

/// A segment (Corey §4.3): pages filled on first touch (`vm::SegmentState`).
pub struct Segment {
    pub(super) state: McsLock<SegmentState<Kernel>>,
    /// Its page map, charged to its maker's kernel-memory quota at every resize.
    pub(super) charge: Charge,
}

/// An address range (Corey §3.1, §4.3): its mappings, held objects, page tables and
/// mapped pages (`vm::RangeState`).
pub struct Range {
    pub(super) state: McsLock<RangeState<Kernel>>,
    /// Cores whose page tables may hold this range's mappings: for a root range, the
    /// cores running a context on it; for a slot range, every core that ever ran a root it
    /// is spliced into. A shootdown goes to them.
    pub(super) cores: AtomicU64,
    /// Cores with a thread waiting (`wait`) on a word of this root range's address space:
    /// where a `wake` must look besides its own core.
    pub(super) waiters: AtomicU64,
    /// For a root range, the soft page faults resolved through it: every context of the
    /// address space (a program's threads) adds its faults here (`page_faults(1)`, the
    /// count Linux's `getrusage` gives a process; Metis reads it per phase, issue 24).
    pub(super) faults: AtomicU64,
    /// For a slot range, where roots have spliced it (its address in their address
    /// spaces), so a shootdown can name the pages it changed; an address stays after an
    /// unsplice (invalidating it again costs little). `None`: more than [`MOST_SPLICES`]
    /// places, and a shootdown flushes everything.
    pub(super) splices: McsLock<Option<Vec<u64>>>,
    /// Its state and mappings, charged to its maker's kernel-memory quota at every edit.
    pub(super) charge: Charge,
}

/// Root ranges that went with a waiter bit still set, by the core that dropped them. No
/// thread can be parked on a range that goes (a parked thread holds its root), so each is
/// a bit a `wait` left behind (issue M14); the tests check the count stays put.
pub(super) static STALE_WAITER_BITS: [AtomicU64; percpu::MAX_CORES] =
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
pub(super) const MOST_SPLICES: usize = 4;

impl Range {
    /// What a shootdown after an edit that unmapped the offsets `span` must invalidate:
    /// those pages at the range's address (a root: its own; a slot: where its one root
    /// splices it), else everything.
    pub(super) fn flush_for(&self, span: Option<(u64, u64)>, root: bool) -> crate::tlb::Flush {
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
pub(super) enum Tables {
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
pub(super) fn rights(perms: Perms) -> PageFlags {
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
pub(super) struct Directory {
    pub(super) pd: u64,
}

impl Directory {
    /// A fresh, empty directory, owned from now on (freed in `Drop`).
    pub(super) fn new() -> Option<Directory> {
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
    /// The devices it polls as a kernel core (`pcore_add_device`, Corey §4.4).
    pub devices: McsLock<Vec<Ptr>>,
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
    /// A syscall device's own state (each `device_alloc` of one makes a new device).
    pub syscall: Option<SyscallDevice>,
}

impl Device {
    /// A device object of `hwid`: a new syscall device for `abi::sysdev::SYSCALL_HWID`.
    pub fn new(hwid: u64) -> Device {
        let syscall = (hwid == abi::sysdev::SYSCALL_HWID).then(SyscallDevice::new);
        Device { hwid, syscall }
    }
}

/// Live syscall devices.
static LIVE: AtomicU64 = AtomicU64::new(0);

/// Live syscall devices (`device_stat`'s detail).
pub fn live_syscall_devices() -> u64 {
    LIVE.load(Ordering::Relaxed)
}

/// A syscall device's state (Corey §4.4; its calls are `sysdev`'s, its kernel core's side
/// `kcore`).
pub struct SyscallDevice {
    /// The pages the program fed it.
    pub buffers: McsLock<SyscallBuffers>,
    /// Set while a kernel core polls it: its buffers stay as they are then.
    pub polled: AtomicBool,
    /// Which received frames it takes (`abi::sysdev::conf::NET_ADDRESS`): 0 what no other
    /// device takes, else an IPv4 address as a number.
    pub net_address: AtomicU64,
}

/// The pages of a syscall device (`device_buf`).
#[derive(Default)]
pub struct SyscallBuffers {
    /// The ring: one page holding the request and reply channels.
    pub ring: Option<Arc<Frame>>,
    /// The packet area, page by page.
    pub packets: Vec<Arc<Frame>>,
}

impl SyscallDevice {
    /// A new syscall device with no buffers yet.
    pub fn new() -> SyscallDevice {
        LIVE.fetch_add(1, Ordering::Relaxed);
        SyscallDevice {
            buffers: McsLock::new(SyscallBuffers::default()),
            polled: AtomicBool::new(false),
            net_address: AtomicU64::new(0),
        }
    }
}

impl Default for SyscallDevice {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for SyscallDevice {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Ordering::Relaxed);
    }
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
    Thread(Arc<crate::thread::ThreadShared>),
    /// An open file or directory of the disk.
    File(FileHandle),
}

/// An open file or directory of the disk (`fs_open`, Corey §5): what its descriptors
/// name. The offset is the library OS's, in the program's memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenFile {
    /// Its inode number.
    pub ino: u32,
    /// Whether it was opened for writing.
    pub writable: bool,
    /// Whether it made the file private to its core (`abi::fs::open::PRIVATE`).
    pub private: bool,
}

/// The open-file object's payload: closing it (its last holder drops it) ends what a
/// private open did.
#[derive(Debug)]
pub struct FileHandle(pub OpenFile);

impl Drop for FileHandle {
    fn drop(&mut self) {
        if self.0.private {
            crate::storage::close_private(self.0.ino);
        }
    }
}

impl objects::Payload for Payload {
    fn take_held(&mut self) -> Vec<Ptr> {
        match self {
            Payload::Range(r) => r.state.with(|s| s.take_held()),
            Payload::Pcore(c) => c.devices.with(core::mem::take),
            _ => Vec::new(),
        }
    }
}

/// A counted pointer to a kernel object.
pub type Ptr = ObjPtr<Payload>;

pub(super) fn segment(p: &Ptr) -> Option<&Segment> {
    match p.payload()? {
        Payload::Segment(s) => Some(s),
        _ => None,
    }
}

pub(super) fn range(p: &Ptr) -> Option<&Range> {
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

/// The device object `p` is, if it is one.
pub fn device(p: &Ptr) -> Option<&Device> {
    match p.payload()? {
        Payload::Device(d) => Some(d),
        _ => None,
    }
}

/// The thread `p` names, if it is one.
pub fn thread(p: &Ptr) -> Option<&Arc<crate::thread::ThreadShared>> {
    match p.payload()? {
        Payload::Thread(t) => Some(t),
        _ => None,
    }
}

/// `thread_create`'s object: `shared`, placed in `share`.
pub fn thread_alloc(
    p: &mut ProgramObjects,
    share: u64,
    shared: Arc<crate::thread::ThreadShared>,
) -> Result<u64, Error> {
    alloc(p, share, ObjectKind::Thread, Payload::Thread(shared))
}

/// The cores with a thread waiting on a word of root range `ar`'s address space.
pub fn range_waiters(ar: &Ptr) -> Option<&AtomicU64> {
    range(ar).map(|r| &r.waiters)
}

/// The soft page faults resolved through root range `ar` so far (0 for another object).
pub fn range_faults(ar: &Ptr) -> u64 {
    range(ar).map_or(0, |r| r.faults.load(Ordering::Relaxed))
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

pub(super) fn to_abi(e: ObjError) -> Error {
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

pub(super) fn ar_error(_: ArError) -> Error {
    Error::InvalidArgument
}

pub(super) fn name() -> ObjName {
    ObjName::new(b"").expect("the empty name fits")
}

pub(super) fn reference(share: u64, object: u64) -> ObjRef {
    ObjRef { share: ObjectId(share), object: ObjectId(object) }
}

pub(super) fn perms(flags: u64) -> Perms {
    Perms { write: flags & map::WRITE != 0, exec: flags & map::EXEC != 0 }
}

/// Where each core's new objects get their ids (made on first use).
pub(super) static CREATORS: PerCoreState<Option<Creator>> = crate::per_core_state!(None);

/// Runs `f` with this core's object creator (made on first use).
pub(super) fn with_creator<R>(f: impl FnOnce(&mut Creator) -> R) -> R {
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
pub(super) fn room() -> Result<(), Error> {
    room_above(reserve_frames())
}

/// `NoResources` at the object cap or with fewer than `reserve` frames to spare: free
/// frames, plus the kernel heap's own free space (the heap gives frames back only when
/// the core goes idle, but
/// what it holds free serves new metadata just as well).
pub(super) fn room_above(reserve: u64) -> Result<(), Error> {
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
pub(super) fn alloc(
    p: &mut ProgramObjects,
    share: u64,
    kind: ObjectKind,
    payload: Payload,
) -> Result<u64, Error> {
    room()?;
    alloc_unchecked(p, share, kind, payload)
}

/// [`alloc`] without the room check (the caller made it).
pub(super) fn alloc_unchecked(
    p: &mut ProgramObjects,
    share: u64,
    kind: ObjectKind,
    payload: Payload,
) -> Result<u64, Error> {
    with_creator(|c| p.set.alloc(c, ObjectId(share), kind, name(), payload))
        .map(|id| id.0)
        .map_err(to_abi)
}

pub(super) fn new_range(root: bool, quota: &Arc<Quota>) -> Result<Range, Error> {
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
        faults: AtomicU64::new(0),
        splices: McsLock::new(Some(Vec::new())),
        charge,
    })
}

/// Kernel bytes of a range before its mappings (charged to its maker's quota).
pub(super) const RANGE_BYTES: u64 = core::mem::size_of::<Range>() as u64;

/// The object ⟨rs, ro⟩ names, of any kind.
pub fn resolve(p: &ProgramObjects, rs: u64, ro: u64) -> Result<Ptr, Error> {
    p.set.resolve(reference(rs, ro)).map_err(to_abi)
}

/// The object ⟨rs, ro⟩ names, of `kind`.
pub fn lookup(p: &ProgramObjects, rs: u64, ro: u64, kind: ObjectKind) -> Result<Ptr, Error> {
    p.set.lookup(reference(rs, ro), kind).map_err(to_abi)
}

/// `fs_open`'s object: a new open file of inode `ino` placed in `share`.
pub fn file_alloc(p: &mut ProgramObjects, share: u64, file: FileHandle) -> Result<u64, Error> {
    alloc(p, share, ObjectKind::File, Payload::File(file))
}

/// The open file ⟨rs, ro⟩ names.
pub fn open_file(p: &ProgramObjects, rs: u64, ro: u64) -> Result<OpenFile, Error> {
    match lookup(p, rs, ro, ObjectKind::File)?.payload() {
        Some(Payload::File(f)) => Ok(f.0),
        _ => Err(Error::NoSuchObject),
    }
}

/// Whether `ar` is a root range (one a pcore can run on).
pub fn is_root_range(ar: &Ptr) -> bool {
    range(ar).is_some_and(|r| r.state.with(|s| matches!(s.tables(), Tables::Root(_))))
}

/// This kernel as the `vm` crate's host: its frames, page tables, objects, locks and TLB
/// shootdown.
pub(super) struct Kernel;

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
