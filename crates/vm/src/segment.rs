//! A segment's state (Corey §4.3): one slot per page, empty until first touched, and the
//! ranges that mapped its pages. It sits behind the segment's own lock; frames are zeroed
//! and copied outside it, so the lock is held only to look and to link (see
//! [`crate::ops::fault`]).

use alloc::sync::{Arc, Weak};
use alloc::vec::Vec;

use crate::{Host, VmError, PAGE_SIZE};

/// One page of a segment: its frame, and whether it is shared copy-on-write with another
/// segment (then it is mapped read-only and a write copies it first).
#[derive(Clone)]
pub(crate) struct Page<F> {
    pub(crate) frame: F,
    pub(crate) cow: bool,
}

/// A segment's pages and the ranges that mapped them.
pub struct SegmentState<H: Host> {
    /// One slot per page; `None` until first touched.
    pages: Vec<Option<Page<H::Frame>>>,
    /// The size `segment_set_nbytes` set (the last page may be partly used).
    nbytes: u64,
    /// Ranges whose tables have mapped pages of this segment: a copy-on-write copy or a
    /// shrink must take those mappings back, whichever core or context made them. Weak,
    /// so a range that goes is forgotten (its tables went with it).
    mapped_in: Vec<Weak<H::Object>>,
}

/// What a fault finds in a page slot ([`SegmentState::look`]).
pub(crate) enum Look<F> {
    /// The page is there: map this frame (read-only if it is copy-on-write).
    Ready(F),
    /// The page was never touched: it needs a zeroed frame.
    Zero,
    /// A write to a copy-on-write page: it needs a copy of this frame.
    Copy(F),
}

impl<H: Host> SegmentState<H> {
    /// Kernel bytes each page of a segment takes in its page map, touched or not (what a
    /// program's kernel-memory quota is charged per page, issue M14).
    pub const PAGE_SLOT_BYTES: u64 = core::mem::size_of::<Option<Page<H::Frame>>>() as u64;

    /// An untouched segment of `nbytes` bytes (every page filled with zeroes on first
    /// touch). The slots are allocated fallibly: `NoMemory` rather than a failed kernel
    /// allocation.
    pub fn new(nbytes: u64) -> Result<Self, VmError> {
        let pages = usize::try_from(nbytes.div_ceil(PAGE_SIZE)).map_err(|_| VmError::NoMemory)?;
        let mut slots = Vec::new();
        slots.try_reserve_exact(pages).map_err(|_| VmError::NoMemory)?;
        slots.resize(pages, None);
        Ok(SegmentState { pages: slots, nbytes, mapped_in: Vec::new() })
    }

    /// Its size in bytes, exactly as set.
    pub fn nbytes(&self) -> u64 {
        self.nbytes
    }

    /// Its number of pages.
    pub fn pages(&self) -> u64 {
        self.pages.len() as u64
    }

    /// How many pages have a frame (were touched or loaded).
    pub fn touched(&self) -> u64 {
        self.pages.iter().flatten().count() as u64
    }

    /// The frame of page `index`, if it was touched.
    pub fn frame(&self, index: u64) -> Option<&H::Frame> {
        Some(&self.slot(index)?.as_ref()?.frame)
    }

    /// Every page's frame (`None` for untouched ones): what a plain copy copies.
    pub fn frames(&self) -> Result<Vec<Option<H::Frame>>, VmError> {
        let mut out = Vec::new();
        out.try_reserve_exact(self.pages.len()).map_err(|_| VmError::NoMemory)?;
        out.extend(self.pages.iter().map(|p| p.as_ref().map(|p| p.frame.clone())));
        Ok(out)
    }

    /// Puts `frame` in page `index` of a segment nobody maps yet (the loader's image, a
    /// plain copy's pages).
    pub fn set_frame(&mut self, index: u64, frame: H::Frame) -> Result<(), VmError> {
        let slot = usize::try_from(index).ok().and_then(|i| self.pages.get_mut(i));
        *slot.ok_or(VmError::OutOfRange)? = Some(Page { frame, cow: false });
        Ok(())
    }

