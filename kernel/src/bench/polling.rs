//! `bench polling` (Multikernel §5.2): the cost of waking a halted core against polling,
//! on the receiver's side (an idle core) and on the waiter's (a core waiting for a reply).

use super::{result, try_vec, Deadline, NEEDS_TWO_CORES};
use crate::arch::cpu;
use crate::monitor::{self};
use crate::percpu::this_core;
use crate::smp::{self};
use crate::transport;
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
    let p = transport::poll_budget();
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
    waiter(target, rounds, c, deadline)
}

/// The waiter's side (M15 item 4: every wait polls for P, then blocks): core 0 calls core 1
/// `rounds` times with work that takes `gap` cycles there, for gaps of ¼ C to 8 C, and
/// waits for each reply with `monitor::wait` (poll for P, then block). Per gap: the median latency the wait added
/// (round trip less the gap), the cycles it polled per call (the model: min(gap + the
/// trip, P)), and how often it halted (above P: then the reply's IPI wakes it, at most C
/// later than a spinning waiter would have seen it).
fn waiter(target: usize, rounds: usize, c: u64, deadline: Deadline) -> Result<(), String> {
    for quarters in [1u64, 2, 4, 8, 16, 32] {
        let gap = c * quarters / 4;
        let work = |_: usize| -> Result<(), String> {
            let start = cpu::rdtsc();
            while cpu::rdtsc() - start < gap {
                core::hint::spin_loop();
            }
            Ok(())
        };
        let mut samples = try_vec(rounds, || 0u64)?;
        let before = transport::wait_stats();
        for sample in samples.iter_mut() {
            deadline.check()?;
            let start = cpu::rdtsc();
            let id = monitor::call_async(target, &work).map_err(|e| format!("call: {e:?}"))?;
            if !monitor::wait(id, 5_000_000).is_ok() {
                return Err(format!("core {target} did not answer"));
            }
            *sample = (cpu::rdtsc() - start).saturating_sub(gap);
        }
        let after = transport::wait_stats();
        let waits = (after.waits - before.waits).max(1);
        let label = format!(",\"config\":\"waiter gap={}C/4\"", quarters);
        let latency = median(&mut samples).unwrap_or(0);
        result("polling", 2, "latency_cycles", latency, "cycles", &label);
        let polled = (after.polled_cycles - before.polled_cycles) / waits;
        result("polling", 2, "polled_cycles", polled, "cycles", &label);
        let slept_pct = (after.slept - before.slept) * 100 / waits;
        result("polling", 2, "halted_pct", slept_pct, "%", &label);
    }
    Ok(())
}
