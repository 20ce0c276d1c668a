//! TLB shootdown for shared address ranges (Corey §3.1: removing a mapping from a range
//! that several cores' page tables include must invalidate their TLBs). Done with IPIs for
//! now; the Multikernel's way, by message to each core's monitor (§5.1), comes with M9.

use crate::arch::{apic, cpu, timer, trap};
use crate::percpu::{self, this_core, CoreState};
use core::sync::atomic::Ordering;

/// How long a flush may take before the wait is reported on the console (it goes on
/// waiting: a frame goes back only once every core that could map it has flushed).
const REPORT_US: u64 = 100_000;

/// Flushes the TLB of every core in `cores` (a bit per core index), this one included,
/// and returns once each has done so. Call it with no lock held that those cores might
/// be spinning on: they flush from an interrupt. Interrupts are on while waiting, so two
/// cores shooting each other down cannot deadlock.
///
/// It waits for every core, however long: the caller frees frames next, and a core that
/// has not flushed could still reach them. The only core not waited for is one that has
/// faulted: it stopped with interrupts off and never runs user code again, so its TLB
/// can no longer be used (`CoreState::Faulted` is published before it halts).
pub fn shootdown(cores: u64) {
    shootdown_with(cores, trap::VECTOR_TLB);
}

/// Flushes every online core's whole TLB, global entries included: kernel pages (a heap's
/// top given back to its core's frames) were unmapped, and the kernel's mappings are
/// global, which a CR3 reload keeps. Returns once every core has flushed.
pub fn shootdown_kernel() {
    let all = percpu::all_cores()
        .filter(|c| c.index < 64 && c.state() == CoreState::Online)
        .fold(0u64, |mask, c| mask | 1 << c.index);
    shootdown_with(all, trap::VECTOR_TLB_GLOBAL);
    crate::arch::paging::flush_everything();
}

fn shootdown_with(cores: u64, vector: u8) {
    let me = this_core().index;
    let mut pending = [(0usize, 0u64); 64];
    let mut n = 0;
    for core in percpu::all_cores() {
        if core.index >= 64 || cores & (1 << core.index) == 0 || core.index == me {
            continue;
        }
        // Acquire: pairs with the Release in the handler.
        pending[n] = (core.index, core.tlb_flushes.load(Ordering::Acquire));
        n += 1;
        apic::send_ipi(core.apic_id, vector);
    }
    x86_64::instructions::tlb::flush_all();
    // `disable_interrupts` reports whether they were on; turn them on to wait.
    let was_enabled = cpu::disable_interrupts();
    cpu::enable_interrupts();
    for &(index, before) in &pending[..n] {
        let Some(core) = percpu::core(index) else { continue };
        let start = cpu::rdtsc();
        let mut reported = false;
        while core.tlb_flushes.load(Ordering::Acquire) == before {
            if core.state() == CoreState::Faulted {
                break;
            }
            if !reported && timer::us_since(start) > REPORT_US {
                crate::println!("tlb: still waiting for core {index} to flush");
                reported = true;
            }
            cpu::pause();
        }
    }
    if !was_enabled {
        cpu::disable_interrupts();
    }
}
