//! Stacks and the context switch (McRT §2: user-level threads are cooperative, so a switch
//! keeps only what the System V ABI says a callee keeps: rbx and rbp, which it pushes;
//! r12–r15, which the compiler saves around it where they are live; the stack pointer; and
//! the FPU control state, MXCSR and the x87 control word, unless the threads share it:
//! `FpuControl::Shared`, or the default `FpuControl::Auto` until a thread calls the setter,
//! [`crate::fpu::set_control`]).
//!
//! Every McRT stack is [`STACK_BYTES`] long and aligned to its length, and its highest
//! bytes hold the thread's header ([`crate::runtime`]'s `Task`), just above where the
//! stack starts: so the running thread is found from the stack pointer alone (its stack's
//! base is `rsp & !(STACK_BYTES - 1)`), on any host, without thread-local storage, which
//! Atoll's user space does not have; and a new thread touches one page, which holds both
//! its header and its first frames.
//!
//! Stacks are recycled: a processor keeps a few, and a process-wide pool keeps up to
//! [`POOL_MAX`] more for later threads and later runtimes, so creating a thread seldom
//! asks the system for memory. A host may carve stacks from memory of its own
//! ([`crate::Host::stack_memory`]; Atoll: segments made on whichever core has room, issue
//! M15): the pool then grows by a segment at a time and keeps every such stack.

use alloc::alloc::{alloc, dealloc, Layout};
#[cfg(not(loom))]
use alloc::vec::Vec;
use core::arch::global_asm;
#[cfg(not(loom))]
use locks::TtsLock;

/// Bytes of every thread's stack (header included), a power of two.
pub const STACK_BYTES: usize = 64 * 1024;

/// Bytes at the very top of every stack that the stack itself keeps (above the header).
pub const STACK_RESERVED: usize = 64;

/// The FPU control words of a thread, which a switch keeps (read and set through
/// [`crate::fpu`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FpuWords {
    /// MXCSR (SSE rounding, exception masks, flush-to-zero, denormals-are-zero); bits 16
    /// and up are reserved and must be clear.
    pub mxcsr: u32,
    /// The x87 FPU control word (precision, rounding, exception masks).
    pub x87: u16,
}

/// The words every McRT thread starts with (the power-on defaults: every exception
/// masked, round to nearest, 64-bit x87 precision).
pub const INITIAL: FpuWords = FpuWords { mxcsr: 0x1F80, x87: 0x037F };

/// The MXCSR and x87 control word a new thread starts with ([`INITIAL`]), as a sharing
/// switch's frame would hold them.
const INITIAL_FPU: u64 = INITIAL.mxcsr as u64 | ((INITIAL.x87 as u64) << 32);

/// Most stacks the process-wide pool keeps.
pub const POOL_MAX: usize = 1024;

/// Stacks given back, for any runtime's next threads (loom builds, which only run the
/// models, have none: loom's locks cannot be made in a `static`).
#[cfg(not(loom))]
static POOL: TtsLock<Vec<Stack>> = TtsLock::new(Vec::new());

/// A stack from the pool, else one carved from stack memory `host` provides
/// ([`crate::Host::stack_memory`], issue M15: on Atoll segments spread over the cores), else
/// a fresh one from the global allocator; `None` when memory is short.
pub fn take_pooled(host: &dyn crate::Host) -> Option<Stack> {
    #[cfg(not(loom))]
    if let Some(s) = POOL.with(|p| p.pop()) {
        return Some(s);
    }
    #[cfg(not(loom))]
    if let Some((base, count)) = host.stack_memory() {
        let mut carved = (0..count).map(|k| {
            let at = (base + k * STACK_BYTES) as *mut u8;
            // SAFETY: the host gave us `count` stacks' worth of writable memory at `base`,
            // aligned to `STACK_BYTES`, for good.
            unsafe { Stack::raw_slot(at).write(HOST_MADE) };
            Stack { base: at }
        });
        let first = carved.next();
        // Host-made stacks are never freed: the pool keeps them beyond `POOL_MAX`.
        POOL.with(|p| p.extend(carved));
        if first.is_some() {
            return first;
        }
    }
    #[cfg(loom)]
    let _ = host;
    Stack::new()
}

/// Gives `stack` to the pool (freed if the pool is full).
#[cfg(loom)]
pub fn give_to_pool(stack: Stack) {
    drop(stack);
}

