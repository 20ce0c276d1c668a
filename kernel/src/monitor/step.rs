//! The point in a long system call where the core answers the rest of the machine.

use crate::arch::cpu;
use crate::percpu::this_core;
use core::sync::atomic::Ordering;

/// A point in a long system call where the core answers the rest of the machine. System
/// calls run with interrupts off; a call whose work grows with its arguments (copying
/// pages, filling a buffer) calls this between steps, with no lock held. It opens an
/// interrupt window, so a pending tick, TLB shootdown or wake-up is taken, and once per
/// tick it serves the monitor as the tick in user mode does (frame returns, pings). The
/// time limit and `pcore_halt` are checked when the call returns ([`syscall_dispatch`]).
/// So a core answers within one tick plus one bounded step, however long the call.
///
/// Outside a context (the loader run from the idle loop) it only opens the window: there
/// the monitor would run deferred calls and starts in the middle of the caller's work.
pub fn step() {
    let core = this_core();
    let were_on = cpu::disable_interrupts();
    cpu::enable_interrupts();
    core::hint::spin_loop(); // `sti` takes effect after the next instruction
    if !were_on {
        cpu::disable_interrupts();
    }
    if !core.in_context.load(Ordering::Acquire) {
        return;
    }
    core.stepped.store(true, Ordering::Relaxed);
    let now = core.ticks();
    // Once a tick, and whenever a message waits (a TLB shootdown's initiator waits for it:
    // its notification, taken in the window above, does nothing in kernel mode).
    if core.served_tick.swap(now, Ordering::Relaxed) != now || crate::monitor::has_messages() {
        crate::monitor::poll_at_tick();
    }
}
