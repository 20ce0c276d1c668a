//! The operations that take more than one lock: the soft page fault (Corey §3.1: a page
//! one core faults in through a shared range is mapped for all), and the copy-on-write
//! copy and the resize of a segment (§4.3), which take back the segment's mappings in
//! every range that made them. Each lock is held for a short look or link; frames are
//! zeroed or copied, and TLBs shot down, with no lock held. The only nesting is a
//! segment's lock inside a range's (to map a page only if the segment still holds it).

use alloc::collections::BTreeMap;
use alloc::sync::Arc;

use crate::range::{Fill, Installed, Plan};
use crate::segment::{Look, SegmentState};
use crate::{Host, ObjectPtr, Perms, VmError, PAGE_SIZE};

/// How a soft page fault ended ([`fault`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The page is mapped now; the access retries.
    Mapped,
    /// Nothing new was mapped: another core was first, the mappings changed meanwhile, or
    /// this core's TLB held a stale entry (the kernel flushes it). The access retries.
    Retry,
    /// No mapping allows the access, or no frame was left: the program faulted.
    Refused,
}

/// A soft page fault at `va` (`write` for a store) of a context running on the root
/// range `root`: if the root maps `va` (directly, or through a spliced range) to a segment
/// page the access is allowed on, fills the page (zeroes on first touch; a copy on a write
/// to a copy-on-write page) and maps it in the tables of the range that maps the segment.
pub fn fault<H: Host>(host: &H, root: &ObjectPtr<H>, va: u64, write: bool) -> Fault {
    let page_va = va & !(PAGE_SIZE - 1);
    let Some(Some(route)) = host.with_range(root, |s| s.route(page_va)) else {
        return Fault::Refused;
    };
    let owner = route.nested.unwrap_or_else(|| root.clone());
    fault_in_range(host, &owner, route.offset, write, route.outer)
}

/// Maps page `offset` of range `owner` for an access through mappings with rights
/// `outer`. The range's lock is held to look the mapping up and to write the entry, not
/// while the page is filled.
fn fault_in_range<H: Host>(
    host: &H,
    owner: &ObjectPtr<H>,
    offset: u64,
    write: bool,
    outer: Perms,
) -> Fault {
    let fill = match host.with_range(owner, |s| s.plan(offset, outer, write)) {
        Some(Plan::Fill(fill)) => fill,
        Some(Plan::Retry) => return Fault::Retry,
        Some(Plan::Refused) | None => return Fault::Refused,
    };
    // Registered before the page is filled, so a copy-on-write copy made from now on finds
    // this range and takes its mapping back.
    if host.with_segment(&fill.seg, |s| s.note_range(Arc::downgrade(owner))).is_none() {
        return Fault::Refused;
    }
    let Some((frame, copied_from)) = fill_page(host, &fill) else { return Fault::Refused };
    if let Some(old) = copied_from {
        // Other entries for this page (in other ranges, or at another address of this one)
        // still map the frame it was copied from, read-only: they must go before the copy
        // is written, or they would read what the page held before.
        forget_pages(host, &fill.seg, [(fill.index, H::addr(&old))].into_iter());
    }
    let installed = host.with_range(owner, |r| {
        host.with_segment(&fill.seg, |s| r.install(&fill, frame, s)).unwrap_or(Installed::Changed)
    });
    match installed {
        Some(Installed::Mapped(replaced)) => {
            if replaced.is_some() && !host.shootdown(owner) {
                core::mem::forget(replaced); // a core may still reach it: never reuse it
                return Fault::Mapped;
            }
            drop(replaced); // no core can reach it through the old entry now
            Fault::Mapped
        }
        Some(Installed::Changed) | None => Fault::Retry,
    }
}

