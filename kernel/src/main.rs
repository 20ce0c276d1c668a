//! Atoll: a multikernel for many-core x86-64 (see docs/architecture.md).
//!
//! The boot core enters at `kmain` (from the PVH entry in `arch::boot`), every other core
//! at `ap_main` (from the trampoline in `arch::start_ap`).
#![no_std]
#![deny(clippy::undocumented_unsafe_blocks)]
#![no_main]

extern crate alloc;

mod arch;
mod bench;
mod boot;
mod console;
mod corey;
mod drivers;
mod initrd;
mod interrupts;
mod kcore;
mod knowledge;
mod ktest;
mod layers;
mod mem;
mod monitor;
mod param;
mod percpu;
mod print;
mod retype;
mod sched;
mod skb_replica;
mod smp;
mod storage;
mod testing;
mod thread;
mod throttle;
mod tlb;
mod transport;
mod twophase;
mod user;

use arch::{apic, cpu, power, start_ap};
use percpu::CoreState;

/// The boot core's first Rust function.
#[no_mangle]
extern "C" fn kmain(start_info: u32) -> ! {
    boot::boot_core(start_info)
}

/// An application processor's first Rust function (on its own stack and the kernel tables).
#[no_mangle]
extern "C" fn ap_main(index: usize) -> ! {
    start_ap::acknowledge(index);
    let Some(core) = percpu::core(index) else { cpu::halt_forever() };
    // SAFETY: this core's block, entered once, on this core, interrupts off.
    unsafe { core.enter() };
    apic::enable_on_this_core();
    if apic::id() != core.apic_id || mem::heap::init_this_core().is_none() {
        println!(
            "smp: core {index} failed to initialise (APIC id {} expected {})",
            apic::id(),
            core.apic_id
        );
        core.set_state(CoreState::Offline);
        cpu::halt_forever();
    }
    print::open_this_core();
    monitor::init_this_core(percpu::core_count());
    twophase::init_this_core();
    throttle::start_tick(index);
    core.set_state(CoreState::Online);
    // The tick (and a slowed core's duty cycle) runs from now on, also under the first
    // remote calls, such as the SKB's speed measurement.
    cpu::enable_interrupts();
    crate::sched::idle_loop()
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    // Before GS is set only the boot core runs; `this_core` would fault.
    let core =
        percpu::core(0).filter(|c| c.state() != CoreState::Offline).map(|_| percpu::this_core());
    let index = core.map_or(0, |c| c.index);
    println!("{}core={}: {}", verdict::PANIC_MARKER, index, info);
    match core {
        Some(c) if c.index != 0 => {
            c.stop_after_fault(255);
            cpu::halt_forever()
        }
        _ => power::exit_qemu(verdict::ExitCode::Failure),
    }
}
