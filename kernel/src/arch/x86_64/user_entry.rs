//! Ring 3: entering user mode, the `syscall` entry, and the way back to the kernel.
//!
//! `enter_user` saves the kernel's callee-saved registers and stack pointer in a
//! `KernelContext`, points RSP0 (interrupts) and `gs:8` (system calls) at that stack, and
//! `iretq`s to the program. A system call enters at `syscall_entry` on that stack and
//! returns with `sysretq`. When the program exits or faults, `exit_to_kernel` restores the
//! context, so `enter_user` returns the program's status to its caller.
//!
//! GS: in the kernel, GS base is the core's `PerCore` block; in user mode it is 0. Every
//! way in (`syscall`, an interrupt from ring 3) and out does `swapgs`.

use super::cpu;
use core::arch::global_asm;

/// User data selector (GDT slot 3, RPL 3).
pub const USER_DATA: u64 = 0x18 | 3;
/// User code selector (GDT slot 4, RPL 3).
pub const USER_CODE: u64 = 0x20 | 3;

const IA32_EFER: u32 = 0xc000_0080;
const IA32_STAR: u32 = 0xc000_0081;
const IA32_LSTAR: u32 = 0xc000_0082;
const IA32_FMASK: u32 = 0xc000_0084;
const IA32_KERNEL_GS_BASE: u32 = 0xc000_0102;

/// Callee-saved registers and stack pointer of the kernel code that entered user mode.
#[repr(C)]
#[derive(Default)]
pub struct KernelContext {
    regs: [u64; 7], // rbx, rbp, r12, r13, r14, r15, rsp
}

/// The user registers a system call brings in (pushed by `syscall_entry`).
#[repr(C)]
#[derive(Debug)]
pub struct SyscallFrame {
    /// Not an argument; saved because the ABI preserves it and Rust code may not.
    pub r9: u64,
    /// Fifth argument.
    pub r8: u64,
    /// Fourth argument.
    pub r10: u64,
    /// Third argument.
    pub rdx: u64,
    /// Second argument.
    pub rsi: u64,
    /// First argument.
    pub rdi: u64,
    /// Call number.
    pub rax: u64,
    /// User return address (from RCX).
    pub rip: u64,
    /// User flags (from R11).
    pub rflags: u64,
    /// User stack pointer.
    pub rsp: u64,
}

global_asm!(
    r#"
    .section .text.user_entry, "ax"

    /* u64 enter_user(KernelContext *ctx, u64 entry, u64 user_rsp, u64 *rsp0, u64 arg) */
    .global enter_user
enter_user:
    movq %rbx, 0(%rdi)
    movq %rbp, 8(%rdi)
    movq %r12, 16(%rdi)
    movq %r13, 24(%rdi)
    movq %r14, 32(%rdi)
    movq %r15, 40(%rdi)
    movq %rsp, 48(%rdi)
    movq %rsp, (%rcx)            /* interrupts from user mode land here */
    movq %rsp, %gs:8             /* and so do system calls */
    pushq ${user_data}           /* iretq frame: ss, rsp, rflags, cs, rip */
    pushq %rdx
    pushq $0x202                 /* IF set */
    pushq ${user_code}
    pushq %rsi
    xorl %eax, %eax              /* leave no kernel values in registers */
    xorl %ebx, %ebx
    xorl %ecx, %ecx
    xorl %edx, %edx
    xorl %esi, %esi
    movq %r8, %rdi               /* the context's argument */
    xorl %ebp, %ebp
    xorl %r8d, %r8d
    xorl %r9d, %r9d
    xorl %r10d, %r10d
    xorl %r11d, %r11d
    xorl %r12d, %r12d
    xorl %r13d, %r13d
    xorl %r14d, %r14d
    xorl %r15d, %r15d
    swapgs
    iretq

    /* void exit_to_kernel(KernelContext *ctx, u64 status): enter_user returns status */
    .global exit_to_kernel
exit_to_kernel:
    movq 0(%rdi), %rbx
    movq 8(%rdi), %rbp
    movq 16(%rdi), %r12
    movq 24(%rdi), %r13
    movq 32(%rdi), %r14
    movq 40(%rdi), %r15
    movq 48(%rdi), %rsp
    movq %rsi, %rax
    ret

    /* syscall: rcx = user rip, r11 = user rflags; IF, DF, TF, AC cleared by FMASK */
    .global syscall_entry
syscall_entry:
    swapgs
    movq %rsp, %gs:16            /* user rsp */
    movq %gs:8, %rsp             /* the kernel stack of enter_user */
    subq $8, %rsp                /* ten pushes below: keep the call 16-byte aligned */
    pushq %gs:16
    pushq %r11
    pushq %rcx
    pushq %rax
    pushq %rdi
    pushq %rsi
    pushq %rdx
    pushq %r10
    pushq %r8
    pushq %r9
    movq %rsp, %rdi
    call syscall_dispatch        /* rax = result word */
    popq %r9
    popq %r8
    popq %r10
    popq %rdx
    popq %rsi
    popq %rdi
    addq $8, %rsp                /* the call number; rax holds the result */
    popq %rcx
    popq %r11
    popq %rsp                    /* user rsp: last use of the kernel stack */
    swapgs
    sysretq
"#,
    user_data = const USER_DATA,
    user_code = const USER_CODE,
    options(att_syntax)
);

extern "C" {
    fn enter_user(
        ctx: *mut KernelContext,
        entry: u64,
        user_rsp: u64,
        rsp0: *mut u64,
        arg: u64,
    ) -> u64;
    fn exit_to_kernel(ctx: *const KernelContext, status: u64) -> !;
    fn syscall_entry();
}

/// Enables `syscall` on this core: STAR selectors, the entry point, the flags to clear.
pub fn init_this_core() {
    // SAFETY: architectural MSRs; the entry point and selectors match the GDT layout.
    unsafe {
        cpu::wrmsr(IA32_EFER, cpu::rdmsr(IA32_EFER) | 1); // SCE
                                                          // sysret: CS = base + 16, SS = base + 8 (base 0x10 | 3); syscall: CS 0x08, SS 0x10.
        cpu::wrmsr(IA32_STAR, (0x13u64 << 48) | (0x08u64 << 32));
        cpu::wrmsr(IA32_LSTAR, syscall_entry as *const () as u64);
        cpu::wrmsr(IA32_FMASK, (1 << 9) | (1 << 10) | (1 << 8) | (1 << 18)); // IF DF TF AC
        cpu::wrmsr(IA32_KERNEL_GS_BASE, 0);
    }
}

/// Runs user code at `entry` with stack `user_rsp` and `arg` in `rdi` until it exits or
/// faults; returns the status passed to [`leave_user`].
///
/// # Safety
/// The current page tables must map the program for user mode; `rsp0` is this core's TSS
/// RSP0 slot; `ctx` must stay valid until the program leaves.
pub unsafe fn run_user(
    ctx: &mut KernelContext,
    entry: u64,
    user_rsp: u64,
    rsp0: *mut u64,
    arg: u64,
) -> u64 {
    // SAFETY: forwarded from the caller.
    unsafe { enter_user(ctx, entry, user_rsp, rsp0, arg) }
}

/// Abandons the user program and returns `status` from [`run_user`].
///
/// # Safety
/// `ctx` must be the context of the `run_user` call still active on this core's stack,
/// and the caller must be running in the kernel on that same stack (a system call or an
/// interrupt from that program).
pub unsafe fn leave_user(ctx: *const KernelContext, status: u64) -> ! {
    // SAFETY: forwarded from the caller.
    unsafe { exit_to_kernel(ctx, status) }
}
