//! `bench polling` (Multikernel §5.2): the cost of waking a halted core against polling.

use super::{result, try_vec, Deadline, NEEDS_TWO_CORES};
use crate::arch::cpu;
use crate::monitor::{self};
use crate::percpu::this_core;
use crate::smp::{self};
use alloc::format;
use alloc::string::String;
use record::median;

/// Multikernel §5.2 ("The cost of polling"): an idle core polls its channels for P cycles,
/// then halts, and a later message must wake it with an IPI costing C; with P = C (the
/// SKB's measured C) the receiver's overhead is at most 2C per message and the added
/// latency at most C, whatever the arrival times. Core 1 is idle; core 0 pings it `rounds`
/// times, each `gap` cycles after the last answer, for gaps of ¼ C to 8 C: the median
/// one-way latency (round trip / 2), how often core 1 had halted (its wake-up count), and
/// the overhead those imply per message: the polling it did (min(gap, P)) plus C for each
/// wake-up.
pub(super) fn polling(rounds: usize, deadline: Deadline) -> Result<(), String> {
    let cores = smp::online_cores();
    let Some(&target) = cores.iter().find(|&&c| c != this_core().index) else {
        return Err(NEEDS_TWO_CORES.into());
    };
    let core = crate::percpu::core(target).ok_or("no such core")?;
    let skb = crate::skb_replica::get().ok_or("the SKB is not measured")?;
    let c = skb.ipi_cost().unwrap_or(skb::DEFAULT_IPI_COST_CYCLES).max(1);
    let p = monitor::poll_budget();
    result("polling", 2, "ipi_cost_cycles", c, "cycles", "");
    result("polling", 2, "poll_budget_cycles", p, "cycles", "");
    for quarters in [1u64, 2, 4, 8, 16, 32] {
        let gap = c * quarters / 4;
        let mut samples = try_vec(rounds, || 0u64)?;
        let woken = core.wakeups();
        for sample in samples.iter_mut() {
            deadline.check()?;
            let start = cpu::rdtsc();
            while cpu::rdtsc() - start < gap {
                core::hint::spin_loop();
            }
            *sample = monitor::ping(target, 5_000_000).ok_or("no pong")? / 2;
        }
        let halted = core.wakeups() - woken;
        let label = format!(",\"config\":\"gap={}C/4\"", quarters);
        result("polling", 2, "latency_cycles", median(&mut samples).unwrap_or(0), "cycles", &label);
        let halted_pct = halted * 100 / rounds as u64;
        result("polling", 2, "halted_pct", halted_pct, "%", &label);
        let overhead = gap.min(p) + c * halted / rounds as u64;
        result("polling", 2, "overhead_cycles", overhead, "cycles", &label);
    }
    Ok(())
}
