//! Where every interrupt and exception lands: `trap_dispatch`, called by the stubs in
//! `arch::trap` (by its link name) with the saved registers. A user-mode exception goes to
//! the user layer (a soft page fault, or the end of the program); a kernel exception is
//! fatal for the core it happens on only: it prints a report and stops that core, and the
//! others go on. The timer tick, the wake-up and test IPIs are counted and acknowledged
//! here. (TLB shootdowns are messages, not interrupts: `tlb`.)

use crate::arch::trap::{
    TrapFrame, EXCEPTION_NAMES, VECTOR_PAGE_FAULT, VECTOR_SPURIOUS, VECTOR_TEST, VECTOR_TIMER,
    VECTOR_WAKE,
};
use crate::arch::{apic, cpu, power};

/// Called by `isr_common` for every interrupt and exception.
#[no_mangle]
extern "C" fn trap_dispatch(frame: &mut TrapFrame) {
    let vector = frame.vector as u8;
    match vector {
        0..=31 if frame.cs & 3 == 3 => crate::user::on_exception(frame), // returns if handled
        0..=31 => fatal_exception(frame),
        VECTOR_TIMER => {
            let core = crate::percpu::this_core();
            // A throttled core's timer also ends its on and off phases (`throttle`).
            if crate::throttle::on_timer(core.index) {
                core.on_tick();
                // The serial port's core drains the other cores' console lines once a tick,
                // in user mode and in the kernel alike (`print`).
                crate::print::drain();
                if frame.cs & 3 == 3 {
                    crate::user::on_tick_in_user(frame);
                }
            } else if frame.cs & 3 == 3 {
                // A slowed core's phase change: messages that came while it halted (a
                // pull, a wake-up) are read now, not at the next tick.
                // (`throttle::on_timer` signalled the end of interrupt.)
                crate::user::on_kick_in_user(frame, || {});
            }
        }
        VECTOR_WAKE => {
            // A kick while a thread runs: the monitor reads its messages now (a shootdown
            // or a pull for the running thread is answered at once, not at the next
            // tick), and signals the end of interrupt once they are answered.
            if frame.cs & 3 == 3 {
                crate::user::on_kick_in_user(frame, apic::eoi);
            } else {
                apic::eoi();
            }
        }
        VECTOR_TEST => {
            crate::percpu::this_core().on_test_ipi();
            apic::eoi();
        }
        VECTOR_SPURIOUS => {}
        _ => {
            crate::percpu::this_core().on_unexpected_interrupt(vector);
            apic::eoi();
        }
    }
}

/// Reports an exception and stops this core; the other cores go on.
fn fatal_exception(frame: &TrapFrame) -> ! {
    let core = crate::percpu::this_core();
    let vector = frame.vector as u8;
    let cr2 = if vector == VECTOR_PAGE_FAULT { cpu::cr2() } else { 0 };
    crate::println!(
        "{}core={} vector={} ({}) error={:#x} rip={:#x} cr2={:#x} rsp={:#x}",
        verdict::TRAP_MARKER,
        core.index,
        vector,
        EXCEPTION_NAMES[vector as usize],
        frame.error,
        frame.rip,
        cr2,
        frame.rsp
    );
    let mut line = BacktraceLine::default();
    let (lo, hi) = core.stack_range();
    let mut rbp = frame.rbp;
    for _ in 0..16 {
        // Follow the frame-pointer chain only while it stays inside this core's stack.
        if rbp < lo || rbp + 16 > hi || !rbp.is_multiple_of(8) {
            break;
        }
        // SAFETY: `rbp` was checked to lie within this core's mapped kernel stack.
        let (next, ret) = unsafe { (*(rbp as *const u64), *((rbp + 8) as *const u64)) };
        line.push(ret);
        if next <= rbp {
            break;
        }
        rbp = next;
    }
    crate::println!("TRAP core={} backtrace: {:#x}{}", core.index, frame.rip, line);
    core.stop_after_fault(vector);
    if core.index == 0 {
        // The boot core runs the console and the test runner: without it nothing can go on.
        crate::print::flush();
        power::exit_qemu(verdict::ExitCode::Failure);
    }
    cpu::halt_forever()
}

/// Up to 16 return addresses, printed as ` <- 0x...`.
#[derive(Default)]
struct BacktraceLine {
    addrs: [u64; 16],
    len: usize,
}

impl BacktraceLine {
    fn push(&mut self, addr: u64) {
        if self.len < self.addrs.len() {
            self.addrs[self.len] = addr;
            self.len += 1;
        }
    }
}

impl core::fmt::Display for BacktraceLine {
    fn fmt(&self, f: &mut core::fmt::Formatter) -> core::fmt::Result {
        for a in &self.addrs[..self.len] {
            write!(f, " <- {a:#x}")?;
        }
        Ok(())
    }
}
