//! `bench shm` (experiment `shm_vs_msg_kernel`, Multikernel §2.2, Figure 3): updates of
//! shared cache lines against updates by message.

use super::urpc::PairMemory;
use super::{result, spin, Deadline, JOB_TIMEOUT_US, NEEDS_TWO_CORES, SHM};
use crate::arch::cpu;
use crate::monitor::{self};
use crate::smp::{self, all_ok};
use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};
use record::median;
use urpc::{Receiver, Sender, PAYLOAD_WORDS};

/// Most cache lines an update touches (Figure 3 goes to 8).
pub(super) const UPDATE_LINES: usize = 8;

/// Cache lines of the shared array in the SHM experiment.
#[repr(C, align(64))]
pub(super) struct SharedLine(AtomicU64, [u64; 7]);

/// Multikernel Figure 3: cycles per update of 1, 2, 4 or 8 cache lines, by cores updating
/// one shared array directly (SHMn) or by sending each update over a URPC channel to a
/// server core that owns the array and answers when done (MSGn), against the number of
/// client cores. The server is the last core and runs a dedicated loop over one channel
/// pair per client (as the paper's server did), not the general monitor.
pub(super) fn shm(updates: usize, deadline: Deadline) -> Result<(), String> {
    let cores = smp::online_cores();
    if cores.len() < 2 {
        return Err(NEEDS_TWO_CORES.into());
    }
    let server = *cores.last().ok_or("no cores")?;
    let clients_all: Vec<usize> = cores.iter().copied().filter(|&c| c != server).collect();
    let lines: Vec<SharedLine> =
        (0..UPDATE_LINES).map(|_| SharedLine(AtomicU64::new(0), [0; 7])).collect();
    for k in 1..=clients_all.len() {
        let clients = &clients_all[..k];
        // The first configuration runs twice; the first pass warms caches and the
        // emulator's translations and is not reported.
        let configs = [(1usize, "shm", false), (1, "msg", false)].into_iter().chain(
            [1usize, 2, 4, 8].into_iter().flat_map(|n| [(n, "shm", true), (n, "msg", true)]),
        );
        for (n_lines, protocol, report) in configs {
            deadline.check()?;
            let per_update: Vec<AtomicU64> = clients.iter().map(|_| AtomicU64::new(0)).collect();
            if protocol == "shm" {
                shared_updates(clients, &lines[..n_lines], updates, &per_update)?;
            } else {
                message_updates(server, clients, n_lines, updates, &per_update, deadline)?;
            }
            if !report {
                continue;
            }
            let mut v: Vec<u64> = per_update.iter().map(|c| c.load(Ordering::Relaxed)).collect();
            let cycles = median(&mut v).unwrap_or(0);
            let extra = format!(",\"protocol\":\"{protocol}{n_lines}\",\"lines\":{n_lines}");
            result(SHM, k, "cycles_per_update", cycles, "cycles", &extra);
        }
    }
    Ok(())
}

/// SHMn: each client adds 1 to every line of `lines`, `updates` times. Cycles per update go
/// to `per_update` (one slot per client). No waiting on other cores, so the work is
/// bounded by `updates` alone.
pub(super) fn shared_updates(
    clients: &[usize],
    lines: &[SharedLine],
    updates: usize,
    per_update: &[AtomicU64],
) -> Result<(), String> {
    let work = |index: usize| -> Result<(), String> {
        let slot = clients.iter().position(|&c| c == index).ok_or("not a client")?;
        let start = cpu::rdtsc();
        for _ in 0..updates {
            for line in lines {
                line.0.fetch_add(1, Ordering::AcqRel);
            }
        }
        per_update[slot].store((cpu::rdtsc() - start) / updates as u64, Ordering::Relaxed);
        Ok(())
    };
    all_ok(clients, &smp::run_on(clients, JOB_TIMEOUT_US, &work))
}

/// MSGn: each client sends `updates` requests over its own channel to `server` and waits
/// for each answer; the server updates `n_lines` lines of its own array per request.
/// Cycles per update go to `per_update` (one slot per client).
pub(super) fn message_updates(
    server: usize,
    clients: &[usize],
    n_lines: usize,
    updates: usize,
    per_update: &[AtomicU64],
    deadline: Deadline,
) -> Result<(), String> {
    let pairs: Vec<Box<PairMemory>> = clients.iter().map(|_| PairMemory::new_boxed()).collect();
    let serve = |_| -> Result<(), String> {
        let mut ends: Vec<_> =
            pairs.iter().map(|p| (Receiver::new(&p.forward), Sender::new(&p.backward))).collect();
        let mut array = [[0u64; 8]; UPDATE_LINES];
        let mut remaining = clients.len() * updates;
        let mut passes = 0u32;
        while remaining > 0 {
            for (rx, tx) in ends.iter_mut() {
                let Some(msg) = rx.try_recv() else { continue };
                for line in &mut array[..(msg.payload[1] as usize).min(UPDATE_LINES)] {
                    line[0] = line[0].wrapping_add(1);
                }
                spin(deadline, || tx.try_send(2, &msg.payload).ok())?;
                remaining -= 1;
            }
            passes = passes.wrapping_add(1);
            if passes.is_multiple_of(64) {
                deadline.check()?;
            }
        }
        core::hint::black_box(&array);
        Ok(())
    };
    let server_call = monitor::call_async(server, &serve).map_err(|e| format!("{e:?}"))?;
    let work = |index: usize| -> Result<(), String> {
        let slot = clients.iter().position(|&c| c == index).ok_or("not a client")?;
        let (mut tx, mut rx) =
            (Sender::new(&pairs[slot].forward), Receiver::new(&pairs[slot].backward));
        let start = cpu::rdtsc();
        for round in 0..updates as u64 {
            let mut payload = [0u64; PAYLOAD_WORDS];
            payload[0] = round;
            payload[1] = n_lines as u64;
            spin(deadline, || tx.try_send(1, &payload).ok())?;
            spin(deadline, || rx.try_recv())?;
        }
        per_update[slot].store((cpu::rdtsc() - start) / updates as u64, Ordering::Relaxed);
        Ok(())
    };
    let outcomes = smp::run_on(clients, JOB_TIMEOUT_US, &work);
    all_ok(&[server], &[monitor::wait(server_call, JOB_TIMEOUT_US)])?;
    all_ok(clients, &outcomes)
}