/// Gives `stack` to the pool (freed if the pool is full and the global allocator made it;
/// a stack carved from a host's memory is always kept).
#[cfg(not(loom))]
pub fn give_to_pool(stack: Stack) {
    let full = POOL.with(|p| {
        if p.len() < POOL_MAX || stack.host_made() {
            p.push(stack);
            None
        } else {
            Some(stack)
        }
    });
    drop(full);
}

/// What a stack's allocation slot holds when the stack was carved from memory a host
/// gave ([`take_pooled`]): address 1, never one the allocator made (those are 64 KiB
/// aligned, or at least 16).
const HOST_MADE: *mut u8 = core::ptr::dangling_mut::<u8>();

/// One stack: `STACK_BYTES` aligned to `STACK_BYTES`.
pub struct Stack {
    base: *mut u8,
}

// SAFETY: a stack is plain memory owned by whoever holds the `Stack`.
unsafe impl Send for Stack {}

impl Stack {
    /// A stack's memory: its size, aligned to it.
    fn aligned() -> Layout {
        // A constant, valid layout (a power-of-two size and alignment).
        Layout::from_size_align(STACK_BYTES, STACK_BYTES).unwrap_or(Layout::new::<u8>())
    }

    /// The memory a stack is carved from when the allocator cannot align that far: twice
    /// its size, so an aligned stack fits anywhere in it.
    fn carved() -> Layout {
        // A constant, valid layout.
        Layout::from_size_align(2 * STACK_BYTES, 16).unwrap_or(Layout::new::<u8>())
    }

    /// A fresh stack, or `None` when memory is short. The allocation's address is kept in
    /// the stack's last word (in [`STACK_RESERVED`], on the page a thread's header and first
    /// frames use anyway, so a new stack touches one page).
    pub fn new() -> Option<Stack> {
        // SAFETY: the layouts have non-zero sizes.
        let mut raw = unsafe { alloc(Self::aligned()) };
        if raw.is_null() {
            // SAFETY: as above.
            raw = unsafe { alloc(Self::carved()) };
        }
        if raw.is_null() {
            return None;
        }
        let base = (raw as usize + STACK_BYTES - 1) & !(STACK_BYTES - 1);
        // SAFETY: `base .. base + STACK_BYTES` lies inside the allocation.
        unsafe { Self::raw_slot(base as *mut u8).write(raw) };
        Some(Stack { base: base as *mut u8 })
    }

    /// Where the stack at `base` keeps its allocation's address.
    fn raw_slot(base: *mut u8) -> *mut *mut u8 {
        (base as usize + STACK_BYTES - 8) as *mut *mut u8
    }

    /// True when it was carved from memory a host gave (never freed).
    pub fn host_made(&self) -> bool {
        // SAFETY: every `Stack` has its allocation slot written (`new`, `take_pooled`).
        unsafe { Self::raw_slot(self.base).read() == HOST_MADE }
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
        if self.host_made() {
            // A host's memory is the runtime's for good: back to the pool, whatever its size.
            #[cfg(not(loom))]
            POOL.with(|p| p.push(Stack { base: self.base }));
            return;
        }
        // SAFETY: `new` stored the allocation's address in the last word; it was aligned
        // (the stack is the whole allocation) or carved, with the matching layout; ours.
        unsafe {
            let raw = Self::raw_slot(self.base).read();
            let layout = if raw == self.base { Self::aligned() } else { Self::carved() };
            dealloc(raw, layout)
        }
    }
}

// ---------------------------------------------------------------------------------------
// Thread headers and switching between threads: the safe interface the runtime uses.
//
// A header is placed in a stack's highest bytes when its thread is made, and taken out
// when the thread is freed; in between, the stack belongs to the header. The crate keeps
// one invariant for the pointers these functions take: **a header pointer is one that
// [`place_header`] returned and that [`free_header`] has not yet been given**. The runtime
// keeps it: a header is freed only once its thread is done and either detached or joined
// (`runtime::retire`, `runtime::free_task`), and until then it is reached only through a
// queue entry, a processor's `pending` slot, a join handle, or the stack pointer.

/// Where a header of type `H` sits in its stack: at the top, below [`STACK_RESERVED`],
/// 64-byte aligned (the thread's first frames start just below it).
pub(crate) const fn header_offset<H>() -> usize {
    STACK_BYTES - STACK_RESERVED - ((core::mem::size_of::<H>() + 63) & !63)
}

