//! Property tests of the multicast tree (Multikernel §5.1) and the console rendering over
//! random topologies: 1..=16 packages of 1..=8 cores, cores enumerated in a random order,
//! random (sometimes missing) latencies.

use proptest::prelude::*;
use skb::{CoreInfo, Skb, RENDER_HEADER_LINES};

/// Latencies are kept below this so that "unmeasured" can be ranked as farther than all.
const MAX_LATENCY: u64 = 1_000_000;

/// A random machine: package sizes, a shuffled order of cores, and a latency (or none)
/// for every ordered pair.
fn machine(measured_pct: u32) -> impl Strategy<Value = Skb> {
    proptest::collection::vec(1u32..=8, 1..=16)
        .prop_flat_map(move |sizes| {
            let mut cores = Vec::new();
            for (p, &size) in sizes.iter().enumerate() {
                for c in 0..size {
                    cores.push(CoreInfo {
                        apic_id: cores.len() as u32,
                        package: p as u32 * 3, // sparse package numbers
                        core: c,
                        smt: c % 2,
                        node: p as u32 / 2,
                    });
                }
            }
            let n = cores.len();
            let lat = proptest::collection::vec(
                (0u32..100, 0..MAX_LATENCY).prop_map(move |(pct, l)| {
                    if pct < measured_pct {
                        Some(l)
                    } else {
                        None
                    }
                }),
                n * n,
            );
            (Just(cores).prop_shuffle(), lat)
        })
        .prop_map(|(cores, lat)| {
            let n = cores.len();
            let mut s = Skb::new(cores);
            for i in 0..n {
                for j in 0..n {
                    if let Some(l) = lat[i * n + j] {
                        s.set_latency(i, j, l);
                    }
                }
            }
            s
        })
}

/// A machine and a source core in it.
fn machine_and_source(measured_pct: u32) -> impl Strategy<Value = (Skb, usize)> {
    machine(measured_pct).prop_flat_map(|s| {
        let n = s.cores();
        (Just(s), 0..n)
    })
}

/// How far an aggregator is from the source for the send order: the source's own branch
/// is nearest (0), an unmeasured one farthest.
fn rank(s: &Skb, source: usize, agg: usize) -> u64 {
    if agg == source {
        0
    } else {
        s.latency(source, agg).unwrap_or(u64::MAX)
    }
}

/// Every property of the tree from `source`.
fn check_tree(s: &Skb, source: usize) -> Result<(), TestCaseError> {
    let t = s.multicast_tree(source);
    prop_assert_eq!(t.source, source);
    let home = s.core(source).unwrap().package;

    // Every core but the source exactly once; the source never.
    let mut d = t.destinations();
    prop_assert!(!d.contains(&source));
    d.sort_unstable();
    let want: Vec<usize> = (0..s.cores()).filter(|&c| c != source).collect();
    prop_assert_eq!(d, want);

    // One aggregator per package, each package once.
    let mut pk: Vec<u32> = t.aggregators.iter().map(|a| s.core(a.core).unwrap().package).collect();
    prop_assert_eq!(pk.len(), s.packages().len());
    pk.sort_unstable();
    prop_assert_eq!(pk, s.packages());

    // The source's own package last, aggregated by the source itself.
    prop_assert_eq!(t.aggregators.last().unwrap().core, source);

    for a in &t.aggregators {
        let p = s.core(a.core).unwrap().package;
        let others: Vec<usize> =
            s.cores_in_package(p).into_iter().filter(|&c| c != a.core && c != source).collect();
        prop_assert_eq!(&a.members, &others);
        if p == home {
            prop_assert_eq!(a.core, source);
            continue;
        }
        // The aggregator is the package's nearest measured core, if any is measured.
        if let Some(l) = s.latency(source, a.core) {
            for c in s.cores_in_package(p) {
                if let Some(m) = s.latency(source, c) {
                    prop_assert!(l <= m, "core {} nearer than aggregator {}", c, a.core);
                }
            }
        } else {
            for c in s.cores_in_package(p) {
                prop_assert_eq!(s.latency(source, c), None);
            }
            prop_assert_eq!(a.core, s.cores_in_package(p)[0]);
        }
    }

    // Most distant first: non-increasing latency from the source.
    let ranks: Vec<u64> = t.aggregators.iter().map(|a| rank(s, source, a.core)).collect();
    for w in ranks.windows(2) {
        prop_assert!(w[0] >= w[1], "send order not farthest first: {:?}", ranks);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn tree_fully_measured((s, source) in machine_and_source(100)) {
        check_tree(&s, source)?;
    }

    #[test]
    fn tree_partly_measured((s, source) in machine_and_source(70)) {
        check_tree(&s, source)?;
    }

    #[test]
    fn tree_unmeasured_follows_package_distance((s, source) in machine_and_source(0)) {
        check_tree(&s, source)?;
        let t = s.multicast_tree(source);
        let home = s.core(source).unwrap().package;
        let dist: Vec<u32> = t
            .aggregators
            .iter()
            .map(|a| s.core(a.core).unwrap().package.abs_diff(home))
            .collect();
        for w in dist.windows(2) {
            prop_assert!(w[0] >= w[1], "not farthest package first: {:?}", dist);
        }
    }

    #[test]
    fn tree_from_every_source(s in machine(90)) {
        for source in 0..s.cores() {
            check_tree(&s, source)?;
        }
    }

    #[test]
    fn render_one_line_per_core((s, _) in machine_and_source(80), ipi in proptest::option::of(any::<u64>())) {
        let mut s = s;
        if let Some(c) = ipi {
            s.set_ipi_cost(c);
        }
        let mut t = String::new();
        s.render(&mut t).unwrap();
        prop_assert_eq!(t.lines().count(), RENDER_HEADER_LINES + s.cores());
        if s.cores() <= 16 {
            for line in t.lines() {
                prop_assert!(line.len() <= 100, "{} columns: {}", line.len(), line);
            }
        }
    }
}
