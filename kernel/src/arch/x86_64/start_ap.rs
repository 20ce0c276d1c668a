//! Starting an application processor: the real-mode trampoline and INIT-SIPI-SIPI.
//!
//! The trampoline is linked at physical 0x8000 and copied there by the boot core. A core
//! woken by a start-up IPI begins at 0x8000 in real mode, climbs to protected mode and
//! long mode on the boot page tables (identity map), jumps to `ap_start64` in the higher
//! half, switches to the kernel page tables and its own stack, and calls `ap_main`. The
//! boot core fills the parameter block before each start and waits only until the new
//! core acknowledges it: no fixed 10 ms wait when the hardware answers sooner.

use super::boot::enter_long_mode;
use super::paging::phys_to_virt;
use super::{apic, cpu, timer};
use core::arch::global_asm;
use core::sync::atomic::{AtomicUsize, Ordering};

/// Physical page the trampoline runs from (SIPI vector 0x08).
const TRAMPOLINE_PAGE: u8 = 0x08;

global_asm!(
    r#"
    .section .trampoline, "ax"
    .code16
    .global ap_trampoline
ap_trampoline:
    cli
    cld
    xorw %ax, %ax
    movw %ax, %ds
    lgdtl tramp_gdt_ptr
    movl %cr0, %eax
    orl $1, %eax
    movl %eax, %cr0
    ljmpl $0x08, $tramp_pm32

    .code32
tramp_pm32:
    movw $0x10, %ax
    movw %ax, %ds
    movw %ax, %es
    movw %ax, %ss
"#,
    // SAFETY: `tramp_cr3` holds the boot tables (`install_trampoline`), which identity-map
    // this page; `tramp_gdt` (loaded above) has 64-bit code at 0x18; interrupts are off.
    enter_long_mode!(cr3 = "tramp_cr3", code = "0x18", to = "tramp_lm64"),
    r#"
    .code64
tramp_lm64:
    movq tramp_entry, %rax
    jmpq *%rax

    .balign 8
tramp_gdt:
    .quad 0
    .quad 0x00cf9a000000ffff      /* 0x08: 32-bit code */
    .quad 0x00cf92000000ffff      /* 0x10: data */
    .quad 0x00af9a000000ffff      /* 0x18: 64-bit code */
tramp_gdt_end:
tramp_gdt_ptr:
    .word tramp_gdt_end - tramp_gdt - 1
    .long tramp_gdt

    /* parameters, written by the boot core before each start-up IPI */
    .balign 8
    .global tramp_cr3, tramp_entry, tramp_stack, tramp_core
tramp_cr3:   .quad 0
tramp_entry: .quad 0
tramp_stack: .quad 0
tramp_core:  .quad 0

    .section .text.ap_start64, "ax"
    .global ap_start64
ap_start64:
    movq tramp_stack, %rsp
    movq tramp_core, %rdi
    movq KERNEL_CR3(%rip), %rax
    movq %rax, %cr3
    xorl %ebp, %ebp
    call ap_main
1:  cli
    hlt
    jmp 1b
"#,
    options(att_syntax)
);

extern "C" {
    static __trampoline_lma: u8;
    static __trampoline_start: u8;
    static __trampoline_end: u8;
    static tramp_cr3: u8;
    static tramp_entry: u8;
    static tramp_stack: u8;
    static tramp_core: u8;
    static ap_start64: u8;
}

/// The kernel PML4 an AP loads once it runs in the higher half (read by `ap_start64`).
#[no_mangle]
static mut KERNEL_CR3: u64 = 0;

/// Index of the last core that took its parameters (`usize::MAX` while none has).
static ACK: AtomicUsize = AtomicUsize::new(usize::MAX);

fn write_param(symbol: *const u8, value: u64) {
    // The trampoline symbols are linked at their physical addresses below 1 MiB.
    // SAFETY: the trampoline page is reserved RAM, reached through the direct map.
    unsafe { core::ptr::write_volatile(phys_to_virt(symbol as u64) as *mut u64, value) };
}

/// Copies the trampoline to 0x8000 and records the kernel page tables (boot core, once).
pub fn install_trampoline(kernel_pml4: u64, boot_pml4: u64) {
    let lma = (&raw const __trampoline_lma) as u64;
    let len = (&raw const __trampoline_end) as u64 - (&raw const __trampoline_start) as u64;
    // SAFETY: the image copy lies in the kernel image (the direct map reaches it); 0x8000 is
    // reserved low memory that nothing else uses.
    unsafe {
        core::ptr::copy_nonoverlapping(
            phys_to_virt(lma) as *const u8,
            phys_to_virt((&raw const __trampoline_start) as u64) as *mut u8,
            len as usize,
        );
        KERNEL_CR3 = kernel_pml4;
    }
    write_param(&raw const tramp_cr3, boot_pml4);
    write_param(&raw const tramp_entry, (&raw const ap_start64) as u64);
}

/// Why a core did not start.
#[derive(Clone, Copy, Debug)]
pub enum StartError {
    /// No answer after INIT and two start-up IPIs.
    NoResponse,
}

/// Starts the core with `apic_id` on `stack_top` (`sent`: the calling core's
/// [`apic::IcrDestination`]); it enters `ap_main(core)`. Returns once
/// the core has taken its parameters (so the block can be reused for the next core).
pub fn start(
    sent: &apic::IcrDestination,
    apic_id: u32,
    core: usize,
    stack_top: u64,
) -> Result<(), StartError> {
    write_param(&raw const tramp_stack, stack_top);
    write_param(&raw const tramp_core, core as u64);
    ACK.store(usize::MAX, Ordering::SeqCst);
    apic::send_init(sent, apic_id);
    apic::send_startup(sent, apic_id, TRAMPOLINE_PAGE);
    // A second SIPI only if the first went unanswered (the MP spec's fallback); a core
    // already running ignores it.
    for wait_us in [2_000, 1_000_000] {
        let start = cpu::rdtsc();
        while timer::us_since(start) < wait_us {
            if ACK.load(Ordering::Acquire) == core {
                return Ok(());
            }
            cpu::pause();
        }
        apic::send_startup(sent, apic_id, TRAMPOLINE_PAGE);
    }
    Err(StartError::NoResponse)
}

/// Called first by a starting core: its parameters are taken, the next may start.
pub fn acknowledge(core: usize) {
    ACK.store(core, Ordering::Release);
}
