//! The idle loop (Multikernel §5.2): poll for the budget P, then halt until a message's
//! IPI or a tick; the upper layers' idle work runs first.

use super::frame_return::flush_frame_returns;
use super::with;
use super::{poll, poll_budget};
use crate::arch::cpu;
use crate::percpu::PerCore;
use core::sync::atomic::{fence, Ordering};

/// Work the idle loop runs before it polls: the scheduler runs this core's ready threads
/// (installed at boot by the user layer, which sits above this one). Returns whether it
/// ran any.
pub(super) static IDLE_WORK: spin::Once<fn() -> bool> = spin::Once::new();

/// Installs the idle loop's work (once, at boot).
pub fn set_idle_work(work: fn() -> bool) {
    IDLE_WORK.call_once(|| work);
}

/// What the upper layers do before this core sleeps (let go of revocation log entries of
/// objects that are gone; terminate two-phase operations whose coordinator faulted;
/// installed at boot).
pub(super) static IDLE_HOUSEKEEPING: spin::Once<fn()> = spin::Once::new();

/// Installs what the upper layers do before the core sleeps (once, at boot).
pub fn set_idle_housekeeping(work: fn()) {
    IDLE_HOUSEKEEPING.call_once(|| work);
}

/// Polls for up to the poll budget; if nothing came, sends partial frame batches home,
/// marks the core asleep and halts until an interrupt.
pub fn idle_once(core: &PerCore) {
    if IDLE_WORK.get().is_some_and(|work| work()) {
        return;
    }
    let start = cpu::rdtsc();
    let budget = poll_budget();
    while cpu::rdtsc() - start < budget {
        if poll() {
            return;
        }
        cpu::pause();
    }
    flush_frame_returns();
    // Before sleeping, the upper layers' housekeeping (what they hold lazily goes,
    // operations orphaned by a faulted core end), then the heap's free top goes back to
    // the frame list.
    if let Some(work) = IDLE_HOUSEKEEPING.get() {
        work();
    }
    crate::mem::heap::trim_this_core();
    cpu::disable_interrupts();
    core.set_asleep(true);
    fence(Ordering::SeqCst);
    if with(|m| m.has_messages()) || crate::tlb::broadcast_pending() {
        core.set_asleep(false);
        cpu::enable_interrupts();
        return;
    }
    cpu::enable_and_halt();
    core.set_asleep(false);
    core.count_wakeup();
}

/// An application processor's life after start-up: serve messages, halt when idle.
pub fn idle_loop(core: &'static PerCore) -> ! {
    loop {
        idle_once(core);
    }
}
