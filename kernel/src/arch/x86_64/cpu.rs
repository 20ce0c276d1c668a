//! Small wrappers over single instructions: port I/O, MSRs, TSC, CPUID, halting.

use core::arch::asm;
use core::arch::x86_64::{__cpuid_count, _rdtsc, CpuidResult};
use x86_64::instructions::port::Port;
use x86_64::registers::model_specific::Msr;

/// Writes one byte to an I/O port.
pub fn outb(port: u16, value: u8) {
    // SAFETY: port I/O has no memory-safety effect on the kernel; callers name devices they own.
    unsafe { Port::new(port).write(value) }
}

/// Reads one byte from an I/O port.
pub fn inb(port: u16) -> u8 {
    // SAFETY: as for `outb`.
    unsafe { Port::new(port).read() }
}

/// Writes 16 bits to an I/O port.
pub fn outw(port: u16, value: u16) {
    // SAFETY: as for `outb`.
    unsafe { Port::new(port).write(value) }
}

/// Writes 32 bits to an I/O port.
pub fn outl(port: u16, value: u32) {
    // SAFETY: as for `outb`.
    unsafe { Port::new(port).write(value) }
}

/// Reads a model-specific register.
pub fn rdmsr(msr: u32) -> u64 {
    // SAFETY: callers read architectural MSRs that exist on every x86-64 CPU Atoll runs on.
    unsafe { Msr::new(msr).read() }
}

/// Writes a model-specific register.
///
/// # Safety
/// The write must not break the kernel's own invariants (e.g. GS base, EFER).
pub unsafe fn wrmsr(msr: u32, value: u64) {
    // SAFETY: forwarded to the caller.
    unsafe { Msr::new(msr).write(value) }
}

/// The time-stamp counter.
#[inline]
pub fn rdtsc() -> u64 {
    // SAFETY: RDTSC is always available in long mode and has no side effects.
    unsafe { _rdtsc() }
}

/// CPUID with a sub-leaf.
pub fn cpuid(leaf: u32, subleaf: u32) -> CpuidResult {
    __cpuid_count(leaf, subleaf)
}

/// CPUID in the form the `caches` crate decodes (`caches::from_cpuid`): the cache
/// hierarchy from the leaf the vendor fills (AMPS §2.4.2 compares a thread's resident set
/// with its last level).
pub fn cpuid_for_caches(leaf: u32, subleaf: u32) -> caches::CpuIdResult {
    let r = cpuid(leaf, subleaf);
    caches::CpuIdResult { eax: r.eax, ebx: r.ebx, ecx: r.ecx, edx: r.edx }
}

/// The faulting address of the last page fault.
pub fn cr2() -> u64 {
    let v: u64;
    // SAFETY: reading CR2 has no side effects.
    unsafe { asm!("mov {}, cr2", out(reg) v, options(nomem, nostack)) };
    v
}

// `sti`, `cli` and `hlt` are compiler barriers (no `nomem`): an interrupt handler may
// change memory at an `sti`, and `PerCoreState::with` relies on no access to its state
// moving out past the `cli` that starts its critical section or the `sti` that ends it.

/// Enables interrupts and halts until one arrives, atomically (no lost wakeup).
pub fn enable_and_halt() {
    // SAFETY: `sti; hlt` is the canonical idle sequence; handlers are installed before use.
    unsafe { asm!("sti; hlt", options(nostack)) };
}

/// Enables interrupts.
pub fn enable_interrupts() {
    // SAFETY: the IDT is loaded before any core calls this.
    unsafe { asm!("sti", options(nostack)) };
}

/// Disables interrupts and returns whether they were enabled.
pub fn disable_interrupts() -> bool {
    let flags: u64;
    // SAFETY: reads RFLAGS and clears IF; no memory effects.
    unsafe { asm!("pushfq; pop {}; cli", out(reg) flags) };
    flags & (1 << 9) != 0
}

/// Whether interrupts are enabled (RFLAGS.IF).
pub fn interrupts_enabled() -> bool {
    let flags: u64;
    // SAFETY: reads RFLAGS; no memory effects.
    unsafe { asm!("pushfq; pop {}", out(reg) flags, options(nomem, preserves_flags)) };
    flags & (1 << 9) != 0
}

/// Runs `f` with interrupts disabled, restoring the previous state.
pub fn without_interrupts<R>(f: impl FnOnce() -> R) -> R {
    let was_enabled = disable_interrupts();
    let r = f();
    if was_enabled {
        enable_interrupts();
    }
    r
}

/// Stops this core for good: interrupts off, halt forever.
pub fn halt_forever() -> ! {
    loop {
        // SAFETY: stopping the core is the intent.
        unsafe { asm!("cli; hlt", options(nomem, nostack)) };
    }
}

/// Tells the core it is in a spin-wait loop.
#[inline]
pub fn pause() {
    core::hint::spin_loop();
}
