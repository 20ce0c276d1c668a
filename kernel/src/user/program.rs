//! Loading and starting programs: from the initrd into Corey segments mapped by a fresh
//! root address range, run on this core until they end ([`run`]), or started on another
//! core by message (`pcore_run`, `program_run`: [`start_job`]).

use super::elf;
use crate::arch::paging;
use crate::arch::user_entry::SyscallFrame;
use crate::corey::device as devices;
use crate::corey::revocation::{self, CAUGHT_UP};
use crate::corey::space::AddressSpace;
use crate::corey::user_memory::{read_string, read_words};
use crate::corey::{self, Ptr};
use crate::initrd;
use crate::monitor::protocol::{Protocol, Rejection};
use crate::param::DEFAULT_LIMIT_US;
use crate::percpu::{this_core, PerCoreState};
use crate::println;
use crate::sched::{self, leave, with_running, with_running_mut, Context, Running};
use crate::thread::ExitStatus;
use abi::{pcore_status, Error, ObjectKind, SysResult, ARGS_MAX};
use abi::{USER_STACK_BYTES, USER_STACK_TOP};
use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::Ordering;
use protocol::Carried;

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

/// The lines programs on this core print while [`run_capturing`] runs (`None`: not
/// capturing).
pub(super) static CAPTURE: PerCoreState<Option<String>> = crate::per_core_state!(None);

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
pub(super) fn run_giving(
    name: &str,
    args: &str,
    limit_us: u64,
    give: &[Ptr],
) -> Result<ExitStatus, Error> {
    let context = load_program(name, args, limit_us, None, give)?;
    Ok(run_context(context))
}

/// Loads program `name`: each ELF segment becomes a segment in a fresh root share, mapped
/// by a fresh root address range, and so does the stack (filled on first touch). The
/// objects in `give` (at most two) go into the root share too, their ids the program's
/// start arguments (`rdi`, then `rsi`; 0 for none).
pub(super) fn load_program(
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

/// What a `START` message carries: a context for this core, on behalf of `pcore`.
pub struct StartJob {
    pub(super) pcore: Ptr,
    pub(super) what: StartWhat,
    /// The revocations the sender's share set had seen when it resolved the objects the
    /// job carries: any revoked since must not reach the new context (issue M14).
    pub(super) seen: u64,
}

impl StartJob {
    /// The objects it hands to the new context.
    pub(super) fn carried(&self) -> Vec<&Ptr> {
        match &self.what {
            StartWhat::Context { root_ar, shares, .. } => {
                core::iter::once(root_ar).chain(shares.iter()).collect()
            }
            StartWhat::Program { give, .. } => give.iter().collect(),
            StartWhat::KernelCore => Vec::new(),
        }
    }
}

pub(super) enum StartWhat {
    /// `pcore_run`: a context on an existing root range.
    Context { entry: u64, stack: u64, arg: u64, root_ar: Ptr, shares: Vec<Ptr> },
    /// `program_run`: a program from the initrd, and the object it is given, if any.
    Program { line: String, give: Option<Ptr> },
    /// `pcore_run` with `KERNEL_CORE`: the core polls the pcore's devices (Corey §4.4).
    KernelCore,
}

/// Sends `job` to `core`'s monitor. On failure the job is dropped (and the pcore's status
/// reset).
pub(super) fn send_job(core: usize, job: StartJob) -> Result<(), Error> {
    let job = Carried::new(Box::new(job));
    if let Err(unsent) = crate::transport::send(core, StartMessage::Start { job }) {
        // Not sent: the job is ours again, and its pcore idle.
        let StartMessage::Start { job } = unsent.message;
        if let Some(p) = corey::pcore(&job.into_box().pcore) {
            p.status.store(pcore_status::IDLE, Ordering::Release);
        }
        return Err(Error::Busy);
    }
    Ok(())
}

::protocol::messages! {
    /// Starting a program or context on another core (Corey §4.4: `pcore_run`,
    /// `program_run`). It takes the core, so the monitor hands it over only between
    /// threads (`When::BetweenThreads`).
    #[derive(Debug)]
    pub enum StartMessage {
        /// Run this job's context here, on behalf of its pcore; the job is the
        /// receiver's now, and answers nothing (the pcore object carries the outcome).
        Start { job: Carried<StartJob> } = 11,
    }
}

/// A start message from core `from` (the monitor's handler table routes its tag here,
/// between threads).
pub fn on_start_message(
    _from: usize,
    tag: u32,
    words: &[u64; protocol::PAYLOAD_WORDS],
) -> Result<(), Rejection> {
    // SAFETY: the monitor hands over each message it read once, as the sender's `encode`
    // wrote it: the job was given up by its sender (`send_job`).
    let StartMessage::Start { job } = unsafe { StartMessage::decode(tag, words) }?;
    start_job(*job.into_box());
    Ok(())
}

/// A `START` message: runs the job's context on this core (from the monitor).
fn start_job(job: StartJob) {
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
    let StartJob { pcore, what, .. } = job;
    let cell = corey::pcore(&pcore).map(|p| p.status.clone());
    if let StartWhat::KernelCore = what {
        match crate::kcore::start(pcore) {
            Ok(()) => sched::dedicate_to_kernel_core(),
            Err(e) => {
                println!("start: core {}: kernel core: {:?}", this_core().index, e);
                if let Some(cell) = cell {
                    cell.store(pcore_status::FAILED, Ordering::Release);
                }
            }
        }
        return;
    }
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
        StartWhat::KernelCore => return, // started above
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

/// `pcore_run(&PcoreRun)`: sends the context to the pcore's core (Corey §4.4).
pub(super) fn pcore_run(
    p: &mut corey::ProgramObjects,
    space: &mut AddressSpace,
    ptr: u64,
) -> SysResult {
    let a = abi::PcoreRun::from_words(read_words::<{ abi::PcoreRun::WORDS }>(p, space, ptr)?);
    let pcore_ptr = corey::lookup(p, a.pcore[0], a.pcore[1], ObjectKind::Pcore)?;
    let pc = corey::pcore(&pcore_ptr).ok_or(Error::InvalidArgument)?;
    if pc.core == this_core().index {
        return Err(Error::NotPermitted);
    }
    if a.flags == abi::PcoreRun::KERNEL_CORE {
        // Corey §4.4: a kernel core runs no context; every other field must be empty.
        let context = abi::PcoreRun { pcore: [0; 2], flags: 0, ..a };
        if context != abi::PcoreRun::default() {
            return Err(Error::InvalidArgument);
        }
        claim(pc)?;
        let seen = CAUGHT_UP.with(|c| *c);
        let job = StartJob { pcore: pcore_ptr.clone(), what: StartWhat::KernelCore, seen };
        return send_job(pc.core, job).map(|_| 0);
    }
    if a.flags != 0 {
        return Err(Error::InvalidArgument);
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
pub(super) fn claim(pc: &corey::Pcore) -> Result<(), Error> {
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
pub(super) fn program_run(
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
pub(super) fn start_program(
    share: u64,
    obj: u64,
    line: u64,
    len: u64,
    give: u64,
) -> Result<Option<alloc::sync::Arc<crate::thread::ThreadShared>>, Error> {
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
pub(super) fn pcore_halt(share: u64, obj: u64) -> SysResult {
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
