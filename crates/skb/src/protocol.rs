//! Which agreement protocol a one-phase operation (a TLB shootdown, Multikernel §5.1) uses
//! to reach its participants: the SKB's policy, from the topology it knows.

use crate::Skb;

/// The four ways of §5.1 (Figure 6) to send one message to many cores and collect their
/// acknowledgements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// One shared cache line written by the initiator and read by every participant; each
    /// acknowledges on its own channel. Every reader's miss is served by one line's home,
    /// so it scales worst.
    Broadcast,
    /// One message per participant on its own channel, acknowledged on the way back.
    Unicast,
    /// One message per package, to an aggregator that forwards within its package (over the
    /// shared cache) and acknowledges once for all; packages in ascending order.
    Multicast,
    /// Multicast, most distant package first (its reply takes longest), each aggregator
    /// chosen nearest the initiator by measured latency.
    NumaMulticast,
}

impl Protocol {
    /// Every protocol, in Figure 6's order.
    pub const ALL: [Protocol; 4] =
        [Protocol::Broadcast, Protocol::Unicast, Protocol::Multicast, Protocol::NumaMulticast];

    /// Its name in commands and results.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Broadcast => "broadcast",
            Protocol::Unicast => "unicast",
            Protocol::Multicast => "multicast",
            Protocol::NumaMulticast => "numa-multicast",
        }
    }

    /// The protocol called `name`, if any.
    pub fn parse(name: &str) -> Option<Protocol> {
        Protocol::ALL.into_iter().find(|p| p.name() == name)
    }
}

impl Skb {
    /// Records a measured one-phase shootdown from a core to `participants` cores of its own
    /// package by `protocol`: `cycles` until every one acknowledged (the boot core measures
    /// broadcast and unicast, Multikernel §5.1, so that [`Skb::pick_protocol`] chooses by
    /// the machine's costs). A later measurement of the same protocol and size replaces it.
    pub fn set_shootdown_cost(&mut self, protocol: Protocol, participants: usize, cycles: u64) {
        self.shootdown_costs.retain(|&(p, n, _)| (p, n) != (protocol, participants));
        self.shootdown_costs.push((protocol, participants, cycles));
    }

    /// The measured shootdowns within a package: (protocol, participants, cycles).
    pub fn shootdown_costs(&self) -> &[(Protocol, usize, u64)] {
        &self.shootdown_costs
    }

    /// The measured cost of a shootdown by `protocol` to `participants` cores of one
    /// package: the measurement itself, or a line through the two measured sizes nearest
    /// it (one measured size: that cost, whatever the size). `None` when unmeasured.
    /// Allocates nothing (a shootdown asks it, the heap's own trim included).
    pub fn shootdown_cost(&self, protocol: Protocol, participants: usize) -> Option<u64> {
        // The nearest measured size, then the nearest other one.
        let mut nearest: Option<(usize, u64)> = None;
        let mut second: Option<(usize, u64)> = None;
        for &(p, n, c) in &self.shootdown_costs {
            if p != protocol {
                continue;
            }
            let d = n.abs_diff(participants);
            if nearest.is_none_or(|(m, _)| d < m.abs_diff(participants)) {
                second = nearest;
                nearest = Some((n, c));
            } else if second.is_none_or(|(m, _)| d < m.abs_diff(participants)) {
                second = Some((n, c));
            }
        }
        let (n0, c0) = nearest?;
        let Some((n1, c1)) = second.filter(|&(n1, _)| n0 != participants && n1 != n0) else {
            return Some(c0);
        };
        // c0 + (c1 - c0) * (x - n0) / (n1 - n0), in signed arithmetic, never below 0.
        let rise = (c1 as i128 - c0 as i128).saturating_mul(participants as i128 - n0 as i128);
        let at = (c0 as i128).saturating_add(rise / (n1 as i128 - n0 as i128));
        Some(at.clamp(0, u64::MAX as i128) as u64)
    }

