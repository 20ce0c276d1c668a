//! Resolving an address through nested address ranges (Corey §3.1, §4.3): what the kernel
//! does on a soft page fault. Starting at a core's root range, each nested range crossed
//! moves the address to the range's own offsets and narrows the rights, until a segment
//! mapping names the page. The walk is bounded ([`MAX_DEPTH`]) and refuses cycles, so a
//! bad tree is an error, never a hang. [`reaches`] lets `ar_set_ar` refuse cycles up front.

use alloc::vec::Vec;

use crate::range::AddressRange;
use crate::{ArError, Perms, Target, MAX_DEPTH, PAGE_SIZE};

/// The ranges a resolution crossed, root first: where the kernel inserts the page-table
/// entry is the last one's subtree (a shared range's entry is seen by all its sharers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Path {
    ids: [u64; MAX_DEPTH],
    len: usize,
}

impl Path {
    /// The range ids crossed, root first.
    pub fn as_slice(&self) -> &[u64] {
        &self.ids[..self.len]
    }

    /// The range holding the segment mapping that was found.
    pub fn leaf(&self) -> u64 {
        self.as_slice().last().copied().unwrap_or(0)
    }
}

/// Where an address leads (Corey §4.3): a page of a segment and the rights to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// The segment's object id.
    pub seg: u64,
    /// Index of the page in the segment.
    pub page: u64,
    /// The rights of every mapping crossed, intersected.
    pub perms: Perms,
    /// The segment mapping is copy-on-write.
    pub cow: bool,
    /// The address as an offset in the leaf range ([`Path::leaf`]).
    pub offset: u64,
    /// The ranges crossed.
    pub path: Path,
}

/// Resolves `va` through range `root` and the ranges nested in it; `lookup` finds a range
/// by id. Errors: [`ArError::NoSuchRange`] for an id `lookup` does not know,
/// [`ArError::OutOfSpan`] past a range's span, [`ArError::NotMapped`] for a hole,
/// [`ArError::Cycle`] if a range is met twice, [`ArError::TooDeep`] past [`MAX_DEPTH`]
/// ranges.
pub fn resolve<'a>(
    root: u64,
    va: u64,
    lookup: impl Fn(u64) -> Option<&'a AddressRange>,
) -> Result<Resolved, ArError> {
    let mut path = Path { ids: [0; MAX_DEPTH], len: 0 };
    let (mut id, mut offset, mut perms) = (root, va, Perms::RWX);
    loop {
        if path.as_slice().contains(&id) {
            return Err(ArError::Cycle);
        }
        if path.len == MAX_DEPTH {
            return Err(ArError::TooDeep);
        }
        path.ids[path.len] = id;
        path.len += 1;
        let ar = lookup(id).ok_or(ArError::NoSuchRange)?;
        if offset >= ar.span() {
            return Err(ArError::OutOfSpan);
        }
        let m = ar.get(offset).ok_or(ArError::NotMapped)?;
        perms = perms.intersect(m.perms);
        match m.target {
            Target::Segment { seg, first_page, cow } => {
                let page = first_page + (offset - m.start) / PAGE_SIZE;
                return Ok(Resolved { seg, page, perms, cow, offset, path });
            }
            Target::Range { ar } => {
                offset -= m.start;
                id = ar;
            }
        }
    }
}

