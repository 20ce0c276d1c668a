//! An address range's state (Corey §3.1, §4.3): its mappings ([`AddressRange`]), the
//! objects it holds because it maps them, its page tables, and every page mapped in them
//! with the frame it maps. It sits behind the range's own lock. A root range's tables are
//! the CR3 of every context on it; a slot range's are linked into every root that splices
//! it, so a page one core faults in is mapped for every core using the range.

use alloc::collections::BTreeMap;
use alloc::sync::Arc;
use alloc::vec::Vec;

use addrrange::{AddressRange, ArError, Mapping, Target};

use crate::segment::SegmentState;
use crate::{Host, PageTables, Perms, PAGE_SIZE};

/// A range's mappings, held objects, tables and mapped pages.
pub struct RangeState<H: Host> {
    map: AddressRange,
    /// What the range maps, by id: it holds one reference to each (see `objects`).
    held: BTreeMap<u64, Arc<H::Object>>,
    tables: H::Tables,
    /// Every page mapped in `tables`, by offset, with the frame it maps (held, so the
    /// frame cannot be freed while mapped).
    mapped: BTreeMap<u64, H::Frame>,
}

/// What an edit took out ([`RangeState::edit`]): drop it only after the shootdown.
pub struct Edited<H: Host> {
    /// The objects the range maps no more (their references, to release).
    pub released: Vec<Arc<H::Object>>,
    /// The frames of the pages unmapped from the tables.
    pub unmapped: Vec<H::Frame>,
    /// Whether a nested range's link was taken out of the tables.
    pub unlinked: bool,
    /// The offsets `[start, end)` (in this range) spanned by the pages it unmapped or took
    /// rights from, if any: what a shootdown must invalidate, unless a link went too.
    pub span: Option<(u64, u64)>,
}

impl<H: Host> Edited<H> {
    /// Whether some core may still hold a translation the edit took out (or took rights
    /// from).
    pub fn needs_shootdown(&self) -> bool {
        self.span.is_some() || !self.unmapped.is_empty() || self.unlinked
    }
}

/// Where a fault at an address of a root range is mapped ([`RangeState::route`]).
pub(crate) struct Route<O> {
    /// The range whose tables map the page: `None` for the root itself, or the nested
    /// range the root splices there.
    pub(crate) nested: Option<Arc<O>>,
    /// The page's offset in that range.
    pub(crate) offset: u64,
    /// The rights of the root's mapping on the way (all, for the root's own mappings).
    pub(crate) outer: Perms,
}

/// What a fault must do in the range that maps the page ([`RangeState::plan`]).
pub(crate) enum Plan<O> {
    /// Nothing maps it, or not for this access: the program faulted.
    Refused,
    /// The tables already map it for this access (another core was first, or this core's
    /// TLB was stale), or a nested range was spliced here since the fault was routed: the
    /// access retries.
    Retry,
    /// Fill the page and map it.
    Fill(Fill<O>),
}

/// A page to fill and map: page `index` of segment `seg`, at `offset`, with the rights
/// of this range's own mapping, `perms`.
pub(crate) struct Fill<O> {
    pub(crate) seg: Arc<O>,
    pub(crate) index: u64,
    pub(crate) perms: Perms,
    pub(crate) offset: u64,
    pub(crate) write: bool,
}

/// What mapping a filled page did ([`RangeState::install`]).
pub(crate) enum Installed<F> {
    /// Mapped; the frame a read-only entry mapped before, if one was replaced (it may be
    /// freed only after a shootdown).
    Mapped(Option<F>),
    /// The range or the page changed while the page was filled, or another core mapped
    /// it: nothing was done, the access retries.
    Changed,
}

/// Every right: what a root range's own mappings are intersected with.
const ALL_PERMS: Perms = Perms::RWX;

impl<H: Host> RangeState<H> {
    /// A range with the mappings `map` (empty) over the tables `tables`.
    pub fn new(map: AddressRange, tables: H::Tables) -> Self {
        RangeState { map, held: BTreeMap::new(), tables, mapped: BTreeMap::new() }
    }

