//! Physical address ranges, fixed-capacity sets of them, and the usable-frame computation
//! that turns the firmware memory map into whole free frames.

use core::fmt;

use crate::FRAME_SIZE;

/// A half-open range `[start, end)` of physical byte addresses. Empty when `start >= end`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PhysRange {
    /// First byte in the range.
    pub start: u64,
    /// First byte after the range.
    pub end: u64,
}

/// Rounds `addr` down to a frame boundary.
const fn align_down(addr: u64) -> u64 {
    addr & !(FRAME_SIZE - 1)
}

/// Rounds `addr` up to a frame boundary; addresses in the last partial frame of the address
/// space saturate to `u64::MAX`, which still ends every range at or after them.
pub(crate) const fn align_up(addr: u64) -> u64 {
    match addr.checked_next_multiple_of(FRAME_SIZE) {
        Some(up) => up,
        None => u64::MAX,
    }
}

impl PhysRange {
    /// The range `[start, end)`.
    pub const fn new(start: u64, end: u64) -> Self {
        PhysRange { start, end }
    }

    /// Length in bytes (0 if empty).
    pub const fn len(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }

    /// Whether the range holds no bytes.
    pub const fn is_empty(&self) -> bool {
        self.start >= self.end
    }

    /// Number of whole frames inside the range (`len() / FRAME_SIZE` for an aligned range).
    pub const fn frames(&self) -> u64 {
        self.shrink_to_frames().len() / FRAME_SIZE
    }

    /// Whether `addr` lies in the range.
    pub const fn contains(&self, addr: u64) -> bool {
        self.start <= addr && addr < self.end
    }

    /// The bytes in both ranges, or `None` if they do not overlap.
    pub fn intersect(&self, other: PhysRange) -> Option<PhysRange> {
        let r = PhysRange::new(self.start.max(other.start), self.end.min(other.end));
        if r.is_empty() {
            None
        } else {
            Some(r)
        }
    }

    /// The whole frames inside the range (start rounded up, end rounded down). Used on RAM:
    /// a partial frame is not usable.
    pub const fn shrink_to_frames(&self) -> PhysRange {
        let start = align_up(self.start);
        let end = align_down(self.end);
        if start >= end {
            PhysRange::new(start, start)
        } else {
            PhysRange::new(start, end)
        }
    }

    /// Every frame the range touches (start rounded down, end rounded up). Used on reserved
    /// ranges: a frame holding one reserved byte is not free.
    pub const fn grow_to_frames(&self) -> PhysRange {
        if self.is_empty() {
            return *self;
        }
        PhysRange::new(align_down(self.start), align_up(self.end))
    }
}

/// A fixed-capacity set was full. Sets are left unchanged by the failed operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CapacityError;

impl fmt::Display for CapacityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("range table full")
    }
}

/// A set of physical addresses kept as at most `N` sorted, disjoint, non-adjacent ranges
/// (touching ranges are merged). Fixed capacity, so it works before the kernel has a heap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RangeSet<const N: usize> {
    ranges: [PhysRange; N],
    len: usize,
}

impl<const N: usize> RangeSet<N> {
    /// The empty set.
    pub const fn new() -> Self {
        RangeSet { ranges: [PhysRange::new(0, 0); N], len: 0 }
    }

    /// The ranges, sorted by address.
    pub fn as_slice(&self) -> &[PhysRange] {
        &self.ranges[..self.len]
    }