    fn slot(&self, index: u64) -> Option<&Option<Page<H::Frame>>> {
        self.pages.get(usize::try_from(index).ok()?)
    }

    fn slot_mut(&mut self, index: u64) -> Option<&mut Option<Page<H::Frame>>> {
        self.pages.get_mut(usize::try_from(index).ok()?)
    }

    /// Remembers that `range` maps pages of this segment (before it fills one, so a
    /// copy-on-write copy made from then on finds the range).
    pub(crate) fn note_range(&mut self, range: Weak<H::Object>) {
        if !self.mapped_in.iter().any(|w| w.ptr_eq(&range)) {
            self.mapped_in.push(range);
        }
    }

    /// The live ranges that mapped pages of this segment (dead ones are forgotten).
    pub(crate) fn ranges(&mut self) -> Vec<Arc<H::Object>> {
        self.mapped_in.retain(|w| w.strong_count() > 0);
        self.mapped_in.iter().filter_map(Weak::upgrade).collect()
    }

    /// What page `index` needs for an access (`write`): `None` past the end.
    pub(crate) fn look(&self, index: u64, write: bool) -> Option<Look<H::Frame>> {
        Some(match self.slot(index)? {
            None => Look::Zero,
            Some(page) if page.cow && write => Look::Copy(page.frame.clone()),
            Some(page) => Look::Ready(page.frame.clone()),
        })
    }

    /// Links `fresh` (made for what [`Self::look`] returned) into page `index`, if the slot
    /// still holds what was looked at: an empty slot, or the same copy-on-write frame.
    /// `false` if another core changed it meanwhile (the caller drops `fresh` and looks
    /// again).
    pub(crate) fn place(&mut self, index: u64, looked: &Look<H::Frame>, fresh: H::Frame) -> bool {
        let Some(slot) = self.slot_mut(index) else { return false };
        let unchanged = match (slot.as_ref(), looked) {
            (None, Look::Zero) => true,
            (Some(now), Look::Copy(then)) => H::addr(&now.frame) == H::addr(then) && now.cow,
            _ => false,
        };
        if unchanged {
            *slot = Some(Page { frame: fresh, cow: false });
        }
        unchanged
    }

    /// Whether page `index` holds `frame`, and if so whether it is copy-on-write: what a
    /// fault checks before it maps `frame` (the page may have changed since it was filled).
    pub(crate) fn holds(&self, index: u64, frame: &H::Frame) -> Option<bool> {
        let page = self.slot(index)?.as_ref()?;
        (H::addr(&page.frame) == H::addr(frame)).then_some(page.cow)
    }

    /// Marks every page copy-on-write and returns the copy (Corey §4.3 `segment_copy`):
    /// both share the frames until either side writes a page.
    pub(crate) fn mark_cow(&mut self) -> Result<Self, VmError> {
        let mut pages = Vec::new();
        pages.try_reserve_exact(self.pages.len()).map_err(|_| VmError::NoMemory)?;
        for page in self.pages.iter_mut().flatten() {
            page.cow = true;
        }
        pages.extend(self.pages.iter().cloned());
        Ok(SegmentState { pages, nbytes: self.nbytes, mapped_in: Vec::new() })
    }

    /// Sets the size to `nbytes`: new pages are untouched, pages past the new end are
    /// taken out and returned with their indices (their mappings must be taken back
    /// before they go).
    pub(crate) fn resize(&mut self, nbytes: u64) -> Result<Vec<(u64, H::Frame)>, VmError> {
        let pages = usize::try_from(nbytes.div_ceil(PAGE_SIZE)).map_err(|_| VmError::NoMemory)?;
        let grow = pages.saturating_sub(self.pages.len());
        self.pages.try_reserve_exact(grow).map_err(|_| VmError::NoMemory)?;
        let dropped = if pages < self.pages.len() {
            let taken = self.pages.drain(pages..);
            (pages as u64..).zip(taken).filter_map(|(i, p)| Some((i, p?.frame))).collect()
        } else {
            Vec::new()
        };
        self.pages.resize(pages, None);
        self.nbytes = nbytes;
        Ok(dropped)
    }
}
