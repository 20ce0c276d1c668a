//! Corey's objects for user programs (Corey §3–§4, Figure 5): shares, segments and address
//! ranges, named by ⟨share, object⟩ references resolved through the program's share set,
//! and the soft page fault that fills a page of a segment mapped by the program's root
//! address range.
//!
//! The object model and the range maps are the hardware-neutral `objects` and `addrrange`
//! crates; this file is the glue: payloads that own frames, the refcount protocol for
//! range edits, page tables. Objects live in the table of the core that created them
//! (ids carry the core); naming an object of another core is not supported yet (it fails
//! as `NoSuchObject`) — sharing across cores by message comes next.

use super::space::AddressSpace;
use crate::arch::paging::phys_to_virt;
use crate::mem::frames;
use crate::percpu::this_core;
use abi::{map, ArSetAr, ArSetSeg, Error};
use addrrange::{AddressRange, ArError, Perms};
use alloc::vec::Vec;
use objects::{Freed, ObjError, ObjName, ObjRef, ObjectId, ObjectKind, Objects, ShareSet};

const PAGE: u64 = 4096;
/// Span of a program's root address range: the user half.
const ROOT_SPAN: u64 = crate::arch::paging::USER_END;
/// Granularity at which ranges nest (Corey spliced ranges at 1 GiB).
const GRANULARITY: u64 = 1 << 30;
/// Most live objects one core keeps (their metadata is kernel heap: a program must not be
/// able to exhaust it).
const MAX_OBJECTS_PER_CORE: usize = 16_384;
/// Free frames a core keeps back from object creation (2 MiB: room for the kernel heap).
const RESERVE_FRAMES: u64 = 512;
/// Largest segment (in pages) one call may create or grow to.
const MAX_SEGMENT_PAGES: u64 = 1 << 20;

/// What a kernel object owns, by kind.
pub enum Payload {
    /// A segment: its frames (0 = not touched yet, filled with zeroes on first touch).
    Segment(Vec<u64>),
    /// An address range.
    Range(AddressRange),
}

/// A core's table of the objects it created.
pub type CoreObjects = Objects<Payload>;

/// A running program's view of the objects: its share set and its root share and range.
pub struct ProgramObjects {
    /// The shares the program can name objects through.
    pub set: ShareSet,
    /// Its private root share.
    pub root_share: ObjectId,
    /// Its root address range (page faults resolve through it).
    pub root_ar: ObjectId,
    /// Pages mapped by soft faults (removed again whenever a range or segment changes).
    pub faulted: Vec<u64>,
    /// Soft page faults taken.
    pub fault_count: u64,
}

fn to_abi(e: ObjError) -> Error {
    match e {
        ObjError::NoSuchObject | ObjError::NotInShareSet | ObjError::NotInShare => {
            Error::NoSuchObject
        }
        ObjError::RefcountOverflow | ObjError::IdsExhausted => Error::NoResources,
        _ => Error::InvalidArgument,
    }
}

fn ar_error(_: ArError) -> Error {
    Error::InvalidArgument
}

fn name() -> ObjName {
    ObjName::new(b"").expect("the empty name fits")
}

/// Runs `f` on this core's object table (created on first use).
pub fn with_objects<R>(f: impl FnOnce(&mut CoreObjects) -> R) -> R {
    let core = this_core();
    core.objects.with(|slot| f(slot.get_or_insert_with(|| Objects::new(core.index as u16))))
}

/// Creates a program's root share and root address range.
pub fn start_program() -> Result<ProgramObjects, Error> {
    with_objects(|objs| {
        let mut set = ShareSet::new();
        let root_share = objs.root_share(&mut set, name()).map_err(to_abi)?;
        let range = AddressRange::new(ROOT_SPAN, GRANULARITY).map_err(ar_error)?;
        let root_ar = objs
            .alloc(&set, root_share, ObjectKind::AddressRange, name(), Payload::Range(range))
            .map_err(|(e, _)| to_abi(e))?;
        Ok(ProgramObjects { set, root_share, root_ar, faulted: Vec::new(), fault_count: 0 })
    })
}

