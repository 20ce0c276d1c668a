//! `bench shootdown` (Multikernel §5.1, Figure 6): TLB shootdown latency by each protocol.

use super::multicast::{packages_below, time_rounds};
use super::{result, Deadline, NEEDS_TWO_CORES};
use crate::knowledge;
use crate::percpu::this_core;
use crate::smp::{self};
use crate::tlb::{Flush, Shootdown};
use agreement::CoreSet;
use alloc::format;
use alloc::string::String;
use skb::Protocol;

/// Multikernel Figure 6 with the real operation (§4.7, §5.1): the latency of a TLB
/// shootdown of one page (`tlb::Shootdown`: the invalidation sent, applied and acknowledged
/// by every participant) to the cores below `k`, by each of the four protocols, against `k`.
/// The participants are idle (polling, or halted and woken by the notification).
pub(super) fn shootdown(rounds: usize, deadline: Deadline) -> Result<(), String> {
    let cores = smp::online_cores();
    if cores.len() < 2 {
        return Err(NEEDS_TWO_CORES.into());
    }
    let source = this_core().index;
    let skb = crate::skb_replica::get().ok_or("the SKB is not measured")?;
    // The per-message costs the model (`agreement-sim`, in `make bench`'s report) predicts
    // from: the one-way latency to a core of this package and to one of another, measured
    // now, beside the shootdowns.
    let home = skb.core(source).map(|c| c.package);
    for (link, remote) in [("local", false), ("remote", true)] {
        let peer = cores
            .iter()
            .copied()
            .find(|&c| c != source && (skb.core(c).map(|c| c.package) != home) == remote);
        if let Some(peer) = peer {
            let cycles = knowledge::one_way_latency(peer, 15)?;
            result(
                "shootdown",
                2,
                "one_way_cycles",
                cycles,
                "cycles",
                &format!(",\"link\":\"{link}\""),
            );
        }
    }
    // A page nothing maps: invalidating it costs what invalidating a mapped page does.
    let flush = Flush { start: 0xffff_e000_0000_0000, pages: 1, global: false };
    for k in 2..=cores.len() {
        let targets: CoreSet = cores.iter().copied().filter(|&c| c != source && c < k).collect();
        let packages = packages_below(skb, k);
        for protocol in Protocol::ALL {
            let cycles = time_rounds(rounds, |_| {
                deadline.check()?;
                Shootdown::start_with(targets, flush, Some(protocol))
                    .wait()
                    .map_err(|c| format!("cores {:#x} never acknowledged", c.0))
            })?;
            let extra = format!(",\"protocol\":\"{}\",\"packages\":{}", protocol.name(), packages);
            result("shootdown", k, "latency_cycles", cycles, "cycles", &extra);
        }
    }
    Ok(())
}
