//! Ring 3: entering user mode, the `syscall` entry, and the way back to the kernel.
//!
//! `resume_user` saves the kernel's callee-saved registers and stack pointer in a
//! `KernelContext`, points RSP0 (interrupts) and `gs:8` (system calls) at that stack, and
//! `iretq`s to a thread with every user register from its saved `UserRegs`. A system call
//! enters at `syscall_entry` on that stack, saves every user register (a blocking call
//! keeps them) and returns with `sysretq`. When the thread leaves the CPU (exits, faults,
//! blocks, is preempted), `exit_to_kernel` restores the context, so `resume_user` returns
//! a word saying why to the scheduler loop.
//!
//! GS: in the kernel, GS base is the core's `PerCore` block; in user mode it is 0. Every
//! way in (`syscall`, an interrupt from ring 3) and out does `swapgs`.
//!
//! FS: the kernel never uses it, so its base is the running thread's own (its thread-local
//! storage pointer, `set_fs_base`): [`load_fs_base`] before the thread runs, [`fs_base`]
//! after it left. CR4.FSGSBASE stays clear, so user code cannot write either base itself
//! (`wrfsbase` and `wrgsbase` fault): a thread's FS base changes only through the call,
//! and user GS stays 0 as `swapgs` assumes.

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

/// The flags a thread's saved `rflags` may carry back to user mode: CF, PF, AF, ZF, SF,
/// DF and OF (IF is always set; IOPL, TF and the rest are never taken from a thread).
const USER_FLAGS: u64 = 0xcd5;

/// A thread's user registers, as saved when it left the CPU (a tick, a blocking call)
/// and as [`run_saved`] restores them: everything user code can see but the FPU state.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UserRegs {
    pub rax: u64,
    pub rbx: u64,
    pub rcx: u64,
    pub rdx: u64,
    pub rsi: u64,
    pub rdi: u64,
    pub rbp: u64,
    pub r8: u64,
    pub r9: u64,
    pub r10: u64,
    pub r11: u64,
    pub r12: u64,
    pub r13: u64,
    pub r14: u64,
    pub r15: u64,
    pub rip: u64,
    pub rsp: u64,
    pub rflags: u64,
}

impl UserRegs {
    /// A fresh thread: `rip`, `rsp` and its argument in `rdi`, every other register 0.
    pub fn start(rip: u64, rsp: u64, arg: u64) -> UserRegs {
        UserRegs { rip, rsp, rdi: arg, rflags: 0x202, ..UserRegs::default() }
    }

    /// The registers an interrupt from user mode saved.
    pub fn from_trap(f: &super::trap::TrapFrame) -> UserRegs {
        UserRegs {
            rax: f.rax,
            rbx: f.rbx,
            rcx: f.rcx,
            rdx: f.rdx,
            rsi: f.rsi,
            rdi: f.rdi,
            rbp: f.rbp,
            r8: f.r8,
            r9: f.r9,
            r10: f.r10,
            r11: f.r11,
            r12: f.r12,
            r13: f.r13,
            r14: f.r14,
            r15: f.r15,
            rip: f.rip,
            rsp: f.rsp,
            rflags: f.rflags,
        }
    }

    /// The registers of a thread in a system call, which returns `result` when the thread
    /// runs again (`syscall` leaves the return address in `rcx` and the flags in `r11`).
    pub fn from_syscall(f: &SyscallFrame, result: u64) -> UserRegs {
        UserRegs {
            rax: result,
            rbx: f.rbx,
            rcx: f.rip,
            rdx: f.rdx,
            rsi: f.rsi,
            rdi: f.rdi,
            rbp: f.rbp,
            r8: f.r8,
            r9: f.r9,
            r10: f.r10,
            r11: f.rflags,
            r12: f.r12,
            r13: f.r13,
            r14: f.r14,
            r15: f.r15,
            rip: f.rip,
            rsp: f.rsp,
            rflags: f.rflags,
        }
    }
}

/// A thread's x87/SSE state, the `fxsave` image (512 bytes, 16-byte aligned).
#[repr(C, align(16))]
#[derive(Clone)]
pub struct FpuState([u8; 512]);

impl FpuState {
    /// The state after `fninit` with SSE's defaults: control word 0x37f, MXCSR 0x1f80.
    pub fn initial() -> FpuState {
        let mut area = [0u8; 512];
        area[0..2].copy_from_slice(&0x037fu16.to_le_bytes());
        area[24..28].copy_from_slice(&0x1f80u32.to_le_bytes());
        area[28..32].copy_from_slice(&0xffffu32.to_le_bytes()); // MXCSR_MASK (ignored)
        FpuState(area)
    }

    /// Saves this core's FPU registers here (the kernel never uses them, so after a
    /// thread leaves user mode they are still its own).
    pub fn save(&mut self) {
        // SAFETY: `fxsave64` writes 512 bytes to a 16-byte-aligned buffer we own.
        unsafe { core::arch::asm!("fxsave64 [{}]", in(reg) self.0.as_mut_ptr(), options(nostack)) };
    }

    /// Loads this state into the core's FPU registers.
    pub fn restore(&self) {
        // SAFETY: an image `save` made or `initial` built (reserved bits of MXCSR clear).
        unsafe { core::arch::asm!("fxrstor64 [{}]", in(reg) self.0.as_ptr(), options(nostack)) };
    }
}