/// Drops everything the program's share set holds (its objects go when nothing else holds
/// them; their frames go back to this core's list).
pub fn end_program(program: ProgramObjects) {
    with_objects(|objs| {
        let freed = objs.release_set(program.set);
        release(objs, freed);
    });
}

/// Frees what reached a refcount of zero: a segment's frames, a range's references to what
/// it maps (which may free more). A worklist, not recursion.
fn release(objs: &mut CoreObjects, mut work: Vec<Freed<Payload>>) {
    while let Some(freed) = work.pop() {
        match freed.payload {
            Some(Payload::Segment(frames_of)) => {
                for pa in frames_of.into_iter().filter(|&pa| pa != 0) {
                    let _ = frames::free(pa);
                }
            }
            Some(Payload::Range(range)) => {
                for target in range.targets().collect::<Vec<u64>>() {
                    if let Ok(more) = objs.drop_ref(ObjectId(target)) {
                        work.extend(more);
                    }
                }
            }
            None => {}
        }
    }
}

fn reference(share: u64, object: u64) -> ObjRef {
    ObjRef { share: ObjectId(share), object: ObjectId(object) }
}

fn perms(flags: u64) -> Perms {
    Perms { write: flags & map::WRITE != 0, exec: flags & map::EXEC != 0 }
}

/// `share_alloc(parent)`.
pub fn share_alloc(p: &ProgramObjects, parent: u64) -> Result<u64, Error> {
    with_objects(|objs| {
        room(objs)?;
        objs.share_alloc(&p.set, ObjectId(parent), name()).map(|id| id.0).map_err(to_abi)
    })
}

/// `NoResources` when this core already keeps [`MAX_OBJECTS_PER_CORE`] objects, or has
/// fewer than [`RESERVE_FRAMES`] free frames left for its own heap.
fn room(objs: &CoreObjects) -> Result<(), Error> {
    if objs.len() >= MAX_OBJECTS_PER_CORE || this_core().free_frames() < RESERVE_FRAMES {
        return Err(Error::NoResources);
    }
    Ok(())
}

/// `share_addobj(share, ⟨ref_share, ref_obj⟩)`.
pub fn share_addobj(
    p: &ProgramObjects,
    share: u64,
    ref_share: u64,
    ref_obj: u64,
) -> Result<u64, Error> {
    with_objects(|objs| {
        objs.share_addobj(&p.set, ObjectId(share), reference(ref_share, ref_obj)).map_err(to_abi)
    })
    .map(|_| 0)
}

/// `share_delobj(⟨ref_share, ref_obj⟩)`.
pub fn share_delobj(p: &ProgramObjects, ref_share: u64, ref_obj: u64) -> Result<u64, Error> {
    with_objects(|objs| {
        let freed = objs.share_delobj(&p.set, reference(ref_share, ref_obj)).map_err(to_abi)?;
        release(objs, freed);
        Ok(0)
    })
}

/// `self_drop(share)`; the root share cannot be dropped (the program would lose its root
/// address range while running on it).
pub fn self_drop(p: &mut ProgramObjects, share: u64) -> Result<u64, Error> {
    if share == p.root_share.0 {
        return Err(Error::NotPermitted);
    }
    with_objects(|objs| {
        let freed = objs.self_drop(&mut p.set, ObjectId(share)).map_err(to_abi)?;
        release(objs, freed);
        Ok(0)
    })
}

/// `obj_get_name(⟨ref_share, ref_obj⟩)`: the kind as an `abi::ObjectKind` code.
pub fn obj_get_name(p: &ProgramObjects, ref_share: u64, ref_obj: u64) -> Result<u64, Error> {
    with_objects(|objs| {
        objs.obj_get_name(&p.set, reference(ref_share, ref_obj))
            .map(|i| i.kind as u64)
            .map_err(to_abi)
    })
}

