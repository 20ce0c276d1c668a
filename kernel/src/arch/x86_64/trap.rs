//! The IDT, the interrupt entry stubs and the trap dispatcher.
//!
//! Every vector has a 16-byte stub that pushes a uniform frame (a zero error code where the
//! CPU pushes none, then the vector number) and jumps to `isr_common`, which saves the
//! general registers and calls `trap_dispatch`. That function is the kernel's, above this
//! layer (`kernel/src/interrupts.rs`): the stubs reach it by its link name, so the
//! hardware glue never imports the layers that handle what it delivers.

use core::arch::global_asm;

/// Local APIC timer tick.
pub const VECTOR_TIMER: u8 = 0x30;
/// Wake-up IPI: a message is waiting for a halted core (Multikernel §5.2).
pub const VECTOR_WAKE: u8 = 0x31;
/// IPI used by the IPI test: the receiver counts it per sender.
pub const VECTOR_TEST: u8 = 0x32;
/// Local APIC spurious-interrupt vector (no EOI).
pub const VECTOR_SPURIOUS: u8 = 0xff;

/// Double fault.
pub const VECTOR_DOUBLE_FAULT: u8 = 8;
/// Non-maskable interrupt.
const VECTOR_NMI: u8 = 2;
/// Page fault.
pub const VECTOR_PAGE_FAULT: u8 = 14;

// Vectors for which the CPU pushes an error code: 8, 10-14, 17, 21, 29, 30.
global_asm!(
    r#"
    .section .text.isr, "ax"
    .balign 16
    .global isr_stubs
isr_stubs:
    .set vec, 0
    .rept 256
    .balign 16
    .if (vec == 8) || ((vec >= 10) && (vec <= 14)) || (vec == 17) || (vec == 21) || (vec == 29) || (vec == 30)
    .else
    pushq $0
    .endif
    pushq $vec
    jmp isr_common
    .set vec, vec + 1
    .endr

isr_common:
    testb $3, 24(%rsp)           /* from user mode? then switch to the kernel's GS */
    jz 1f
    swapgs
1:  pushq %rax
    pushq %rcx
    pushq %rdx
    pushq %rbx
    pushq %rbp
    pushq %rsi
    pushq %rdi
    pushq %r8
    pushq %r9
    pushq %r10
    pushq %r11
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, %rdi
    cld
    call trap_dispatch
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %r11
    popq %r10
    popq %r9
    popq %r8
    popq %rdi
    popq %rsi
    popq %rbp
    popq %rbx
    popq %rdx
    popq %rcx
    popq %rax
    addq $16, %rsp
    testb $3, 8(%rsp)            /* back to user mode? then give it its GS */
    jz 2f
    swapgs
2:  iretq
"#,
    options(att_syntax)
);

extern "C" {
    static isr_stubs: u8;
}

/// The registers saved on entry, in the order `isr_common` pushes them.
#[repr(C)]
#[derive(Debug)]
pub struct TrapFrame {
    pub r15: u64,
    pub r14: u64,
    pub r13: u64,
    pub r12: u64,
    pub r11: u64,
    pub r10: u64,
    pub r9: u64,
    pub r8: u64,
    pub rdi: u64,
    pub rsi: u64,
    pub rbp: u64,
    pub rbx: u64,
    pub rdx: u64,
    pub rcx: u64,
    pub rax: u64,
    pub vector: u64,
    pub error: u64,
    pub rip: u64,
    pub cs: u64,
    pub rflags: u64,
    pub rsp: u64,
    pub ss: u64,
}

#[derive(Clone, Copy)]
#[repr(C)]
struct Gate {
    offset_low: u16,
    selector: u16,
    ist: u8,
    flags: u8,
    offset_mid: u16,
    offset_high: u32,
    reserved: u32,
}

/// An interrupt descriptor table: 256 gates, exactly one 4 KiB page. Each core has its
/// own, in a frame of its own memory (Multikernel: no kernel structure shared by default).
#[repr(C, align(4096))]
pub struct Idt([Gate; 256]);

const _: () = assert!(core::mem::size_of::<Idt>() == 4096);

/// Code segment selector of the per-core GDT (`gdt::CoreTables` appends code first).
const KERNEL_CODE_SELECTOR: u16 = 0x08;

/// Fills the IDT in the 4 KiB frame at `va`: every vector goes to its stub; double fault
/// and NMI run on the core's IST stack.
///
/// # Safety
/// `va` must be a writable, page-aligned frame the caller owns for the kernel's lifetime.
pub unsafe fn build_idt(va: u64) -> &'static Idt {
    let base = (&raw const isr_stubs) as u64;
    let idt = va as *mut Idt;
    for v in 0..256usize {
        let handler = base + 16 * v as u64;
        let ist = if v as u8 == VECTOR_DOUBLE_FAULT || v as u8 == VECTOR_NMI {
            super::gdt::IST_CRITICAL as u8 + 1
        } else {
            0
        };
        let gate = Gate {
            offset_low: handler as u16,
            selector: KERNEL_CODE_SELECTOR,
            ist,
            flags: 0x8e, // present, ring 0, 64-bit interrupt gate (IF cleared on entry)
            offset_mid: (handler >> 16) as u16,
            offset_high: (handler >> 32) as u32,
            reserved: 0,
        };
        // SAFETY: forwarded from the caller; one gate of the table.
        unsafe { (*idt).0[v] = gate };
    }
    // SAFETY: fully initialised above; never written again.
    unsafe { &*idt }
}

impl Idt {
    /// Loads this IDT on the calling core.
    pub fn load(&'static self) {
        let ptr = x86_64::structures::DescriptorTablePointer {
            limit: (core::mem::size_of::<Idt>() - 1) as u16,
            base: x86_64::VirtAddr::new(self as *const Idt as u64),
        };
        // SAFETY: the table is fully initialised, never changes, and lives forever.
        unsafe { x86_64::instructions::tables::lidt(&ptr) };
    }
}

/// Names of the 32 exception vectors, for reports.
pub const EXCEPTION_NAMES: [&str; 32] = [
    "divide error",
    "debug",
    "NMI",
    "breakpoint",
    "overflow",
    "bound range",
    "invalid opcode",
    "device not available",
    "double fault",
    "coprocessor overrun",
    "invalid TSS",
    "segment not present",
    "stack fault",
    "general protection",
    "page fault",
    "reserved",
    "x87 error",
    "alignment check",
    "machine check",
    "SIMD error",
    "virtualization",
    "control protection",
    "reserved",
    "reserved",
    "reserved",
    "reserved",
    "reserved",
    "reserved",
    "hypervisor injection",
    "VMM communication",
    "security",
    "reserved",
];
