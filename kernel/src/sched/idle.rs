//! The idle loop (Multikernel §5.2): a core runs its ready threads; with none, it polls
//! its channels for the budget P, does the housekeeping the layers below keep for idle
//! time, and halts until a message's IPI or a tick. Kernel code that waits for threads
//! runs them itself ([`run_until`]).

use super::balance::{balance, report_load, undedicate_uid, KERNEL_CORE_UID};
use super::run::{housekeeping, run_next, unload_tables};
use crate::arch::cpu;
use crate::kcore::Polled;
use crate::monitor;
use crate::percpu::{this_core, PerCoreState};

/// One pass of the idle loop: a ready thread if there is one (not while the scheduler's
/// own loop is on the stack: [`super::run_until`] runs them), else poll for P, then
/// housekeeping and a halt.
pub fn idle_once() {
    if idle_work() {
        return;
    }
    // A kernel core never sleeps: a round over its devices instead (Corey §4.4), with a
    // window for the tick between rounds.
    match crate::kcore::poll() {
        Polled::NotKernelCore => {}
        Polled::Round => {
            cpu::enable_interrupts();
            cpu::pause();
            cpu::disable_interrupts();
            return;
        }
        Polled::Ended => {
            undedicate_uid(KERNEL_CORE_UID);
            report_load();
            return;
        }
    }
    if monitor::poll_for_budget() {
        return;
    }
    // Before sleeping: what the layers below hold lazily goes (revocation log entries of
    // objects that are gone), operations orphaned by a faulted core end, and frames lost
    // to a faulted retype come back.
    crate::corey::revocation::prune_revocations();
    crate::twophase::resolve_orphans();
    crate::retype::recover_lost_frames();
    monitor::sleep();
}

/// An application processor's life after start-up: run threads, serve messages, halt
/// when idle.
pub fn idle_loop() -> ! {
    loop {
        idle_once();
    }
}

/// How deep this core is in [`run_until`] (the idle loop's work stays out while it runs).
pub(super) static DEPTH: PerCoreState<u32> = crate::per_core_state!(0);

/// Runs this core's threads until `stop()` holds (checked between threads); with none
/// ready, the core serves its monitor and halts as the idle loop does.
pub fn run_until(stop: &dyn Fn() -> bool) {
    let core = this_core();
    let saved_rsp0 = core.rsp0();
    let saved_syscall_stack = core.syscall_stack();
    DEPTH.with(|d| *d += 1);
    loop {
        // Between threads the core serves its monitor whole: calls and starts deferred
        // while a thread ran are served here, never after the threads end.
        monitor::poll();
        housekeeping();
        if stop() {
            break;
        }
        if !run_next() {
            unload_tables();
            balance();
            if stop() {
                break;
            }
            idle_once();
        }
    }
    DEPTH.with(|d| *d -= 1);
    core.set_rsp0(saved_rsp0);
    core.set_syscall_stack(saved_syscall_stack);
    cpu::enable_interrupts();
}

/// Runs one ready thread, if there is one (the idle loop's first step, and what a core
/// waiting for a remote call lends itself to: `monitor::set_idle_work`).
pub fn idle_work() -> bool {
    if DEPTH.with(|d| *d > 0) {
        return false;
    }
    monitor::poll();
    housekeeping();
    if run_next() {
        cpu::enable_interrupts();
        return true;
    }
    unload_tables();
    balance();
    false
}
