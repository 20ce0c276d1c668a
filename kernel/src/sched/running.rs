//! A thread as the scheduler holds it ([`Running`]): everything a user context is, on
//! the CPU or off it, and how it leaves the CPU (ended, blocked, preempted, shipped).

use super::with_current;
use crate::arch::cpu;
use crate::arch::user_entry::{self, FpuState, KernelContext, UserRegs};
use crate::corey::space::AddressSpace;
use crate::corey::user_memory::{read_words, write_words};
use crate::corey::{self, Ptr};
use crate::percpu::this_core;
use crate::println;
use crate::thread::{ExitStatus, ThreadShared};
use abi::Error;
use alloc::boxed::Box;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::Ordering;
use sched::WaitKey;

/// Why a thread left the CPU without ending, and what the loop does with it.
pub enum After {
    /// Back on this core's run queue (preempted, yielded).
    Ready,
    /// Parked on a wait key until a wake-up or the deadline (TSC).
    Park { key: WaitKey, deadline: Option<u64>, on_wake: OnWake },
    /// Sent to another core (pulled, or moved by its affinity).
    Ship(usize),
}

/// What a parked thread's call returns when it runs again.
pub enum OnWake {
    /// `wait`: [`wait_result::WOKEN`], or `TIMED_OUT` at the deadline.
    Wait,
    /// `sleep`: 0.
    Sleep,
    /// `thread_join` / `program_run`: the joined thread's status word.
    Join(Arc<ThreadShared>),
}

/// The word a leaving thread hands the loop when it did not end (ExitStatus words use
/// the high half's values 0–4).
pub(crate) const SWITCHED: u64 = 0x10 << 32;

/// A thread: everything a user context is, on the CPU or off it. Off it, the box is in
/// a run queue or a wait queue of one core, or in a message on its way to another.
pub struct Running {
    pub(crate) name: String,
    pub(crate) args: String,
    /// Console output not yet ended by a newline: printed a whole line at a time, so
    /// program output never runs into the kernel's own lines.
    pub(crate) line: Vec<u8>,
    /// Its root range's tables (set when it is switched in).
    pub(crate) space: AddressSpace,
    /// The scheduler loop's saved kernel context while the thread is on the CPU.
    pub(crate) context: *const KernelContext,
    pub(crate) objects: corey::ProgramObjects,
    /// The program it belongs to: its time limit, and whether it was stopped.
    pub(crate) program: Arc<crate::sched::lifetime::Program>,
    /// Whether it is its program's main thread (whose end ends the program).
    pub(crate) role: Role,
    /// The pcore object it runs on, if it was started through one (a main thread).
    pub(crate) pcore: Option<Ptr>,
    /// Its user registers while it is off the CPU.
    pub(crate) regs: UserRegs,
    /// Its x87/SSE state while it is off the CPU.
    pub(crate) fpu: FpuState,
    /// Its FS base while it is off the CPU (`set_fs_base`; 0 for a new thread): loaded
    /// before it runs, read back when it leaves, so it moves with the thread.
    pub(crate) fs_base: u64,
    /// What every core knows of it (status, joiners, affinity, counters).
    pub(crate) shared: alloc::sync::Arc<crate::thread::ThreadShared>,
    /// Why it left the CPU, for the scheduler loop.
    pub(crate) after: After,
    /// What its blocking call returns when it is woken.
    pub(crate) on_wake: Option<OnWake>,
}

// SAFETY: a `Running` moves between cores whole, in one message; `context` is only
// followed by the core it runs on, while it runs there.
unsafe impl Send for Running {}

/// A thread's place in its program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// The context the program started as: its end ends the program.
    Main,
    /// Made by `thread_create`: its end is its own.
    Spawned,
}

impl Running {
    /// A thread of `program` with `objects` that starts with `regs`, allowed where
    /// `shared` says.
    pub(crate) fn new_thread(
        name: String,
        objects: corey::ProgramObjects,
        shared: alloc::sync::Arc<crate::thread::ThreadShared>,
        regs: UserRegs,
        program: Arc<crate::sched::lifetime::Program>,
        role: Role,
    ) -> Box<Running> {
        Box::new(Running {
            name,
            args: String::new(),
            line: Vec::new(),
            space: AddressSpace::view(0),
            context: core::ptr::null(),
            objects,
            program,
            role,
            pcore: None,
            regs,
            fpu: FpuState::initial(),
            fs_base: 0,
            shared,
            after: After::Ready,
            on_wake: None,
        })
    }