/// The frame for the page `fill` names, filled with zeroes on first touch; a write to a
/// copy-on-write page copies it first (then the frame it was copied from comes too). The
/// page is zeroed or copied outside the segment's lock, and dropped again if another core
/// filled the slot meanwhile.
fn fill_page<H: Host>(host: &H, fill: &Fill<H::Object>) -> Option<(H::Frame, Option<H::Frame>)> {
    loop {
        let looked = host.with_segment(&fill.seg, |s| s.look(fill.index, fill.write))??;
        let fresh = match &looked {
            Look::Ready(frame) => return Some((frame.clone(), None)),
            Look::Zero => host.zeroed()?,
            Look::Copy(frame) => host.copy(frame)?,
        };
        if host.with_segment(&fill.seg, |s| s.place(fill.index, &looked, fresh.clone()))? {
            let copied_from = match looked {
                Look::Copy(old) => Some(old),
                _ => None,
            };
            return Some((fresh, copied_from));
        }
        // Another core changed the page meanwhile: `fresh` goes back; look again.
    }
}

/// The frame of page `index` of segment `seg`, filled with zeroes if it was never
/// touched: a page handed to a device as buffer space (Corey §4.4 `device_buf`), which
/// the device reaches by its physical address from then on. A copy-on-write page is
/// refused (`WrongKind`): the device would keep the shared frame while the segment's next
/// write moved to a copy. `OutOfRange` past the segment's end.
pub fn pin_page<H: Host>(host: &H, seg: &H::Object, index: u64) -> Result<H::Frame, VmError> {
    loop {
        let looked = host.with_segment(seg, |s| s.look(index, true)).ok_or(VmError::WrongKind)?;
        let looked = looked.ok_or(VmError::OutOfRange)?;
        let fresh = match &looked {
            Look::Ready(frame) => return Ok(frame.clone()),
            Look::Zero => host.zeroed().ok_or(VmError::NoMemory)?,
            Look::Copy(_) => return Err(VmError::WrongKind),
        };
        if host.with_segment(seg, |s| s.place(index, &looked, fresh.clone())) == Some(true) {
            return Ok(fresh);
        }
        // Another core filled the page meanwhile: `fresh` goes back; look again.
    }
}

/// `segment_copy(COW)` of the segment `seg`: marks every page copy-on-write and returns
/// the copy's state, sharing the frames. The source's writable mappings are taken back in
/// every range that mapped them, on every core, so no context can write the shared frames
/// any more; they fault back in read-only.
pub fn copy_on_write<H: Host>(host: &H, seg: &H::Object) -> Result<SegmentState<H>, VmError> {
    let copy = host.with_segment(seg, |s| s.mark_cow()).ok_or(VmError::WrongKind)??;
    let pages = (0..copy.pages()).filter_map(|i| Some((i, H::addr(copy.frame(i)?))));
    forget_pages(host, seg, pages);
    Ok(copy)
}

/// `segment_set_nbytes`: resizes `seg`; pages past the new end are let go once their
/// mappings are taken back in every range that mapped them.
pub fn set_nbytes<H: Host>(host: &H, seg: &H::Object, nbytes: u64) -> Result<(), VmError> {
    let dropped = host.with_segment(seg, |s| s.resize(nbytes)).ok_or(VmError::WrongKind)??;
    forget_pages(host, seg, dropped.iter().map(|(i, f)| (*i, H::addr(f))));
    drop(dropped); // no entry maps them any more
    Ok(())
}

/// Takes back every entry for the `pages` of `seg` (page index, frame address) in every
/// range that mapped pages of `seg`, whichever core or context faulted them in, and
/// shoots down the cores that may hold them. After this no context can reach those frames
/// as those pages through an old entry. A segment no range ever mapped (a file read with
/// `segment_read`, a descriptor copied by `dup`) costs nothing here.
fn forget_pages<H: Host>(host: &H, seg: &H::Object, pages: impl Iterator<Item = (u64, u64)>) {
    let ranges = host.with_segment(seg, |s| s.ranges()).unwrap_or_default();
    if ranges.is_empty() {
        return;
    }
    let (id, pages): (u64, BTreeMap<u64, u64>) = (H::id(seg), pages.collect());
    for range in ranges {
        let taken = host.with_range(&range, |r| r.forget(id, &pages)).unwrap_or_default();
        if !taken.is_empty() && !host.shootdown(&range) {
            core::mem::forget(taken); // a core may still reach them: never reuse them
            continue;
        }
        drop(taken); // the frames may go now: no entry maps them
    }
}
