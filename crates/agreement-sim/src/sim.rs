//! The discrete-event engine and the four protocols of Multikernel §5.1 (Figure 6), as
//! Atoll's kernel runs them (`kernel/src/tlb.rs`, `skb::MulticastTree`).
//!
//! Every message is an event in a queue ordered by time. A core handles one message at a
//! time, in arrival order: it starts when both the message and the core are ready, pays
//! `receive`, then pays `send` for each message it sends, one after another. The misses
//! on the broadcast line wait at the line's home in turn too. So queueing at the source,
//! at the aggregators and at the line's home comes out of the simulation, not a formula.
//!
//! The protocols, for an operation from core 0 to cores `1..n`:
//! - **Unicast**: the source sends to every participant in core order; each applies and
//!   acks; the source receives the acks one by one.
//! - **Broadcast**: the source writes one shared line (one `send`); every participant
//!   then misses on it, and the misses are served one after another by the line's home
//!   (§5.1: "each slave core then pulls the new copy from the master's cache. With N
//!   cores, the data crosses the interconnect N times"), so the k-th reader, in core
//!   order, sees it after `k * shared_line_per_reader` plus its transit. Acks by unicast.
//! - **Multicast**: one message per remote package, to its first core (the aggregator),
//!   in ascending package order, then direct messages to the source's own package (the
//!   kernel sends that branch last: it is the nearest). An aggregator applies, forwards
//!   to its package's other participants, collects their acks and acks the source once
//!   (§5.1: "the master sends a URPC message to the first core of each processor, which
//!   forwards it to the other three cores in the package").
//! - **NumaMulticast**: the same tree, remote packages most distant first (§5.1:
//!   "having the master send requests to the highest latency nodes first"). With one
//!   `transit_remote` every remote package is equally far in latency, so the SKB's
//!   tie-break decides: package distance `|p - 0|`, i.e. descending package number.
//!
//! Buffer placement, the other half of §5.1's NUMA-aware protocol ("allocating URPC
//! buffers from memory local to the multicast aggregation nodes"): in NumaMulticast every
//! message inside a remote package is a local cache transfer (`transit_local`) and only
//! source <-> aggregator messages cross the interconnect (`transit_remote`). In plain
//! Multicast the buffers are on the source's node, so each forward from an aggregator to
//! a member and each member's ack also go to remote memory: they pay an extra
//! `(transit_remote - transit_local) / 2` (half a remote trip: one side of the transfer
//! is remote) for each remote package that forwards, because all of those packages'
//! accesses go to the same memory, the source node's, at about the same time (they start
//! one send apart and do the same work), so each access waits behind one from each other
//! forwarding package. With one forwarding package that is the plain
//! `(transit_remote - transit_local) / 2`.
//!
//! Why the factor: as a flat `(transit_remote - transit_local) / 2`, the aggregators
//! absorb the penalty in their own ack queues and the two multicasts come out with the
//! same slope (at the paper's Table 2 costs, the same latency at 64 cores), which is not
//! Figure 6, where NUMA-aware is the flat curve. The factor is what grows with the number
//! of packages, which is what NUMA-local buffers remove. Why not a queue at the source
//! node's memory, like the broadcast line's: its first-come order mixes forwards and acks
//! of different packages, and an access arriving later can let a more urgent one through
//! first, so adding a core could make the operation faster (a first-come anomaly that a
//! proptest found). A fixed factor keeps the model monotone in `n`.
//! (Atoll's own channels always live in the receiver's memory, so on Atoll plain
//! multicast differs from NUMA-aware multicast in send order only; the model keeps the
//! paper's plain multicast so that it can be checked against Figure 6.)
//!
//! Send order, with one `transit_remote` for every remote package: NUMA-aware's
//! farthest-first puts the highest-numbered package first, and with the cores filled
//! package by package that is the partly filled one. The full packages then start one
//! `send` later than in plain multicast. When that send is not paid back by the buffer
//! penalty (small `transit_remote - transit_local`, as in Table 2), NumaMulticast is
//! slower than Multicast at those core counts (at Table 2's costs on 8×8: by up to one
//! `send`, 180 cycles, at 21 of the counts between 17 and 43). It is never slower when every package it uses is full,
//! or when there is at most one remote package: then the two differ by the penalty alone.
//!
//! Not modelled: the source's own flush, interconnect hop counts (one `transit_remote`
//! for every remote package), polling delays (every core is assumed to be polling), and
//! contention on the interconnect other than at the line's home and the factor above.

