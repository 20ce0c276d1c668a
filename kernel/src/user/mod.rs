//! User programs and contexts: loading a program from the initrd into Corey segments
//! mapped by a fresh root address range, running a context in ring 3 on the calling core
//! until it exits, faults or is halted, starting contexts on other cores (`pcore_run`,
//! `program_run`), and the system calls.
//!
//! Every context is a thread (`sched`): a core time-shares its threads, and a thread
//! can move to another core by message. A program may lend its own core to another
//! program (`program_run` on its own pcore): it waits, as `thread_join` does, until that
//! one ends.

pub mod corey;
pub mod devices;
pub mod elf;
pub mod initrd;
pub mod program;
pub mod revocation;
pub mod sched;
pub mod space;

use crate::arch::cpu;
use crate::arch::paging;
use crate::arch::trap::{TrapFrame, EXCEPTION_NAMES};
use crate::arch::user_entry::{self, FpuState, KernelContext, SyscallFrame, UserRegs};
use crate::monitor::protocol::Request;
use crate::percpu::{this_core, PerCoreState};
use crate::println;
use abi::{nr, pcore_status, Error, ObjectKind, SysResult, ARGS_MAX};
use abi::{USER_STACK_BYTES, USER_STACK_TOP};
use alloc::boxed::Box;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::Ordering;
use corey::Ptr;
use space::AddressSpace;

/// How a program ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitStatus {
    /// It called `exit(code)`.
    Exited(i32),
    /// It took exception `vector` and was stopped.
    Faulted(u8),
    /// It ran past its time limit and was stopped.
    TimedOut,
    /// `pcore_halt` stopped it.
    Halted,
    /// It could not start (bad program, no memory for its page tables).
    Failed,
}

impl ExitStatus {
    fn encode(self) -> u64 {
        match self {
            ExitStatus::Exited(code) => code as u32 as u64,
            ExitStatus::Faulted(vector) => 1 << 32 | vector as u64,
            ExitStatus::TimedOut => 2 << 32,
            ExitStatus::Halted => 3 << 32,
            ExitStatus::Failed => 4 << 32,
        }
    }

    /// The status a leaving context's word encodes (see `leave`).
    pub fn decode(word: u64) -> ExitStatus {
        match word >> 32 {
            1 => ExitStatus::Faulted(word as u8),
            2 => ExitStatus::TimedOut,
            3 => ExitStatus::Halted,
            4 => ExitStatus::Failed,
            _ => ExitStatus::Exited(word as u32 as i32),
        }
    }

    /// The status a `pcore_status` word reports.
    pub fn from_status_word(word: u64) -> ExitStatus {
        match pcore_status::state(word) {
            pcore_status::EXITED => ExitStatus::Exited(word as u32 as i32),
            pcore_status::FAULTED => ExitStatus::Faulted(word as u8),
            pcore_status::TIMED_OUT => ExitStatus::TimedOut,
            pcore_status::HALTED => ExitStatus::Halted,
            _ => ExitStatus::Failed,
        }
    }

    /// As `pcore_status` reports it.
    pub fn status_word(self) -> u64 {
        match self {
            ExitStatus::Exited(code) => pcore_status::EXITED | code as u32 as u64,
            ExitStatus::Faulted(v) => pcore_status::FAULTED | v as u64,
            ExitStatus::TimedOut => pcore_status::TIMED_OUT,
            ExitStatus::Halted => pcore_status::HALTED,
            ExitStatus::Failed => pcore_status::FAILED,
        }
    }
}

/// A thread: everything a user context is, on the CPU or off it. Off it, the box is in
/// a run queue or a wait queue of one core, or in a message on its way to another.
pub struct Running {
    name: String,
    args: String,
    /// Console output not yet ended by a newline: printed a whole line at a time, so
    /// program output never runs into the kernel's own lines.
    line: Vec<u8>,
    /// Its root range's tables (set when it is switched in).
    space: AddressSpace,
    /// The scheduler loop's saved kernel context while the thread is on the CPU.
    context: *const KernelContext,
    objects: corey::ProgramObjects,
    /// The program it belongs to: its time limit, and whether it was stopped.
    program: Arc<program::Program>,
    /// Whether it is its program's main thread (whose end ends the program).
    role: Role,
    /// The pcore object it runs on, if it was started through one (a main thread).
    pcore: Option<Ptr>,
    /// Its user registers while it is off the CPU.
    regs: UserRegs,
    /// Its x87/SSE state while it is off the CPU.
    fpu: FpuState,
    /// Its FS base while it is off the CPU (`set_fs_base`; 0 for a new thread): loaded
    /// before it runs, read back when it leaves, so it moves with the thread.
    fs_base: u64,
    /// What every core knows of it (status, joiners, affinity, counters).
    shared: alloc::sync::Arc<sched::ThreadShared>,
    /// Why it left the CPU, for the scheduler loop.
    after: sched::After,
    /// What its blocking call returns when it is woken.
    on_wake: Option<sched::OnWake>,
}

// SAFETY: a `Running` moves between cores whole, in one message; `context` is only
// followed by the core it runs on, while it runs there.
unsafe impl Send for Running {}

/// A thread's place in its program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// The context the program started as: its end ends the program.
    Main,
    /// Made by `thread_create`: its end is its own.
    Spawned,
}

impl Running {
    /// A thread of `program` with `objects` that starts with `regs`, allowed where
    /// `shared` says.
    fn new_thread(
        name: String,
        objects: corey::ProgramObjects,
        shared: alloc::sync::Arc<sched::ThreadShared>,
        regs: UserRegs,
        program: Arc<program::Program>,
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
            after: sched::After::Ready,
            on_wake: None,
        })
    }

    /// The thread of a prepared context, pinned to this core (a program, or a pcore's
    /// context, keeps Corey's meaning: it runs on the core it was started on).
    fn from_context(context: Context) -> Box<Running> {
        let shared = sched::ThreadShared::new(1 << this_core().index);
        let mut regs = UserRegs::start(context.entry, context.stack, context.arg);
        regs.rsi = context.arg2;
        let program = program::Program::new(context.limit_us, context.pcore.clone());
        let mut t =
            Running::new_thread(context.name, context.objects, shared, regs, program, Role::Main);
        t.args = context.args;
        t.pcore = context.pcore;
        t
    }
}

