//! Poll, then halt (Multikernel §5.2): a core with nothing to do polls its channels for
//! the budget P, then marks itself asleep and halts until a message's IPI or a tick. The
//! idle loop itself (threads first, then this) is the scheduler's (`sched::idle`).

use super::frame_return::flush_frame_returns;
use super::poll;
use crate::arch::cpu;
use crate::transport;

/// What a core does while its kernel waits for a remote call's answer (`call::wait`):
/// the scheduler runs this core's ready threads, so a thread placed here does not wait
/// for the kernel's wait to end. Installed at boot by the scheduler, which sits above this
/// layer (the one upcall the monitor keeps: `docs/architecture.md`, "Layers"). Returns
/// whether it ran any.
pub(super) static IDLE_WORK: spin::Once<fn() -> bool> = spin::Once::new();

/// Installs what a waiting core lends itself to (once, at boot).
pub fn set_idle_work(work: fn() -> bool) {
    IDLE_WORK.call_once(|| work);
}

/// Polls for up to the poll budget P; true as soon as anything came (a message, a
/// broadcast), false if the budget passed with nothing. Then sends partial batches of
/// freed frames home (before the core may sleep).
pub fn poll_for_budget() -> bool {
    // The serial port's core writes out the lines other cores printed (`print`), here and
    // at every tick, not at every poll: in a wait's loop the drain's check added half a
    // message's latency (`bench polling` at 2 cores: 2.2k -> 3.2k cycles one way).
    crate::print::drain();
    let start = cpu::rdtsc();
    let budget = transport::poll_budget();
    while cpu::rdtsc() - start < budget {
        if poll() {
            return true;
        }
        cpu::pause();
    }
    flush_frame_returns();
    false
}

/// Gives the heap's free top back to the frame list, marks the core asleep and halts until
/// an interrupt (a message's wake-up IPI, a broadcast's, or the tick); returns at once if
/// one came meanwhile.
pub fn sleep() {
    crate::mem::heap::trim_this_core();
    transport::sleep_unless(&crate::tlb::broadcast_pending);
}