/// A segment's page table (one word per page), or `NoResources`: a segment may not be
/// larger than the free memory of this core, and the kernel's own allocation must not fail.
fn page_slots(pages: u64) -> Result<Vec<u64>, Error> {
    if pages > MAX_SEGMENT_PAGES || pages > this_core().free_frames() {
        return Err(Error::NoResources);
    }
    let mut slots = Vec::new();
    slots.try_reserve_exact(pages as usize).map_err(|_| Error::NoResources)?;
    slots.resize(pages as usize, 0);
    Ok(slots)
}

/// `segment_alloc(share, nbytes)`: frames are taken on first touch, from this core's list.
pub fn segment_alloc(p: &ProgramObjects, share: u64, nbytes: u64) -> Result<u64, Error> {
    let slots = page_slots(nbytes.div_ceil(PAGE))?;
    with_objects(|objs| {
        room(objs)?;
        objs.alloc(&p.set, ObjectId(share), ObjectKind::Segment, name(), Payload::Segment(slots))
            .map(|id| id.0)
            .map_err(|(e, _)| to_abi(e))
    })
}

/// `segment_copy(share, ⟨ref_share, ref_obj⟩)`: a plain copy — every page touched in the
/// source gets a new frame with the same contents; untouched pages stay untouched.
pub fn segment_copy(
    p: &ProgramObjects,
    share: u64,
    ref_share: u64,
    ref_obj: u64,
) -> Result<u64, Error> {
    let source: Vec<u64> = with_objects(|objs| {
        match objs.lookup(&p.set, reference(ref_share, ref_obj), ObjectKind::Segment) {
            Ok(Payload::Segment(f)) => Ok(f.clone()),
            Ok(_) => Err(Error::InvalidArgument),
            Err(e) => Err(to_abi(e)),
        }
    })?;
    let touched = source.iter().filter(|&&pa| pa != 0).count() as u64;
    if touched + RESERVE_FRAMES > this_core().free_frames() {
        return Err(Error::NoResources);
    }
    let mut copy = page_slots(source.len() as u64)?;
    for (slot, &pa) in copy.iter_mut().zip(&source) {
        if pa == 0 {
            continue;
        }
        let Some(new) = frames::alloc() else {
            for pa in copy.iter().filter(|&&pa| pa != 0) {
                let _ = frames::free(*pa);
            }
            return Err(Error::NoResources);
        };
        // SAFETY: `pa` is a frame of a live segment, `new` a fresh frame of this core; both
        // are reached through the direct map and do not overlap.
        unsafe {
            core::ptr::copy_nonoverlapping(
                phys_to_virt(pa) as *const u8,
                phys_to_virt(new) as *mut u8,
                PAGE as usize,
            )
        };
        *slot = new;
    }
    with_objects(|objs| {
        room(objs)?;
        objs.alloc(&p.set, ObjectId(share), ObjectKind::Segment, name(), Payload::Segment(copy))
            .map(|id| id.0)
            .map_err(|(e, payload)| {
                if let Payload::Segment(frames_of) = payload {
                    for pa in frames_of.into_iter().filter(|&pa| pa != 0) {
                        let _ = frames::free(pa);
                    }
                }
                to_abi(e)
            })
    })
}

/// `segment_get_nbytes(⟨ref_share, ref_obj⟩)`.
pub fn segment_get_nbytes(p: &ProgramObjects, ref_share: u64, ref_obj: u64) -> Result<u64, Error> {
    with_objects(|objs| {
        match objs.lookup(&p.set, reference(ref_share, ref_obj), ObjectKind::Segment) {
            Ok(Payload::Segment(f)) => Ok(f.len() as u64 * PAGE),
            Ok(_) => Err(Error::InvalidArgument),
            Err(e) => Err(to_abi(e)),
        }
    })
}