/// Places `header` in `stack`'s highest bytes and prepares the stack below it so that
/// the first switch to it calls `entry(header address)`; returns the header and the
/// stack pointer to switch to. The stack now belongs to the header until
/// [`free_header`].
pub(crate) fn place_header<H>(
    stack: Stack,
    header: H,
    entry: extern "C" fn(usize) -> !,
) -> (*const H, usize) {
    const { assert!(core::mem::align_of::<H>() <= 64 && header_offset::<H>() >= 4096) };
    let h = (stack.into_base() as usize + header_offset::<H>()) as *mut H;
    // SAFETY: `h` is 64-aligned (the stack is aligned to its size) and lies inside the
    // stack, which we own: nothing else is there. The 64 bytes below it are ours too
    // (the assertion above leaves at least 4 KiB), and `h` is 16-aligned.
    let sp = unsafe {
        h.write(header);
        prepare(h as usize, entry, h as usize)
    };
    (h, sp)
}

/// The header `h` points to.
///
/// The returned reference is valid until `h` goes to [`free_header`]: by the invariant
/// above, the runtime frees a header only when no thread, queue or handle can reach it
/// any more, so no reference obtained here is used past that.
pub(crate) fn header<'a, H>(h: *const H) -> &'a H {
    // SAFETY: by the crate's invariant (above), `h` was placed by `place_header`, is
    // properly aligned and initialised, and is still live.
    unsafe { &*h }
}

/// The header of the stack the caller runs on: where one is if the caller runs on a McRT
/// stack (the caller checks that it does, and that a live header is there).
#[inline(always)]
pub(crate) fn running_header<H>() -> *const H {
    (stack_base_of_sp() + header_offset::<H>()) as *const H
}

/// Drops the header `h` and gives back its stack. The caller passes a header no thread,
/// queue or handle will reach again (the crate's invariant, above); that thread has left
/// its stack for good.
pub(crate) fn free_header<H>(h: *const H) -> Stack {
    let base = (h as usize - header_offset::<H>()) as *mut u8;
    // SAFETY: by the invariant, `h` is a live header placed by `place_header` in the
    // stack at `base`, which `into_base` gave up, and nothing uses either again.
    unsafe {
        core::ptr::drop_in_place(h as *mut H);
        Stack::from_base(base)
    }
}

/// Switches from the running thread (its stack pointer saved in `save`) to the thread
/// whose saved stack pointer is `next`, with [`switch`] when `keep_fpu` (each thread
/// keeps its FPU control words), else [`switch_sharing_fpu`]; returns when something
/// switches back to this thread.
///
/// The runtime passes only a `next` saved by an earlier switch (or made by
/// [`place_header`]) of a thread that no processor runs (`Task::on_cpu`, taken from a
/// queue under its lock, or the processor's own idle loop), and a `save` in the running
/// thread's header, which lives until it is switched back in.
#[inline(always)]
pub(crate) fn switch_threads(save: &core::cell::Cell<usize>, next: usize, keep_fpu: bool) {
    if keep_fpu {
        // SAFETY: as the runtime ensures (above): `next` is a suspended context that
        // nothing else runs, and `save` outlives the switch.
        unsafe { switch(save.as_ptr(), next) }
    } else {
        // SAFETY: as above.
        unsafe { switch_sharing_fpu(save.as_ptr(), next) }
    }
}

/// What a switched-out thread borrowed when it switched: `p` comes from a reference the
/// thread holds across its switch (on its stack, or passed down to the call that
/// switched), so it is valid while the thread is switched out. The runtime uses this
/// only for the word of a blocked thread's predicate (`predicate.rs`), which it evaluates
/// only while that thread is switched out and the predicate is in its header; the thread
/// clears the predicate before its borrow ends.
pub(crate) fn suspended_borrow<'a, T>(p: *const T) -> &'a T {
    // SAFETY: as above: the borrow `p` came from outlives the thread's switch, and the
    // caller uses the result only while the thread is switched out.
    unsafe { &*p }
}

/// What a thread lends other threads of its team while it waits for them: `p` comes from
/// a reference the lending thread holds (on its stack) until every borrower has said it
/// is done with it, and the borrower uses the result only until it says so. The runtime
/// uses this only for an OpenMP reduction's contributions (`omp::Ctx::reduce`: each member
/// keeps its value alive until the team's slot moves on, after everyone has read).
pub(crate) fn lent<'a, T>(p: *const T) -> &'a T {
    // SAFETY: as above: the lender keeps the referent alive (and unchanged: shared reads
    // only) for as long as the borrower uses the result.
    unsafe { &*p }
}

