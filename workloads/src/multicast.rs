//! Multikernel Figure 6 (§5.1): the latency of a message to every core and the collection
//! of all their acknowledgements, by protocol, against the number of cores k. The source
//! is core 0; for k = 2 ..= cores the first k cores take part, a thread pinned on each.
//!
//! - **broadcast**: the source writes the round into one shared cache line that every
//!   target polls; each target acks on a URPC channel of its own back to the source.
//! - **unicast**: the source sends on a URPC channel to each target in turn, then collects
//!   each target's ack on the channel back.
//! - **multicast**: the SKB's tree (`skb::Skb::multicast_tree`, the kernel's own query) over
//!   the packages the platform reports for the k cores: the source sends one message per
//!   other package, most distant first, to that package's aggregator, which forwards it to
//!   the rest of its package and acks once it has all their acks; the cores of the
//!   source's own package get the message directly. With one package the tree is flat,
//!   and multicast sends what unicast sends.
//!
//! Every channel is a `urpc` channel in `Shared` memory, one each way between a core and
//! the core that sends to it. The source times each round from its first send to its last
//! ack; the result is the median over rounds, the method of the kernel's `bench multicast`
//! (`kernel/src/bench.rs`, which uses the monitor's channels and prints `impl` `kernel`).
//! A first unicast pass to one core is not reported (warm caches and translations).

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};

use skb::{CoreInfo, Skb};
use urpc::{ChannelMemory, Receiver, Sender, PAYLOAD_WORDS};

use crate::memory::{alloc_slice, CacheLine, Placement, SpinBarrier};
use crate::pingpong::QUEUE;
use crate::result::{self, median};
use crate::Platform;

/// Rounds per protocol and core count when none are asked for (the kernel's default).
pub const DEFAULT_ROUNDS: usize = 50;

/// Tag of a request down the tree.
const REQUEST: u32 = 1;
/// Tag of an acknowledgement up the tree.
const ACK: u32 = 2;

/// How the source reaches every core.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// One shared line every target polls; acks by message.
    Broadcast,
    /// A message to each target on its own channel.
    Unicast,
    /// One message per package to an aggregator, which forwards within its package.
    Multicast,
}

impl Protocol {
    /// Every protocol, in the order the kernel's `bench multicast` measures them.
    pub const ALL: [Protocol; 3] = [Protocol::Unicast, Protocol::Multicast, Protocol::Broadcast];

    /// The `protocol` of the result lines.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Broadcast => "broadcast",
            Protocol::Unicast => "unicast",
            Protocol::Multicast => "multicast",
        }
    }
}

/// Who sends to whom in one round: core `c` forwards the round's message to each of
/// `children[c]` in order, then waits for each one's ack. Core 0 is the source; every
/// other core has exactly one parent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tree {
    /// The cores each core sends to, indexed by core.
    pub children: Vec<Vec<usize>>,
}

impl Tree {
    /// Unicast to `k` cores: the source sends to every other core itself.
    pub fn unicast(k: usize) -> Tree {
        let mut children = vec![Vec::new(); k.max(1)];
        children[0] = (1..k).collect();
        Tree { children }
    }

    /// The SKB's multicast tree from core 0 over cores `0..packages.len()`, core `c` in
    /// package `packages[c]`. No latencies are known here, so each package's aggregator
    /// is its lowest-numbered core and remote packages go most distant first by package
    /// number (see `skb::MulticastTree`).
    pub fn multicast(packages: &[u32]) -> Tree {
        let infos = packages
            .iter()
            .enumerate()
            .map(|(i, &package)| CoreInfo {
                apic_id: i as u32,
                package,
                core: i as u32,
                smt: 0,
                node: 0,
            })
            .collect();
        let skb_tree = Skb::new(infos).multicast_tree(0);
        let mut children = vec![Vec::new(); packages.len().max(1)];
        for branch in skb_tree.aggregators {
            if branch.core == 0 {
                children[0].extend_from_slice(&branch.members);
            } else {
                children[0].push(branch.core);
                children[branch.core] = branch.members;
            }
        }
        Tree { children }
    }

