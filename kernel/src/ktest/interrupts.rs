//! Layer 4 tests: timer ticks on every core, and IPIs between every ordered pair.

use super::{all_ok, JOB_TIMEOUT_US};
use crate::arch::{apic, cpu, timer, trap};
use crate::percpu::{self, this_core};
use crate::{kernel_test, smp};
use alloc::format;
use alloc::string::String;
use core::sync::atomic::{AtomicBool, Ordering};

kernel_test!(TIMER_TICKS, "interrupts.timer_ticks", 1, Shared, timer_ticks);
kernel_test!(TICK_RATE, "interrupts.tick_rate", 1, Shared, tick_rate);
kernel_test!(IPI_ALL_PAIRS, "interrupts.ipi_all_pairs", 2, Shared, ipi_all_pairs);
kernel_test!(
    TLB_WAITS,
    "interrupts.tlb_shootdown_waits_for_a_busy_core",
    2,
    Shared,
    tlb_shootdown_waits_for_a_busy_core
);

/// This core ticks at the boot's rate (`hz=`, or the default): over half a second of TSC
/// time it counts between half and one and a half times the ticks it should. (Loose, since a
/// TCG vCPU on a busy host loses ticks; tight enough to tell 100 Hz from 250 Hz.)
fn tick_rate() -> Result<(), String> {
    const WINDOW_US: u64 = 500_000;
    let me = this_core();
    let start = me.ticks();
    let t0 = cpu::rdtsc();
    while timer::us_since(t0) < WINDOW_US {
        cpu::enable_and_halt();
    }
    let counted = me.ticks() - start;
    let expected = timer::tick_hz() * WINDOW_US / 1_000_000;
    if counted * 2 < expected || counted * 2 > expected * 3 {
        return Err(format!(
            "{counted} ticks in {WINDOW_US} us at {} Hz (expected about {expected})",
            timer::tick_hz()
        ));
    }
    Ok(())
}

/// Each core's tick count advances while it waits with interrupts on.
fn timer_ticks() -> Result<(), String> {
    let cores = smp::online_cores();
    let work = |_| -> Result<(), String> {
        let me = this_core();
        let start = me.ticks();
        let t0 = cpu::rdtsc();
        // Three tick periods, but accept the first tick seen: TCG can be slow.
        while me.ticks() < start + 3 && timer::us_since(t0) < 5_000_000 {
            cpu::enable_and_halt();
        }
        if me.ticks() == start {
            return Err("no timer tick in 5 s".into());
        }
        Ok(())
    };
    all_ok(&cores, &smp::run_on(&cores, JOB_TIMEOUT_US, &work))
}

/// Every core sends a test IPI to every other core, one at a time; each is received and
/// counted against the right sender.
fn ipi_all_pairs() -> Result<(), String> {
    let cores = smp::online_cores();
    for &from in &cores {
        let send_all = |_| -> Result<(), String> {
            for &to in &cores {
                if to == from {
                    continue;
                }
                let target = percpu::core(to).ok_or("no such core")?;
                let before = target.test_ipis_from(from);
                target.test_ipi_sender.store(from, Ordering::Release);
                apic::send_ipi(
                    &percpu::this_core().icr_destination,
                    target.apic_id,
                    trap::VECTOR_TEST,
                );
                let t0 = cpu::rdtsc();
                while target.test_ipis_from(from) == before {
                    if timer::us_since(t0) > 5_000_000 {
                        return Err(format!("IPI {from} -> {to} not received in 5 s"));
                    }
                    cpu::pause();
                }
            }
            Ok(())
        };
        all_ok(&[from], &smp::run_on(&[from], JOB_TIMEOUT_US, &send_all))?;
    }
    Ok(())
}

/// A TLB shootdown returns only after every core it targets has flushed, however long a
/// core is busy (the caller frees frames next). Core 1 spins 300 ms with interrupts off in
/// a monitor job, marks that it is done, then returns to its idle loop (and only then reads
/// the invalidation message): a shootdown of core 1 that returns before the mark gave up
/// too early (it used to, after 100 ms).
fn tlb_shootdown_waits_for_a_busy_core() -> Result<(), String> {
    let started = AtomicBool::new(false);
    let done = AtomicBool::new(false);
    let busy = |_| -> Result<(), String> {
        let were_on = cpu::disable_interrupts();
        started.store(true, Ordering::Release);
        timer::spin_us(300_000);
        done.store(true, Ordering::Release);
        if were_on {
            cpu::enable_interrupts();
        }
        Ok(())
    };
    let call = crate::monitor::call_async(1, &busy).map_err(|e| format!("{e:?}"))?;
    while !started.load(Ordering::Acquire) {
        crate::monitor::poll();
        cpu::pause();
    }
    crate::tlb::shootdown(1 << 1).map_err(|c| format!("cores {:#x} never flushed", c.0))?;
    let flushed_after_the_spin = done.load(Ordering::Acquire);
    all_ok(&[1], &[crate::monitor::wait(call, JOB_TIMEOUT_US)])?;
    if !flushed_after_the_spin {
        return Err("the shootdown returned while core 1 still had interrupts off".into());
    }
    Ok(())
}
