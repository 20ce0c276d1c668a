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
    /// The protocol for a one-phase operation from `source` to `participants` (Multikernel
    /// §5.1: "the SKB ... constructs an appropriate multicast tree"). Participants all in
    /// the source's package: unicast (a tree would only add a hop, and the package's cores
    /// share a cache, so each message costs a cache-line transfer). Participants in other
    /// packages: NUMA-aware multicast, one cross-package message per package, the farthest
    /// first, which Figure 6 shows is the flattest as cores grow. Out-of-range cores count
    /// as remote (the tree then sends to them directly).
    pub fn pick_protocol(
        &self,
        source: usize,
        participants: impl IntoIterator<Item = usize>,
    ) -> Protocol {
        let home = self.core(source).map(|c| c.package);
        let all_local = participants
            .into_iter()
            .all(|p| home.is_some() && self.core(p).map(|c| c.package) == home);
        if all_local {
            Protocol::Unicast
        } else {
            Protocol::NumaMulticast
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
}
