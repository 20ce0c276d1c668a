//! The model against the shape of Multikernel Figure 6 (§5.1), and its general laws:
//! latency never falls as cores are added, and a fitted model gives back the round trip
//! it was fitted from.

use agreement_sim::{
    costs_from_measurements, curve, paper_costs, predict, relative_error, Costs, Measured,
    Protocol, Topology,
};
use proptest::prelude::*;

/// The 8×8 machine the binary models by default.
const EIGHT_BY_EIGHT: Topology = Topology { packages: 8, cores_per_package: 8 };

/// Figure 6's regime: crossing the interconnect costs far more than the shared cache, and
/// each reader of the broadcast line pulls it across the interconnect (§5.1).
const FIGURE6: Costs = Costs {
    send: 100.0,
    transit_local: 50.0,
    transit_remote: 600.0,
    receive: 100.0,
    shared_line_per_reader: 600.0,
};

/// Latency per added core from 16 to 64 cores (Figure 6's right half, scaled to 8×8).
fn slope(p: Protocol, costs: &Costs) -> f64 {
    let at = |n| predict(p, EIGHT_BY_EIGHT, n, costs);
    (at(64) - at(16)) / 48.0
}

#[test]
fn numa_multicast_is_never_slower_than_multicast_when_remote_is_expensive() {
    for n in 2..=64 {
        let numa = predict(Protocol::NumaMulticast, EIGHT_BY_EIGHT, n, &FIGURE6);
        let plain = predict(Protocol::Multicast, EIGHT_BY_EIGHT, n, &FIGURE6);
        assert!(numa <= plain, "n={n}: numa {numa} > multicast {plain}");
    }
}

#[test]
fn figure6_numa_is_flattest_and_broadcast_steepest() {
    let s: Vec<(Protocol, f64)> = Protocol::ALL.iter().map(|&p| (p, slope(p, &FIGURE6))).collect();
    let of = |p| s.iter().find(|(q, _)| *q == p).map_or(f64::NAN, |x| x.1);
    for &(p, v) in &s {
        if p != Protocol::NumaMulticast {
            assert!(of(Protocol::NumaMulticast) < v, "numa not flattest: {s:?}");
        }
        if p != Protocol::Broadcast {
            assert!(of(Protocol::Broadcast) > v, "broadcast not steepest: {s:?}");
        }
    }
    // And Figure 6's order at the full machine: broadcast > unicast > multicast > numa.
    let at64: Vec<f64> =
        Protocol::ALL.iter().map(|&p| predict(p, EIGHT_BY_EIGHT, 64, &FIGURE6)).collect();
    assert!(at64.windows(2).all(|w| w[0] > w[1]), "{at64:?}");
}

#[test]
fn with_the_paper_costs_both_multicasts_win_at_64() {
    // Table 2's remote penalty is small (75 cycles one way), so the model gives the two
    // multicasts the same latency at 64 cores: the aggregators' ack queues hide it.
    let c = paper_costs();
    let at64 = |p| predict(p, EIGHT_BY_EIGHT, 64, &c);
    for tree in [Protocol::Multicast, Protocol::NumaMulticast] {
        for flat in [Protocol::Broadcast, Protocol::Unicast] {
            assert!(at64(tree) < at64(flat), "{tree:?} vs {flat:?}");
            assert!(slope(tree, &c) < slope(flat, &c), "{tree:?} vs {flat:?}");
        }
    }
    assert!(at64(Protocol::NumaMulticast) <= at64(Protocol::Multicast));
}

#[test]
fn with_the_paper_costs_farthest_first_costs_one_send_when_the_far_package_is_partial() {
    // Not a wish but what the model says (see sim.rs): at 17 cores the farthest package
    // (package 2) has only its aggregator, and sending to it first delays package 1.
    let c = paper_costs();
    let numa = predict(Protocol::NumaMulticast, EIGHT_BY_EIGHT, 17, &c);
    let plain = predict(Protocol::Multicast, EIGHT_BY_EIGHT, 17, &c);
    assert!(relative_error(numa - plain, c.send) < 1e-9, "{numa} - {plain}");
}

