//! One address range (Corey §3.1, §4.3): its mappings sorted by offset and never
//! overlapping, and the edits of Figure 5: `ar_set_seg` ([`AddressRange::set_seg`]),
//! `ar_set_ar` ([`AddressRange::set_ar`]), unmapping, and `ar_get`
//! ([`AddressRange::get`], [`AddressRange::mappings`]). An edit replaces what was under it,
//! splitting segment mappings that stick out on either side, and returns what it removed.
//! Only the core that owns the range (or holds its lock, for a shared one) calls these.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use crate::{ArError, Mapping, Perms, Target, PAGE_SIZE};

/// An address range: a table of mappings over offsets `[0, span)` (Corey §3.1 "a range of
/// virtual-to-physical mappings"). Nested ranges occupy whole, aligned slots of
/// `granularity` bytes, the size of the page-table subtree the kernel shares for them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddressRange {
    span: u64,
    granularity: u64,
    /// The mappings, keyed by start offset.
    maps: BTreeMap<u64, Mapping>,
    /// For each object mapped, how many mappings name it.
    targets: BTreeMap<u64, u64>,
}

impl AddressRange {
    /// Kernel bytes one mapping takes: its entry in the mappings and in the per-object
    /// counts, each a B-tree slot, counted twice for the trees' part-full nodes (what a
    /// program's kernel-memory quota is charged for a mapping, issue M14).
    pub const MAPPING_BYTES: u64 =
        2 * (core::mem::size_of::<(u64, Mapping)>() + core::mem::size_of::<(u64, u64)>()) as u64;

    /// An empty range over `span` bytes (a multiple of [`PAGE_SIZE`]) whose nested ranges
    /// go in slots of `granularity` bytes (a power of two, at least a page; the kernel
    /// uses page-table level sizes, [`crate::DEFAULT_GRANULARITY`] by default).
    pub fn new(span: u64, granularity: u64) -> Result<Self, ArError> {
        if !granularity.is_power_of_two() || granularity < PAGE_SIZE {
            return Err(ArError::BadGranularity);
        }
        if !span.is_multiple_of(PAGE_SIZE) {
            return Err(ArError::Unaligned);
        }
        Ok(AddressRange { span, granularity, maps: BTreeMap::new(), targets: BTreeMap::new() })
    }

    /// Bytes of offsets the range covers.
    pub fn span(&self) -> u64 {
        self.span
    }

    /// Size and alignment of nested-range slots.
    pub fn granularity(&self) -> u64 {
        self.granularity
    }

    /// `ar_set_seg(ar, voff, segid, soff, len)`: maps the `pages` pages from offset `va`
    /// to pages `first_page..` of segment `seg`, replacing whatever was mapped there.
    /// Returns the removed mappings (pieces of them, where a mapping stuck out).
    pub fn set_seg(
        &mut self,
        va: u64,
        seg: u64,
        first_page: u64,
        pages: u64,
        perms: Perms,
        cow: bool,
    ) -> Result<Vec<Mapping>, ArError> {
        let end = self.check_pages(va, pages)?;
        if first_page.checked_add(pages).is_none() {
            return Err(ArError::SegmentOverflow);
        }
        self.check_whole_ranges(va, end)?;
        let removed = self.cut(va, end);
        let target = Target::Segment { seg, first_page, cow };
        self.put(Mapping { start: va, pages, target, perms });
        Ok(removed)
    }

    /// `set_seg(va, seg, first_page, pages, perms, false)` when the range maps exactly
    /// that run of that segment at `va` already (one mapping, not copy-on-write) and only
    /// the rights change: they change in place. Returns the rights it had, or `None` (and
    /// changes nothing) when the call would be more than that.
    pub fn set_perms(
        &mut self,
        va: u64,
        seg: u64,
        first_page: u64,
        pages: u64,
        perms: Perms,
    ) -> Option<Perms> {
        let m = self.maps.get_mut(&va)?;
        let same = Target::Segment { seg, first_page, cow: false };
        if m.pages != pages || m.target != same {
            return None;
        }
        Some(core::mem::replace(&mut m.perms, perms))
    }

    /// `ar_set_ar(ar, voff, ar1, ...)`: splices range `ar` into the slot at `va` (aligned
    /// to the granularity), its offset 0 at `va`, replacing whatever was mapped in the
    /// slot. Accesses through it get at most `perms`. The slot is a window on offsets
    /// `[0, granularity)` of `ar`; a smaller `ar` ends early (faults past its span are
    /// [`ArError::OutOfSpan`]). Returns the removed mappings. Refusing cycles is the
    /// caller's job (see [`crate::reaches`]).
    pub fn set_ar(&mut self, va: u64, ar: u64, perms: Perms) -> Result<Vec<Mapping>, ArError> {
        if !va.is_multiple_of(self.granularity) {
            return Err(ArError::Unaligned);
        }
        let end = va.checked_add(self.granularity).ok_or(ArError::OutOfSpan)?;
        if end > self.span {
            return Err(ArError::OutOfSpan);
        }
        // Nested ranges fill whole slots, so none can stick out of this one.
        let removed = self.cut(va, end);
        self.put(Mapping {
            start: va,
            pages: self.granularity / PAGE_SIZE,
            target: Target::Range { ar },
            perms,
        });
        Ok(removed)
    }

