//! Multicast trees (Multikernel §5.1, "NUMA-Aware Multicast" of Figure 6): to reach every
//! core, the source sends one message per package, to that package's aggregation core,
//! most distant package first; each aggregator forwards to the rest of its package over
//! the package's shared cache. The paper's SKB computes such a route for every source
//! core at startup "ordered by decreasing message latency"; this is that query.

use crate::Skb;
use alloc::vec::Vec;
use core::cmp::Ordering;

/// A two-level tree: the source sends to each aggregator (in `aggregators` order, most
/// distant first); each aggregator forwards to its `members`.
///
/// There is exactly one [`Aggregation`] per package. The source's own package comes
/// **last** (it is the nearest) with `core == source`: the source sends to those members
/// directly. So a one-package machine gives a flat tree, a single
/// `Aggregation { core: source, members: every other core }`, and a one-core machine
/// gives `Aggregation { core: source, members: [] }`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MulticastTree {
    /// The core the message starts from.
    pub source: usize,
    /// One entry per package, in send order.
    pub aggregators: Vec<Aggregation>,
}

/// One package's branch of a [`MulticastTree`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Aggregation {
    /// The aggregator; equal to the tree's source for the source's own package.
    pub core: usize,
    /// Its package's other cores, excluding the source, ascending (they share a cache,
    /// so their order matters little).
    pub members: Vec<usize>,
}

impl MulticastTree {
    /// Every destination exactly once, in send order: branch by branch, the aggregator
    /// (unless it is the source) and then its members. The source is never included.
    pub fn destinations(&self) -> Vec<usize> {
        let mut out = Vec::new();
        for a in &self.aggregators {
            if a.core != self.source {
                out.push(a.core);
            }
            out.extend_from_slice(&a.members);
        }
        out
    }
}

/// A remote package's branch with its sort keys.
struct Branch {
    /// Source → aggregator latency, if measured.
    latency: Option<u64>,
    /// `|package - source's package|`, the fallback distance.
    distance: u32,
    package: u32,
    agg: Aggregation,
}

/// Send order of two remote branches: farthest first. Unmeasured branches count as
/// farthest (unknown may be far, and sending early to a near core costs little), then
/// higher latency, then larger package-number distance, then lower package number.
fn farthest_first(a: &Branch, b: &Branch) -> Ordering {
    let by_latency = match (a.latency, b.latency) {
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (x, y) => y.cmp(&x),
    };
    by_latency.then(b.distance.cmp(&a.distance)).then(a.package.cmp(&b.package))
}

impl Skb {
    /// The core of `cores` nearest to `source` by measured latency; ties and unmeasured
    /// cores go to the lowest index (measured beats unmeasured). `cores` is non-empty.
    fn nearest(&self, source: usize, cores: &[usize]) -> usize {
        let mut best = cores[0];
        for &c in cores {
            let better = match (self.latency(source, c), self.latency(source, best)) {
                (Some(l), Some(b)) => l < b,
                (Some(_), None) => true,
                _ => false,
            };
            if better {
                best = c;
            }
        }
        best
    }

    /// The multicast tree for a message from `source` to every other core (Multikernel
    /// §5.1, Figure 6 "NUMA-aware multicast").
    ///
    /// One aggregation core per package: the package's core nearest to the source by
    /// measured latency (lowest index on ties or when unmeasured); the source itself for
    /// its own package. Remote packages are ordered most distant first by the source's
    /// latency to their aggregator, falling back to package-number distance when
    /// unmeasured (see [`MulticastTree`] for the exact order); the source's own package
    /// is last. Each aggregator forwards to the rest of its package.
    ///
    /// An out-of-range `source` gives a tree with no aggregators.
    pub fn multicast_tree(&self, source: usize) -> MulticastTree {
        let mut tree = MulticastTree { source, aggregators: Vec::new() };
        let Some(home) = self.core(source).map(|c| c.package) else {
            return tree;
        };

        let mut branches = Vec::new();
        for p in self.packages() {
            if p == home {
                continue;
            }
            let cores = self.cores_in_package(p);
            let agg = self.nearest(source, &cores);
            branches.push(Branch {
                latency: self.latency(source, agg),
                distance: p.abs_diff(home),
                package: p,
                agg: Aggregation {
                    core: agg,
                    members: cores.into_iter().filter(|&c| c != agg).collect(),
                },
            });
        }
        branches.sort_by(farthest_first);
        for b in branches {
            tree.aggregators.push(b.agg);
        }

        let local = self.cores_in_package(home);
        tree.aggregators.push(Aggregation {
            core: source,
            members: local.into_iter().filter(|&c| c != source).collect(),
        });
        tree
    }
}

