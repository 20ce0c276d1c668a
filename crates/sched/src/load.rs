//! Scaled load (AMPS §2.2) and the replica of every core's load that a core balances from.
//!
//! A core's load is its run-queue length (the running thread counted); its scaled load is
//! `L = length / P`. Loads are compared exactly, by cross-multiplying, never rounded.
//! In a multikernel no core reads another core's run queue: each core sends its length when
//! it changes and periodically, and every core keeps a [`LoadTable`] of what it was told.

use alloc::vec::Vec;
use core::cmp::Ordering;

use crate::power::Power;

/// A scaled load `length / power`, compared exactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScaledLoad {
    /// Run-queue length, the running thread included.
    pub length: u64,
    /// The core's scaled power.
    pub power: Power,
}

impl ScaledLoad {
    /// `length / power`.
    pub fn new(length: u64, power: Power) -> ScaledLoad {
        ScaledLoad { length, power: Power(power.0.max(1)) }
    }

    /// The load with one thread more.
    pub fn plus_one(self) -> ScaledLoad {
        ScaledLoad::new(self.length + 1, self.power)
    }

    /// The load with one thread fewer (never below zero).
    pub fn minus_one(self) -> ScaledLoad {
        ScaledLoad::new(self.length.saturating_sub(1), self.power)
    }

    /// Compares `self` and `other` as the fractions they are.
    pub fn cmp_load(self, other: ScaledLoad) -> Ordering {
        // a/pa ? b/pb  <=>  a*pb ? b*pa (powers are positive).
        let left = u128::from(self.length) * u128::from(other.power.0);
        let right = u128::from(other.length) * u128::from(self.power.0);
        left.cmp(&right)
    }

    /// True when `self - other > 1`: the two cores are out of balance (§2.2: a system is
    /// balanced when `Lmax - Lmin <= 1`).
    pub fn exceeds_by_more_than_one(self, other: ScaledLoad) -> bool {
        // a/pa - b/pb > 1  <=>  (a*pb - b*pa) * 1000 > pa*pb  (powers in thousandths,
        // the lengths in whole threads: 1 = 1000 thousandths).
        let (pa, pb) = (u128::from(self.power.0), u128::from(other.power.0));
        let a = u128::from(self.length) * pb * 1000;
        let b = u128::from(other.length) * pa * 1000;
        a > b && a - b > pa * pb
    }

    /// `L` in thousandths (for printing; decisions use the exact comparisons).
    pub fn milli(self) -> u64 {
        self.length * 1000 * 1000 / self.power.0
    }
}

/// What one core has been told about another (or knows about itself).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoreLoad {
    /// Run-queue length, the running thread included.
    pub length: u64,
    /// Scaled computing power.
    pub power: Power,
    /// NUMA node.
    pub node: usize,
    /// Sequence number of the report this came from (a later report replaces an earlier
    /// one; an older one arriving late is ignored).
    pub seq: u64,
    /// False for a core that takes no threads (offline, faulted, or dedicated to one
    /// context by `pcore_run`).
    pub online: bool,
}

impl CoreLoad {
    /// Its scaled load.
    pub fn load(&self) -> ScaledLoad {
        ScaledLoad::new(self.length, self.power)
    }
}

/// One core's replica of every core's load.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadTable {
    cores: Vec<CoreLoad>,
}

impl LoadTable {
    /// A table of idle, online cores with these powers and nodes.
    pub fn new(powers: &[Power], nodes: &[usize]) -> LoadTable {
        let cores = powers
            .iter()
            .enumerate()
            .map(|(i, &power)| CoreLoad {
                length: 0,
                power,
                node: nodes.get(i).copied().unwrap_or(0),
                seq: 0,
                online: true,
            })
            .collect();
        LoadTable { cores }
    }

    /// How many cores.
    pub fn len(&self) -> usize {
        self.cores.len()
    }

    /// True for a table of no cores.
    pub fn is_empty(&self) -> bool {
        self.cores.is_empty()
    }