    /// Unmaps the `pages` pages from offset `va`: returns the removed mappings (pieces of
    /// them, where a mapping stuck out), empty if nothing was mapped there. A nested range
    /// can only be unmapped whole.
    pub fn unmap(&mut self, va: u64, pages: u64) -> Result<Vec<Mapping>, ArError> {
        let end = self.check_pages(va, pages)?;
        self.check_whole_ranges(va, end)?;
        Ok(self.cut(va, end))
    }

    /// `ar_get` for one address: the mapping covering offset `va`, if any.
    pub fn get(&self, va: u64) -> Option<&Mapping> {
        let (_, m) = self.maps.range(..=va).next_back()?;
        m.contains(va).then_some(m)
    }

    /// `ar_get(ar)`: all mappings, in offset order.
    pub fn mappings(&self) -> impl Iterator<Item = &Mapping> {
        self.maps.values()
    }

    /// The nested ranges, as (slot offset, range id), in offset order.
    pub fn nested(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.maps.values().filter_map(|m| match m.target {
            Target::Range { ar } => Some((m.start, ar)),
            Target::Segment { .. } => None,
        })
    }

    /// How many mappings the range has.
    pub fn len(&self) -> usize {
        self.maps.len()
    }

    /// Whether nothing is mapped.
    pub fn is_empty(&self) -> bool {
        self.maps.is_empty()
    }

    /// Whether some mapping names object `id` (a segment or a nested range); the range
    /// holds one reference to each such object.
    pub fn maps(&self, id: u64) -> bool {
        self.targets.contains_key(&id)
    }

    /// The distinct objects the range maps, in id order.
    pub fn targets(&self) -> impl Iterator<Item = u64> + '_ {
        self.targets.keys().copied()
    }

    /// The distinct objects named in `removed` that the range maps no more: after an edit,
    /// the references the kernel gives back.
    pub fn released(&self, removed: &[Mapping]) -> Vec<u64> {
        let mut ids: Vec<u64> =
            removed.iter().map(|m| m.target.id()).filter(|&id| !self.maps(id)).collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// Checks that `pages` pages from `va` are a non-empty, page-aligned run inside the
    /// span; returns the offset after them.
    fn check_pages(&self, va: u64, pages: u64) -> Result<u64, ArError> {
        if !va.is_multiple_of(PAGE_SIZE) {
            return Err(ArError::Unaligned);
        }
        if pages == 0 {
            return Err(ArError::Empty);
        }
        let end = pages
            .checked_mul(PAGE_SIZE)
            .and_then(|len| va.checked_add(len))
            .ok_or(ArError::OutOfSpan)?;
        if end > self.span {
            return Err(ArError::OutOfSpan);
        }
        Ok(end)
    }

    /// Refuses an edit of `[start, end)` that covers part, not all, of a nested range.
    fn check_whole_ranges(&self, start: u64, end: u64) -> Result<(), ArError> {
        for m in self.overlapping(start, end) {
            let whole = start <= m.start && m.end() <= end;
            if matches!(m.target, Target::Range { .. }) && !whole {
                return Err(ArError::SplitsRange);
            }
        }
        Ok(())
    }

    /// The mappings that overlap `[start, end)`, in order.
    fn overlapping(&self, start: u64, end: u64) -> impl Iterator<Item = &Mapping> {
        // At most one mapping starts before `start` and reaches into the run.
        let before =
            self.maps.range(..start).next_back().map(|(_, m)| m).filter(|m| m.end() > start);
        before.into_iter().chain(self.maps.range(start..end).map(|(_, m)| m))
    }

    /// Removes everything in `[start, end)`, putting back the parts of segment mappings
    /// that stick out; returns the removed parts in order.
    fn cut(&mut self, start: u64, end: u64) -> Vec<Mapping> {
        let hit: Vec<u64> = self.overlapping(start, end).map(|m| m.start).collect();
        let mut removed = Vec::with_capacity(hit.len());
        for key in hit {
            let Some(m) = self.take(key) else { continue };
            if m.start < start {
                self.put(piece(&m, m.start, start));
            }
            if m.end() > end {
                self.put(piece(&m, end, m.end()));
            }
            removed.push(piece(&m, m.start.max(start), m.end().min(end)));
        }
        removed
    }

    /// Inserts `m` (which overlaps nothing) and counts its target.
    fn put(&mut self, m: Mapping) {
        *self.targets.entry(m.target.id()).or_insert(0) += 1;
        self.maps.insert(m.start, m);
    }

    /// Removes the mapping starting at `start` and uncounts its target.
    fn take(&mut self, start: u64) -> Option<Mapping> {
        let m = self.maps.remove(&start)?;
        let id = m.target.id();
        if let Some(n) = self.targets.get_mut(&id) {
            *n -= 1;
            if *n == 0 {
                self.targets.remove(&id);
            }
        }
        Some(m)
    }
}

/// The part `[start, end)` of `m` (page-aligned, inside `m`), with the segment page index
/// moved along. A nested range is only ever taken whole.
fn piece(m: &Mapping, start: u64, end: u64) -> Mapping {
    let target = match m.target {
        Target::Segment { seg, first_page, cow } => {
            Target::Segment { seg, first_page: first_page + (start - m.start) / PAGE_SIZE, cow }
        }
        t @ Target::Range { .. } => t,
    };
    Mapping { start, pages: (end - start) / PAGE_SIZE, target, perms: m.perms }
}

#[cfg(test)]
#[path = "range_tests.rs"]
mod tests;