    /// The protocol for a one-phase operation from `source` to `participants` (Multikernel
    /// §5.1: "the SKB ... constructs an appropriate multicast tree"). Participants in other
    /// packages: NUMA-aware multicast, one cross-package message per package, the farthest
    /// first, which Figure 6 shows is the flattest as cores grow. Out-of-range cores count
    /// as remote (the tree then sends to them directly). Participants all in the source's
    /// package (a tree would only add a hop): broadcast or unicast, whichever the boot
    /// core's measurements ([`Skb::set_shootdown_cost`]) say costs less at that many
    /// participants; unicast when unmeasured or equal (broadcast's one line is read by
    /// every participant, so it loses as they grow, and it wins only where measured so).
    pub fn pick_protocol(
        &self,
        source: usize,
        participants: impl IntoIterator<Item = usize>,
    ) -> Protocol {
        let home = self.core(source).map(|c| c.package);
        let mut count = 0;
        let mut all_local = true;
        for p in participants {
            count += 1;
            all_local &= home.is_some() && self.core(p).map(|c| c.package) == home;
        }
        if !all_local {
            return Protocol::NumaMulticast;
        }
        match (
            self.shootdown_cost(Protocol::Broadcast, count),
            self.shootdown_cost(Protocol::Unicast, count),
        ) {
            (Some(b), Some(u)) if b < u => Protocol::Broadcast,
            _ => Protocol::Unicast,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CoreInfo;
    use alloc::vec::Vec;

    fn machine(packages: u32, per: u32) -> Skb {
        let cores: Vec<CoreInfo> = (0..packages * per)
            .map(|i| CoreInfo {
                apic_id: i,
                package: i / per,
                core: i % per,
                smt: 0,
                node: i / per,
            })
            .collect();
        Skb::new(cores)
    }

    #[test]
    fn names_round_trip_and_garbage_is_refused() {
        for p in Protocol::ALL {
            assert_eq!(Protocol::parse(p.name()), Some(p));
        }
        assert_eq!(Protocol::parse("Unicast"), None);
        assert_eq!(Protocol::parse(""), None);
    }

    #[test]
    fn one_package_is_unicast_and_several_are_numa_multicast() {
        let one = machine(1, 4);
        assert_eq!(one.pick_protocol(0, [1, 2, 3]), Protocol::Unicast);
        let two = machine(2, 2);
        assert_eq!(two.pick_protocol(0, [1]), Protocol::Unicast);
        assert_eq!(two.pick_protocol(0, [1, 2]), Protocol::NumaMulticast);
        assert_eq!(two.pick_protocol(3, [2]), Protocol::Unicast);
        assert_eq!(two.pick_protocol(0, [99]), Protocol::NumaMulticast);
        assert_eq!(two.pick_protocol(99, [1]), Protocol::NumaMulticast);
    }

    #[test]
    fn measured_costs_choose_between_broadcast_and_unicast_in_a_package() {
        let mut one = machine(1, 8);
        // Broadcast cheaper for one participant, dearer for seven: they cross near four.
        one.set_shootdown_cost(Protocol::Broadcast, 1, 5_000);
        one.set_shootdown_cost(Protocol::Broadcast, 7, 17_000);
        assert_eq!(one.pick_protocol(0, [1]), Protocol::Unicast); // unicast unmeasured
        one.set_shootdown_cost(Protocol::Unicast, 1, 7_000);
        one.set_shootdown_cost(Protocol::Unicast, 7, 13_000);
        assert_eq!(one.shootdown_cost(Protocol::Broadcast, 4), Some(11_000));
        assert_eq!(one.shootdown_cost(Protocol::Unicast, 4), Some(10_000));
        assert_eq!(one.pick_protocol(0, [1]), Protocol::Broadcast);
        assert_eq!(one.pick_protocol(0, [1, 2]), Protocol::Broadcast); // 7,000 against 8,000
        assert_eq!(one.pick_protocol(0, [1, 2, 3]), Protocol::Unicast); // a tie: unicast
        assert_eq!(one.pick_protocol(0, 1..8), Protocol::Unicast);
        // Beyond the measured sizes the lines go on; a remeasurement replaces a point.
        assert_eq!(one.shootdown_cost(Protocol::Broadcast, 10), Some(23_000));
        one.set_shootdown_cost(Protocol::Broadcast, 7, 9_000);
        assert_eq!(one.pick_protocol(0, 1..8), Protocol::Broadcast);
        // Other packages: still NUMA-aware multicast, whatever was measured.
        let mut two = machine(2, 2);
        two.set_shootdown_cost(Protocol::Broadcast, 1, 1);
        two.set_shootdown_cost(Protocol::Unicast, 1, 2);
        assert_eq!(two.pick_protocol(0, [1]), Protocol::Broadcast);
        assert_eq!(two.pick_protocol(0, [1, 2]), Protocol::NumaMulticast);
    }

    #[test]
    fn a_falling_line_never_goes_below_zero() {
        let mut m = machine(1, 2);
        m.set_shootdown_cost(Protocol::Unicast, 1, 1_000);
        m.set_shootdown_cost(Protocol::Unicast, 2, 100);
        assert_eq!(m.shootdown_cost(Protocol::Unicast, 50), Some(0));
        assert_eq!(m.shootdown_cost(Protocol::Unicast, 0), Some(1_900));
        assert_eq!(m.shootdown_cost(Protocol::Multicast, 1), None);
        // Extreme costs and sizes saturate instead of overflowing.
        m.set_shootdown_cost(Protocol::Broadcast, 1, u64::MAX);
        m.set_shootdown_cost(Protocol::Broadcast, 2, 0);
        assert_eq!(m.shootdown_cost(Protocol::Broadcast, usize::MAX), Some(0));
        assert_eq!(m.shootdown_cost(Protocol::Broadcast, 0), Some(u64::MAX));
    }
}
