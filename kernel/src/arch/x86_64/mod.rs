//! x86-64: boot, CPU structures, interrupts, the local APIC, timers, paging, SMP start,
//! PCI enumeration.
pub mod acpi;
pub mod apic;
pub mod boot;
pub mod cpu;
pub mod gdt;
pub mod paging;
pub mod pci;
pub mod power;
pub mod serial;
pub mod start_ap;
pub mod timer;
pub mod trap;
pub mod user_entry;

/// Masks the legacy 8259 PICs (remapped to vectors 0x20-0x2f first, so a spurious IRQ can
/// never look like an exception). Atoll uses only the local APICs.
pub fn disable_legacy_pic() {
    use cpu::outb;
    outb(0x20, 0x11);
    outb(0xa0, 0x11);
    outb(0x21, 0x20);
    outb(0xa1, 0x28);
    outb(0x21, 4);
    outb(0xa1, 2);
    outb(0x21, 1);
    outb(0xa1, 1);
    outb(0x21, 0xff);
    outb(0xa1, 0xff);
}

/// Sets this core's GS base: `gs:0` then reaches the core's `PerCore` block.
///
/// # Safety
/// `block` must point at a live `PerCore` whose first field points at itself.
pub unsafe fn set_gs_base(block: u64) {
    // SAFETY: forwarded; IA32_GS_BASE.
    unsafe { cpu::wrmsr(0xc000_0101, block) };
}

/// Reads `gs:0`: the calling core's `PerCore` pointer.
pub fn gs_self() -> u64 {
    let v: u64;
    // SAFETY: every core sets GS base before any code that calls this runs.
    unsafe {
        core::arch::asm!("mov {}, gs:[0]", out(reg) v, options(nostack, readonly, preserves_flags))
    };
    v
}