use crate::{Costs, Protocol, Topology};
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// The core every operation starts from.
const SOURCE: usize = 0;

/// Who sends to whom in one operation.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Plan {
    /// The source's messages, in send order (for Broadcast: every reader of the line).
    first: Vec<usize>,
    /// Each core's forwards, in send order (non-empty for aggregators only).
    children: Vec<Vec<usize>>,
    /// Whom each participant acknowledges (the source for itself).
    parent: Vec<usize>,
    /// Remote packages whose aggregator forwards (has members): how many share the source
    /// node's memory in plain Multicast.
    forwarding: usize,
}

/// The route of an operation from core 0 to cores `1..n` (`2 <= n <= topo.cores()`).
fn plan(protocol: Protocol, topo: Topology, n: usize) -> Plan {
    let mut p = Plan {
        first: Vec::new(),
        children: vec![Vec::new(); n],
        parent: vec![SOURCE; n],
        forwarding: 0,
    };
    match protocol {
        Protocol::Unicast | Protocol::Broadcast => p.first.extend(1..n),
        Protocol::Multicast | Protocol::NumaMulticast => {
            let per = topo.cores_per_package;
            let last = topo.package_of(n - 1);
            let mut remote: Vec<usize> = (1..=last).collect();
            if protocol == Protocol::NumaMulticast {
                // Most distant first: distance |p - 0| = p.
                remote.reverse();
            }
            for package in remote {
                // The package's first core aggregates (the SKB's choice too: all remote
                // cores are equally near, and ties go to the lowest core).
                let aggregator = package * per;
                p.first.push(aggregator);
                for member in aggregator + 1..((package + 1) * per).min(n) {
                    p.children[aggregator].push(member);
                    p.parent[member] = aggregator;
                }
                if !p.children[aggregator].is_empty() {
                    p.forwarding += 1;
                }
            }
            // The source's own package last, directly.
            p.first.extend(1..per.min(n));
        }
    }
    p
}

/// What a message asks of its receiver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Apply the operation (and forward it, for an aggregator).
    Request,
    /// One participant, or one aggregator's whole package, has applied it.
    Ack,
}

/// A message on its way.
#[derive(Clone, Copy, Debug)]
struct Message {
    to: usize,
    kind: Kind,
    /// Cycles it holds the broadcast line's home, if it is a read of the line (the reads
    /// are served one at a time).
    home: Option<f64>,
    /// Cycles from leaving the sender (or the home) until the receiver sees it.
    transit: f64,
}

/// Where a message is.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// Reached the line's home, waits to be served.
    AtHome(Message),
    /// Visible to its receiver.
    Arrived(Message),
}

/// A step at a time; `seq` keeps equal times in the order they were scheduled.
#[derive(Clone, Copy, Debug)]
struct Event {
    time: f64,
    seq: u64,
    step: Step,
}

impl PartialEq for Event {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Event {
    /// Reversed, so that `BinaryHeap` (a max-heap) pops the earliest event first.
    fn cmp(&self, other: &Self) -> Ordering {
        other.time.total_cmp(&self.time).then(other.seq.cmp(&self.seq))
    }
}

/// The simulation's state.
struct Sim<'a> {
    protocol: Protocol,
    topo: Topology,
    costs: &'a Costs,
    plan: Plan,
    queue: BinaryHeap<Event>,
    seq: u64,
    /// When each core is next free.
    busy_until: Vec<f64>,
    /// Acks each core still waits for (the source, and aggregators).
    pending: Vec<usize>,
    /// When the broadcast line's home is next free.
    home_free: f64,
    /// When the source received the last ack.
    done: Option<f64>,
}