#[test]
fn unicast_grows_linearly() {
    // Once the source is the bottleneck every added core costs it one send and one
    // ack receive: the increments are equal.
    for costs in [FIGURE6, paper_costs()] {
        let c = curve(Protocol::Unicast, EIGHT_BY_EIGHT, &costs);
        let steps: Vec<f64> = c.windows(2).map(|w| w[1].1 - w[0].1).collect();
        let per_core = costs.send + costs.receive;
        for (i, d) in steps.iter().enumerate().skip(14) {
            assert!(relative_error(*d, per_core) < 1e-9, "step {i}: {d} vs {per_core}");
        }
    }
}

#[test]
fn with_one_package_multicast_is_unicast() {
    // No remote package means no aggregator: both multicasts send to every core directly,
    // exactly as unicast does, so the tolerance is only floating-point rounding.
    const TOLERANCE: f64 = 1e-12;
    for costs in [FIGURE6, paper_costs()] {
        let one = Topology { packages: 1, cores_per_package: 64 };
        let uni = curve(Protocol::Unicast, one, &costs);
        for p in [Protocol::Multicast, Protocol::NumaMulticast] {
            for ((n, u), (_, m)) in uni.iter().zip(curve(p, one, &costs)) {
                assert!(relative_error(m, *u) <= TOLERANCE, "{p:?} n={n}: {m} vs {u}");
            }
        }
    }
}

#[test]
fn costs_fitted_from_the_paper_give_back_its_one_way_latencies() {
    let c = paper_costs();
    let two_local = Topology { packages: 1, cores_per_package: 2 };
    let two_remote = Topology { packages: 2, cores_per_package: 1 };
    assert!(relative_error(predict(Protocol::Unicast, two_local, 2, &c), 2.0 * 538.0) < 1e-9);
    assert!(relative_error(predict(Protocol::Unicast, two_remote, 2, &c), 2.0 * 613.0) < 1e-9);
}

/// Any positive cost up to 2000 cycles.
fn cost() -> impl Strategy<Value = f64> {
    0.01f64..2000.0
}

fn costs() -> impl Strategy<Value = Costs> {
    (cost(), cost(), cost(), cost(), cost()).prop_map(|(s, tl, tr, r, sh)| Costs {
        send: s,
        transit_local: tl,
        transit_remote: tr,
        receive: r,
        shared_line_per_reader: sh,
    })
}

fn topology() -> impl Strategy<Value = Topology> {
    (1usize..=8, 1usize..=8)
        .prop_map(|(packages, cores_per_package)| Topology { packages, cores_per_package })
}

proptest! {
    #[test]
    fn latency_never_falls_as_cores_are_added(c in costs(), t in topology()) {
        for p in Protocol::ALL {
            let curve = curve(p, t, &c);
            for w in curve.windows(2) {
                prop_assert!(w[1].1 >= w[0].1 * (1.0 - 1e-12), "{:?} {:?}: {:?}", p, t, w);
            }
        }
    }

    #[test]
    fn numa_multicast_never_loses_when_send_order_cannot_matter(c in costs(), t in topology()) {
        // Every package used full, or at most one remote package: the two multicasts then
        // differ only by plain multicast's remote-buffer penalty, which only adds delay.
        let per = t.cores_per_package;
        for n in (2..=t.cores()).filter(|n| n % per == 0 || *n <= 2 * per) {
            let numa = predict(Protocol::NumaMulticast, t, n, &c);
            let plain = predict(Protocol::Multicast, t, n, &c);
            prop_assert!(numa <= plain * (1.0 + 1e-12), "n={}: {} > {}", n, numa, plain);
        }
    }

    #[test]
    fn fitted_costs_give_back_the_measured_round_trips(
        local in 10.0f64..100_000.0,
        remote in proptest::option::of(10.0f64..100_000.0),
        send in proptest::option::of(cost()),
        receive in proptest::option::of(cost()),
    ) {
        let m = Measured { round_trip_local: local, round_trip_remote: remote, send, receive };
        let c = costs_from_measurements(&m);
        let two = Topology { packages: 1, cores_per_package: 2 };
        prop_assert!(relative_error(predict(Protocol::Unicast, two, 2, &c), local) < 0.01);
        // Remote comes back too, unless it was below what send and receive alone take.
        if let Some(r) = remote {
            if r / 2.0 >= c.send + c.receive {
                let apart = Topology { packages: 2, cores_per_package: 1 };
                prop_assert!(relative_error(predict(Protocol::Unicast, apart, 2, &c), r) < 0.01);
            }
        }
    }
}