/// What [`crate::run`] borrows or owns for the whole run (the host; the runtime's shared
/// state, which each thread's header names), with its lifetime erased: `run` joins every
/// processor's system thread, and frees every thread header, before it returns or drops
/// what it owns, so no thread or header holds the result past that.
pub(crate) fn for_the_run<T>(r: &T) -> &'static T {
    // SAFETY: only the lifetime changes; as above, every user of the result is gone
    // before the referent is.
    unsafe { &*(r as *const T) }
}

/// The host [`crate::run`] borrows, for the whole run, as [`for_the_run`].
pub(crate) fn host_for_the_run(host: &dyn crate::Host) -> &'static dyn crate::Host {
    // SAFETY: only the lifetime changes (same layout); as for `for_the_run`, every user of
    // the result is gone before `run` returns.
    unsafe { core::mem::transmute::<&dyn crate::Host, &'static dyn crate::Host>(host) }
}

/// A thread's body that borrows what lives for `'a` only, as the `'static` body a thread
/// takes: the caller joins the thread running it before `'a` ends, on every path (the
/// OpenMP adaptor's `region`, whose guard aborts rather than unwind past the joins).
pub(crate) fn scoped_body<'a>(
    body: alloc::boxed::Box<dyn FnOnce() + Send + 'a>,
) -> alloc::boxed::Box<dyn FnOnce() + Send + 'static> {
    // SAFETY: only the lifetime changes (same layout). The thread may use what `body`
    // borrows only while it runs, and the caller joins it (it has ended) before `'a` ends.
    unsafe { core::mem::transmute(body) }
}

/// The calling thread's FPU control words: (MXCSR, x87 control word).
pub(crate) fn fpu_control() -> (u32, u16) {
    let mut mxcsr: u32 = 0;
    let mut x87: u16 = 0;
    // SAFETY: stores the two words into the locals; nothing else is touched.
    unsafe {
        core::arch::asm!(
            "stmxcsr [{m}]",
            "fnstcw [{x}]",
            m = in(reg) &mut mxcsr,
            x = in(reg) &mut x87,
            options(nostack, preserves_flags),
        )
    };
    (mxcsr, x87)
}

/// Loads the calling thread's FPU control words (the words a saving [`switch`] keeps for
/// it from now on).
///
/// # Panics
/// When `mxcsr` has a reserved bit (16 and up) set, which `ldmxcsr` would fault on.
pub(crate) fn set_fpu_control(mxcsr: u32, x87: u16) {
    assert!(mxcsr >> 16 == 0, "mcrt: reserved MXCSR bits");
    // SAFETY: MXCSR's reserved bits are clear (checked above); any x87 control word
    // loads. Only the two control registers change; no memory is written.
    unsafe {
        core::arch::asm!(
            "ldmxcsr [{m}]",
            "fldcw [{x}]",
            m = in(reg) &mxcsr,
            x = in(reg) &x87,
            options(nostack, preserves_flags, readonly),
        )
    };
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
    // The frame a switch resumes (see [`switch`]): the resume address, here the trampoline,
    // then the FPU word; the trampoline then finds the function and its argument. After
    // it has taken them the stack pointer is `top`, 16-aligned, as its `call` needs.
    let sp = top - 32;
    let frame = sp as *mut u64;
    let words =
        [mcrt_trampoline as *const () as u64, INITIAL_FPU, entry as *const () as u64, task as u64];
    for (i, w) in words.iter().enumerate() {
        // SAFETY: the caller owns the 64 bytes below `top`.
        unsafe { frame.add(i).write(*w) };
    }
    sp
}

extern "C" {
    /// A new thread's first resume address: loads its FPU word, then calls `entry(task)`
    /// from the frame [`prepare`] made.
    fn mcrt_trampoline();
}

global_asm!(
    ".globl mcrt_trampoline",
    "mcrt_trampoline:",
    "ldmxcsr [rsp]",
    "fldcw [rsp + 4]",
    "mov rax, [rsp + 8]",
    "mov rdi, [rsp + 16]",
    "add rsp, 24",
    "xor ebp, ebp",
    "call rax",
    "ud2",
);