    /// The core that sends to `core`, if any.
    pub fn parent(&self, core: usize) -> Option<usize> {
        self.children.iter().position(|c| c.contains(&core))
    }

    /// Messages the source itself sends per round.
    pub fn fan_out(&self) -> usize {
        self.children[0].len()
    }
}

/// The package of each of the first `k` cores (0 where the platform does not say).
pub fn packages_of<P: Platform + ?Sized>(p: &P, k: usize) -> Vec<u32> {
    (0..k).map(|c| p.package(c).unwrap_or(0)).collect()
}

/// How many distinct packages `packages` names.
pub fn package_count(packages: &[u32]) -> usize {
    let mut distinct = packages.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    distinct.len()
}

/// The median latency in cycles of `rounds` rounds of `protocol` from core 0 to cores
/// `1..k` and back.
pub fn measure<P: Platform + ?Sized>(
    p: &P,
    k: usize,
    protocol: Protocol,
    rounds: usize,
) -> Result<u64, String> {
    if k < 2 || k > p.cores() {
        return Err(format!("{k} cores do not fit the {} there are", p.cores()));
    }
    let rounds = rounds.max(1);
    let tree = match protocol {
        Protocol::Multicast => Tree::multicast(&packages_of(p, k)),
        Protocol::Unicast | Protocol::Broadcast => Tree::unicast(k),
    };
    // down[c]: from c's parent to c; up[c]: from c back to its parent.
    let down = alloc_slice::<ChannelMemory<QUEUE>, P>(p, k, Placement::Shared)?;
    let up = alloc_slice::<ChannelMemory<QUEUE>, P>(p, k, Placement::Shared)?;
    let line = alloc_slice::<CacheLine, P>(p, 1, Placement::Shared)?;
    let barrier = alloc_slice::<SpinBarrier, P>(p, 1, Placement::Shared)?;
    let samples: Vec<AtomicU64> = (0..rounds).map(|_| AtomicU64::new(0)).collect();
    // The first round a message arrived carrying the wrong round number (u64::MAX: none).
    let wrong = AtomicU64::new(u64::MAX);
    let receive = |rx: &mut Receiver<'_, QUEUE>, round: u64| {
        let msg = loop {
            if let Some(m) = rx.try_recv() {
                break m;
            }
        };
        if msg.payload[0] != round {
            let _ = wrong.compare_exchange(u64::MAX, round, Ordering::Relaxed, Ordering::Relaxed);
        }
    };
    let send = |tx: &mut Sender<'_, QUEUE>, tag: u32, round: u64| {
        while tx.try_send(tag, &[round; PAYLOAD_WORDS]).is_err() {}
    };

    // Unicast and multicast: every core runs the same loop over its place in the tree.
    let node = |c: usize| {
        let mut from_parent = (c != 0).then(|| Receiver::new(&down[c]));
        let mut to_parent = (c != 0).then(|| Sender::new(&up[c]));
        let kids = &tree.children[c];
        let mut to_kids: Vec<_> = kids.iter().map(|&d| Sender::new(&down[d])).collect();
        let mut from_kids: Vec<_> = kids.iter().map(|&d| Receiver::new(&up[d])).collect();
        barrier[0].wait(k);
        for (i, sample) in samples.iter().enumerate() {
            let round = i as u64 + 1;
            let start = p.cycles();
            if let Some(rx) = from_parent.as_mut() {
                receive(rx, round);
            }
            for tx in to_kids.iter_mut() {
                send(tx, REQUEST, round);
            }
            for rx in from_kids.iter_mut() {
                receive(rx, round);
            }
            match to_parent.as_mut() {
                Some(tx) => send(tx, ACK, round),
                None => sample.store(p.cycles() - start, Ordering::Relaxed),
            }
        }
    };
    // Broadcast: the source writes the line; every target polls it and acks.
    let broadcast = |c: usize| {
        if c == 0 {
            let mut acks: Vec<_> = (1..k).map(|d| Receiver::new(&up[d])).collect();
            barrier[0].wait(k);
            for (i, sample) in samples.iter().enumerate() {
                let round = i as u64 + 1;
                let start = p.cycles();
                line[0].0.store(round, Ordering::Release);
                for rx in acks.iter_mut() {
                    receive(rx, round);
                }
                sample.store(p.cycles() - start, Ordering::Relaxed);
            }
        } else {
            let mut ack = Sender::new(&up[c]);
            barrier[0].wait(k);
            for round in 1..=rounds as u64 {
                while line[0].0.load(Ordering::Acquire) < round {}
                send(&mut ack, ACK, round);
            }
        }
    };
    let cores: Vec<usize> = (0..k).collect();
    match protocol {
        Protocol::Broadcast => p.run_on(&cores, &broadcast)?,
        Protocol::Unicast | Protocol::Multicast => p.run_on(&cores, &node)?,
    }
    let round = wrong.load(Ordering::Relaxed);
    if round != u64::MAX {
        return Err(format!("{}: a message of round {round} carried another", protocol.name()));
    }
    let mut cycles: Vec<u64> = samples.iter().map(|s| s.load(Ordering::Relaxed)).collect();
    Ok(median(&mut cycles).unwrap_or(0))
}