/// A context ready to run: what `pcore_run` or the program loader prepared.
pub struct Context {
    name: String,
    args: String,
    entry: u64,
    stack: u64,
    arg: u64,
    /// A second start argument (`rsi`): the keyboard, for `init`.
    arg2: u64,
    objects: corey::ProgramObjects,
    limit_us: u64,
    pcore: Option<Ptr>,
}

/// Time limit of a program started with [`run`] (ten minutes).
const DEFAULT_LIMIT_US: u64 = 600_000_000;

/// Bytes copied from user memory per step of a console write.
const WRITE_MAX: usize = 1024;
/// Most bytes one `write` call prints (it returns the count; the library loops): a call's
/// work is bounded.
const WRITE_CALL_MAX: u64 = 4096;
/// Longest console line a program prints before it is broken.
const LINE_MAX: usize = 200;

/// Loads program `name` from the initrd and runs it on this core until it ends.
pub fn run(name: &str, args: &str) -> Result<ExitStatus, Error> {
    run_with_limit(name, args, DEFAULT_LIMIT_US)
}

/// Like [`run`], stopping the program (`TimedOut`) once it has run for `limit_us`: the
/// timer tick checks, so a program that never makes a system call cannot keep its core.
pub fn run_with_limit(name: &str, args: &str, limit_us: u64) -> Result<ExitStatus, Error> {
    run_giving(name, args, limit_us, &[])
}

/// Like [`run_with_limit`], giving the program the machine device (the capability for
/// `kernel_command` and `poweroff`) and the keyboard (for `console_read`): their ids in
/// the program's root share are its start arguments (`rdi`, `rsi`). The kernel starts
/// `init` this way.
pub fn run_with_machine(name: &str, args: &str, limit_us: u64) -> Result<ExitStatus, Error> {
    let given =
        [corey::capability_device(devices::MACHINE)?, corey::capability_device(devices::KEYBOARD)?];
    run_giving(name, args, limit_us, &given)
}

/// Most bytes of a program's output [`run_capturing`] keeps (later lines are dropped).
const CAPTURE_MAX: usize = 16 * 1024;

/// The lines programs on this core print while [`run_capturing`] runs (`None`: not
/// capturing).
static CAPTURE: PerCoreState<Option<String>> = crate::per_core_state!(None);

/// Like [`run_with_limit`], also returning the lines the program printed on this core
/// (each ending in a newline; at most [`CAPTURE_MAX`] bytes): for tests that check what a
/// program reports.
pub fn run_capturing(name: &str, args: &str, limit_us: u64) -> Result<(ExitStatus, String), Error> {
    CAPTURE.with(|c| *c = Some(String::new()));
    let status = run_with_limit(name, args, limit_us);
    let text = CAPTURE.with(|c| c.take()).unwrap_or_default();
    status.map(|s| (s, text))
}

/// Loads program `name`, handing it `give`, and runs it on this core until it ends.
fn run_giving(name: &str, args: &str, limit_us: u64, give: &[Ptr]) -> Result<ExitStatus, Error> {
    let context = load_program(name, args, limit_us, None, give)?;
    Ok(run_context(context))
}

/// Loads program `name`: each ELF segment becomes a segment in a fresh root share, mapped
/// by a fresh root address range, and so does the stack (filled on first touch). The
/// objects in `give` (at most two) go into the root share too, their ids the program's
/// start arguments (`rdi`, then `rsi`; 0 for none).
fn load_program(
    name: &str,
    args: &str,
    limit_us: u64,
    pcore: Option<Ptr>,
    give: &[Ptr],
) -> Result<Context, Error> {
    // Refused, not cut: a shortened command line would run something else.
    if args.len() > ARGS_MAX {
        return Err(Error::InvalidArgument);
    }
    let image = initrd::find(name).ok_or(Error::NoSuchObject)?;
    // cpio aligns file data to 4 bytes; the ELF parser wants 8.
    let aligned: Vec<u64>;
    let image = if image.as_ptr().align_offset(8) == 0 {
        image
    } else {
        // As large as the program file: asked of the heap, not assumed (issue M14).
        let mut words = Vec::new();
        words.try_reserve_exact(image.len().div_ceil(8)).map_err(|_| Error::NoResources)?;
        words.resize(image.len().div_ceil(8), 0u64);
        for (word, chunk) in words.iter_mut().zip(image.chunks(8)) {
            let mut bytes = [0u8; 8];
            bytes[..chunk.len()].copy_from_slice(chunk);
            *word = u64::from_le_bytes(bytes);
        }
        aligned = words;
        // SAFETY: viewing the u64 buffer as its first `image.len()` bytes.
        unsafe { core::slice::from_raw_parts(aligned.as_ptr().cast::<u8>(), image.len()) }
    };
    let mut objects = corey::new_program()?;
    let entry = elf::load(image, |run| {
        corey::load_segment(&mut objects, run.va, run.pages, &run.pieces, run.flags)
    })?;
    let stack_pages = USER_STACK_BYTES / 4096;
    let stack_va = USER_STACK_TOP - USER_STACK_BYTES;
    corey::load_segment(&mut objects, stack_va, stack_pages, &[], abi::map::WRITE)?;
    let mut start_args = [0u64; 2];
    for (arg, ptr) in start_args.iter_mut().zip(give) {
        *arg = corey::give(&mut objects, ptr.clone())?;
    }
    let [arg, arg2] = start_args;
    Ok(Context {
        name: name.into(),
        args: args.into(),
        entry,
        // As if `_start` had been called (8 below a 16-byte boundary).
        stack: USER_STACK_TOP - 8,
        arg,
        arg2,
        objects,
        limit_us,
        pcore,
    })
}