    /// Iterates over the ranges in address order.
    pub fn iter(&self) -> impl Iterator<Item = PhysRange> + '_ {
        self.as_slice().iter().copied()
    }

    /// Number of ranges (not bytes).
    pub const fn len(&self) -> usize {
        self.len
    }

    /// Whether the set holds no addresses.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Total bytes in the set.
    pub fn total_bytes(&self) -> u64 {
        let mut total = 0;
        for r in self.as_slice() {
            total += r.len();
        }
        total
    }

    /// Total whole frames in the set.
    pub fn total_frames(&self) -> u64 {
        let mut total = 0;
        for r in self.as_slice() {
            total += r.frames();
        }
        total
    }

    /// Whether `addr` is in the set (binary search).
    pub fn contains(&self, addr: u64) -> bool {
        let i = self.as_slice().partition_point(|r| r.end <= addr);
        i < self.len && self.ranges[i].contains(addr)
    }

    /// Adds the addresses of `r`, merging with every range it overlaps or touches.
    pub fn insert(&mut self, r: PhysRange) -> Result<(), CapacityError> {
        if r.is_empty() {
            return Ok(());
        }
        // Ranges [i, j) overlap or touch `r`: they all become one.
        let i = self.as_slice().partition_point(|x| x.end < r.start);
        let j = self.as_slice().partition_point(|x| x.start <= r.end);
        let mut merged = r;
        if i < j {
            merged.start = merged.start.min(self.ranges[i].start);
            merged.end = merged.end.max(self.ranges[j - 1].end);
        }
        self.splice(i, j, &[merged])
    }

    /// Removes the addresses of `r`; a range that `r` cuts in the middle splits in two.
    pub fn remove(&mut self, r: PhysRange) -> Result<(), CapacityError> {
        if r.is_empty() {
            return Ok(());
        }
        // Ranges [i, j) overlap `r`; what survives is at most a left and a right piece.
        let i = self.as_slice().partition_point(|x| x.end <= r.start);
        let j = self.as_slice().partition_point(|x| x.start < r.end);
        if i >= j {
            return Ok(());
        }
        let mut pieces = [PhysRange::default(); 2];
        let mut n = 0;
        if self.ranges[i].start < r.start {
            pieces[n] = PhysRange::new(self.ranges[i].start, r.start);
            n += 1;
        }
        if self.ranges[j - 1].end > r.end {
            pieces[n] = PhysRange::new(r.end, self.ranges[j - 1].end);
            n += 1;
        }
        self.splice(i, j, &pieces[..n])
    }

    /// Replaces ranges `[i, j)` with `new`, shifting the tail; fails (unchanged) if the
    /// result would not fit.
    fn splice(&mut self, i: usize, j: usize, new: &[PhysRange]) -> Result<(), CapacityError> {
        let new_len = self.len - (j - i) + new.len();
        if new_len > N {
            return Err(CapacityError);
        }
        // Move the tail ranges [j, len) to start at i + new.len().
        let to = i + new.len();
        if to > j {
            let mut k = self.len;
            while k > j {
                k -= 1;
                self.ranges[k + (to - j)] = self.ranges[k];
            }
        } else if to < j {
            for k in j..self.len {
                self.ranges[k - (j - to)] = self.ranges[k];
            }
        }
        self.ranges[i..to].copy_from_slice(new);
        self.len = new_len;
        Ok(())
    }

    /// Shrinks every range to the whole frames inside it, dropping ranges with none. Ranges
    /// only shrink, so they stay disjoint and non-adjacent.
    fn shrink_to_frames(&mut self) {
        let mut kept = 0;
        for k in 0..self.len {
            let r = self.ranges[k].shrink_to_frames();
            if !r.is_empty() {
                self.ranges[kept] = r;
                kept += 1;
            }
        }
        self.len = kept;
    }
}

impl<const N: usize> Default for RangeSet<N> {
    fn default() -> Self {
        Self::new()
    }
}