/// Whether range `target` is `from` or nested (at any depth) in it; ids `lookup` does not
/// know lead nowhere. Before `ar_set_ar` puts `child` into `parent`, the kernel refuses
/// if `reaches(child, parent, ..)`: that would be a cycle, which no count could free.
pub fn reaches<'a>(
    from: u64,
    target: u64,
    lookup: impl Fn(u64) -> Option<&'a AddressRange>,
) -> bool {
    let mut seen: Vec<u64> = Vec::new();
    let mut work = alloc::vec![from];
    while let Some(id) = work.pop() {
        if id == target {
            return true;
        }
        if seen.contains(&id) {
            continue;
        }
        seen.push(id);
        if let Some(ar) = lookup(id) {
            work.extend(ar.nested().map(|(_, child)| child));
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::collections::BTreeMap;

    const P: u64 = PAGE_SIZE;
    const G: u64 = 4 * P;

    /// Ranges by id; each spans 16 pages with 4-page slots.
    fn ranges(ids: &[u64]) -> BTreeMap<u64, AddressRange> {
        let new = || AddressRange::new(16 * P, G).unwrap();
        ids.iter().map(|&id| (id, new())).collect()
    }

    #[test]
    fn a_segment_in_the_root() {
        let mut rs = ranges(&[1]);
        let root = rs.get_mut(&1).unwrap();
        root.set_seg(2 * P, 70, 100, 4, Perms::RX, true).unwrap();
        let r = resolve(1, 3 * P + 5, |id| rs.get(&id)).unwrap();
        assert_eq!((r.seg, r.page, r.perms, r.cow), (70, 101, Perms::RX, true));
        assert_eq!((r.offset, r.path.as_slice(), r.path.leaf()), (3 * P + 5, &[1][..], 1));
    }

    #[test]
    fn nested_ranges_move_the_offset_and_narrow_the_rights() {
        // 1 (16 pages, 4-page slots) --[slot at 8P, RWX]--> 2 (4 pages, 2-page slots)
        //   --[slot at 2P, RW]--> 3 (2 pages) --[page 1: seg 9 page 40, RWX]
        let mut rs = ranges(&[1]);
        rs.insert(2, AddressRange::new(4 * P, 2 * P).unwrap());
        rs.insert(3, AddressRange::new(2 * P, 2 * P).unwrap());
        rs.get_mut(&1).unwrap().set_ar(8 * P, 2, Perms::RWX).unwrap();
        rs.get_mut(&2).unwrap().set_ar(2 * P, 3, Perms::RW).unwrap();
        rs.get_mut(&3).unwrap().set_seg(P, 9, 40, 1, Perms::RWX, false).unwrap();
        let va = 8 * P + 2 * P + P + 17;
        let r = resolve(1, va, |id| rs.get(&id)).unwrap();
        assert_eq!((r.seg, r.page, r.perms, r.cow), (9, 40, Perms::RW, false));
        assert_eq!((r.offset, r.path.as_slice()), (P + 17, &[1, 2, 3][..]));
        // The same nested range seen from its own root resolves alike.
        assert_eq!(resolve(2, 3 * P, |id| rs.get(&id)).unwrap().page, 40);
        // Rights narrow to nothing but reading.
        rs.get_mut(&1).unwrap().set_ar(8 * P, 2, Perms::RX).unwrap();
        assert_eq!(resolve(1, va, |id| rs.get(&id)).unwrap().perms, Perms::R);
        // Holes, spans, unknown ranges.
        assert_eq!(resolve(1, 10 * P, |id| rs.get(&id)), Err(ArError::NotMapped));
        assert_eq!(resolve(1, 8 * P, |id| rs.get(&id)), Err(ArError::NotMapped));
        assert_eq!(resolve(1, 0, |id| rs.get(&id)), Err(ArError::NotMapped));
        assert_eq!(resolve(1, 16 * P, |id| rs.get(&id)), Err(ArError::OutOfSpan));
        assert_eq!(resolve(4, 0, |id| rs.get(&id)), Err(ArError::NoSuchRange));
    }

    #[test]
    fn a_nested_range_smaller_than_its_slot_ends_early() {
        let mut rs = ranges(&[1]);
        rs.insert(2, AddressRange::new(2 * P, G).unwrap());
        rs.get_mut(&1).unwrap().set_ar(0, 2, Perms::RW).unwrap();
        rs.get_mut(&2).unwrap().set_seg(P, 5, 0, 1, Perms::RW, false).unwrap();
        assert_eq!(resolve(1, P, |id| rs.get(&id)).map(|r| r.seg), Ok(5));
        assert_eq!(resolve(1, 3 * P, |id| rs.get(&id)), Err(ArError::OutOfSpan));
        rs.remove(&2);
        assert_eq!(resolve(1, P, |id| rs.get(&id)), Err(ArError::NoSuchRange));
    }

    #[test]
    fn cycles_are_detected() {
        let mut rs = ranges(&[1, 2, 3]);
        rs.get_mut(&1).unwrap().set_ar(0, 1, Perms::RW).unwrap();
        assert_eq!(resolve(1, 0, |id| rs.get(&id)), Err(ArError::Cycle));
        rs.get_mut(&1).unwrap().set_ar(0, 2, Perms::RW).unwrap();
        rs.get_mut(&2).unwrap().set_ar(0, 3, Perms::RW).unwrap();
        rs.get_mut(&3).unwrap().set_ar(0, 2, Perms::RW).unwrap();
        assert_eq!(resolve(1, 5, |id| rs.get(&id)), Err(ArError::Cycle));
        assert!(reaches(2, 3, |id| rs.get(&id)) && reaches(3, 2, |id| rs.get(&id)));
        assert!(reaches(1, 3, |id| rs.get(&id)) && !reaches(2, 1, |id| rs.get(&id)));
        assert!(reaches(7, 7, |id| rs.get(&id)) && !reaches(7, 1, |id| rs.get(&id)));
    }

    #[test]
    fn depth_is_bounded() {
        let ids: Vec<u64> = (1..=MAX_DEPTH as u64 + 1).collect();
        let mut rs = ranges(&ids);
        for &id in &ids[..MAX_DEPTH] {
            rs.get_mut(&id).unwrap().set_ar(0, id + 1, Perms::RW).unwrap();
        }
        let last = MAX_DEPTH as u64 + 1;
        rs.get_mut(&last).unwrap().set_seg(0, 99, 0, 1, Perms::RW, false).unwrap();
        assert_eq!(resolve(1, 0, |id| rs.get(&id)), Err(ArError::TooDeep));
        let r = resolve(2, 0, |id| rs.get(&id)).unwrap();
        assert_eq!((r.seg, r.path.as_slice().len()), (99, MAX_DEPTH));
    }
}