/// Runs `context` on this core until it ends (as a thread pinned here; the core runs its
/// other threads too meanwhile).
pub fn run_context(context: Context) -> ExitStatus {
    let t = Running::from_context(context);
    let shared = t.shared.clone();
    sched::enqueue(t);
    sched::run_until(&|| shared.status() != pcore_status::RUNNING);
    ExitStatus::from_status_word(shared.status())
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
fn publish_status(pcore: Option<Ptr>, status: ExitStatus) {
    let cell = pcore.as_ref().and_then(corey::pcore).map(|p| p.status.clone());
    drop(pcore);
    if let Some(cell) = cell {
        cell.store(status.status_word(), Ordering::Release);
    }
}

/// What a `START` message carries: a context for this core, on behalf of `pcore`.
pub struct StartJob {
    pcore: Ptr,
    what: StartWhat,
    /// The revocations the sender's share set had seen when it resolved the objects the
    /// job carries: any revoked since must not reach the new context (issue M14).
    seen: u64,
}

impl StartJob {
    /// The objects it hands to the new context.
    fn carried(&self) -> Vec<&Ptr> {
        match &self.what {
            StartWhat::Context { root_ar, shares, .. } => {
                core::iter::once(root_ar).chain(shares.iter()).collect()
            }
            StartWhat::Program { give, .. } => give.iter().collect(),
        }
    }
}

enum StartWhat {
    /// `pcore_run`: a context on an existing root range.
    Context { entry: u64, stack: u64, arg: u64, root_ar: Ptr, shares: Vec<Ptr> },
    /// `program_run`: a program from the initrd, and the object it is given, if any.
    Program { line: String, give: Option<Ptr> },
}

/// Sends `job` to `core`'s monitor. On failure the job is dropped (and the pcore's status
/// reset).
fn send_job(core: usize, job: StartJob) -> Result<(), Error> {
    let raw = Box::into_raw(Box::new(job));
    if crate::monitor::send(core, &Request::Start { job: raw as u64 }).is_err() {
        // SAFETY: the message was not sent, so nobody else has the pointer.
        let job = unsafe { Box::from_raw(raw) };
        if let Some(p) = corey::pcore(&job.pcore) {
            p.status.store(pcore_status::IDLE, Ordering::Release);
        }
        return Err(Error::Busy);
    }
    Ok(())
}

/// A `START` message: runs the job's context on this core (from the monitor).
pub fn start_job(raw: u64) {
    // SAFETY: `send_job` made this pointer with `Box::into_raw` and gave it to us alone
    // (the protocol checked it lies in the kernel half).
    let job = unsafe { Box::from_raw(raw as *mut StartJob) };
    // A carried object revoked after the sender resolved it: the context does not start
    // (this core may have committed the revocation before this message was read, and a
    // share set made now starts caught up with it, so it would never be scrubbed).
    if revocation::revoked_since(job.seen, &job.carried()) {
        println!("start: core {}: an object it was given was revoked", this_core().index);
        if let Some(p) = corey::pcore(&job.pcore) {
            p.status.store(pcore_status::FAILED, Ordering::Release);
        }
        return;
    }
    let StartJob { pcore, what, .. } = *job;
    let cell = corey::pcore(&pcore).map(|p| p.status.clone());
    // Corey §4.4: a `pcore_run` context has its core to itself.
    let dedicate = matches!(what, StartWhat::Context { .. });
    let context = match what {
        StartWhat::Context { entry, stack, arg, root_ar, shares } => {
            match corey::new_context(root_ar, shares, corey::new_quota()) {
                Ok(objects) => Ok(Context {
                    name: "context".into(),
                    args: String::new(),
                    entry,
                    stack,
                    arg,
                    arg2: 0,
                    objects,
                    limit_us: DEFAULT_LIMIT_US,
                    pcore: Some(pcore),
                }),
                Err(e) => Err(e),
            }
        }
        StartWhat::Program { line, give } => {
            let (name, args) = line.split_once(' ').unwrap_or((&line, ""));
            load_program(name, args.trim_start(), DEFAULT_LIMIT_US, Some(pcore), give.as_slice())
        }
    };
    match context {
        Ok(c) if dedicate => sched::enqueue_dedicated(Running::from_context(c)),
        Ok(c) => sched::enqueue(Running::from_context(c)),
        Err(e) => {
            println!("start: core {}: {:?}", this_core().index, e);
            if let Some(cell) = cell {
                cell.store(pcore_status::FAILED, Ordering::Release);
            }
        }
    }
}

/// The running thread's details, for a system call or a fault.
fn with_running<R>(f: impl FnOnce(&Running, &AddressSpace) -> R) -> Option<R> {
    with_running_mut(|r, space| f(r, space))
}

/// The running thread, mutable (its objects, its page tables).
fn with_running_mut<R>(f: impl FnOnce(&mut Running, &mut AddressSpace) -> R) -> Option<R> {
    sched::with_current(|r| {
        let mut space = AddressSpace::view(r.space.pml4());
        f(r, &mut space)
    })
}

/// Leaves the running thread with `status` (from a system call or an exception). Nothing
/// on the stack between here and the scheduler loop is dropped: a caller drops what it
/// owns (strings, object references) first.
fn leave(status: ExitStatus) -> ! {
    leave_raw(status.encode())
}

/// Leaves the running thread, handing the scheduler loop `word` (an exit status, or the
/// scheduler's "switched" word with the thread's registers saved in its box).
fn leave_raw(word: u64) -> ! {
    let Some(context) = with_running(|r, _| r.context) else {
        println!("user: no program is running on core {}", this_core().index);
        cpu::halt_forever()
    };
    // SAFETY: the context of the `run_saved` call active on this core's stack; we are in
    // the kernel on that stack (a system call or an interrupt from the thread).
    unsafe { user_entry::leave_user(context, word) }
}

/// Reads `N` words of the running thread's memory at `ptr` (for `sched`'s calls).
fn read_words_of<const N: usize>(r: &mut Running, ptr: u64) -> Result<[u64; N], Error> {
    let mut space = AddressSpace::view(r.space.pml4());
    read_words::<N>(&mut r.objects, &mut space, ptr)
}

/// Writes words to the running thread's memory at `ptr`.
fn write_words_of(r: &mut Running, ptr: u64, words: &[u64]) -> Result<(), Error> {
    let mut space = AddressSpace::view(r.space.pml4());
    write_words(&mut r.objects, &mut space, ptr, words)
}

/// Reads the 32-bit word at `addr` of the running thread's memory.
fn read_u32_of(r: &mut Running, addr: u64) -> Result<u32, Error> {
    let mut space = AddressSpace::view(r.space.pml4());
    let mut bytes = [0u8; 4];
    corey::fault_in(&mut r.objects, &mut space, addr, 4, false);
    space.copy_in(addr, &mut bytes)?;
    Ok(u32::from_le_bytes(bytes))
}

/// An exception in user mode. A page fault on a page the program's root address range maps
/// is a soft fault: the page is filled and mapped (or copied, for a write to a
/// copy-on-write page), and the program goes on. Anything else is reported and stops the
/// program; the core goes on.
pub fn on_exception(frame: &TrapFrame) {
    let vector = frame.vector as u8;
    let cr2 = if vector == crate::arch::trap::VECTOR_PAGE_FAULT { cpu::cr2() } else { 0 };
    if vector == crate::arch::trap::VECTOR_PAGE_FAULT {
        let present = frame.error & 1 != 0;
        let write = frame.error & 2 != 0;
        // Not present, or a write to a page mapped read-only (copy-on-write).
        if (!present || write)
            && with_running_mut(|r, _| {
                let resident = r.shared.resident().clone();
                corey::charging(&resident, || {
                    corey::soft_fault(&mut r.objects, cr2, write, present)
                })
            }) == Some(true)
        {
            return;
        }
    }
    let name = with_running(|r, _| r.name.clone()).unwrap_or_default();
    let out_of_memory = vector == crate::arch::trap::VECTOR_PAGE_FAULT
        && this_core().free_frames() < corey::FAULT_RESERVE_FRAMES;
    println!(
        "USER FAULT core={} program={} vector={} ({}{}) error={:#x} rip={:#x} cr2={:#x} cs={:#x} rsp={:#x} rflags={:#x}",
        this_core().index,
        name,
        vector,
        EXCEPTION_NAMES[vector as usize],
        if out_of_memory { ", out of memory" } else { "" },
        frame.error,
        frame.rip,
        cr2,
        frame.cs,
        frame.rsp,
        frame.rflags
    );
    drop(name);
    leave(ExitStatus::Faulted(vector))
}

/// A timer tick that interrupted user mode (after its EOI): stops the context if it has
/// run past its time limit or its pcore was halted, then gives the scheduler its turn
/// (the slice, wake-ups, balancing).
pub fn on_tick_in_user(frame: &TrapFrame) {
    // The monitor's turn while a context holds the core (Barrelfish's monitor is likewise
    // scheduled beside applications): frame returns and pings must not wait for it to end.
    crate::monitor::poll_at_tick();
    // Two-phase decisions this core coordinated that waited for room in a channel.
    crate::twophase::deliver_decisions();
    // Frames of blocks given here whose giver faulted (a core that never idles, too).
    crate::retype::recover_lost_frames();
    stop_if_due();
    sched::on_tick(frame);
}

/// A wake-up IPI (or a throttled core's phase change) that interrupted user mode: another
/// core kicked this one (a TLB shootdown, a pull for its running thread): the monitor and
/// the scheduler run now. `end_of_interrupt` runs between the two, after the messages are
/// read and answered: a shootdown's acknowledgement then goes out before the EOI's APIC
/// access (an MMIO exit under TCG), and before the scheduler may switch threads.
pub fn on_kick_in_user(frame: &TrapFrame, end_of_interrupt: impl FnOnce()) {
    crate::monitor::poll();
    // The interrupt is still in service: interrupts on inside `poll` would hold the timer
    // (same priority class) off until the end of interrupt.
    debug_assert!(!cpu::interrupts_enabled(), "the monitor's poll turned interrupts on");
    end_of_interrupt();
    sched::on_kick(frame);
}

/// A point in a long system call where the core answers the rest of the machine. System
/// calls run with interrupts off; a call whose work grows with its arguments (copying
/// pages, filling a buffer) calls this between steps, with no lock held. It opens an
/// interrupt window, so a pending tick, TLB shootdown or wake-up is taken, and once per
/// tick it serves the monitor as the tick in user mode does (frame returns, pings). The
/// time limit and `pcore_halt` are checked when the call returns ([`syscall_dispatch`]).
/// So a core answers within one tick plus one bounded step, however long the call.
///
/// Outside a context (the loader run from the idle loop) it only opens the window: there
/// the monitor would run deferred calls and starts in the middle of the caller's work.
pub fn step() {
    let core = this_core();
    let were_on = cpu::disable_interrupts();
    cpu::enable_interrupts();
    core::hint::spin_loop(); // `sti` takes effect after the next instruction
    if !were_on {
        cpu::disable_interrupts();
    }
    if !core.in_context.load(Ordering::Acquire) {
        return;
    }
    core.stepped.store(true, Ordering::Relaxed);
    let now = core.ticks();
    // Once a tick, and whenever a message waits (a TLB shootdown's initiator waits for it:
    // its notification, taken in the window above, does nothing in kernel mode).
    if core.served_tick.swap(now, Ordering::Relaxed) != now || crate::monitor::has_messages() {
        crate::monitor::poll_at_tick();
    }
}

/// Leaves the running thread if its program was stopped, its pcore halted or its time
/// limit passed: at a tick in user mode, and at the end of a system call that took steps
/// (a long call may have passed any of them). Nothing is held there.
fn stop_if_due() {
    if let Some(status) = with_running(|r, _| r.program.stopping()).flatten() {
        if status == ExitStatus::TimedOut {
            report_timeout();
        }
        leave(status);
    }
}

/// Prints the line that tells a thread was stopped at its program's time limit.
fn report_timeout() {
    let name = with_running(|r, _| r.name.clone()).unwrap_or_default();
    println!("USER TIMEOUT core={} program={}", this_core().index, name);
}

/// Entry from `syscall_entry`: runs one system call, returns the result word.
#[no_mangle]
extern "C" fn syscall_dispatch(frame: &mut SyscallFrame) -> u64 {
    // `sysret` to a non-canonical address would fault in ring 0 on the user's stack.
    if frame.rip >= paging::USER_END {
        leave(ExitStatus::Faulted(13));
    }
    let (a, b, c) = (frame.rdi, frame.rsi, frame.rdx);
    // Calls that may name objects first see the revocations this core committed.
    let names_objects = !matches!(
        frame.rax,
        nr::NULL | nr::CYCLES | nr::PCORE_CURRENT | nr::WRITE | nr::EXIT | nr::SET_FS_BASE
    );
    let barrier = if names_objects { revocation_barrier() } else { Ok(()) };
    let result: SysResult = match frame.rax {
        _ if barrier.is_err() => Err(Error::Busy),
        nr::NULL => Ok(0),
        nr::WRITE => write(a, b),
        nr::EXIT => leave(ExitStatus::Exited(a as i32)),
        nr::PCORE_CURRENT => Ok(this_core().index as u64),
        nr::CYCLES => Ok(cpu::rdtsc()),
        nr::ARGS => args(a, b),
        nr::LOCALITY_GET => locality_get(a, b),
        nr::PROGRAM_RUN => program_run(frame, a, b, c, frame.r10, frame.r8),
        nr::CORES_ONLINE => Ok(crate::smp::online_cores().len() as u64),
        nr::KERNEL_COMMAND => kernel_command(a, b, c, frame.r10),
        nr::POWEROFF => poweroff(a, b),
        nr::CONSOLE_READ => console_read(a, b, c, frame.r10),
        nr::FILE_LIST => file_list(a, b),
        nr::DEVICE_LIST => device_list(a, b),
        nr::PCORE_HALT => pcore_halt(a, b),
        nr::THREAD_CREATE => sched::thread_create(a),
        nr::THREAD_JOIN => sched::thread_join(frame, a, b),
        nr::THREAD_STATUS => sched::thread_status(a, b),
        nr::YIELD => sched::yield_now(frame),
        nr::SLEEP => sched::sleep(frame, a),
        nr::WAIT => sched::wait(frame, a, b, c),
        nr::WAKE => sched::wake(a, b),
        nr::THREAD_SET_AFFINITY => sched::set_affinity(frame, a, b, c),
        nr::THREAD_STAT => sched::thread_stat(a, b, c),
        nr::SET_FS_BASE => sched::set_fs_base(a),
        nr::ROOT_SHARE..=nr::PAGE_FAULTS
        | nr::SEGMENT_COPY..=nr::SEGMENT_READ
        | nr::SHARE_DUPOBJ
        | nr::OBJ_REVOKE => object_call(frame),
        _ => Err(Error::NoSuchCall),
    };
    // Only a call that took steps can have outlived a tick's checks (a plain load keeps
    // the null call's path short).
    let core = this_core();
    if core.stepped.load(Ordering::Relaxed) {
        core.stepped.store(false, Ordering::Relaxed);
        stop_if_due();
    }
    abi::encode(result)
}

/// Revocation's barrier before a call that may name objects (`objects::revoke`): while a
/// revocation is prepared on this core the call waits for its decision (so no new entry
/// of the object appears behind a scrub; `Busy` if none comes in time), then the caller's
/// share set catches up with the revocations this core committed.
fn revocation_barrier() -> Result<(), Error> {
    if crate::twophase::revocation_prepared_here() {
        let start = cpu::rdtsc();
        while crate::twophase::revocation_prepared_here() {
            if crate::arch::timer::us_since(start) > crate::twophase::TIMEOUT_US {
                return Err(Error::Busy);
            }
            crate::monitor::poll();
            // Its coordinator may have faulted: then the participants decide among them.
            crate::twophase::resolve_orphans();
            step(); // not seconds with interrupts off
        }
    }
    if revocation::revocations_committed() != 0 {
        with_running_mut(|r, _| revocation::catch_up(&mut r.objects));
    }
    CAUGHT_UP.with(|c| *c = revocation::revocations_committed());
    Ok(())
}

/// The revocations the running call's share set was caught up with at its barrier. An
/// object the call resolves may have been revoked after that (a step in the call serves
/// two-phase messages): a call that hands objects to a new holder (`program_run`'s
/// `give`, `pcore_run`'s range and shares) checks them against the log from there.
static CAUGHT_UP: PerCoreState<u64> = crate::per_core_state!(0);

/// `write(ptr, len)`: prints at most [`WRITE_CALL_MAX`] bytes and returns the count. Those
/// bytes are checked first, then copied in pieces into the program's line buffer; control
/// characters other than newline and tab become `.`.
fn write(ptr: u64, len: u64) -> SysResult {
    let len = len.min(WRITE_CALL_MAX);
    let mut buf = [0u8; WRITE_MAX];
    let mut done = 0;
    while done < len {
        if done > 0 {
            step();
        }
        let n = (len - done).min(WRITE_MAX as u64) as usize;
        with_running_mut(|r, space| {
            if done == 0 {
                corey::fault_in(&mut r.objects, space, ptr, len, false);
                space.check(ptr, len, false)?;
            }
            space.copy_in(ptr + done, &mut buf[..n])
        })
        .ok_or(Error::NotPermitted)??;
        for &b in &buf[..n] {
            emit(match b {
                // Backspace too: the shell's line editing echoes it.
                b'\n' | b'\t' | 0x08 | 0x20..=0x7e | 0x80..=0xff => b,
                _ => b'.',
            });
        }
        done += n as u64;
    }
    Ok(len)
}

/// Reads `N` little-endian words of user memory at `ptr`.
fn read_words<const N: usize>(
    p: &mut corey::ProgramObjects,
    space: &mut AddressSpace,
    ptr: u64,
) -> Result<[u64; N], Error> {
    let mut bytes = [0u8; 256];
    corey::fault_in(p, space, ptr, N as u64 * 8, false);
    space.copy_in(ptr, &mut bytes[..N * 8])?;
    Ok(le_words(&bytes[..N * 8]))
}

/// Writes little-endian words to user memory at `ptr`.
fn write_words(
    p: &mut corey::ProgramObjects,
    space: &mut AddressSpace,
    ptr: u64,
    words: &[u64],
) -> Result<(), Error> {
    let mut bytes = Vec::new();
    for w in words {
        bytes.extend_from_slice(&w.to_le_bytes());
    }
    copy_out(p, space, ptr, &bytes)
}

/// Corey's object calls (Figure 5), on the running context's share set.
fn object_call(frame: &SyscallFrame) -> SysResult {
    let (a, b, c, d, e) = (frame.rdi, frame.rsi, frame.rdx, frame.r10, frame.r8);
    with_running_mut(|r, space| {
        let p = &mut r.objects;
        match frame.rax {
            nr::ROOT_SHARE => Ok(p.set.root_id().0),
            nr::ROOT_AR => Ok(p.root_ar.id().0),
            nr::SHARE_ALLOC => corey::share_alloc(p, a),
            nr::SHARE_ADDOBJ => corey::share_addobj(p, a, b, c),
            nr::SHARE_DELOBJ => corey::share_delobj(p, a, b),
            nr::SHARE_DUPOBJ => corey::share_dupobj(p, a, b, c),
            nr::OBJ_REVOKE => revocation::obj_revoke(p, a, b),
            nr::SELF_DROP => corey::self_drop(p, a),
            nr::OBJ_GET_NAME => corey::obj_get_name(p, a, b),
            nr::SEGMENT_ALLOC => corey::segment_alloc(p, a, b),
            nr::SEGMENT_GET_NBYTES => corey::segment_get_nbytes(p, a, b),
            nr::SEGMENT_SET_NBYTES => corey::segment_set_nbytes(p, a, b, c),
            nr::SEGMENT_COPY => corey::segment_copy(p, a, b, c, d),
            nr::SEGMENT_READ => corey::segment_read(p, space, a, b, c, d, e),
            nr::AR_ALLOC => corey::ar_alloc(p, a, b),
            nr::AR_SET_SEG => {
                let w = read_words::<8>(p, space, a)?;
                corey::ar_set_seg(p, abi::ArSetSeg::from_words(w))
            }
            nr::AR_SET_AR => {
                let w = read_words::<6>(p, space, a)?;
                corey::ar_set_ar(p, abi::ArSetAr::from_words(w))
            }
            nr::AR_GET => corey::ar_get(p, a, b, c),
            nr::AR_MAPPINGS => {
                // At most what the caller has room for is collected.
                let max = usize::try_from(d).unwrap_or(usize::MAX);
                let (total, listed) = corey::ar_mappings(p, a, b, max)?;
                // Written out a few at a time from the stack: no second copy on the heap.
                // The whole destination is checked first, so a bad one copies nothing.
                let len = (listed.len() * 48) as u64;
                corey::fault_in(p, space, c, len, true);
                space.check(c, len, true)?;
                const AT_ONCE: usize = 32;
                let mut bytes = [0u8; AT_ONCE * 48];
                for (i, chunk) in listed.chunks(AT_ONCE).enumerate() {
                    let words = chunk.iter().flat_map(|m| m.to_words());
                    let n = chunk.len() * 48;
                    for (slot, word) in bytes[..n].chunks_exact_mut(8).zip(words) {
                        slot.copy_from_slice(&word.to_le_bytes());
                    }
                    let at = c.saturating_add((i * AT_ONCE * 48) as u64);
                    copy_out(p, space, at, &bytes[..n])?;
                }
                Ok(total as u64)
            }
            nr::PAGE_FAULTS => Ok(p.fault_count),
            nr::SET_ADD_SHARE => corey::set_add_share(p, a, b),
            nr::FILE_OPEN => {
                let name = read_string(p, space, b, c)?;
                let data = initrd::find(&name).ok_or(Error::NoSuchObject)?;
                corey::segment_from(p, a, data)
            }
            nr::PCORE_ALLOC => corey::pcore_alloc(p, a, b),
            nr::PCORE_RUN => pcore_run(p, space, a),
            nr::PCORE_STATUS => {
                let ptr = corey::lookup(p, a, b, ObjectKind::Pcore)?;
                Ok(corey::pcore(&ptr).ok_or(Error::InvalidArgument)?.status.load(Ordering::Acquire))
            }
            nr::PCORE_SET_INTERVAL => {
                let ptr = corey::lookup(p, a, b, ObjectKind::Pcore)?;
                if !(10..=1000).contains(&c) {
                    return Err(Error::InvalidArgument);
                }
                corey::pcore(&ptr).ok_or(Error::InvalidArgument)?.hz.store(c, Ordering::Relaxed);
                Ok(0)
            }
            nr::DEVICE_ALLOC => corey::device_alloc(p, a, b),
            nr::DEVICE_STAT => {
                let hwid = corey::device_hwid(p, a, b)?;
                let st = devices::stat(hwid).ok_or(Error::NoSuchObject)?;
                write_words(p, space, c, &[st.hwid, st.kind, st.count, st.detail])?;
                Ok(0)
            }
            _ => Err(Error::NoSuchCall),
        }
    })
    .ok_or(Error::NotPermitted)?
}

/// Copies `data` to user memory at `ptr`, filling untouched pages first.
fn copy_out(
    p: &mut corey::ProgramObjects,
    space: &mut AddressSpace,
    ptr: u64,
    data: &[u8],
) -> Result<(), Error> {
    corey::fault_in(p, space, ptr, data.len() as u64, true);
    space.copy_out(ptr, data)
}

/// Copies a string of at most [`ARGS_MAX`] bytes from user memory.
fn read_string(
    p: &mut corey::ProgramObjects,
    space: &mut AddressSpace,
    ptr: u64,
    len: u64,
) -> Result<String, Error> {
    if len > ARGS_MAX as u64 {
        return Err(Error::InvalidArgument);
    }
    let mut buf = [0u8; ARGS_MAX];
    corey::fault_in(p, space, ptr, len, false);
    space.copy_in(ptr, &mut buf[..len as usize])?;
    core::str::from_utf8(&buf[..len as usize]).map(String::from).map_err(|_| Error::InvalidArgument)
}

/// `pcore_run(&PcoreRun)`: sends the context to the pcore's core (Corey §4.4).
fn pcore_run(p: &mut corey::ProgramObjects, space: &mut AddressSpace, ptr: u64) -> SysResult {
    let a = abi::PcoreRun::from_words(read_words::<16>(p, space, ptr)?);
    let pcore_ptr = corey::lookup(p, a.pcore[0], a.pcore[1], ObjectKind::Pcore)?;
    let pc = corey::pcore(&pcore_ptr).ok_or(Error::InvalidArgument)?;
    if pc.core == this_core().index {
        return Err(Error::NotPermitted);
    }
    let root_ar = corey::lookup(p, a.ar[0], a.ar[1], ObjectKind::AddressRange)?;
    if !corey::is_root_range(&root_ar) || a.entry >= paging::USER_END {
        return Err(Error::InvalidArgument);
    }
    let n = usize::try_from(a.nshares).map_err(|_| Error::InvalidArgument)?;
    if n > abi::PcoreRun::MAX_SHARES {
        return Err(Error::InvalidArgument);
    }
    let shares = corey::shares_for_child(p, &a.shares[..n])?;
    claim(pc)?;
    let what = StartWhat::Context { entry: a.entry, stack: a.stack, arg: a.arg, root_ar, shares };
    let seen = CAUGHT_UP.with(|c| *c);
    send_job(pc.core, StartJob { pcore: pcore_ptr.clone(), what, seen }).map(|_| 0)
}

/// Marks `pc` running, or `Busy` if it is already.
fn claim(pc: &corey::Pcore) -> Result<(), Error> {
    let status = pc.status.load(Ordering::Acquire);
    if pcore_status::state(status) == pcore_status::RUNNING {
        return Err(Error::Busy);
    }
    pc.halt.store(false, Ordering::Release);
    pc.status
        .compare_exchange(status, pcore_status::RUNNING, Ordering::AcqRel, Ordering::Acquire)
        .map(|_| ())
        .map_err(|_| Error::Busy)
}

/// `program_run(pcore, line, len, give)`: a program on the pcore's core; on the caller's
/// own core the caller waits for it (its context is parked, then resumed). `give` (if
/// not 0) names an object of the caller's root share that the program receives.
fn program_run(
    frame: &SyscallFrame,
    share: u64,
    obj: u64,
    line: u64,
    len: u64,
    give: u64,
) -> SysResult {
    match start_program(share, obj, line, len, give)? {
        None => Ok(0),
        // Our own core: lent to the program, a thread pinned here; the caller waits for it
        // as `thread_join` does. (Nothing the start owned is left on this stack, which the
        // caller leaves without unwinding when it blocks.)
        Some(program) => sched::join(frame, program),
    }
}

/// `program_run`'s start: the program sent to the pcore's core (`None`), or queued on
/// this core (its thread, to wait for).
fn start_program(
    share: u64,
    obj: u64,
    line: u64,
    len: u64,
    give: u64,
) -> Result<Option<alloc::sync::Arc<sched::ThreadShared>>, Error> {
    let (pcore_ptr, text, give) = with_running_mut(|r, space| {
        let ptr = corey::lookup(&r.objects, share, obj, ObjectKind::Pcore)?;
        let given = match give {
            0 => None,
            id => Some(corey::resolve(&r.objects, r.objects.set.root_id().0, id)?),
        };
        Ok::<_, Error>((ptr, read_string(&mut r.objects, space, line, len)?, given))
    })
    .ok_or(Error::NotPermitted)??;
    let text = String::from(text.trim());
    let pc = corey::pcore(&pcore_ptr).ok_or(Error::InvalidArgument)?;
    let (name, args) = text.split_once(' ').unwrap_or((&text, ""));
    if initrd::find(name).is_none() {
        return Err(Error::NoSuchObject);
    }
    let seen = CAUGHT_UP.with(|c| *c);
    // Revoked since the barrier (a step while reading the line served it): not given.
    if give.as_ref().is_some_and(|g| revocation::revoked_since(seen, &[g])) {
        return Err(Error::NoSuchObject);
    }
    claim(pc)?;
    if pc.core != this_core().index {
        let what = StartWhat::Program { line: text.clone(), give };
        return send_job(pc.core, StartJob { pcore: pcore_ptr.clone(), what, seen }).map(|_| None);
    }
    let pcore = Some(pcore_ptr.clone());
    match load_program(name, args.trim_start(), DEFAULT_LIMIT_US, pcore, give.as_slice()) {
        Ok(context) => {
            let t = Running::from_context(context);
            let program = t.shared.clone();
            sched::enqueue(t);
            Ok(Some(program))
        }
        Err(e) => {
            pc.status.store(pcore_status::FAILED, Ordering::Release);
            Err(e)
        }
    }
}

/// `pcore_halt(pcore)`: stops the pcore's context at its next tick (at once if it is the
/// caller's own).
fn pcore_halt(share: u64, obj: u64) -> SysResult {
    let (ptr, mine) = with_running(|r, _| {
        let ptr = corey::lookup(&r.objects, share, obj, ObjectKind::Pcore)?;
        let mine = r.pcore.as_ref().is_some_and(|p| alloc::sync::Arc::ptr_eq(p, &ptr));
        Ok::<_, Error>((ptr, mine))
    })
    .ok_or(Error::NotPermitted)??;
    if mine {
        drop(ptr);
        leave(ExitStatus::Halted);
    }
    corey::pcore(&ptr).ok_or(Error::InvalidArgument)?.halt.store(true, Ordering::SeqCst);
    // Its program's threads that are parked or queued anywhere end now; running ones at
    // their next tick (`stop_if_due`).
    sched::reap_on(u64::MAX);
    Ok(0)
}

/// Checks that ⟨share, obj⟩ names a machine device in the running context's share set:
/// the capability `kernel_command` and `poweroff` ask for.
fn check_machine(share: u64, obj: u64) -> Result<(), Error> {
    match with_running(|r, _| corey::holds_device(&r.objects, share, obj, devices::MACHINE)) {
        Some(true) => Ok(()),
        _ => Err(Error::NotPermitted),
    }
}

/// `poweroff(machine_share, machine_obj)`.
fn poweroff(share: u64, obj: u64) -> SysResult {
    check_machine(share, obj)?;
    crate::arch::power::power_off()
}

/// `kernel_command(machine_share, machine_obj, line, len)`: one line of the kernel console.
fn kernel_command(share: u64, obj: u64, ptr: u64, len: u64) -> SysResult {
    check_machine(share, obj)?;
    let line = with_running_mut(|r, space| read_string(&mut r.objects, space, ptr, len))
        .ok_or(Error::NotPermitted)??;
    devices::count_machine_command();
    // The console's own `run` would start programs on this core through a remote call to
    // itself, which waits forever while this program holds the core.
    if line.split_whitespace().next() == Some("run") {
        return Err(Error::NotPermitted);
    }
    let console = KERNEL_CONSOLE.get().ok_or(Error::NoSuchCall)?;
    // One line at a time, machine-wide: a line that works on other cores (`sched`, `asym`,
    // `retype`, `bench`) waits in `smp::run_on` for their calls, and a core inside a
    // system call serves calls only when it returns, so two such lines on two cores
    // waited for each other until a timeout (found by the unguarded fuzzer, issue M14).
    if CONSOLE_LINE.swap(true, Ordering::Acquire) {
        return Err(Error::Busy);
    }
    // The console printed why it refused a line. A line that waited in vain for other
    // cores (a report or change sent to a core busy in a long call) is `TimedOut`, not a
    // bad line: the caller may try it again.
    let unanswered = crate::monitor::stats().calls_timed_out;
    let result = console(&line).map(|_| 0).map_err(|_| {
        if crate::monitor::stats().calls_timed_out > unanswered {
            Error::TimedOut
        } else {
            Error::InvalidArgument
        }
    });
    CONSOLE_LINE.store(false, Ordering::Release);
    result
}

/// Set while a `kernel_command` line runs (see there): the one machine-wide flag a
/// program's console line takes, as the serial console it prints to is one.
static CONSOLE_LINE: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// Runs one kernel-console line and reports a refusal on the console itself; `Err` is its
/// answer to a line it refused.
pub type ConsoleExecute = fn(&str) -> Result<(), String>;

/// What runs a `kernel_command` line: the kernel console's `execute`, installed at boot
/// (the console sits above this layer).
static KERNEL_CONSOLE: spin::Once<ConsoleExecute> = spin::Once::new();

/// Installs the kernel console for `kernel_command` (once, at boot).
pub fn set_kernel_console(execute: ConsoleExecute) {
    KERNEL_CONSOLE.call_once(|| execute);
}

/// `console_read(keyboard_share, keyboard_obj, buf, len)`: bytes typed so far, without
/// waiting; ⟨keyboard_share, keyboard_obj⟩ must name the keyboard device (the kernel gives
/// it to `init` alone), so no other program reads keystrokes meant for the shell. A
/// program that reads wants what it printed so far (a prompt, an echo) on the screen: its
/// unfinished line is printed first, as stdio flushes before input.
fn console_read(share: u64, obj: u64, ptr: u64, len: u64) -> SysResult {
    match with_running(|r, _| corey::holds_device(&r.objects, share, obj, devices::KEYBOARD)) {
        Some(true) => {}
        _ => return Err(Error::NotPermitted),
    }
    let pending = sched::with_current(|r| core::mem::take(&mut r.line));
    if let Some(bytes) = pending.filter(|b| !b.is_empty()) {
        crate::print!("{}", String::from_utf8_lossy(&bytes));
    }
    let mut bytes = Vec::new();
    while (bytes.len() as u64) < len.min(256) {
        match crate::arch::serial::try_read_byte() {
            Some(b) => bytes.push(b),
            None => break,
        }
    }
    with_running_mut(|r, space| copy_out(&mut r.objects, space, ptr, &bytes))
        .ok_or(Error::NotPermitted)??;
    devices::count_keyboard_bytes(bytes.len() as u64);
    Ok(bytes.len() as u64)
}

/// `file_list(buf, len)`: the initrd's names, one per line.
fn file_list(ptr: u64, len: u64) -> SysResult {
    let mut text = String::new();
    for (name, _) in initrd::files() {
        text.push_str(name);
        text.push('\n');
    }
    let n = (len as usize).min(text.len());
    with_running_mut(|r, space| copy_out(&mut r.objects, space, ptr, &text.as_bytes()[..n]))
        .ok_or(Error::NotPermitted)??;
    Ok(text.len() as u64)
}

/// `device_list(buf, max)`.
fn device_list(ptr: u64, max: u64) -> SysResult {
    let all = devices::list();
    let n = (max as usize).min(all.len());
    let words: Vec<u64> = all[..n].iter().flat_map(|d| [d.hwid, d.kind, d.core, d.name]).collect();
    with_running_mut(|r, space| write_words(&mut r.objects, space, ptr, &words))
        .ok_or(Error::NotPermitted)??;
    Ok(all.len() as u64)
}

/// `locality_get(core, out)`: the core's place and costs, from the SKB.
fn locality_get(core: u64, out: u64) -> SysResult {
    let target = crate::percpu::core(usize::try_from(core).map_err(|_| Error::InvalidArgument)?)
        .ok_or(Error::InvalidArgument)?;
    let me = this_core().index;
    let skb = crate::knowledge::get();
    let locality = abi::Locality {
        package: target.location.package as u64,
        core: target.location.core as u64,
        smt: target.location.smt as u64,
        node: target.node as u64,
        latency_cycles: skb.and_then(|s| s.latency(me, target.index)).unwrap_or(0),
        compute_speed: crate::knowledge::compute_speed(target.index).unwrap_or(0),
        // One value for the machine: the boot core's (CPUID or its chase).
        llc_bytes: crate::user::sched::last_level_cache_bytes(),
    };
    with_running_mut(|r, space| write_words(&mut r.objects, space, out, &locality.to_words()))
        .ok_or(Error::NotPermitted)??;
    Ok(0)
}

/// Little-endian words from bytes.
fn le_words<const N: usize>(bytes: &[u8]) -> [u64; N] {
    let mut words = [0u64; N];
    for (w, chunk) in words.iter_mut().zip(bytes.chunks_exact(8)) {
        *w = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
    }
    words
}

/// Adds one byte to the program's line; prints the line at a newline or when it is long.
fn emit(byte: u8) {
    let full = sched::with_current(|r| {
        if byte != b'\n' {
            r.line.push(byte);
        }
        (byte == b'\n' || r.line.len() >= LINE_MAX).then(|| core::mem::take(&mut r.line))
    })
    .flatten();
    if let Some(line) = full {
        let line = String::from_utf8_lossy(&line);
        CAPTURE.with(|c| {
            if let Some(kept) = c.as_mut().filter(|k| k.len() + line.len() < CAPTURE_MAX) {
                kept.push_str(&line);
                kept.push('\n');
            }
        });
        crate::println!("{line}");
    }
}

fn args(ptr: u64, len: u64) -> SysResult {
    with_running_mut(|r, space| {
        corey::fault_in(&mut r.objects, space, ptr, len, true);
        space.check(ptr, len, true)?;
        let bytes = r.args.as_bytes();
        let n = bytes.len().min(len as usize);
        space.copy_out(ptr, &bytes[..n]).map(|_| n as u64)
    })
    .ok_or(Error::NotPermitted)?
}
