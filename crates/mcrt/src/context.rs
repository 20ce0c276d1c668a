//! Stacks and the context switch (McRT §2: user-level threads are cooperative, so a switch
//! saves only what the System V ABI says a callee keeps: rbx, rbp, r12–r15, the stack
//! pointer, and the FPU control state, MXCSR and the x87 control word).
//!
//! Every McRT stack is [`STACK_BYTES`] long and aligned to its length, and its lowest bytes
//! hold the thread's header ([`crate::task::Task`]). So the running thread is found from the
//! stack pointer alone (`rsp & !(STACK_BYTES - 1)`), on any host, without thread-local
//! storage, which Atoll's user space does not have.

use alloc::alloc::{alloc, dealloc, Layout};
use core::arch::global_asm;

/// Bytes of every thread's stack (header included), a power of two.
pub const STACK_BYTES: usize = 64 * 1024;

/// The MXCSR and x87 control word a new thread starts with (the power-on defaults: every
/// exception masked, round to nearest).
const INITIAL_FPU: u64 = 0x1F80 | (0x037F << 32);

/// One stack: `STACK_BYTES` aligned to `STACK_BYTES`.
pub struct Stack {
    base: *mut u8,
}

// SAFETY: a stack is plain memory owned by whoever holds the `Stack`.
unsafe impl Send for Stack {}

impl Stack {
    fn layout() -> Layout {
        // A constant, valid layout (power-of-two size and alignment).
        Layout::from_size_align(STACK_BYTES, STACK_BYTES).unwrap_or(Layout::new::<u8>())
    }

    /// A fresh stack, or `None` when memory is short.
    pub fn new() -> Option<Stack> {
        // SAFETY: the layout has a non-zero size.
        let base = unsafe { alloc(Self::layout()) };
        (!base.is_null()).then_some(Stack { base })
    }

    /// Its lowest address (where the thread header lives).
    pub fn base(&self) -> *mut u8 {
        self.base
    }

    /// Rebuilds the `Stack` whose base is `base` (given up with [`Stack::into_base`]).
    ///
    /// # Safety
    /// `base` came from `into_base` and nobody else owns it.
    pub unsafe fn from_base(base: *mut u8) -> Stack {
        Stack { base }
    }

    /// Gives the memory up without freeing it; [`Stack::from_base`] takes it back.
    pub fn into_base(self) -> *mut u8 {
        let base = self.base;
        core::mem::forget(self);
        base
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout, and owned by us.
        unsafe { dealloc(self.base, Self::layout()) }
    }
}

/// The base of the stack the caller runs on (its thread's header), if it runs on a McRT
/// stack at all.
#[inline(always)]
pub fn stack_base_of_sp() -> usize {
    let sp: usize;
    // SAFETY: reads the stack pointer; no memory is touched.
    unsafe {
        core::arch::asm!("mov {}, rsp", out(reg) sp, options(nomem, nostack, preserves_flags))
    };
    sp & !(STACK_BYTES - 1)
}

/// Prepares a new stack so that the first switch to it calls `entry(task)` with an
/// ABI-aligned stack; returns the stack pointer to switch to. `top` is the stack's top
/// (16-aligned).
///
/// # Safety
/// `top` is the 16-aligned top of a stack the caller owns, with at least 64 bytes below it.
pub unsafe fn prepare(top: usize, entry: extern "C" fn(usize) -> !, task: usize) -> usize {
    // The frame `mcrt_switch` pops: FPU word, r15, r14, r13, r12, rbx, rbp, return address.
    // After its `ret` the stack pointer is `top`, 16-aligned, as `mcrt_trampoline`'s call
    // needs.
    let sp = top - 64;
    let frame = sp as *mut u64;
    let words = [
        INITIAL_FPU,
        0,
        0,
        task as u64,               // r13: the argument
        entry as *const () as u64, // r12: the function
        0,
        0,
        mcrt_trampoline as *const () as u64,
    ];
    for (i, w) in words.iter().enumerate() {
        // SAFETY: the caller owns the 64 bytes below `top`.
        unsafe { frame.add(i).write(*w) };
    }
    sp
}

extern "C" {
    /// Saves the callee-saved registers and FPU control state on the current stack, stores
    /// the stack pointer in `*save`, and continues on the stack `next` with the state saved
    /// there.
    fn mcrt_switch(save: *mut usize, next: usize);
    /// A new thread's first return address: calls `r12(r13)`.
    fn mcrt_trampoline();
}

global_asm!(
    ".globl mcrt_switch",
    "mcrt_switch:",
    "push rbp",
    "push rbx",
    "push r12",
    "push r13",
    "push r14",
    "push r15",
    "sub rsp, 8",
    "stmxcsr [rsp]",
    "fnstcw [rsp + 4]",
    "mov [rdi], rsp",
    "mov rsp, rsi",
    "ldmxcsr [rsp]",
    "fldcw [rsp + 4]",
    "add rsp, 8",
    "pop r15",
    "pop r14",
    "pop r13",
    "pop r12",
    "pop rbx",
    "pop rbp",
    "ret",
    ".globl mcrt_trampoline",
    "mcrt_trampoline:",
    "mov rdi, r13",
    "call r12",
    "ud2",
);

/// Switches from the running context (its stack pointer saved in `*save`) to the one whose
/// stack pointer is `next`; returns when something switches back.
///
/// # Safety
/// `next` is a stack pointer saved by `switch` or made by [`prepare`], of a context that is
/// not running; `save` stays valid until this context is resumed.
#[inline(always)]
pub unsafe fn switch(save: *mut usize, next: usize) {
    // SAFETY: as the caller promised; `mcrt_switch` follows the C ABI.
    unsafe { mcrt_switch(save, next) }
}