/// `segment_set_nbytes(⟨ref_share, ref_obj⟩, nbytes)`: pages past the new end are freed.
pub fn segment_set_nbytes(
    p: &mut ProgramObjects,
    space: &mut AddressSpace,
    ref_share: u64,
    ref_obj: u64,
    nbytes: u64,
) -> Result<u64, Error> {
    let pages = nbytes.div_ceil(PAGE);
    if pages > MAX_SEGMENT_PAGES || pages > this_core().free_frames() {
        return Err(Error::NoResources);
    }
    let dropped = with_objects(|objs| {
        match objs.lookup_mut(&p.set, reference(ref_share, ref_obj), ObjectKind::Segment) {
            Ok(Payload::Segment(f)) => {
                let dropped = if (pages as usize) < f.len() {
                    f.split_off(pages as usize)
                } else {
                    Vec::new()
                };
                f.try_reserve_exact((pages as usize).saturating_sub(f.len()))
                    .map_err(|_| Error::NoResources)?;
                f.resize(pages as usize, 0);
                Ok(dropped)
            }
            Ok(_) => Err(Error::InvalidArgument),
            Err(e) => Err(to_abi(e)),
        }
    })?;
    // A page mapped from a dropped frame must go before the frame does.
    forget_faulted(p, space);
    for pa in dropped.into_iter().filter(|&pa| pa != 0) {
        let _ = frames::free(pa);
    }
    Ok(0)
}

/// `ar_alloc(share)`: a new range (span: the user half; nesting at 1 GiB).
pub fn ar_alloc(p: &ProgramObjects, share: u64) -> Result<u64, Error> {
    let range = AddressRange::new(GRANULARITY, GRANULARITY).map_err(ar_error)?;
    with_objects(|objs| {
        room(objs)?;
        objs.alloc(&p.set, ObjectId(share), ObjectKind::AddressRange, name(), Payload::Range(range))
            .map(|id| id.0)
            .map_err(|(e, _)| to_abi(e))
    })
}

/// Applies an edit to a range with the reference protocol of the `objects` crate: a
/// reference to the new target first (if the range did not map it), then one dropped for
/// each target the edit removed the last mapping of.
fn edit_range(
    objs: &mut CoreObjects,
    ar: ObjectId,
    target: ObjectId,
    edit: impl FnOnce(&mut AddressRange) -> Result<Vec<addrrange::Mapping>, ArError>,
) -> Result<(), Error> {
    let newly_held = match objs.payload(ar) {
        Some(Payload::Range(range)) => !range.maps(target.0),
        _ => return Err(Error::InvalidArgument),
    };
    if newly_held {
        objs.add_ref(target).map_err(to_abi)?;
    }
    let outcome = match objs.payload_mut(ar) {
        Some(Payload::Range(range)) => edit(range).map(|removed| range.released(&removed)),
        _ => Err(ArError::NoSuchRange),
    };
    match outcome {
        Ok(released) => {
            for id in released {
                let freed = objs.drop_ref(ObjectId(id)).unwrap_or_default();
                release(objs, freed);
            }
            Ok(())
        }
        Err(e) => {
            if newly_held {
                let freed = objs.drop_ref(target).unwrap_or_default();
                release(objs, freed);
            }
            Err(ar_error(e))
        }
    }
}

/// `ar_set_seg(&ArSetSeg)`.
pub fn ar_set_seg(
    p: &mut ProgramObjects,
    space: &mut AddressSpace,
    a: ArSetSeg,
) -> Result<u64, Error> {
    with_objects(|objs| {
        let ar = objs.resolve(&p.set, reference(a.ar[0], a.ar[1])).map_err(to_abi)?;
        let seg = objs.resolve(&p.set, reference(a.seg[0], a.seg[1])).map_err(to_abi)?;
        if objs.kind(seg) != Some(ObjectKind::Segment) {
            return Err(Error::InvalidArgument);
        }
        // Copy-on-write mappings come with cfork; until then they are refused, not ignored.
        if a.flags & map::COW != 0 {
            return Err(Error::InvalidArgument);
        }
        edit_range(objs, ar, seg, |r| {
            r.set_seg(a.va, seg.0, a.first_page, a.pages, perms(a.flags), false)
        })
    })?;
    forget_faulted(p, space);
    Ok(0)
}

