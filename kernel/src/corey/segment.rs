//! The segment calls (Corey §4.2): a segment is physical memory, filled page by page on
//! first touch, copied copy-on-write.

use super::frame::Frame;
use super::object::{
    alloc, alloc_unchecked, lookup, room, room_above, segment, to_abi, Kernel, Payload,
    ProgramObjects, Segment,
};
use super::range::{fault_in, set_seg};
use super::space::AddressSpace;
use super::{reserve_frames, LOAD_RESERVE_FRAMES, MAX_SEGMENT_PAGES, PAGE};
use crate::arch::paging::phys_to_virt;
use crate::percpu::this_core;
use abi::{ArSetSeg, Error};
use locks::McsLock;
use objects::ObjectKind;
use vm::{SegmentState, VmError};

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
pub(super) fn filled_segment(
    nbytes: u64,
    pieces: &[(usize, &[u8])],
) -> Result<SegmentState<Kernel>, Error> {
    let mut state = segment_state(nbytes)?;
    for &(offset, data) in pieces {
        let mut at = offset;
        let end = offset + data.len();
        while at < end {
            let index = (at / PAGE as usize) as u64;
            let in_page = at % PAGE as usize;
            let n = (PAGE as usize - in_page).min(end - at);
            crate::monitor::step();
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
pub(super) fn new_segment(
    p: &ProgramObjects,
    state: SegmentState<Kernel>,
) -> Result<Payload, Error> {
    let bytes = segment_bytes(state.nbytes());
    let charge = p.set.quota().charge(bytes).map_err(to_abi)?;
    Ok(Payload::Segment(Segment { state: McsLock::new(state), charge }))
}

/// Kernel bytes of a segment of `nbytes` bytes: its page map, touched or not.
pub(super) fn segment_bytes(nbytes: u64) -> u64 {
    nbytes.div_ceil(PAGE) * SegmentState::<Kernel>::PAGE_SLOT_BYTES
}

/// An untouched segment of `nbytes` bytes, or `NoResources`: a segment may not be larger
/// than the free memory of this core, and the kernel's own allocation must not fail.
pub(super) fn segment_state(nbytes: u64) -> Result<SegmentState<Kernel>, Error> {
    let pages = nbytes.div_ceil(PAGE);
    if pages > MAX_SEGMENT_PAGES || pages > this_core().free_frames() {
        return Err(Error::NoResources);
    }
    SegmentState::new(nbytes).map_err(vm_error)
}

pub(super) fn vm_error(e: VmError) -> Error {
    match e {
        VmError::NoMemory => Error::NoResources,
        VmError::OutOfRange | VmError::WrongKind => Error::InvalidArgument,
    }
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
                    crate::monitor::step();
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
            crate::monitor::step();
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