impl Skb {
    /// The plain multicast tree (Multikernel §5.1, Figure 6 "multicast"): one aggregator
    /// per package, the package's lowest core, packages in ascending order, no latency
    /// knowledge used; the source's own package last, sent to directly, as in
    /// [`Skb::multicast_tree`].
    pub fn plain_multicast_tree(&self, source: usize) -> MulticastTree {
        let mut tree = self.multicast_tree(source);
        for a in tree.aggregators.iter_mut().filter(|a| a.core != source) {
            a.members.push(a.core);
            a.members.sort_unstable();
            a.core = a.members.remove(0);
        }
        tree.aggregators.sort_by_key(|a| if a.core == source { usize::MAX } else { a.core });
        tree
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CoreInfo;
    use alloc::vec;

    /// `packages` × `per` cores, numbered package by package, nothing measured.
    fn machine(packages: u32, per: u32) -> Skb {
        let mut cores = Vec::new();
        for p in 0..packages {
            for c in 0..per {
                cores.push(CoreInfo { apic_id: p * per + c, package: p, core: c, smt: 0, node: p });
            }
        }
        Skb::new(cores)
    }

    /// HyperTransport hops between two packages of the 8×4-core AMD machine of Figure 2,
    /// drawn as two rows of four sockets with links along the rows and across (a ladder).
    fn hops(a: usize, b: usize) -> u32 {
        let (ra, ca) = ((a / 4) as u32, (a % 4) as u32);
        let (rb, cb) = ((b / 4) as u32, (b % 4) as u32);
        ra.abs_diff(rb) + ca.abs_diff(cb)
    }

    /// Figure 2's machine with Table 2's one-way latencies (8×4-core AMD: shared 538,
    /// one-hop 613, two-hop 618 cycles; 5 more per further hop), plus a 0..=3 cycle
    /// jitter `(from + to) % 4` so the nearest core of a package depends on the source.
    fn figure2() -> Skb {
        let mut s = machine(8, 4);
        for a in 0..32 {
            for b in 0..32 {
                let h = hops(a / 4, b / 4);
                let base = if h == 0 { 538 } else { 608 + 5 * h as u64 };
                s.set_latency(a, b, base + ((a + b) % 4) as u64);
            }
        }
        s
    }

    fn agg_cores(t: &MulticastTree) -> Vec<usize> {
        t.aggregators.iter().map(|a| a.core).collect()
    }

    #[test]
    fn figure2_base_latencies_match_table2() {
        let s = figure2();
        assert_eq!(s.latency(0, 1), Some(538 + 1));
        assert_eq!(s.latency(0, 4), Some(613)); // package 0 -> 1: one hop
        assert_eq!(s.latency(0, 8), Some(618)); // package 0 -> 2: two hops
        assert_eq!(s.latency(0, 28), Some(628)); // package 0 -> 7: four hops
    }

    #[test]
    fn figure2_from_core_0() {
        let t = figure2().multicast_tree(0);
        // Jitter (0 + c) % 4 is smallest at c ≡ 0: the first core of each package.
        // Hops from package 0: 7:4, 3:3 6:3, 2:2 5:2, 1:1 4:1; ties by package distance.
        assert_eq!(agg_cores(&t), vec![28, 24, 12, 20, 8, 16, 4, 0]);
        assert_eq!(t.aggregators[0].members, vec![29, 30, 31]);
        assert_eq!(t.aggregators[7].members, vec![1, 2, 3]);
        assert_eq!(t.destinations().len(), 31);
    }

    #[test]
    fn figure2_from_core_5() {
        let s = figure2();
        let t = s.multicast_tree(5);
        // Jitter (5 + c) % 4 is smallest at c ≡ 3: the last core of each package.
        // Package 1 sits at row 0, column 1. Hops: 7:3; 3:2 4:2 6:2; 0:1 2:1 5:1.
        // Ties are broken by package-number distance, farthest first, then number.
        assert_eq!(agg_cores(&t), vec![31, 27, 19, 15, 23, 3, 11, 5]);
        let last = t.aggregators.last().unwrap();
        assert_eq!(last.members, vec![4, 6, 7]);
        assert_eq!(t.aggregators[0].members, vec![28, 29, 30]);
        let lat: Vec<u64> =
            t.aggregators[..7].iter().map(|a| s.latency(5, a.core).unwrap()).collect();
        assert_eq!(lat, vec![623, 618, 618, 618, 613, 613, 613]);
    }

    #[test]
    fn figure2_every_source_reaches_everyone() {
        let s = figure2();
        for src in 0..32 {
            let mut d = s.multicast_tree(src).destinations();
            d.sort_unstable();
            let want: Vec<usize> = (0..32).filter(|&c| c != src).collect();
            assert_eq!(d, want);
        }
    }

    #[test]
    fn unmeasured_orders_by_package_distance() {
        let t = machine(8, 4).multicast_tree(9);
        // Package 2; distances 7:5 6:4 5:3 0:2 4:2 1:1 3:1; lowest index aggregates.
        assert_eq!(agg_cores(&t), vec![28, 24, 20, 0, 16, 4, 12, 9]);
        assert_eq!(t.aggregators[7].members, vec![8, 10, 11]);
        assert_eq!(t.aggregators[3].members, vec![1, 2, 3]);
    }

    #[test]
    fn unmeasured_packages_go_before_measured() {
        let mut s = machine(3, 2);
        s.set_latency(0, 2, 900);
        s.set_latency(0, 3, 800);
        // Package 1 measured (nearest core 3), package 2 not: package 2 first.
        let t = s.multicast_tree(0);
        assert_eq!(agg_cores(&t), vec![4, 3, 0]);
        assert_eq!(t.aggregators[1].members, vec![2]);
    }

    #[test]
    fn measured_core_beats_unmeasured_as_aggregator() {
        let mut s = machine(2, 4);
        s.set_latency(0, 7, 1000);
        let t = s.multicast_tree(0);
        assert_eq!(agg_cores(&t), vec![7, 0]);
        assert_eq!(t.aggregators[0].members, vec![4, 5, 6]);
    }

    #[test]
    fn flat_one_package() {
        let mut s = machine(1, 4);
        s.set_latency(2, 0, 100);
        let t = s.multicast_tree(2);
        assert_eq!(
            t,
            MulticastTree {
                source: 2,
                aggregators: vec![Aggregation { core: 2, members: vec![0, 1, 3] }],
            }
        );
        assert_eq!(t.destinations(), vec![0, 1, 3]);
    }

    #[test]
    fn one_core() {
        let t = machine(1, 1).multicast_tree(0);
        assert_eq!(t.aggregators, vec![Aggregation { core: 0, members: vec![] }]);
        assert!(t.destinations().is_empty());
    }

    #[test]
    fn bad_source_gives_empty_tree() {
        let t = machine(2, 2).multicast_tree(4);
        assert_eq!(t.source, 4);
        assert!(t.aggregators.is_empty());
        assert!(t.destinations().is_empty());
        assert!(Skb::new(Vec::new()).multicast_tree(0).aggregators.is_empty());
    }

    #[test]
    fn interleaved_sparse_packages() {
        // SMT-style enumeration: packages 5 and 9 alternate by core index.
        let cores = (0..6u32)
            .map(|i| CoreInfo {
                apic_id: i,
                package: if i % 2 == 0 { 5 } else { 9 },
                core: i / 2,
                smt: 0,
                node: 0,
            })
            .collect();
        let s = Skb::new(cores);
        let t = s.multicast_tree(2);
        assert_eq!(agg_cores(&t), vec![1, 2]);
        assert_eq!(t.aggregators[0].members, vec![3, 5]);
        assert_eq!(t.aggregators[1].members, vec![0, 4]);
        assert_eq!(t.destinations(), vec![1, 3, 5, 0, 4]);
    }

    #[test]
    fn plain_tree_takes_each_package_lowest_core_in_ascending_order() {
        // The SKB's tree from core 5 of Figure 2 sends farthest first to nearest cores;
        // the plain one ignores latency.
        let s = figure2();
        let t = s.plain_multicast_tree(5);
        assert_eq!(agg_cores(&t), vec![0, 8, 12, 16, 20, 24, 28, 5]);
        assert_eq!(t.aggregators[0].members, vec![1, 2, 3]);
        assert_eq!(t.aggregators[7].members, vec![4, 6, 7]);
        let mut all = t.destinations();
        all.sort_unstable();
        assert_eq!(all, (0..32).filter(|&c| c != 5).collect::<Vec<_>>());
        // One package: the same flat tree as the SKB's.
        let flat = machine(1, 4);
        assert_eq!(flat.plain_multicast_tree(2), flat.multicast_tree(2));
    }
}
