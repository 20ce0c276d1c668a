//! A discrete-event model of one-phase agreement (a TLB shootdown, Multikernel §5.1): the
//! source sends to every participant, each applies the operation and acknowledges, and the
//! operation is done when the source has received every acknowledgement. It predicts the
//! latency of the four protocols of Figure 6 (broadcast, unicast, multicast, NUMA-aware
//! multicast) at 2..=P*C cores of a machine with P packages of C cores, from per-message
//! costs the SKB measures (Multikernel §4.9: "online measurement ... URPC communication
//! latency").
//!
//! The model is a simulation, not a formula: messages are events in a time-ordered queue
//! and each core handles one at a time, so the queueing at the source and at aggregators
//! that bends Figure 6's curves shows up by itself. See `sim.rs` for the protocols and
//! `fit.rs` for turning a measured round trip into [`Costs`].

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cli;
mod fit;
mod sim;

pub use fit::{
    costs_from_measurements, paper_costs, relative_error, Measured, PAPER_MSGS_PER_KCYCLE,
    PAPER_ONE_WAY_LOCAL, PAPER_ONE_WAY_REMOTE,
};

/// Measured costs in cycles (the kernel's SKB measures them on the machine; see
/// [`costs_from_measurements`]).
///
/// Negative, NaN or infinite values are taken as 0 by [`predict`], so that every event
/// time stays a finite number and the event queue stays ordered.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Costs {
    /// Sender's cost to put one message in a channel (the sender is busy this long per
    /// message).
    pub send: f64,
    /// Time from a message being sent until the receiver can see it, within a package
    /// (cache line transfer over the shared cache).
    pub transit_local: f64,
    /// Same across packages (interconnect).
    pub transit_remote: f64,
    /// Receiver's cost to take a message out and handle it (apply the operation: e.g.
    /// invalidate TLB entries).
    pub receive: f64,
    /// Extra cost per additional reader of one shared line (broadcast protocol: every
    /// reader's miss on the one line is serialised at the line's home; Multikernel §5.1
    /// explains why broadcast scales badly).
    pub shared_line_per_reader: f64,
}

impl Costs {
    /// The costs with every unusable value (negative, NaN, infinite) replaced by 0.
    fn sanitized(&self) -> Costs {
        let ok = |x: f64| if x.is_finite() && x > 0.0 { x } else { 0.0 };
        Costs {
            send: ok(self.send),
            transit_local: ok(self.transit_local),
            transit_remote: ok(self.transit_remote),
            receive: ok(self.receive),
            shared_line_per_reader: ok(self.shared_line_per_reader),
        }
    }
}

/// The four protocols of Multikernel §5.1, Figure 6: the SKB's own (`skb::Protocol`), so
/// the model, the kernel and the report name them alike.
pub use skb::Protocol;

/// A machine of `packages` packages with `cores_per_package` cores each; cores are
/// numbered package by package (cores `0..C` are package 0, and so on).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Topology {
    /// Number of packages (sockets; each one a NUMA node with a shared last-level cache).
    pub packages: usize,
    /// Cores in each package.
    pub cores_per_package: usize,
}

impl Topology {
    /// Number of cores on the machine (saturating, so absurd sizes do not overflow).
    pub fn cores(&self) -> usize {
        self.packages.saturating_mul(self.cores_per_package)
    }

    /// The package `core` sits in (0 on a machine with no cores per package).
    pub fn package_of(&self, core: usize) -> usize {
        core.checked_div(self.cores_per_package).unwrap_or(0)
    }
}

/// Predicted latency in cycles of one operation from core 0 to cores 1..n (the first n
/// cores of `topo`, filled package by package), acks included.
///
/// `n` larger than the machine counts as the whole machine; `n < 2` (nobody to tell)
/// takes 0 cycles.
pub fn predict(protocol: Protocol, topo: Topology, n: usize, costs: &Costs) -> f64 {
    sim::run(protocol, topo, n, &costs.sanitized())
}

/// The curve for n = 2..=topo.cores() (empty on a machine of fewer than 2 cores).
pub fn curve(protocol: Protocol, topo: Topology, costs: &Costs) -> Vec<(usize, f64)> {
    (2..=topo.cores()).map(|n| (n, predict(protocol, topo, n, costs))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cores_are_numbered_package_by_package() {
        let t = Topology { packages: 3, cores_per_package: 4 };
        assert_eq!(t.cores(), 12);
        assert_eq!(t.package_of(0), 0);
        assert_eq!(t.package_of(3), 0);
        assert_eq!(t.package_of(4), 1);
        assert_eq!(t.package_of(11), 2);
        assert_eq!(Topology { packages: 2, cores_per_package: 0 }.package_of(5), 0);
        assert_eq!(Topology { packages: usize::MAX, cores_per_package: 2 }.cores(), usize::MAX);
    }

    #[test]
    fn nobody_to_tell_costs_nothing_and_n_is_clamped() {
        let t = Topology { packages: 1, cores_per_package: 4 };
        let c = paper_costs();
        for p in Protocol::ALL {
            assert_eq!(predict(p, t, 0, &c), 0.0);
            assert_eq!(predict(p, t, 1, &c), 0.0);
            assert_eq!(predict(p, t, 100, &c), predict(p, t, 4, &c));
        }
        assert!(
            curve(Protocol::Unicast, Topology { packages: 1, cores_per_package: 1 }, &c).is_empty()
        );
    }

    #[test]
    fn unusable_costs_count_as_zero() {
        let t = Topology { packages: 2, cores_per_package: 2 };
        let bad = Costs {
            send: f64::NAN,
            transit_local: -5.0,
            transit_remote: f64::INFINITY,
            receive: 10.0,
            shared_line_per_reader: f64::NEG_INFINITY,
        };
        for p in Protocol::ALL {
            let v = predict(p, t, 4, &bad);
            assert!(v.is_finite() && v >= 0.0, "{p:?}: {v}");
        }
        // Only the receives remain: unicast to one core is a request and an ack received.
        assert_eq!(predict(Protocol::Unicast, t, 2, &bad), 20.0);
    }
}
