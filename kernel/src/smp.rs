//! Cores working together: starting the application processors, and running work on
//! chosen cores (through the monitors' remote calls; the test harness and console use it).

use crate::arch::{cpu, start_ap, timer};
use crate::monitor;
use crate::percpu::{self, CoreState};
use alloc::string::String;
use alloc::vec::Vec;

pub use crate::monitor::{Outcome, Work};

/// Runs `work` on each core in `cores` at once (inline on the calling core if listed) and
/// waits up to `timeout_us` for each; see [`monitor::run_on`].
pub fn run_on(cores: &[usize], timeout_us: u64, work: &Work<'_>) -> Vec<Outcome> {
    monitor::run_on(cores, timeout_us, work)
}

/// Turns outcomes into one result, naming the first core whose work did not succeed.
pub fn all_ok(cores: &[usize], outcomes: &[Outcome]) -> Result<(), String> {
    for (core, outcome) in cores.iter().zip(outcomes) {
        if !outcome.is_ok() {
            return Err(alloc::format!("core {core}: {outcome:?}"));
        }
    }
    Ok(())
}

/// Indices of the cores that are online now.
pub fn online_cores() -> Vec<usize> {
    percpu::all_cores().filter(|c| c.state() == CoreState::Online).map(|c| c.index).collect()
}

/// Starts every application processor whose block is published, one after another; each
/// continues its own initialisation while the next is started. Returns the number of cores
/// that acknowledged.
pub fn start_application_processors() -> usize {
    let mut started = 0;
    for core in percpu::all_cores().skip(1) {
        core.set_state(CoreState::Starting);
        match start_ap::start(
            &percpu::this_core().icr_destination,
            core.apic_id,
            core.index,
            core.stack_range().1,
        ) {
            Ok(()) => started += 1,
            Err(e) => {
                core.set_state(CoreState::Offline);
                crate::println!(
                    "smp: core {} (APIC id {}) did not start: {:?}",
                    core.index,
                    core.apic_id,
                    e
                );
            }
        }
    }
    started
}

/// Waits until no core is still starting (or `timeout_us` passes). Returns the online count.
pub fn wait_for_online(timeout_us: u64) -> usize {
    let start = cpu::rdtsc();
    while percpu::all_cores().any(|c| c.state() == CoreState::Starting)
        && timer::us_since(start) < timeout_us
    {
        cpu::pause();
    }
    percpu::all_cores().filter(|c| c.state() == CoreState::Online).count()
}
