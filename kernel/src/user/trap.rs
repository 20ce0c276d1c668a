//! Traps from user mode: exceptions (a soft page fault goes on; anything else stops the
//! thread), and ticks and kicks that give the monitor and the scheduler their turn.

use crate::arch::cpu;
use crate::arch::trap::{TrapFrame, EXCEPTION_NAMES};
use crate::corey::{self};
use crate::percpu::this_core;
use crate::println;
use crate::sched::{self, leave, with_running, with_running_mut};
use crate::thread::ExitStatus;

/// An exception in user mode. A page fault on a page the program's root address range maps
/// is a soft fault: the page is filled and mapped (or copied, for a write to a
/// copy-on-write page), and the program goes on. Anything else is reported and stops the
/// program; the core goes on.
pub fn on_exception(frame: &TrapFrame) {
    let vector = frame.vector as u8;
    let cr2 = if vector == crate::arch::trap::VECTOR_PAGE_FAULT { cpu::cr2() } else { 0 };
    if vector == crate::arch::trap::VECTOR_PAGE_FAULT {
        let present = frame.error & 1 != 0;
        let write = frame.error & 2 != 0;
        // Not present, or a write to a page mapped read-only (copy-on-write).
        if (!present || write)
            && with_running_mut(|r, _| {
                let resident = r.shared.resident().clone();
                corey::charging(&resident, || {
                    let access = if write { corey::Access::Write } else { corey::Access::Read };
                    corey::soft_fault(&mut r.objects, cr2, access)
                })
            }) == Some(true)
        {
            return;
        }
    }
    let out_of_memory = vector == crate::arch::trap::VECTOR_PAGE_FAULT
        && this_core().free_frames() < crate::param::FAULT_RESERVE_FRAMES;
    if out_of_memory && wait_for_frames(crate::param::FAULT_RESERVE_FRAMES) {
        return; // the instruction faults again, and the fault is filled
    }
    let name = with_running(|r, _| r.name.clone()).unwrap_or_default();
    println!(
        "USER FAULT core={} program={} vector={} ({}{}) error={:#x} rip={:#x} cr2={:#x} cs={:#x} rsp={:#x} rflags={:#x}",
        this_core().index,
        name,
        vector,
        EXCEPTION_NAMES[vector as usize],
        if out_of_memory { ", out of memory" } else { "" },
        frame.error,
        frame.rip,
        cr2,
        frame.cs,
        frame.rsp,
        frame.rflags
    );
    drop(name);
    leave(ExitStatus::Faulted(vector))
}

/// Waits until this core has `at_least` free frames, for frames on their way back: a
/// program that just ended (the shell's last one, say) frees its memory on every core that
/// held its threads, at their next tick or message, and frames freed on another core come
/// home by message (`FRAME_RETURN`); the kernel heap's free pages come back by a trim. For
/// a page fault or a program load that found its core short. Polls for them, then blocks
/// until the next message or tick; gives up after [`crate::param::FAULT_MEMORY_WAIT_US`]
/// without progress (or ten times that in all). Whether the core has them.
pub fn wait_for_frames(at_least: u64) -> bool {
    use crate::arch::timer::us_since;
    use crate::param::FAULT_MEMORY_WAIT_US;
    let core = this_core();
    let start = cpu::rdtsc();
    let mut progress_at = start;
    let mut best = core.free_frames();
    let mut patience = crate::transport::PollThenBlock::new();
    loop {
        // Read, look, then pause (see `PollThenBlock`).
        crate::monitor::poll();
        crate::retype::recover_lost_frames();
        crate::mem::heap::trim_this_core();
        let free = core.free_frames();
        if free >= at_least {
            return true;
        }
        if free > best {
            (best, progress_at) = (free, cpu::rdtsc());
        }
        if us_since(progress_at) > FAULT_MEMORY_WAIT_US
            || us_since(start) > 10 * FAULT_MEMORY_WAIT_US
        {
            return false;
        }
        patience.pause(&crate::tlb::broadcast_pending);
    }
}

/// A timer tick that interrupted user mode (after its EOI): stops the context if it has
/// run past its time limit or its pcore was halted, then gives the scheduler its turn
/// (the slice, wake-ups, balancing).
pub fn on_tick_in_user(frame: &TrapFrame) {
    // The monitor's turn while a context holds the core (Barrelfish's monitor is likewise
    // scheduled beside applications): frame returns and pings must not wait for it to end.
    crate::monitor::poll_at_tick();
    // Two-phase decisions this core coordinated that waited for room in a channel.
    crate::twophase::deliver_decisions();
    // Frames of blocks given here whose giver faulted (a core that never idles, too).
    crate::retype::recover_lost_frames();
    stop_if_due();
    sched::on_tick(frame);
}

/// A wake-up IPI (or a throttled core's phase change) that interrupted user mode: another
/// core kicked this one (a TLB shootdown, a pull for its running thread): the monitor and
/// the scheduler run now. `end_of_interrupt` runs between the two, after the messages are
/// read and answered: a shootdown's acknowledgement then goes out before the EOI's APIC
/// access (an MMIO exit under TCG), and before the scheduler may switch threads.
pub fn on_kick_in_user(frame: &TrapFrame, end_of_interrupt: impl FnOnce()) {
    crate::monitor::poll();
    // The interrupt is still in service: interrupts on inside `poll` would hold the timer
    // (same priority class) off until the end of interrupt.
    debug_assert!(!cpu::interrupts_enabled(), "the monitor's poll turned interrupts on");
    end_of_interrupt();
    sched::on_kick(frame);
}

/// Leaves the running thread if its program was stopped, its pcore halted or its time
/// limit passed: at a tick in user mode, and at the end of a system call that took steps
/// (a long call may have passed any of them). Nothing is held there.
pub(super) fn stop_if_due() {
    if let Some(status) = with_running(|r, _| r.program.stopping()).flatten() {
        if status == ExitStatus::TimedOut {
            report_timeout();
        }
        leave(status);
    }
}

/// Prints the line that tells a thread was stopped at its program's time limit.
pub(super) fn report_timeout() {
    let name = with_running(|r, _| r.name.clone()).unwrap_or_default();
    println!("USER TIMEOUT core={} program={}", this_core().index, name);
}