/// `ar_set_ar(&ArSetAr)`: refuses a splice that would make a cycle.
pub fn ar_set_ar(
    p: &mut ProgramObjects,
    space: &mut AddressSpace,
    a: ArSetAr,
) -> Result<u64, Error> {
    with_objects(|objs| {
        let ar = objs.resolve(&p.set, reference(a.ar[0], a.ar[1])).map_err(to_abi)?;
        let child = objs.resolve(&p.set, reference(a.child[0], a.child[1])).map_err(to_abi)?;
        if objs.kind(child) != Some(ObjectKind::AddressRange) {
            return Err(Error::InvalidArgument);
        }
        let lookup = |id: u64| match objs.payload(ObjectId(id)) {
            Some(Payload::Range(r)) => Some(r),
            _ => None,
        };
        if addrrange::reaches(child.0, ar.0, lookup) {
            return Err(Error::InvalidArgument);
        }
        edit_range(objs, ar, child, |r| r.set_ar(a.va, child.0, perms(a.flags)))
    })?;
    forget_faulted(p, space);
    Ok(0)
}

/// `ar_get(⟨ref_share, ref_obj⟩, va)`: the id mapped at `va` in that range (0 if none).
pub fn ar_get(p: &ProgramObjects, ref_share: u64, ref_obj: u64, va: u64) -> Result<u64, Error> {
    with_objects(|objs| {
        match objs.lookup(&p.set, reference(ref_share, ref_obj), ObjectKind::AddressRange) {
            Ok(Payload::Range(r)) => Ok(r.get(va).map_or(0, |m| m.target.id())),
            Ok(_) => Err(Error::InvalidArgument),
            Err(e) => Err(to_abi(e)),
        }
    })
}

/// Unmaps every page soft faults mapped (they fault in again as needed): after any change
/// to ranges or segments, no stale mapping survives.
fn forget_faulted(p: &mut ProgramObjects, space: &mut AddressSpace) {
    let pages = core::mem::take(&mut p.faulted);
    space.unmap_frames(&pages);
}

/// A page fault at `va` in user mode: if the root range maps it to a segment page the
/// access is allowed on, fill that page (zeroes on first touch), map it, and return
/// `true` so the program retries the access.
pub fn soft_fault(p: &mut ProgramObjects, space: &mut AddressSpace, va: u64, write: bool) -> bool {
    let page_va = va & !(PAGE - 1);
    let found = with_objects(|objs| {
        let lookup = |id: u64| match objs.payload(ObjectId(id)) {
            Some(Payload::Range(r)) => Some(r),
            _ => None,
        };
        let resolved = addrrange::resolve(p.root_ar.0, page_va, lookup).ok()?;
        if write && !resolved.perms.write {
            return None;
        }
        let Some(Payload::Segment(frames_of)) = objs.payload_mut(ObjectId(resolved.seg)) else {
            return None;
        };
        let slot = frames_of.get_mut(resolved.page as usize)?;
        if *slot == 0 {
            let pa = frames::alloc()?;
            // SAFETY: a fresh frame of this core's own, reached through the direct map.
            unsafe { core::ptr::write_bytes(phys_to_virt(pa) as *mut u8, 0, PAGE as usize) };
            *slot = pa;
        }
        Some((*slot, resolved.perms))
    });
    let Some((pa, perms)) = found else { return false };
    if space.map_frame(page_va, pa, perms.write, perms.exec).is_err() {
        return false;
    }
    p.faulted.push(page_va);
    p.fault_count += 1;
    true
}