/// The frames the kernel may hand out: every frame lying entirely in RAM and touching no
/// reserved byte.
///
/// `ram` is the firmware memory map already filtered to usable RAM (in any order, may
/// overlap); `reserved` holds what must not be handed out (kernel image, boot modules, page
/// tables built by the boot code, the first MiB, ...). The RAM ranges are first merged, then
/// shrunk inward to frame boundaries, so a frame split between two adjacent RAM entries is
/// kept; reserved ranges are widened outward. Fails only if the ranges need more than `N`
/// entries at some step (including the merged RAM map before rounding).
pub fn usable_frames<const N: usize>(
    ram: impl IntoIterator<Item = PhysRange>,
    reserved: impl IntoIterator<Item = PhysRange>,
) -> Result<RangeSet<N>, CapacityError> {
    let mut set = RangeSet::new();
    for r in ram {
        set.insert(r)?;
    }
    set.shrink_to_frames();
    for r in reserved {
        set.remove(r.grow_to_frames())?;
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    const K: u64 = FRAME_SIZE;

    fn r(start: u64, end: u64) -> PhysRange {
        PhysRange::new(start, end)
    }

    fn ranges<const N: usize>(set: &RangeSet<N>) -> Vec<(u64, u64)> {
        set.iter().map(|x| (x.start, x.end)).collect()
    }

    #[test]
    fn range_basics() {
        let a = r(K, 4 * K);
        assert_eq!(a.len(), 3 * K);
        assert_eq!(a.frames(), 3);
        assert!(a.contains(K) && a.contains(4 * K - 1) && !a.contains(4 * K));
        assert_eq!(a.intersect(r(3 * K, 9 * K)), Some(r(3 * K, 4 * K)));
        assert_eq!(a.intersect(r(4 * K, 9 * K)), None);
        assert_eq!(r(5, 3).len(), 0);
        assert!(r(5, 3).is_empty());
        assert_eq!(r(1, 2 * K + 1).frames(), 1);
        assert_eq!(r(1, 2 * K + 1).shrink_to_frames(), r(K, 2 * K));
        assert_eq!(r(1, 2 * K + 1).grow_to_frames(), r(0, 3 * K));
        assert!(r(1, 10).shrink_to_frames().is_empty());
        assert_eq!(r(u64::MAX - 10, u64::MAX).grow_to_frames().end, u64::MAX);
        assert!(r(u64::MAX - 10, u64::MAX).shrink_to_frames().is_empty());
    }

    #[test]
    fn insert_merges_overlapping_and_touching() {
        let mut s = RangeSet::<4>::new();
        s.insert(r(10, 20)).unwrap();
        s.insert(r(30, 40)).unwrap();
        s.insert(r(0, 5)).unwrap();
        assert_eq!(ranges(&s), [(0, 5), (10, 20), (30, 40)]);
        s.insert(r(20, 30)).unwrap(); // touches both neighbours
        assert_eq!(ranges(&s), [(0, 5), (10, 40)]);
        s.insert(r(3, 12)).unwrap();
        assert_eq!(ranges(&s), [(0, 40)]);
        s.insert(r(7, 7)).unwrap(); // empty: no-op
        assert_eq!(s.total_bytes(), 40);
        assert!(s.contains(39) && !s.contains(40));
    }

    #[test]
    fn remove_subtracts_and_splits() {
        let mut s = RangeSet::<4>::new();
        s.insert(r(0, 100)).unwrap();
        s.remove(r(10, 20)).unwrap();
        assert_eq!(ranges(&s), [(0, 10), (20, 100)]);
        s.remove(r(5, 25)).unwrap();
        assert_eq!(ranges(&s), [(0, 5), (25, 100)]);
        s.remove(r(0, 5)).unwrap();
        s.remove(r(200, 300)).unwrap();
        assert_eq!(ranges(&s), [(25, 100)]);
        s.remove(r(0, 1000)).unwrap();
        assert!(s.is_empty());
    }

    #[test]
    fn full_set_reports_and_stays_unchanged() {
        let mut s = RangeSet::<2>::new();
        s.insert(r(0, 10)).unwrap();
        s.insert(r(20, 30)).unwrap();
        assert_eq!(s.insert(r(40, 50)), Err(CapacityError));
        assert_eq!(s.remove(r(2, 3)), Err(CapacityError));
        assert_eq!(ranges(&s), [(0, 10), (20, 30)]);
        // Merging and trimming need no new slot.
        s.insert(r(10, 20)).unwrap();
        s.remove(r(0, 2)).unwrap();
        assert_eq!(ranges(&s), [(2, 30)]);
    }

    #[test]
    fn usable_frames_example() {
        // Typical PC: low RAM up to the VGA hole, then RAM from 1 MiB with an unaligned end,
        // split across two adjacent map entries at an unaligned point.
        let ram = [r(0, 0x9fc00), r(0x10_0000, 0x20_0800), r(0x20_0800, 0x7fe_0123)];
        let reserved = [r(0, 0x10_0000), r(0x20_0000, 0x20_0001)];
        let set: RangeSet<8> = usable_frames(ram, reserved).unwrap();
        assert_eq!(ranges(&set), [(0x10_0000, 0x20_0000), (0x20_1000, 0x7fe_0000)]);
    }
}