    /// The thread of a prepared context, pinned to this core (a program, or a pcore's
    /// context, keeps Corey's meaning: it runs on the core it was started on).
    pub(crate) fn from_context(context: Context) -> Box<Running> {
        let shared = crate::thread::ThreadShared::new(1 << this_core().index);
        let mut regs = UserRegs::start(context.entry, context.stack, context.arg);
        regs.rsi = context.arg2;
        let program = crate::sched::lifetime::Program::new(context.limit_us, context.pcore.clone());
        let mut t =
            Running::new_thread(context.name, context.objects, shared, regs, program, Role::Main);
        t.args = context.args;
        t.pcore = context.pcore;
        t
    }
}

/// A context ready to run: what `pcore_run` or the program loader prepared.
pub struct Context {
    pub(crate) name: String,
    pub(crate) args: String,
    pub(crate) entry: u64,
    pub(crate) stack: u64,
    pub(crate) arg: u64,
    /// A second start argument (`rsi`): the keyboard, for `init`.
    pub(crate) arg2: u64,
    pub(crate) objects: corey::ProgramObjects,
    pub(crate) limit_us: u64,
    pub(crate) pcore: Option<Ptr>,
}

/// Whether this core's CR3 may still hold an ending thread's root tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cr3 {
    /// The core switched away from them: it leaves the root's cores.
    SwitchedAway,
    /// The thread ended off the CPU (parked or queued when its program stopped): the
    /// tables loaded now may be its root's, shared with the thread that runs, so the core
    /// stays among the root's cores (the scheduler's loaded root leaves when replaced).
    MayHoldThem,
}

/// Takes an ended context apart: its last output line, its objects (the core leaves its
/// root if `cr3` says it switched away), then its pcore's status.
pub(crate) fn finish(running: Running, status: ExitStatus, cr3: Cr3) {
    let Running { line, objects, pcore, .. } = running;
    if !line.is_empty() {
        crate::println!("{}", String::from_utf8_lossy(&line));
    }
    match cr3 {
        Cr3::SwitchedAway => corey::end_context(objects),
        Cr3::MayHoldThem => drop(objects),
    }
    publish_status(pcore, status);
}

/// Publishes `status` on the pcore's status word after letting go of the pcore: a parent
/// that sees the status may free the pcore and take the core again straight away.
pub(crate) fn publish_status(pcore: Option<Ptr>, status: ExitStatus) {
    let cell = pcore.as_ref().and_then(corey::pcore).map(|p| p.status.clone());
    drop(pcore);
    if let Some(cell) = cell {
        cell.store(status.status_word(), Ordering::Release);
    }
}

/// The running thread's details, for a system call or a fault.
pub(crate) fn with_running<R>(f: impl FnOnce(&Running, &AddressSpace) -> R) -> Option<R> {
    with_running_mut(|r, space| f(r, space))
}

/// The running thread, mutable (its objects, its page tables).
pub(crate) fn with_running_mut<R>(
    f: impl FnOnce(&mut Running, &mut AddressSpace) -> R,
) -> Option<R> {
    with_current(|r| {
        let mut space = AddressSpace::view(r.space.pml4());
        f(r, &mut space)
    })
}

/// Leaves the running thread with `status` (from a system call or an exception). Nothing
/// on the stack between here and the scheduler loop is dropped: a caller drops what it
/// owns (strings, object references) first.
pub(crate) fn leave(status: ExitStatus) -> ! {
    leave_raw(status.encode())
}

/// Leaves the running thread, handing the scheduler loop `word` (an exit status, or the
/// scheduler's "switched" word with the thread's registers saved in its box).
pub(crate) fn leave_raw(word: u64) -> ! {
    let Some(context) = with_running(|r, _| r.context) else {
        println!("user: no program is running on core {}", this_core().index);
        cpu::halt_forever()
    };
    // SAFETY: the context of the `run_saved` call active on this core's stack; we are in
    // the kernel on that stack (a system call or an interrupt from the thread).
    unsafe { user_entry::leave_user(context, word) }
}

/// Reads `N` words of the running thread's memory at `ptr` (for `sched`'s calls).
pub(crate) fn read_words_of<const N: usize>(r: &mut Running, ptr: u64) -> Result<[u64; N], Error> {
    let mut space = AddressSpace::view(r.space.pml4());
    read_words::<N>(&mut r.objects, &mut space, ptr)
}

/// Writes words to the running thread's memory at `ptr`.
pub(crate) fn write_words_of(r: &mut Running, ptr: u64, words: &[u64]) -> Result<(), Error> {
    let mut space = AddressSpace::view(r.space.pml4());
    write_words(&mut r.objects, &mut space, ptr, words)
}

/// Reads the 32-bit word at `addr` of the running thread's memory.
pub(crate) fn read_u32_of(r: &mut Running, addr: u64) -> Result<u32, Error> {
    let mut space = AddressSpace::view(r.space.pml4());
    let mut bytes = [0u8; 4];
    corey::fault_in(&mut r.objects, &mut space, addr, 4, false);
    space.copy_in(addr, &mut bytes)?;
    Ok(u32::from_le_bytes(bytes))
}