impl Sim<'_> {
    fn push(&mut self, time: f64, step: Step) {
        self.queue.push(Event { time, seq: self.seq, step });
        self.seq += 1;
    }

    /// The message `from -> to` of `kind`, with its transit and home for this protocol.
    fn message(&self, from: usize, to: usize, kind: Kind) -> Message {
        let c = self.costs;
        let same = self.topo.package_of(from) == self.topo.package_of(to);
        let mut transit = if same { c.transit_local } else { c.transit_remote };
        let mut home = None;
        match self.protocol {
            // Every reader's miss on the one line is served by its home in turn (§5.1).
            Protocol::Broadcast if kind == Kind::Request => home = Some(c.shared_line_per_reader),
            // Forwarding buffers on the source's node (see the file comment): a message
            // inside a remote package goes to that memory, shared by every forwarding
            // package.
            Protocol::Multicast if same && from != SOURCE && to != SOURCE => {
                let penalty = ((c.transit_remote - c.transit_local) / 2.0).max(0.0);
                transit += penalty * self.plan.forwarding as f64;
            }
            _ => {}
        }
        Message { to, kind, home, transit }
    }

    /// Sends `from -> to` once the sender has paid for it at `time`.
    fn send(&mut self, time: f64, from: usize, to: usize, kind: Kind) {
        let m = self.message(from, to, kind);
        match m.home {
            Some(_) => self.push(time, Step::AtHome(m)),
            None => self.push(time + m.transit, Step::Arrived(m)),
        }
    }

    /// The source starts at time 0.
    fn start(&mut self) {
        let first = self.plan.first.clone();
        let mut t = 0.0;
        if self.protocol == Protocol::Broadcast {
            // One write of the line; every reader then fetches it.
            t += self.costs.send;
            for &to in &first {
                self.send(t, SOURCE, to, Kind::Request);
            }
        } else {
            for &to in &first {
                t += self.costs.send;
                self.send(t, SOURCE, to, Kind::Request);
            }
        }
        self.busy_until[SOURCE] = t;
        self.pending[SOURCE] = first.len();
    }

    /// Core `m.to` handles `m`, which it could see from `time` on.
    fn handle(&mut self, time: f64, m: Message) {
        let core = m.to;
        let mut t = time.max(self.busy_until[core]) + self.costs.receive;
        match m.kind {
            Kind::Request => {
                let children = std::mem::take(&mut self.plan.children[core]);
                if children.is_empty() {
                    t += self.costs.send;
                    self.send(t, core, self.plan.parent[core], Kind::Ack);
                } else {
                    self.pending[core] = children.len();
                    for &to in &children {
                        t += self.costs.send;
                        self.send(t, core, to, Kind::Request);
                    }
                }
            }
            Kind::Ack => {
                self.pending[core] = self.pending[core].saturating_sub(1);
                if self.pending[core] == 0 {
                    if core == SOURCE {
                        self.done = Some(t);
                    } else {
                        t += self.costs.send;
                        self.send(t, core, self.plan.parent[core], Kind::Ack);
                    }
                }
            }
        }
        self.busy_until[core] = t;
    }
}