    /// Its mappings.
    pub fn map(&self) -> &AddressRange {
        &self.map
    }

    /// Its page tables.
    pub fn tables(&self) -> &H::Tables {
        &self.tables
    }

    /// Its page tables, to link a nested range in (`ar_set_ar`).
    pub fn tables_mut(&mut self) -> &mut H::Tables {
        &mut self.tables
    }

    /// How many pages are mapped in its tables.
    pub fn mapped_pages(&self) -> usize {
        self.mapped.len()
    }

    /// The object it holds with id `id`.
    pub fn held(&self, id: u64) -> Option<&Arc<H::Object>> {
        self.held.get(&id)
    }

    /// The nested ranges it splices, in offset order.
    pub fn nested(&self) -> Vec<Arc<H::Object>> {
        self.map.nested().filter_map(|(_, id)| self.held.get(&id).cloned()).collect()
    }

    /// Takes out every reference it holds (as the range is freed, so a chain of holders is
    /// released by a worklist, `objects::release`).
    pub fn take_held(&mut self) -> Vec<Arc<H::Object>> {
        core::mem::take(&mut self.held).into_values().collect()
    }

    /// Applies `edit` to the mappings; the range maps `target` afterwards. The range takes
    /// a reference to `target` and lets go of what the edit removed the last mapping of.
    /// The pages of every removed mapping are unmapped from the tables (they fault in
    /// again as needed), and removed nested ranges are unlinked: an entry exists only
    /// where a mapping is (see the crate docs), so that is every entry in the edited span.
    /// A failed edit changes nothing.
    pub fn edit(
        &mut self,
        target: Arc<H::Object>,
        edit: impl FnOnce(&mut AddressRange) -> Result<Vec<Mapping>, ArError>,
    ) -> Result<Edited<H>, ArError> {
        let removed = edit(&mut self.map)?;
        let released =
            self.map.released(&removed).iter().filter_map(|id| self.held.remove(id)).collect();
        self.held.entry(H::id(&target)).or_insert(target);
        let mut unmapped = Vec::new();
        let mut unlinked = false;
        let mut span: Option<(u64, u64)> = None;
        for m in &removed {
            let offsets: Vec<u64> = self.mapped.range(m.start..m.end()).map(|(&o, _)| o).collect();
            if let (Some(&first), Some(&last)) = (offsets.first(), offsets.last()) {
                let (lo, hi) = span.unwrap_or((first, last + PAGE_SIZE));
                span = Some((lo.min(first), hi.max(last + PAGE_SIZE)));
            }
            unmapped.extend(offsets.into_iter().filter_map(|o| self.unmap(o)));
            if let Target::Range { .. } = m.target {
                self.tables.unlink(m.start);
                unlinked = true;
            }
        }
        Ok(Edited { released, unmapped, unlinked, span })
    }

    /// `ar_set_seg(va, target, first_page, pages, perms)`: a rights change in place
    /// (`set_perms`, below) when the range maps these very pages of the segment
    /// already, the segment locked through `host` inside this range's lock, as a fault
    /// locks them; otherwise the mapping is replaced ([`RangeState::edit`]).
    pub fn set_seg(
        &mut self,
        host: &H,
        target: Arc<H::Object>,
        va: u64,
        first_page: u64,
        pages: u64,
        perms: Perms,
    ) -> Result<Edited<H>, ArError> {
        let id = H::id(&target);
        let changed = host
            .with_segment(&target, |seg| self.set_perms(va, id, first_page, pages, perms, seg))
            .flatten();
        match changed {
            Some(changed) => Ok(changed),
            None => self.edit(target, |r| r.set_seg(va, id, first_page, pages, perms, false)),
        }
    }

