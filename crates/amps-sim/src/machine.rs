//! The simulated machine (cores and their speeds) and the kernel's scheduler tunables.

use sched::power::PAPER_S;
use sched::Power;

/// A full-speed core, in the thousandths every speed is kept in.
pub const FULL: u64 = 1000;

/// Cores and their speeds, in thousandths of a full-speed core.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Machine {
    /// Speed of each core (`FULL` = 1000 is full speed; 500 a core at 50 % duty).
    pub speeds: Vec<u64>,
}

impl Machine {
    /// The paper's configuration (§4.1): "three fourths of the total cores run at 50 % of
    /// their full duty cycles", the fast ones first (8 cores: 2 fast and 6 slow, §4.2,
    /// Figure 5). Fewer than four cores keep one fast core (2 cores: core 1 at 50 %, as the
    /// M7 runs, `asym=1:50`).
    pub fn paper(cores: usize) -> Machine {
        let fast = (cores / 4).max(1).min(cores);
        let speeds = (0..cores).map(|c| if c < fast { FULL } else { FULL / 2 }).collect();
        Machine { speeds }
    }

    /// `cores` cores at full speed.
    pub fn uniform(cores: usize) -> Machine {
        Machine { speeds: vec![FULL; cores] }
    }

    /// How many cores.
    pub fn cores(&self) -> usize {
        self.speeds.len()
    }

    /// The scaled powers the kernel gives these cores: `Power::from_frequencies` with the
    /// paper's `S = 0.85` (§3) over the measured speed ratio, rounded to eighths
    /// (`kernel/src/sched/mod.rs`, `Scheduler::new`). A core twice as fast gets 1.75.
    pub fn powers(&self) -> Vec<Power> {
        Power::from_frequencies(&self.speeds, PAPER_S).into_iter().map(Power::quantized).collect()
    }

    /// A short name: `1x100+1x50` (counts of each speed in percent, fastest first).
    pub fn name(&self) -> String {
        let mut groups: Vec<(u64, usize)> = Vec::new();
        for &s in &self.speeds {
            match groups.iter_mut().find(|(g, _)| *g == s) {
                Some((_, n)) => *n += 1,
                None => groups.push((s, 1)),
            }
        }
        groups.sort_by_key(|g| std::cmp::Reverse(g.0));
        let parts: Vec<String> =
            groups.iter().map(|(s, n)| format!("{n}x{}", s * 100 / FULL)).collect();
        parts.join("+")
    }
}

/// The kernel's scheduler tunables (`kernel/src/param.rs`) and the costs the simulation
/// charges, all in TSC cycles or ticks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Params {
    /// The tick rate (`hz=` on the kernel command line; the M7 runs used the guest's 250).
    pub hz: u64,
    /// TSC cycles per second (the M7 guests read 2605 MHz).
    pub tsc_hz: u64,
    /// `REPORT_EVERY_TICKS`: ticks between a busy core's unprompted load reports.
    pub report_every_ticks: u64,
    /// `BALANCE_EVERY_TICKS`: ticks between a busy core's balancing passes.
    pub balance_every_ticks: u64,
    /// `PULL_PATIENCE_TICKS`: ticks a puller waits before it pulls again.
    pub pull_patience_ticks: u64,
    /// Ticks per time slice (the kernel's run queues use 1).
    pub slice_ticks: u32,
    /// Cycles from a thread leaving its core to its arrival at the other (`thread_migrate`
    /// measured about 54k under TCG, docs/bench.md).
    pub migration_cycles: u64,
    /// TSC cycles of one work unit at full speed ([`crate::workload::CYCLES_PER_UNIT`]
    /// as the M7 run measured it; TCG's speed varies from boot to boot).
    pub unit_cycles: u64,
    /// One message's latency between cores (a load report, a pull, a wake).
    pub message_cycles: u64,
    /// A switch to another thread (`thread_switch`: about 7.5k under TCG).
    pub switch_cycles: u64,
    /// The creator's time per `thread_create` (create + join measured 0.42M).
    pub create_cycles: u64,
    /// The simulation's time step (resolution).
    pub step_cycles: u64,
    /// Every core's load table holds every core's true length whenever it decides (no
    /// staleness): not the kernel, a bound on what fresher reports could give.
    pub oracle_table: bool,
    /// A pull's answer (the thread's arrival, or `NoneToGive`) ends the puller's patience:
    /// not the kernel today (its patience always runs out in full), a candidate change.
    pub answer_ends_patience: bool,
    /// A core reports its load whenever its length changes, also from the wake-up path (a
    /// barrier's last thread readying the others here): not the kernel (it reports at
    /// most once a tick, from the tick and the loop between threads), a candidate change.
    pub eager_reports: bool,
    /// A source checks a pull against its own true length before it answers (AMPS
    /// §2.3.2's rule: the move must not leave the puller above the source's load, and must
    /// restore balance or go to a faster core) and refuses one that no longer holds: not
    /// the kernel (`sched::inbox::answer_pull` gives a thread whenever it has one that may
    /// go, so two pullers with one stale report can both win and empty a fast core), a
    /// candidate change.
    pub recheck_pulls: bool,
    /// A core that readies woken threads places the ready ones by the policy, as a new
    /// thread is placed (Linux's wake-up balancing, which the paper's AMPS inherits): not
    /// the kernel (a woken thread joins the run queue of the core it parked on), a
    /// candidate change.
    pub place_woken: bool,
    /// Print every scheduling event to standard error (for reading one run).
    pub trace: bool,
}

impl Default for Params {
    /// The kernel as the M7 runs had it: 250 Hz, reports every 10 ticks, balancing every 2,
    /// patience 4, slices of 1 tick; TCG's measured costs.
    fn default() -> Params {
        Params {
            hz: 250,
            tsc_hz: 2_605_000_000,
            report_every_ticks: 10,
            balance_every_ticks: 2,
            pull_patience_ticks: 4,
            slice_ticks: 1,
            migration_cycles: 54_000,
            unit_cycles: crate::workload::CYCLES_PER_UNIT,
            message_cycles: 10_000,
            switch_cycles: 7_500,
            create_cycles: 200_000,
            step_cycles: 2_000,
            oracle_table: false,
            answer_ends_patience: false,
            eager_reports: false,
            recheck_pulls: false,
            place_woken: false,
            trace: false,
        }
    }
}

impl Params {
    /// Cycles per tick.
    pub fn tick_cycles(&self) -> u64 {
        self.tsc_hz / self.hz.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_mixes() {
        assert_eq!(Machine::paper(2).speeds, [1000, 500]);
        assert_eq!(Machine::paper(4).speeds, [1000, 500, 500, 500]);
        assert_eq!(Machine::paper(8).name(), "2x100+6x50");
        // P = 2 × 0.85 = 1.7, rounded to eighths: 1.75 (docs/bench.md, M7).
        assert_eq!(Machine::paper(2).powers(), [Power(1750), Power(1000)]);
        assert_eq!(Machine::uniform(3).powers(), [Power::ONE; 3]);
    }
}
