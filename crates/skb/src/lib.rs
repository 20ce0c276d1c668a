//! The system knowledge base (SKB, Multikernel §4.9 "Knowledge and policy engine"): where
//! each core sits and what the boot code measured (URPC latency per ordered core pair,
//! compute speed per core, IPI cost). Queries turn those facts into policy: how long an
//! idle core polls (§5.2) and the multicast tree for a message to every core (§5.1).
//!
//! Indices are the kernel's core numbers `0..cores()`, in the order given to [`Skb::new`].
//! Nothing here panics on input: setters ignore out-of-range cores, getters return `None`.
#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

extern crate alloc;

mod protocol;
mod render;
mod tree;

use alloc::vec;
use alloc::vec::Vec;

pub use protocol::Protocol;
pub use render::RENDER_HEADER_LINES;
pub use tree::{Aggregation, MulticastTree};

/// IPI wake-up cost assumed until one is measured: the paper's C "around 6000 cycles"
/// for Barrelfish on its hardware (Multikernel §5.2, "The cost of polling").
pub const DEFAULT_IPI_COST_CYCLES: u64 = 6000;

/// Where a core sits (filled by the kernel from CPUID/ACPI).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoreInfo {
    /// Local APIC id (the IPI destination).
    pub apic_id: u32,
    /// Package (socket); cores of one package share a last-level cache.
    pub package: u32,
    /// Core within the package.
    pub core: u32,
    /// Hardware thread within the core.
    pub smt: u32,
    /// NUMA node (ACPI SRAT proximity domain).
    pub node: u32,
}

/// The system knowledge base (Multikernel §4.9): topology and measured costs.
///
/// Everything measured starts unmeasured (`None`) and is filled by the boot code.
#[derive(Clone, Debug)]
pub struct Skb {
    /// Topology, one entry per core.
    cores: Vec<CoreInfo>,
    /// One-way latency in TSC cycles, row = sender, column = receiver (`n * n`).
    latency: Vec<Option<u64>>,
    /// Work units per millisecond, per core.
    speed: Vec<Option<u64>>,
    /// Cycles to wake a halted core with an IPI.
    ipi_cost: Option<u64>,
    /// Measured one-phase shootdowns within one package: (protocol, participants,
    /// cycles), at most one per protocol and size ([`Skb::set_shootdown_cost`]).
    shootdown_costs: Vec<(protocol::Protocol, usize, u64)>,
    /// The last-level cache, from CPUID or measured (AMPS §2.4.2: the RSS policy's bound).
    llc: Option<caches::LastLevel>,
}

impl Skb {
    /// A knowledge base for `cores` (index = kernel core number), nothing measured yet.
    pub fn new(cores: Vec<CoreInfo>) -> Self {
        let n = cores.len();
        Skb {
            cores,
            latency: vec![None; n * n],
            speed: vec![None; n],
            ipi_cost: None,
            shootdown_costs: Vec::new(),
            llc: None,
        }
    }

    /// Records the last-level cache, as CPUID describes it or a pointer chase measured it.
    pub fn set_last_level_cache(&mut self, llc: caches::LastLevel) {
        self.llc = Some(llc);
    }

    /// The last-level cache (AMPS §2.4.2: a running thread whose resident set on its node
    /// exceeds it is costly to move off that node), if known.
    pub fn last_level_cache(&self) -> Option<caches::LastLevel> {
        self.llc
    }

    /// Number of cores.
    pub fn cores(&self) -> usize {
        self.cores.len()
    }

    /// Topology of core `i`, or `None` if there is no such core.
    pub fn core(&self, i: usize) -> Option<&CoreInfo> {
        self.cores.get(i)
    }

    /// Index of the `(from, to)` entry of the latency matrix, if both cores exist and
    /// differ (a core does not message itself, so the diagonal is never stored).
    fn pair(&self, from: usize, to: usize) -> Option<usize> {
        let n = self.cores.len();
        if from < n && to < n && from != to {
            Some(from * n + to)
        } else {
            None
        }
    }

    /// One-way URPC latency from `from` to `to` in TSC cycles (median of round trips / 2),
    /// as measured. Ignored when either core does not exist or `from == to`.
    pub fn set_latency(&mut self, from: usize, to: usize, cycles: u64) {
        if let Some(k) = self.pair(from, to) {
            self.latency[k] = Some(cycles);
        }
    }

    /// Measured one-way latency from `from` to `to` in TSC cycles; `None` when unmeasured,
    /// when a core does not exist, and always on the diagonal (`from == to`).
    pub fn latency(&self, from: usize, to: usize) -> Option<u64> {
        self.pair(from, to).and_then(|k| self.latency[k])
    }

    /// Compute speed of a core: units of fixed work per millisecond (the AMPS "computing
    /// power" before scaling). Ignored for a core that does not exist.
    pub fn set_compute_speed(&mut self, core: usize, work_per_ms: u64) {
        if let Some(s) = self.speed.get_mut(core) {
            *s = Some(work_per_ms);
        }
    }

    /// Measured compute speed of `core` in work units per millisecond, if any.
    pub fn compute_speed(&self, core: usize) -> Option<u64> {
        self.speed.get(core).copied().flatten()
    }