    /// The rights change of `ar_set_seg` when it maps the same pages of the same segment
    /// again (Multikernel §5.1, Figure 7's rights reduction; Linux's `mprotect`): the
    /// mapping's rights change in place, and so do the entries already in the tables,
    /// which keep their frames: each gets the new rights, less write for a page that is
    /// copy-on-write in `segment` (the segment the mapping names, locked by the caller
    /// inside this range's lock, as a fault locks them). An entry whose page the segment
    /// no longer holds goes (it faults in again). What it returns is an edit that released
    /// no object, whose `span` covers the entries that lost rights or went (what a
    /// shootdown must invalidate; entries that only gained rights need none: a stale
    /// entry with fewer rights faults, and the fault finds the new one). `None` when the
    /// call is more than a rights change: make it with [`RangeState::edit`].
    fn set_perms(
        &mut self,
        va: u64,
        seg: u64,
        first_page: u64,
        pages: u64,
        perms: Perms,
        segment: &SegmentState<H>,
    ) -> Option<Edited<H>> {
        self.map.set_perms(va, seg, first_page, pages, perms)?;
        let mut edited =
            Edited { released: Vec::new(), unmapped: Vec::new(), unlinked: false, span: None };
        let end = va.saturating_add(pages.saturating_mul(PAGE_SIZE));
        // Each entry's page, and whether the segment still holds its frame (copy-on-write
        // or not).
        let entries: Vec<(u64, Option<bool>)> = self
            .mapped
            .range(va..end)
            .map(|(&o, f)| (o, segment.holds(first_page + (o - va) / PAGE_SIZE, f)))
            .collect();
        let lost = |edited: &mut Edited<H>, offset: u64| {
            let (lo, hi) = edited.span.unwrap_or((offset, offset + PAGE_SIZE));
            edited.span = Some((lo.min(offset), hi.max(offset + PAGE_SIZE)));
        };
        for (offset, held) in entries {
            let Some((addr, had)) = self.tables.translate(offset) else { continue };
            let now = held.map(|cow| Perms { write: perms.write && !cow, exec: perms.exec });
            if now == Some(had) {
                continue;
            }
            // The entry goes and comes back with its new rights (as `install` replaces
            // one); a table it needs is there already, but should the map fail all the
            // same, the page stays unmapped (it faults in again).
            self.tables.unmap(offset);
            match now {
                Some(now) if self.tables.map(offset, addr, now).is_ok() => {
                    if now.intersect(had) != had {
                        lost(&mut edited, offset);
                    }
                }
                _ => {
                    edited.unmapped.extend(self.mapped.remove(&offset));
                    lost(&mut edited, offset);
                }
            }
        }
        Some(edited)
    }

    /// Where a fault at `va` of this root range goes (`None` if nothing maps it).
    pub(crate) fn route(&self, va: u64) -> Option<Route<H::Object>> {
        let m = self.map.get(va)?;
        let target = self.held.get(&m.target.id())?;
        Some(match m.target {
            Target::Segment { .. } => Route { nested: None, offset: va, outer: ALL_PERMS },
            Target::Range { .. } => {
                Route { nested: Some(target.clone()), offset: va - m.start, outer: m.perms }
            }
        })
    }

    /// What a fault at `offset` of this range needs, for an access through mappings with
    /// rights `outer` on the way. The access needs the rights of both; the entry gets this
    /// range's own, since a nested range's entries serve every root that splices it, each
    /// within the rights of its own link (the host's, see [`crate::PageTables`]).
    pub(crate) fn plan(&self, offset: u64, outer: Perms, write: bool) -> Plan<H::Object> {
        if self.map.get(offset).is_some_and(|m| matches!(m.target, Target::Range { .. })) {
            return Plan::Retry;
        }
        let Some((seg, index, perms)) = self.page_at(offset) else { return Plan::Refused };
        if write && !perms.intersect(outer).write {
            return Plan::Refused;
        }
        if self.serves(offset, write) {
            return Plan::Retry;
        }
        Plan::Fill(Fill { seg, index, perms, offset, write })
    }