/// Every protocol at k = 2 ..= cores, as `"experiment":"multicast"` result lines (`cores`
/// is k, as in the kernel's lines; `packages` is how many packages the k cores span).
pub fn run<P: Platform + ?Sized>(p: &P, rounds: usize) -> Result<Vec<String>, String> {
    if p.cores() < 2 {
        return Err("needs 2 cores".into());
    }
    // One unreported pass warms caches and an emulator's translations (as `shm` does).
    measure(p, 2, Protocol::Unicast, rounds)?;
    let mut lines = Vec::new();
    for k in 2..=p.cores() {
        let packages = package_count(&packages_of(p, k));
        for protocol in Protocol::ALL {
            let cycles = measure(p, k, protocol, rounds)?;
            let extra = format!(",\"protocol\":\"{}\",\"packages\":{packages}", protocol.name());
            lines.push(result::line(
                p.system(),
                "multicast",
                k,
                "latency_cycles",
                cycles,
                "cycles",
                &extra,
            ));
        }
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unicast_sends_everything_from_the_source() {
        let t = Tree::unicast(4);
        assert_eq!(t.children, vec![vec![1, 2, 3], vec![], vec![], vec![]]);
        assert_eq!(t.parent(3), Some(0));
        assert_eq!(t.parent(0), None);
    }

    #[test]
    fn one_package_gives_the_flat_tree_unicast_has() {
        assert_eq!(Tree::multicast(&[0, 0, 0, 0]), Tree::unicast(4));
        assert_eq!(Tree::multicast(&[7, 7]), Tree::unicast(2));
    }

    #[test]
    fn two_packages_give_an_aggregator_for_the_other_one() {
        // 4 cores in 2 packages (QEMU -smp 4,sockets=2): the source sends to core 2, which
        // forwards to 3, and to its own neighbour 1 directly.
        let t = Tree::multicast(&[0, 0, 1, 1]);
        assert_eq!(t.children, vec![vec![2, 1], vec![], vec![3], vec![]]);
        assert_eq!(t.parent(3), Some(2));
        assert_eq!(t.fan_out(), 2);
        // Cut to 3 cores, the other package has only its aggregator.
        assert_eq!(Tree::multicast(&[0, 0, 1]).children, vec![vec![2, 1], vec![], vec![]]);
    }

    #[test]
    fn four_packages_send_most_distant_first() {
        // 8 cores in 4 packages of 2: one message per package, farthest package first.
        let t = Tree::multicast(&[0, 0, 1, 1, 2, 2, 3, 3]);
        assert_eq!(t.children[0], vec![6, 4, 2, 1]);
        assert_eq!((t.children[6].as_slice(), t.children[4].as_slice()), (&[7][..], &[5][..]));
        assert_eq!(t.children[2], vec![3]);
    }

    #[test]
    fn interleaved_packages_still_group_by_package() {
        // Linux may number the CPUs of two packages alternately.
        let t = Tree::multicast(&[0, 1, 0, 1, 0, 1]);
        assert_eq!(t.children[0], vec![1, 2, 4]);
        assert_eq!(t.children[1], vec![3, 5]);
    }

    #[test]
    fn every_core_but_the_source_has_one_parent() {
        for packages in [&[0u32, 0, 1, 1, 2, 2, 2][..], &[3, 1, 4, 1, 5], &[0, 9]] {
            let t = Tree::multicast(packages);
            assert_eq!(t.parent(0), None);
            for c in 1..packages.len() {
                let parents = t.children.iter().filter(|kids| kids.contains(&c)).count();
                assert_eq!(parents, 1, "{packages:?} core {c}");
                let parent = t.parent(c).unwrap();
                assert!(parent == 0 || packages[parent] == packages[c], "{packages:?} {c}");
            }
        }
    }

    #[test]
    fn packages_are_counted_once_each() {
        assert_eq!(package_count(&[0, 0, 1, 1]), 2);
        assert_eq!(package_count(&[5]), 1);
        assert_eq!(package_count(&[]), 0);
    }
}

/// The protocols run end to end on host threads that pretend to be cores in packages.
#[cfg(all(test, feature = "linux"))]
mod threads {
    use super::*;
    use crate::linux::Linux;
    use crate::Region;

    /// `cores` unpinned threads, core `c` in package `c / per_package`; memory from Linux.
    struct Packages {
        cores: usize,
        per_package: usize,
        linux: Linux,
    }

    impl Platform for Packages {
        fn system(&self) -> &'static str {
            "test"
        }
        fn cores(&self) -> usize {
            self.cores
        }
        fn cycles(&self) -> u64 {
            crate::linux::tsc()
        }
        fn null_call(&self) {}
        fn package(&self, core: usize) -> Option<u32> {
            Some((core / self.per_package) as u32)
        }
        fn run_on(&self, cores: &[usize], work: &(dyn Fn(usize) + Sync)) -> Result<(), String> {
            std::thread::scope(|s| {
                for &c in cores {
                    s.spawn(move || work(c));
                }
            });
            Ok(())
        }
        fn alloc(&self, bytes: usize, _: Placement) -> Result<Region, String> {
            // Shared memory needs no first touch on a core the host may not have.
            self.linux.alloc(bytes, Placement::Shared)
        }
    }

    #[test]
    fn every_protocol_reaches_four_cores_in_two_packages() {
        let p = Packages { cores: 4, per_package: 2, linux: Linux::new() };
        let lines = run(&p, 3).unwrap();
        assert_eq!(lines.len(), 3 * 3);
        for protocol in ["unicast", "multicast", "broadcast"] {
            let at4 = lines
                .iter()
                .find(|l| l.contains("\"cores\":4") && l.contains(&format!("\"{protocol}\"")))
                .unwrap();
            assert!(at4.contains("\"packages\":2") && at4.contains("\"system\":\"test\""));
            assert!(!at4.contains("\"value\":0,"), "{at4}");
        }
        assert!(lines.iter().any(|l| l.contains("\"cores\":2") && l.contains("\"packages\":1")));
        assert!(measure(&p, 5, Protocol::Unicast, 1).is_err());
        assert!(measure(&p, 1, Protocol::Unicast, 1).is_err());
    }
}