/// The switch, as inline assembly that tells the compiler every register is clobbered
/// except the two it cannot be told of (rbp, rbx), which it pushes: so the compiler saves
/// only the registers live across the switch, and in a loop saves most of them once, in
/// the caller's prologue, instead of at every switch (as `corosensei` does). The frame left
/// on the suspended stack: resume address, FPU word (MXCSR, x87 control word), rbx, rbp.
/// `$save` stores the FPU word (or not) and leaves the x87 half in ecx for the resumed side; `$restore` is what the resumed side does with them.
macro_rules! switch_asm {
    ($save:expr, $restore:expr, $from:expr, $to:expr) => {
        core::arch::asm!(
            "push rbp",
            "push rbx",
            "sub rsp, 8",
            $save,
            "lea rdx, [rip + 2f]",
            "push rdx",
            "mov [rdi], rsp",
            "mov rsp, rsi",
            // Not `ret`: the return stack buffer predicts the address this context called
            // from, and we resume another context's. An indirect jump is predicted from
            // the branch history instead, which a ping-pong of threads repeats.
            "pop rdx",
            "jmp rdx",
            "2:",
            $restore,
            "add rsp, 8",
            "pop rbx",
            "pop rbp",
            inout("rdi") $from => _,
            inout("rsi") $to => _,
            out("r12") _,
            out("r13") _,
            out("r14") _,
            out("r15") _,
            clobber_abi("C"),
        )
    };
}

/// Saves the FPU word and carries the x87 control word to the resumed side in ecx.
macro_rules! save_fpu {
    () => {
        "stmxcsr [rsp]\nfnstcw [rsp + 4]\nmovzx ecx, word ptr [rsp + 4]"
    };
}

/// The resumed side reloads MXCSR always and the x87 control word only if it differs from
/// the switcher's. `stmxcsr` waits for the SSE instructions before it (their status flags),
/// and comparing its result means waiting for it; a plain reload does not wait: on an AMD
/// EPYC (`bench-host` `mcrt_micro`, `mcrt-context`) the switch went from 6.1 to 3.9
/// ns, of which `stmxcsr` is 2.8. `fnstcw` is cheap, and `fldcw` is not: that one is
/// compared.
macro_rules! restore_fpu {
    () => {
        "ldmxcsr [rsp]\nmovzx edx, word ptr [rsp + 4]\ncmp ecx, edx\nje 4f\nfldcw [rsp + 4]\n4:"
    };
}

/// The resumed side of a sharing switch: if a saving switch resumed it (ecx is not all
/// ones), loads the initial words ([`INITIAL`]: MXCSR 0x1F80, x87 0x037F), through the
/// frame's FPU slot, which the sharing switch left unwritten and nobody reads again.
macro_rules! restore_initial_fpu {
    () => {
        "cmp ecx, -1\nje 5f\nmov dword ptr [rsp], 0x1F80\nldmxcsr [rsp]\ncmp ecx, 0x037F\nje 5f\nmov word ptr [rsp + 4], 0x037F\nfldcw [rsp + 4]\n5:"
    };
}

/// Switches from the running context (its stack pointer saved in `*save`) to the one whose
/// stack pointer is `next`, keeping each context's FPU control state (MXCSR and the x87
/// control word are callee-saved in the System V ABI); returns when something switches
/// back.
///
/// # Safety
/// `next` is a stack pointer saved by a switch or made by [`prepare`], of a context that is
/// not running; `save` stays valid until this context is resumed.
#[inline(always)]
pub unsafe fn switch(save: *mut usize, next: usize) {
    // SAFETY: as the caller promised. The stack below the stack pointer is ours (no
    // `nostack`), and every register the resumed context may change is declared clobbered.
    unsafe { switch_asm!(save_fpu!(), restore_fpu!(), save, next) }
}

/// As [`switch`], but the contexts share one FPU control state ([`crate::FpuControl::Shared`],
/// and [`crate::FpuControl::Auto`] until a thread calls [`crate::fpu::set_control`]): the
/// switcher reads neither word (`stmxcsr` alone costs more than the rest of a switch on
/// some x86 cores). What the resumed side loads depends on who resumes it:
/// - another sharing switch (ecx all ones, which no 16-bit control word equals): nothing;
///   it carries on with the switcher's words, which are the ones it had;
/// - a [`switch`] (ecx the switcher's x87 control word): the initial words
///   ([`INITIAL`]), MXCSR always and the x87 word if the switcher's differs.
///   A context is suspended by this switch only while its thread has not called the
///   setter, so these are its own words; the switcher's may not be (issue M15: under
///   `Auto`, the thread that called the setter is then running with its own).
///
/// And a context that [`switch`] suspended still gets its own back when this switch
/// resumes it: MXCSR is always reloaded, and the x87 word, as ecx differs from it.
///
/// # Safety
/// As [`switch`].
#[inline(always)]
pub unsafe fn switch_sharing_fpu(save: *mut usize, next: usize) {
    // SAFETY: as for `switch`.
    unsafe { switch_asm!("mov ecx, -1", restore_initial_fpu!(), save, next) }
}
