//! TLB shootdown (Corey §3.1: removing a mapping from a range that several cores' page
//! tables include must invalidate their TLBs). Done with IPIs for now; the Multikernel's
//! way, by message to each core's monitor (§5.1), comes with M9.
//!
//! A shootdown is split in two: [`Shootdown::start`] sends the IPIs and flushes this core;
//! [`Shootdown::done`] tells whether every other core has flushed since. Whoever frees
//! frames waits for it first ([`shootdown`] starts and waits at once). The wait is for
//! every core, however long: a core that has not flushed could still reach the frames.
//! The only core not waited for is one that has faulted: it stopped with interrupts off
//! and never runs user code again, so its TLB can no longer be used (`CoreState::Faulted`
//! is published before it halts).

use crate::arch::{apic, cpu, paging, timer, trap};
use crate::percpu::{self, this_core, CoreState, MAX_CORES};
use core::sync::atomic::Ordering;

/// How long a flush may take before the wait is reported on the console (it goes on
/// waiting).
const REPORT_US: u64 = 100_000;

/// A shootdown in flight: the cores asked to flush, and each one's flush count when asked.
pub struct Shootdown {
    cores: u64,
    before: [u64; MAX_CORES],
}

impl Shootdown {
    /// Asks every core in `cores` (a bit per core index) but this one to flush its TLB,
    /// and flushes this core's. `global` flushes global (kernel) entries too, which a CR3
    /// reload keeps. Never waits.
    pub fn start(cores: u64, global: bool) -> Shootdown {
        let me = this_core().index;
        let vector = if global { trap::VECTOR_TLB_GLOBAL } else { trap::VECTOR_TLB };
        let mut asked = Shootdown { cores: 0, before: [0; MAX_CORES] };
        for core in percpu::all_cores() {
            if core.index >= 64 || cores & (1 << core.index) == 0 || core.index == me {
                continue;
            }
            // Acquire: pairs with the Release in the handler.
            asked.before[core.index] = core.tlb_flushes.load(Ordering::Acquire);
            asked.cores |= 1 << core.index;
            apic::send_ipi(core.apic_id, vector);
        }
        if global {
            paging::flush_everything();
        } else {
            x86_64::instructions::tlb::flush_all();
        }
        asked
    }

    /// Whether every core asked has flushed (or faulted) since [`Shootdown::start`].
    pub fn done(&self) -> bool {
        (0..MAX_CORES.min(64)).filter(|&i| self.cores & (1 << i) != 0).all(|i| self.flushed(i))
    }

    fn flushed(&self, index: usize) -> bool {
        percpu::core(index).is_none_or(|c| {
            c.tlb_flushes.load(Ordering::Acquire) != self.before[index]
                || c.state() == CoreState::Faulted
        })
    }

    /// Waits until [`Shootdown::done`]. Interrupts are on while waiting, so two cores
    /// shooting each other down cannot deadlock; call it with no lock held that the other
    /// cores might be spinning on (they flush from an interrupt).
    pub fn wait(self) {
        let was_enabled = cpu::disable_interrupts();
        cpu::enable_interrupts();
        let start = cpu::rdtsc();
        let mut reported = false;
        while !self.done() {
            if !reported && timer::us_since(start) > REPORT_US {
                crate::println!("tlb: still waiting for cores to flush ({:#x})", self.cores);
                reported = true;
            }
            cpu::pause();
        }
        if !was_enabled {
            cpu::disable_interrupts();
        }
    }
}

/// Flushes the TLB of every core in `cores` (a bit per core index), this one included,
/// and returns once each has done so (see [`Shootdown::wait`]).
pub fn shootdown(cores: u64) {
    Shootdown::start(cores, false).wait();
}

/// Every online core, as a shootdown's core set.
pub fn all_online() -> u64 {
    percpu::all_cores()
        .filter(|c| c.index < 64 && c.state() == CoreState::Online)
        .fold(0u64, |mask, c| mask | 1 << c.index)
}