/// Loads a thread's FS base into this core before the thread runs (and a null FS
/// selector first: a selector load sets the base from a descriptor, and an `iretq` to ring
/// 3 may null a selector it finds there, so the base is written last). `base` comes from
/// `set_fs_base`, which took only user-half addresses, or from [`fs_base`]; anything else
/// loads 0 rather than fault.
pub fn load_fs_base(base: u64) {
    use x86_64::instructions::segmentation::{Segment, FS};
    use x86_64::registers::model_specific::FsBase;
    use x86_64::structures::gdt::SegmentSelector;
    // SAFETY: the kernel never uses FS (it has no thread-local storage), so neither its
    // selector nor its base carries kernel state; the null selector is always loadable.
    unsafe { FS::set_reg(SegmentSelector(0)) };
    let base = x86_64::VirtAddr::try_new(base).unwrap_or(x86_64::VirtAddr::zero());
    FsBase::write(base);
}

/// This core's FS base: the running thread's (user code cannot change it but through a
/// selector load, which gives a flat descriptor's base, 0), read when it leaves the CPU.
pub fn fs_base() -> u64 {
    x86_64::registers::model_specific::FsBase::read().as_u64()
}

/// Callee-saved registers and stack pointer of the kernel code that entered user mode.
#[repr(C)]
#[derive(Default)]
pub struct KernelContext {
    regs: [u64; 7], // rbx, rbp, r12, r13, r14, r15, rsp
}

/// The user registers a system call brings in (pushed by `syscall_entry`): all of them,
/// so a call that blocks can save the thread whole and another can run.
#[repr(C)]
#[derive(Debug)]
pub struct SyscallFrame {
    /// Callee-saved registers (saved only so a blocking call can keep them).
    pub r15: u64,
    /// Callee-saved.
    pub r14: u64,
    /// Callee-saved.
    pub r13: u64,
    /// Callee-saved.
    pub r12: u64,
    /// Callee-saved.
    pub rbp: u64,
    /// Callee-saved.
    pub rbx: u64,
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

    /* u64 resume_user(KernelContext *ctx, const UserRegs *regs, u64 *rsp0): saves the
       kernel context, then enters ring 3 with every user register from `regs` (a thread
       starting or switched back in); returns what exit_to_kernel passes */
    .global resume_user
resume_user:
    movq %rbx, 0(%rdi)
    movq %rbp, 8(%rdi)
    movq %r12, 16(%rdi)
    movq %r13, 24(%rdi)
    movq %r14, 32(%rdi)
    movq %r15, 40(%rdi)
    movq %rsp, 48(%rdi)
    movq %rsp, (%rdx)
    movq %rsp, %gs:8
    movq %rsi, %rax
    pushq ${user_data}           /* iretq frame: ss, rsp, rflags, cs, rip */
    pushq 128(%rax)
    movq 136(%rax), %rcx
    andq ${user_flags}, %rcx     /* arithmetic flags and DF only; IF always set */
    orq $0x202, %rcx
    pushq %rcx
    pushq ${user_code}
    pushq 120(%rax)
    movq 8(%rax), %rbx
    movq 16(%rax), %rcx
    movq 24(%rax), %rdx
    movq 32(%rax), %rsi
    movq 40(%rax), %rdi
    movq 48(%rax), %rbp
    movq 56(%rax), %r8
    movq 64(%rax), %r9
    movq 72(%rax), %r10
    movq 80(%rax), %r11
    movq 88(%rax), %r12
    movq 96(%rax), %r13
    movq 104(%rax), %r14
    movq 112(%rax), %r15
    movq 0(%rax), %rax
    swapgs
    iretq

    /* void exit_to_kernel(KernelContext *ctx, u64 status): resume_user returns status */
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
    movq %gs:8, %rsp             /* the kernel stack of resume_user */
    subq $8, %rsp                /* sixteen pushes below: keep the call 16-byte aligned */
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
    pushq %rbx                   /* the callee-saved ones: a blocking call saves them */
    pushq %rbp
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, %rdi
    call syscall_dispatch        /* rax = result word */
    addq $48, %rsp               /* callee-saved: Rust code kept them */
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
    user_flags = const USER_FLAGS,
    options(att_syntax)
);

extern "C" {
    fn resume_user(ctx: *mut KernelContext, regs: *const UserRegs, rsp0: *mut u64) -> u64;
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
    // Threads may use x87 and SSE: the kernel saves their state (`fxsave`) when it
    // switches them. CR0: MP set, EM and TS clear; CR4: OSFXSR and OSXMMEXCPT.
    // SAFETY: enabling FPU/SSE for user code; the kernel itself is built without SSE.
    unsafe {
        core::arch::asm!(
            "mov {t}, cr0", "and {t}, ~0xc", "or {t}, 0x2", "mov cr0, {t}",
            "mov {t}, cr4", "or {t}, 0x600", "mov cr4, {t}",
            t = out(reg) _, options(nostack)
        );
    }
}

/// Runs a thread from its saved registers until it leaves (exits, faults, blocks or is
/// preempted); returns the word passed to [`leave_user`].
///
/// # Safety
/// The current page tables map the thread's program for user mode.
pub unsafe fn run_saved(ctx: &mut KernelContext, regs: &UserRegs, rsp0: *mut u64) -> u64 {
    // SAFETY: forwarded from the caller; `regs` is only read.
    unsafe { resume_user(ctx, regs, rsp0) }
}

/// Abandons the user program and returns `status` from [`run_saved`].
///
/// # Safety
/// `ctx` must be the context of the `run_saved` call still active on this core's stack,
/// and the caller must be running in the kernel on that same stack (a system call or an
/// interrupt from that program).
pub unsafe fn leave_user(ctx: *const KernelContext, status: u64) -> ! {
    // SAFETY: forwarded from the caller.
    unsafe { exit_to_kernel(ctx, status) }
}
