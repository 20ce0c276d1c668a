//! The address-range calls (Corey §4.3: `ar_set_seg`, `ar_set_ar`), entering and leaving
//! a root range's tables, and the soft page fault that fills a page a range maps.

use super::object::{
    alloc, ar_error, is_root_range, lookup, new_range, perms, range, rights, room, to_abi, Kernel,
    Payload, ProgramObjects, Ptr, Range, Tables, MOST_SPLICES, RANGE_BYTES,
};
use super::space::AddressSpace;
use super::{FAULT_RESERVE_FRAMES, MAX_MAPPINGS, PAGE};
use crate::arch::paging::{self};
use crate::mem::frames;
use crate::param::FAULT_IN_MAX;
use crate::percpu::this_core;
use abi::{map, ArSetAr, ArSetSeg, Error, MappingInfo};
use addrrange::{AddressRange, ArError, Target};
use alloc::vec::Vec;
use core::sync::atomic::Ordering;
use objects::ObjectKind;
use vm::RangeState;
use x86_64::structures::paging::PageTableFlags as PageFlags;

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
pub(super) struct SlotLink<'a> {
    pub(super) va: u64,
    /// The slot's page directory.
    pub(super) pd: u64,
    pub(super) rights: PageFlags,
    pub(super) slot: &'a Range,
}

/// Applies `edit` to range `ar`, which maps `target` afterwards (`vm::RangeState::edit`:
/// the range's references, and the pages of every removed mapping unmapped from its
/// tables, removed slots unlinked; or `vm::RangeState::set_seg`'s rights change
/// in place), and links `link`'s slot into its tables, all under
/// the range's lock. The table the link needs is made before the edit, so a refusal
/// leaves everything as it was. The cores that may hold what was taken out are shot down
/// before any of it is freed, whatever happened after the edit.
pub(super) fn edit_range(
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
                // Lock order: a root range's state, then a slot range's `splices` (a leaf
                // lock: nothing is taken under it). Nothing takes them the other way.
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

pub(super) fn set_seg(p: &mut ProgramObjects, a: ArSetSeg) -> Result<(), Error> {
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
pub(super) fn leave_root(p: &ProgramObjects) {
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

/// What a faulting access was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// A read (or an instruction fetch).
    Read,
    /// A write: a copy-on-write page is copied.
    Write,
}

/// A page fault at `va` in user mode: if the root range maps it (directly, or through a
/// spliced slot range) to a segment page the access is allowed on, `vm::fault` fills that
/// page and maps it in the tables of the range that maps the segment, and this returns
/// `true` so the program retries. `present` says the page was mapped read-only (a write to
/// a copy-on-write page); the tables tell that too.
pub fn soft_fault(p: &mut ProgramObjects, va: u64, access: Access) -> bool {
    let write = access == Access::Write;
    // Out of memory is the program's fault report, never a failed kernel allocation.
    if this_core().free_frames() < FAULT_RESERVE_FRAMES {
        return false;
    }
    match vm::fault(&Kernel, &p.root_ar, va, write) {
        vm::Fault::Mapped => {
            p.fault_count += 1;
            // The address space's count too (one line every context of it writes, beside
            // the root range's lock that `vm::fault` took anyway to route the fault).
            if let Some(r) = range(&p.root_ar) {
                r.faults.fetch_add(1, Ordering::Relaxed);
            }
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
            crate::monitor::step();
        }
        match paging::translate(space.pml4(), page) {
            Some((_, flags))
                if !write
                    || flags.contains(x86_64::structures::paging::PageTableFlags::WRITABLE) => {}
            Some(_) => {
                soft_fault(p, page, Access::Write);
            }
            None => {
                soft_fault(p, page, if write { Access::Write } else { Access::Read });
            }
        }
        page += PAGE;
    }
}
