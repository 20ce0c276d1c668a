//! `bench twophase` (Multikernel §4.7–§4.8): two-phase commits of registers and retypes.

use super::multicast::time_rounds;
use super::{result, try_vec, Deadline, JOB_TIMEOUT_US, NEEDS_TWO_CORES};
use crate::arch::cpu;
use crate::mem::frames;
use crate::monitor::{self};
use crate::percpu::this_core;
use crate::smp::{self};
use agreement::CoreSet;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use record::median;

/// Multikernel Figure 8: the latency of a two-phase commit (`twophase`: prepare, votes,
/// decision, acknowledgements) with the cores below `k` as participants, one operation at
/// a time (`single`), and the cost per operation when `PIPELINE` operations on different
/// registers are in flight at once (`pipelined`: what a retype-heavy workload sees).
pub(super) fn two_phase(rounds: usize, deadline: Deadline) -> Result<(), String> {
    const PIPELINE: usize = 8;
    let reg = |register, value| crate::twophase::Operation::Register { register, value };
    let cores = smp::online_cores();
    if cores.len() < 2 {
        return Err(NEEDS_TWO_CORES.into());
    }
    // Registers of this core's own (a run never conflicts with one from another core),
    // made in every replica at start-up and reused by every run: a register, once seen, is
    // kept for good, so fresh ones per run grew every core's heap.
    let me = this_core().index;
    let register = |i: u64| crate::twophase::bench_register(me, i);
    const _: () = assert!((PIPELINE as u64) < crate::twophase::BENCH_REGISTERS);
    for k in 2..=cores.len() {
        let participants: CoreSet = cores.iter().copied().filter(|&c| c < k).collect();
        let single = time_rounds(rounds, |round| {
            deadline.check()?;
            match crate::twophase::commit(participants, reg(register(PIPELINE as u64), round)) {
                agreement::Decision::Commit => Ok(()),
                agreement::Decision::Abort => Err("an operation without conflict aborted".into()),
            }
        })?;
        result("twophase", k, "latency_cycles", single, "cycles", ",\"config\":\"single\"");
        let batches = rounds.div_ceil(PIPELINE).max(1);
        let batch = time_rounds(batches, |round| {
            deadline.check()?;
            // One register each for the operations in flight at once (they must not
            // conflict); a batch ends before the next starts.
            let ops: Vec<_> = (0..PIPELINE as u64)
                .map(|i| crate::twophase::start(participants, reg(register(i), round + i)))
                .collect();
            for op in ops {
                if crate::twophase::finish(op) != agreement::Decision::Commit {
                    return Err("a pipelined operation aborted".into());
                }
            }
            Ok(())
        })?;
        let per_op = batch / PIPELINE as u64;
        result("twophase", k, "latency_cycles", per_op, "cycles", ",\"config\":\"pipelined\"");
    }
    retype_rounds(&cores, rounds.min(RETYPE_ROUNDS), deadline)
}

/// Most timed retypes in one run (each moves a block there and back).
pub(super) const RETYPE_ROUNDS: usize = 20;

/// A retype over two-phase commit among every online core (`config` `retype`): this core
/// gives one block to the next core, timed until the commit is done and the frames are
/// sent; then, untimed, that core gives the same block back once its frames arrived, so a
/// run leaves the ownership as it found it.
pub(super) fn retype_rounds(
    cores: &[usize],
    rounds: usize,
    deadline: Deadline,
) -> Result<(), String> {
    let me = this_core().index;
    let to = *cores.iter().find(|&&c| c != me).ok_or(NEEDS_TWO_CORES)?;
    let mut samples = try_vec(rounds, || 0u64)?;
    for sample in samples.iter_mut() {
        deadline.check()?;
        let start = cpu::rdtsc();
        let first = crate::retype::give(1, to).map_err(|e| format!("retype: {e}"))?;
        *sample = cpu::rdtsc() - start;
        let back = |_| -> Result<(), String> {
            let last = first + physmem::BLOCK_SIZE - physmem::FRAME_SIZE;
            while !(frames::is_free_here(first) && frames::is_free_here(last)) {
                deadline.check()?;
                monitor::flush_frame_returns();
                monitor::poll();
                cpu::pause();
            }
            if !frames::take_blocks_at(first, 1) {
                return Err(format!("block {first:#x} did not arrive whole"));
            }
            crate::retype::give_taken(first, 1, me).map(|_| ()).map_err(|e| format!("{e}"))
        };
        smp::all_ok(&[to], &smp::run_on(&[to], JOB_TIMEOUT_US, &back))?;
    }
    let cycles = median(&mut samples).unwrap_or(0);
    result("twophase", cores.len(), "latency_cycles", cycles, "cycles", ",\"config\":\"retype\"");
    Ok(())
}