    /// Cost of waking a halted core with an IPI, in TSC cycles (C of Multikernel §5.2).
    pub fn set_ipi_cost(&mut self, cycles: u64) {
        self.ipi_cost = Some(cycles);
    }

    /// Measured IPI wake-up cost in TSC cycles, if any.
    pub fn ipi_cost(&self) -> Option<u64> {
        self.ipi_cost
    }

    /// How long an idle core polls its channels before halting, in TSC cycles.
    ///
    /// Multikernel §5.2: polling for P cycles and then paying C for an IPI costs at most
    /// `P + C` per message; with no knowledge of arrival times P = C bounds the overhead
    /// at 2C and the added latency at C (2-competitive). So this is the measured IPI cost,
    /// or [`DEFAULT_IPI_COST_CYCLES`] while unmeasured.
    pub fn poll_budget_cycles(&self) -> u64 {
        self.ipi_cost.unwrap_or(DEFAULT_IPI_COST_CYCLES)
    }

    /// The distinct package numbers, ascending.
    pub fn packages(&self) -> Vec<u32> {
        let mut ps: Vec<u32> = self.cores.iter().map(|c| c.package).collect();
        ps.sort_unstable();
        ps.dedup();
        ps
    }

    /// The other cores of `core`'s package, ascending (empty for a core it does not know).
    pub fn package_mates(&self, core: usize) -> Vec<usize> {
        self.core(core).map_or(Vec::new(), |c| {
            let mut mates = self.cores_in_package(c.package);
            mates.retain(|&m| m != core);
            mates
        })
    }

    /// The cores of package `p`, ascending (empty if there is no such package).
    pub fn cores_in_package(&self, p: u32) -> Vec<usize> {
        let mut out = Vec::new();
        for (i, c) in self.cores.iter().enumerate() {
            if c.package == p {
                out.push(i);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` cores in one package, one per physical core.
    fn flat(n: u32) -> Skb {
        let cores =
            (0..n).map(|i| CoreInfo { apic_id: i, package: 0, core: i, smt: 0, node: 0 }).collect();
        Skb::new(cores)
    }

    #[test]
    fn starts_unmeasured() {
        let s = flat(3);
        assert_eq!(s.cores(), 3);
        assert_eq!(s.core(2).map(|c| c.apic_id), Some(2));
        assert_eq!(s.core(3), None);
        assert_eq!(s.latency(0, 1), None);
        assert_eq!(s.compute_speed(0), None);
        assert_eq!(s.ipi_cost(), None);
    }

    #[test]
    fn latency_is_per_ordered_pair() {
        let mut s = flat(3);
        s.set_latency(0, 1, 500);
        s.set_latency(1, 0, 700);
        assert_eq!(s.latency(0, 1), Some(500));
        assert_eq!(s.latency(1, 0), Some(700));
        assert_eq!(s.latency(0, 2), None);
    }

    #[test]
    fn bad_indices_and_diagonal_are_ignored() {
        let mut s = flat(2);
        s.set_latency(0, 0, 5);
        s.set_latency(0, 2, 5);
        s.set_latency(9, 1, 5);
        s.set_compute_speed(2, 100);
        assert_eq!(s.latency(0, 0), None);
        assert_eq!(s.latency(0, 2), None);
        assert_eq!(s.latency(9, 1), None);
        assert_eq!(s.compute_speed(2), None);
        assert!(s.latency.iter().all(|l| l.is_none()));
    }

    #[test]
    fn compute_speed_per_core() {
        let mut s = flat(2);
        s.set_compute_speed(1, 12_345);
        assert_eq!(s.compute_speed(0), None);
        assert_eq!(s.compute_speed(1), Some(12_345));
    }

    #[test]
    fn poll_budget_default_then_measured() {
        let mut s = flat(2);
        assert_eq!(s.poll_budget_cycles(), DEFAULT_IPI_COST_CYCLES);
        assert_eq!(s.poll_budget_cycles(), 6000);
        s.set_ipi_cost(4321);
        assert_eq!(s.ipi_cost(), Some(4321));
        assert_eq!(s.poll_budget_cycles(), 4321);
    }

    #[test]
    fn packages_and_their_cores() {
        let pk = [3, 1, 3, 0, 1];
        let cores = pk
            .iter()
            .enumerate()
            .map(|(i, &p)| CoreInfo { apic_id: i as u32, package: p, core: 0, smt: 0, node: p })
            .collect();
        let s = Skb::new(cores);
        assert_eq!(s.packages(), vec![0, 1, 3]);
        assert_eq!(s.cores_in_package(3), vec![0, 2]);
        assert_eq!(s.cores_in_package(1), vec![1, 4]);
        assert_eq!(s.cores_in_package(2), Vec::<usize>::new());
        assert_eq!(s.package_mates(2), vec![0]);
        assert_eq!(s.package_mates(3), Vec::<usize>::new());
        assert_eq!(s.package_mates(99), Vec::<usize>::new());
    }

    #[test]
    fn no_cores() {
        let s = Skb::new(Vec::new());
        assert_eq!(s.cores(), 0);
        assert!(s.packages().is_empty());
        assert_eq!(s.latency(0, 0), None);
    }
}