/// Latency of one operation from core 0 to cores `1..n` (see [`crate::predict`]);
/// `costs` are already sanitized (finite, non-negative).
pub(crate) fn run(protocol: Protocol, topo: Topology, n: usize, costs: &Costs) -> f64 {
    let n = n.min(topo.cores());
    if n < 2 {
        return 0.0;
    }
    let mut sim = Sim {
        protocol,
        topo,
        costs,
        plan: plan(protocol, topo, n),
        queue: BinaryHeap::new(),
        seq: 0,
        busy_until: vec![0.0; n],
        pending: vec![0; n],
        home_free: 0.0,
        done: None,
    };
    sim.start();
    while let Some(e) = sim.queue.pop() {
        match e.step {
            Step::AtHome(m) => {
                let served = e.time.max(sim.home_free) + m.home.unwrap_or(0.0);
                sim.home_free = served;
                sim.push(served + m.transit, Step::Arrived(m));
            }
            Step::Arrived(m) => sim.handle(e.time, m),
        }
    }
    // Every participant acks exactly once up a tree rooted at the source, so the source's
    // last ack always comes; 0 would only mean the plan lost a participant.
    debug_assert!(sim.done.is_some());
    sim.done.unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOPO: Topology = Topology { packages: 3, cores_per_package: 4 };

    fn costs(send: f64, tl: f64, tr: f64, receive: f64, shared: f64) -> Costs {
        Costs {
            send,
            transit_local: tl,
            transit_remote: tr,
            receive,
            shared_line_per_reader: shared,
        }
    }

    #[test]
    fn multicast_plans_one_message_per_remote_package_then_the_local_cores() {
        let p = plan(Protocol::Multicast, TOPO, 10);
        assert_eq!(p.first, vec![4, 8, 1, 2, 3]);
        assert_eq!(p.children[4], vec![5, 6, 7]);
        assert_eq!(p.children[8], vec![9]);
        assert_eq!(p.parent[9], 8);
        assert_eq!(p.parent[3], SOURCE);
        let numa = plan(Protocol::NumaMulticast, TOPO, 10);
        assert_eq!(numa.first, vec![8, 4, 1, 2, 3]);
        assert_eq!(numa.children, p.children);
        assert_eq!(plan(Protocol::Unicast, TOPO, 10).first, (1..10).collect::<Vec<_>>());
    }

    #[test]
    fn unicast_to_one_core_is_one_round_trip() {
        let c = costs(10.0, 100.0, 1000.0, 20.0, 0.0);
        let local = run(Protocol::Unicast, TOPO, 2, &c);
        assert_eq!(local, 2.0 * (10.0 + 100.0 + 20.0));
        let remote = Topology { packages: 2, cores_per_package: 1 };
        assert_eq!(run(Protocol::Unicast, remote, 2, &c), 2.0 * (10.0 + 1000.0 + 20.0));
    }

    #[test]
    fn the_source_receives_acks_one_at_a_time() {
        // Sends are free and transit is zero: every ack arrives at once after the
        // participants' receive; the source then takes `receive` for each in turn.
        let c = costs(0.0, 0.0, 0.0, 10.0, 0.0);
        let t = Topology { packages: 1, cores_per_package: 5 };
        assert_eq!(run(Protocol::Unicast, t, 5, &c), 10.0 + 4.0 * 10.0);
    }

    #[test]
    fn broadcast_readers_are_served_one_after_another() {
        // The k-th reader sees the line at send + k * shared + transit; with receives free
        // only the last reader's ack (send + transit) matters.
        let c = costs(5.0, 1.0, 0.0, 0.0, 7.0);
        let t = Topology { packages: 1, cores_per_package: 4 };
        assert_eq!(run(Protocol::Broadcast, t, 4, &c), 5.0 + 3.0 * 7.0 + 1.0 + 5.0 + 1.0);
    }

    #[test]
    fn plain_multicast_pays_half_a_remote_trip_per_forwarding_package_inside_a_package() {
        let c = costs(0.0, 10.0, 110.0, 0.0, 0.0);
        let t = Topology { packages: 3, cores_per_package: 2 };
        // 0 -> 2 (remote), 2 -> 3 (local + 50), 3 -> 2 (local + 50), 2 -> 0 (remote).
        assert_eq!(run(Protocol::Multicast, t, 4, &c), 110.0 + 60.0 + 60.0 + 110.0);
        assert_eq!(run(Protocol::NumaMulticast, t, 4, &c), 110.0 + 10.0 + 10.0 + 110.0);
        // Core 4 alone in package 2 forwards nothing: still one forwarding package.
        assert_eq!(run(Protocol::Multicast, t, 5, &c), 110.0 + 60.0 + 60.0 + 110.0);
        // Packages 1 and 2 both forward: twice the penalty.
        assert_eq!(run(Protocol::Multicast, t, 6, &c), 110.0 + 110.0 + 110.0 + 110.0);
        assert_eq!(plan(Protocol::Multicast, t, 6).forwarding, 2);
    }

    #[test]
    fn events_pop_earliest_first_and_in_schedule_order_on_ties() {
        let m = Message { to: 1, kind: Kind::Ack, home: None, transit: 0.0 };
        let mut q = BinaryHeap::new();
        for (time, seq) in [(3.0, 0), (1.0, 1), (1.0, 2), (2.0, 3)] {
            q.push(Event { time, seq, step: Step::Arrived(m) });
        }
        let order: Vec<u64> = std::iter::from_fn(|| q.pop()).map(|e| e.seq).collect();
        assert_eq!(order, vec![1, 2, 3, 0]);
    }
}