    /// What is known about `core`.
    pub fn get(&self, core: usize) -> Option<&CoreLoad> {
        self.cores.get(core)
    }

    /// Every core's entry, by core index.
    pub fn cores(&self) -> &[CoreLoad] {
        &self.cores
    }

    /// Applies `core`'s report of its length, numbered `seq`; returns false (and changes
    /// nothing) for an unknown core or a report older than the one held.
    pub fn report(&mut self, core: usize, length: u64, seq: u64) -> bool {
        match self.cores.get_mut(core) {
            Some(entry) if seq > entry.seq => {
                entry.length = length;
                entry.seq = seq;
                true
            }
            _ => false,
        }
    }

    /// Sets `core`'s length directly (a core's own entry, or a move it just made).
    pub fn set_length(&mut self, core: usize, length: u64) {
        if let Some(entry) = self.cores.get_mut(core) {
            entry.length = length;
        }
    }

    /// Sets `core`'s power (its speed was measured again, e.g. after a frequency change).
    pub fn set_power(&mut self, core: usize, power: Power) {
        if let Some(entry) = self.cores.get_mut(core) {
            entry.power = Power(power.0.max(1));
        }
    }

    /// Marks `core` as taking threads or not.
    pub fn set_online(&mut self, core: usize, online: bool) {
        if let Some(entry) = self.cores.get_mut(core) {
            entry.online = online;
        }
    }

    /// True when `Lmax - Lmin <= 1` over the online cores (§2.2).
    pub fn balanced(&self) -> bool {
        let online = self.cores.iter().filter(|c| c.online).map(CoreLoad::load);
        let mut extremes: Option<(ScaledLoad, ScaledLoad)> = None;
        for l in online {
            extremes = Some(match extremes {
                None => (l, l),
                Some((lo, hi)) => (
                    if l.cmp_load(lo).is_lt() { l } else { lo },
                    if l.cmp_load(hi).is_gt() { l } else { hi },
                ),
            });
        }
        extremes.is_none_or(|(lo, hi)| !hi.exceeds_by_more_than_one(lo))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(length: u64, power: u64) -> ScaledLoad {
        ScaledLoad::new(length, Power(power))
    }

    #[test]
    fn loads_compare_as_fractions() {
        assert!(l(4, 2000).cmp_load(l(2, 1000)).is_eq());
        assert!(l(3, 4000).cmp_load(l(1, 1000)).is_lt());
        assert!(l(1, 1700).cmp_load(l(1, 1000)).is_lt());
        assert_eq!(l(3, 2000).milli(), 1500);
    }

    #[test]
    fn out_of_balance_means_more_than_one_apart() {
        assert!(!l(2, 1000).exceeds_by_more_than_one(l(1, 1000)));
        assert!(l(3, 1000).exceeds_by_more_than_one(l(1, 1000)));
        // 5/2 - 1/1 = 1.5 > 1; 4/2 - 1/1 = 1.
        assert!(l(5, 2000).exceeds_by_more_than_one(l(1, 1000)));
        assert!(!l(4, 2000).exceeds_by_more_than_one(l(1, 1000)));
    }

    #[test]
    fn figure_1_is_balanced() {
        // One fast core (P = 2) with four threads, three slow ones with two: L = 2 each.
        let mut t = LoadTable::new(&[Power(2000), Power(1000), Power(1000), Power(1000)], &[]);
        for (core, length) in [(0, 4), (1, 2), (2, 2), (3, 2)] {
            t.set_length(core, length);
        }
        assert!(t.balanced());
        t.set_length(1, 3);
        assert!(t.balanced());
        t.set_length(1, 4);
        assert!(!t.balanced());
    }

    #[test]
    fn late_reports_do_not_overwrite_newer_ones() {
        let mut t = LoadTable::new(&[Power::ONE, Power::ONE], &[0, 1]);
        assert!(t.report(1, 3, 2));
        assert!(!t.report(1, 5, 1));
        assert_eq!(t.get(1).unwrap().length, 3);
        assert!(!t.report(7, 1, 9));
        assert_eq!(t.get(1).unwrap().node, 1);
    }
}