    /// The segment page mapped at `offset`, and the mapping's rights.
    fn page_at(&self, offset: u64) -> Option<(Arc<H::Object>, u64, Perms)> {
        let m = self.map.get(offset)?;
        let Target::Segment { first_page, .. } = m.target else { return None };
        let seg = self.held.get(&m.target.id())?.clone();
        Some((seg, first_page + (offset - m.start) / PAGE_SIZE, m.perms))
    }

    /// Whether the tables map `offset` well enough for the access: present, and writable
    /// for a write.
    fn serves(&self, offset: u64, write: bool) -> bool {
        self.tables.translate(offset).is_some_and(|(_, p)| !write || p.write)
    }

    /// Maps `frame`, filled for `fill`, if the range still maps that page of that segment
    /// there with the same rights, and the segment `seg` (locked inside this range's lock)
    /// still holds `frame` in that page. A copy-on-write page is mapped read-only; a
    /// read-only entry there is replaced.
    pub(crate) fn install(
        &mut self,
        fill: &Fill<H::Object>,
        frame: H::Frame,
        seg: &SegmentState<H>,
    ) -> Installed<H::Frame> {
        let offset = fill.offset;
        // The range may have changed while the page was filled (another segment, another
        // page of it, other rights): map only what it maps now.
        let now = self.page_at(offset);
        let still = now.is_some_and(|(s, index, perms)| {
            H::id(&s) == H::id(&fill.seg) && index == fill.index && perms == fill.perms
        });
        if !still || self.serves(offset, fill.write) {
            return Installed::Changed;
        }
        // The page may have become copy-on-write (or been replaced) since it was filled.
        let Some(cow) = seg.holds(fill.index, &frame) else { return Installed::Changed };
        let perms = Perms { write: fill.perms.write && !cow, exec: fill.perms.exec };
        let replaced = self.unmap(offset);
        let addr = H::addr(&frame);
        if self.tables.map(offset, addr, perms).is_ok() {
            self.mapped.insert(offset, frame);
        }
        // (If no table could be allocated, the old entry is gone anyway; the access faults
        // again and is refused or retried.)
        Installed::Mapped(replaced)
    }

    /// Unmaps every entry for a page of segment `seg` that maps the frame `pages` gives
    /// for it (page index → frame address), wherever the range maps that page; returns
    /// their frames (drop them only after the shootdown). An entry maps the page the
    /// range's mapping names at its offset (see the crate docs), so the mappings of `seg`
    /// say where to look: the cost is in mappings and pages taken, not pages mapped.
    pub(crate) fn forget(&mut self, seg: u64, pages: &BTreeMap<u64, u64>) -> Vec<H::Frame> {
        let mut offsets = Vec::new();
        for m in self.map.mappings() {
            let Target::Segment { seg: s, first_page, .. } = m.target else { continue };
            if s != seg {
                continue;
            }
            for (&index, &addr) in pages.range(first_page..first_page.saturating_add(m.pages)) {
                let offset = m.start + (index - first_page) * PAGE_SIZE;
                if self.mapped.get(&offset).is_some_and(|f| H::addr(f) == addr) {
                    offsets.push(offset);
                }
            }
        }
        offsets.into_iter().filter_map(|o| self.unmap(o)).collect()
    }

    /// Unmaps the page at `offset`, if it is mapped; returns its frame.
    fn unmap(&mut self, offset: u64) -> Option<H::Frame> {
        let frame = self.mapped.remove(&offset)?;
        self.tables.unmap(offset);
        Some(frame)
    }
}

impl<H: Host> Drop for RangeState<H> {
    /// Unmaps every page before the frames go (no context runs on a range being freed, and
    /// a root that spliced it had unlinked it or is gone).
    fn drop(&mut self) {
        let all: Vec<u64> = self.mapped.keys().copied().collect();
        for offset in all {
            self.unmap(offset);
        }
    }
}
