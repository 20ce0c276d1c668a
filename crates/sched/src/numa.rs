//! NUMA-aware migration of running threads (AMPS §2.4): per-thread, per-node resident-set
//! counters, the allocation-phase heuristic, and the three policies that decide whether a
//! running thread may move (`numa=always|same-node|rss` on the kernel command line).
//!
//! The counters are charged to the thread that faulted a page in or allocated it, on the
//! node its frame lives on, and uncharged when that page is freed (the kernel remembers
//! whom it charged, the paper's "owner list", so a page freed by another thread of the
//! program uncharges the right one).

use alloc::vec;
use alloc::vec::Vec;

/// Whether a running thread may migrate (§2.4.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NumaPolicy {
    /// Always allow it (the default; the only sensible choice on an SMP).
    Always,
    /// Only to a core of the same node.
    SameNode,
    /// Unless the migration is predicted to be expensive, or the thread is allocating.
    Rss,
}

impl NumaPolicy {
    /// Parses `always`, `same-node` or `rss`.
    pub fn parse(word: &str) -> Option<NumaPolicy> {
        match word {
            "always" => Some(NumaPolicy::Always),
            "same-node" => Some(NumaPolicy::SameNode),
            "rss" => Some(NumaPolicy::Rss),
            _ => None,
        }
    }

    /// The name `parse` takes.
    pub fn name(self) -> &'static str {
        match self {
            NumaPolicy::Always => "always",
            NumaPolicy::SameNode => "same-node",
            NumaPolicy::Rss => "rss",
        }
    }

    /// Whether a running thread with resident set `rss` may move from a core of node `from`
    /// to a core of node `to`, whose last-level cache holds `llc_bytes`.
    pub fn allows(self, rss: &ResidentSet, from: usize, to: usize, llc_bytes: u64) -> bool {
        match self {
            NumaPolicy::Always => true,
            NumaPolicy::SameNode => from == to,
            NumaPolicy::Rss => !rss.allocating() && !rss.predicts_costly_move(from, to, llc_bytes),
        }
    }
}

/// One thread's resident pages per node, and whether it is allocating.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResidentSet {
    /// Pages per node.
    pages: Vec<u64>,
    /// The total at the last tick.
    previous_total: u64,
    /// Whether the last tick saw the total grow.
    allocating: bool,
    /// Bytes per page.
    page_bytes: u64,
}

impl ResidentSet {
    /// An empty resident set over `nodes` nodes of pages of `page_bytes`.
    pub fn new(nodes: usize, page_bytes: u64) -> ResidentSet {
        ResidentSet {
            pages: vec![0; nodes.max(1)],
            previous_total: 0,
            allocating: false,
            page_bytes,
        }
    }

    /// A thread's resident set from counts kept elsewhere (the kernel keeps them in
    /// atomics, since a page may be freed on any core): `pages` per node, and whether the
    /// last tick found it allocating.
    pub fn from_counts(pages: &[u64], allocating: bool, page_bytes: u64) -> ResidentSet {
        let mut pages = pages.to_vec();
        if pages.is_empty() {
            pages.push(0);
        }
        let previous_total = pages.iter().sum();
        ResidentSet { pages, previous_total, allocating, page_bytes }
    }

    /// Charges a page on `node` (the thread faulted it in or allocated it).
    pub fn charge(&mut self, node: usize) {
        if let Some(n) = self.pages.get_mut(node) {
            *n += 1;
        }
    }

    /// Uncharges a page on `node` (it was freed).
    pub fn uncharge(&mut self, node: usize) {
        if let Some(n) = self.pages.get_mut(node) {
            *n = n.saturating_sub(1);
        }
    }

    /// Resident pages on `node`.
    pub fn on_node(&self, node: usize) -> u64 {
        self.pages.get(node).copied().unwrap_or(0)
    }

    /// Resident pages on all nodes.
    pub fn total(&self) -> u64 {
        self.pages.iter().sum()
    }

    /// The timer tick's check (§2.4.3): the thread is in an allocation phase if its total
    /// grew since the last tick. Returns the new state.
    pub fn tick(&mut self) -> bool {
        let total = self.total();
        self.allocating = total > self.previous_total;
        self.previous_total = total;
        self.allocating
    }

    /// Whether the last tick found it allocating.
    pub fn allocating(&self) -> bool {
        self.allocating
    }

    /// The prediction of §2.4.2: a move from node `from` to node `to` is costly if the
    /// nodes differ, `from` holds the most of the thread's pages, and those pages are more
    /// than the destination's last-level cache holds.
    pub fn predicts_costly_move(&self, from: usize, to: usize, llc_bytes: u64) -> bool {
        let here = self.on_node(from);
        from != to
            && self.pages.iter().all(|&n| n <= here)
            && here.saturating_mul(self.page_bytes) > llc_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resident_set_from_counts_predicts_as_one_charged_page_by_page() {
        let mut charged = ResidentSet::new(2, 4096);
        for _ in 0..300 {
            charged.charge(1);
        }
        let counted = ResidentSet::from_counts(&[0, 300], false, 4096);
        assert_eq!(counted.total(), 300);
        for (from, to) in [(1, 0), (0, 1), (1, 1)] {
            assert_eq!(
                counted.predicts_costly_move(from, to, 1 << 20),
                charged.predicts_costly_move(from, to, 1 << 20)
            );
        }
        assert!(ResidentSet::from_counts(&[1], true, 4096).allocating());
    }

    const MIB: u64 = 1 << 20;

    #[test]
    fn the_allocation_phase_is_growth_since_the_last_tick() {
        let mut r = ResidentSet::new(2, 4096);
        assert!(!r.tick());
        r.charge(0);
        assert!(r.tick());
        assert!(!r.tick());
        r.uncharge(0);
        r.uncharge(0);
        assert_eq!(r.total(), 0);
        assert!(!r.tick());
    }

    #[test]
    fn a_big_resident_set_on_the_source_node_makes_a_move_costly() {
        let mut r = ResidentSet::new(2, 4096);
        for _ in 0..1024 {
            r.charge(0); // 4 MiB on node 0
        }
        r.charge(1);
        assert!(r.predicts_costly_move(0, 1, 2 * MIB));
        assert!(!r.predicts_costly_move(0, 1, 8 * MIB), "fits in the destination's LLC");
        assert!(!r.predicts_costly_move(0, 0, 2 * MIB), "same node");
        assert!(!r.predicts_costly_move(1, 0, 2 * MIB), "node 1 is not where it lives");
    }

    #[test]
    fn the_three_policies() {
        let mut r = ResidentSet::new(2, 4096);
        for _ in 0..1024 {
            r.charge(0);
        }
        r.tick();
        assert!(NumaPolicy::Always.allows(&r, 0, 1, MIB));
        assert!(!NumaPolicy::SameNode.allows(&r, 0, 1, MIB));
        assert!(NumaPolicy::SameNode.allows(&r, 1, 1, MIB));
        // Allocating: refused even where the prediction is cheap.
        assert!(!NumaPolicy::Rss.allows(&r, 0, 1, 64 * MIB));
        r.tick();
        assert!(NumaPolicy::Rss.allows(&r, 0, 1, 64 * MIB));
        assert!(!NumaPolicy::Rss.allows(&r, 0, 1, MIB));
        for p in [NumaPolicy::Always, NumaPolicy::SameNode, NumaPolicy::Rss] {
            assert_eq!(NumaPolicy::parse(p.name()), Some(p));
        }
    }
}
