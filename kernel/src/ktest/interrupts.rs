//! Layer 4 tests: timer ticks on every core, and IPIs between every ordered pair.

use super::{all_ok, JOB_TIMEOUT_US};
use crate::arch::{apic, cpu, timer, trap};
use crate::percpu::{self, this_core};
use crate::{kernel_test, smp};
use alloc::format;
use alloc::string::String;
use core::sync::atomic::Ordering;

kernel_test!(TIMER_TICKS, "interrupts.timer_ticks", 1, false, timer_ticks);
kernel_test!(IPI_ALL_PAIRS, "interrupts.ipi_all_pairs", 2, false, ipi_all_pairs);

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
                apic::send_ipi(target.apic_id, trap::VECTOR_TEST);
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
