//! `CoreSet`: a set of core indices 0..64 in one word. The protocols track who participates,
//! who answered and who failed as sets, so every check is a mask operation.

/// A set of cores, one bit per core index 0..64. Core indices of 64 or more cannot be
/// members: adding one does nothing and asking for one answers `false`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CoreSet(pub u64);

impl CoreSet {
    /// The empty set.
    pub const EMPTY: CoreSet = CoreSet(0);
    /// How many cores a set can name.
    pub const CAPACITY: usize = 64;

    /// The set holding only `core`; empty when `core >= 64` (never panics: core numbers may
    /// come from messages).
    pub fn single(core: usize) -> CoreSet {
        if core < Self::CAPACITY {
            CoreSet(1 << core)
        } else {
            CoreSet::EMPTY
        }
    }

    /// The cores `0..n` (all 64 when `n >= 64`).
    pub fn first(n: usize) -> CoreSet {
        if n >= Self::CAPACITY {
            CoreSet(u64::MAX)
        } else {
            CoreSet((1 << n) - 1)
        }
    }

    /// Whether `core` is in the set.
    pub fn contains(self, core: usize) -> bool {
        self.0 & Self::single(core).0 != 0
    }

    /// Adds `core` (no effect when `core >= 64`).
    pub fn insert(&mut self, core: usize) {
        self.0 |= Self::single(core).0;
    }

    /// Removes `core`.
    pub fn remove(&mut self, core: usize) {
        self.0 &= !Self::single(core).0;
    }

    /// How many cores are in the set.
    pub fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The cores in the set, in ascending order.
    pub fn iter(self) -> CoreIter {
        CoreIter(self.0)
    }

    /// The cores in either set.
    pub fn union(self, o: CoreSet) -> CoreSet {
        CoreSet(self.0 | o.0)
    }

    /// The cores in both sets.
    pub fn intersection(self, o: CoreSet) -> CoreSet {
        CoreSet(self.0 & o.0)
    }

    /// The cores in `self` but not in `o`.
    pub fn minus(self, o: CoreSet) -> CoreSet {
        CoreSet(self.0 & !o.0)
    }

    /// Whether every core in `self` is also in `o`.
    pub fn is_subset(self, o: CoreSet) -> bool {
        self.minus(o).is_empty()
    }
}

impl FromIterator<usize> for CoreSet {
    fn from_iter<I: IntoIterator<Item = usize>>(cores: I) -> CoreSet {
        let mut set = CoreSet::EMPTY;
        for core in cores {
            set.insert(core);
        }
        set
    }
}

/// Iterator over a [`CoreSet`], lowest core first.
#[derive(Clone, Debug)]
pub struct CoreIter(u64);

impl Iterator for CoreIter {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        if self.0 == 0 {
            return None;
        }
        let core = self.0.trailing_zeros() as usize;
        self.0 &= self.0 - 1; // clear the lowest set bit
        Some(core)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.0.count_ones() as usize;
        (n, Some(n))
    }
}

impl ExactSizeIterator for CoreIter {}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    #[test]
    fn insert_remove_contains() {
        let mut s = CoreSet::EMPTY;
        assert!(s.is_empty());
        s.insert(0);
        s.insert(63);
        s.insert(5);
        s.insert(5);
        assert_eq!(s.len(), 3);
        assert!(s.contains(0) && s.contains(5) && s.contains(63));
        assert!(!s.contains(1));
        s.remove(5);
        s.remove(7);
        assert_eq!(s.len(), 2);
        assert!(!s.contains(5));
    }

    #[test]
    fn out_of_range_cores_are_never_members() {
        assert_eq!(CoreSet::single(64), CoreSet::EMPTY);
        assert_eq!(CoreSet::single(usize::MAX), CoreSet::EMPTY);
        let mut s = CoreSet::first(64);
        assert_eq!(s.len(), 64);
        s.insert(64);
        s.remove(64);
        assert_eq!(s.len(), 64);
        assert!(!s.contains(64));
    }

    #[test]
    fn iter_is_ascending() {
        let s: CoreSet = [9, 0, 63, 3].into_iter().collect();
        assert_eq!(s.iter().collect::<Vec<_>>(), [0, 3, 9, 63]);
        assert_eq!(s.iter().len(), 4);
        assert_eq!(CoreSet::EMPTY.iter().next(), None);
    }

    #[test]
    fn set_algebra() {
        let a = CoreSet::first(4); // 0..4
        let b: CoreSet = [2, 3, 4, 5].into_iter().collect();
        assert_eq!(a.union(b), CoreSet::first(6));
        assert_eq!(a.minus(b), CoreSet::first(2));
        assert_eq!(a.intersection(b), [2, 3].into_iter().collect());
        assert!(CoreSet::first(2).is_subset(a));
        assert!(!b.is_subset(a));
        assert_eq!(CoreSet::first(0), CoreSet::EMPTY);
    }
}
