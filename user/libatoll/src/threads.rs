//! Threads: one program on several cores in ONE address space. Each other core gets a
//! context (`pcore_alloc` + `pcore_run`, Corey §4.4) on the caller's own root address
//! range, with a stack of its own mapped there; the caller's core runs its part itself.
//! Every context faults the root range's segments into its own page tables (the same
//! frames, so memory is shared as threads' memory is), and includes the range's slot
//! ranges (shared page tables, Corey §3.1).
//!
//! Objects: a thread's context has a fresh root share, which the others cannot name. So
//! while threads run, the program's address-space objects (the root range, new heap
//! segments, new mappings) are kept in one "home" share every thread holds
//! ([`crate::obj::home_share`]); when they end, everything the root range maps is moved
//! into the caller's root share again, where `cfork` looks for it.
//!
//! Limits: no `cfork` while threads run; and a copy-on-write page (after a `cfork`) that
//! one thread copies stays mapped to the old copy in another thread's tables until that
//! thread's next edit of the root range, so threads must communicate through memory they
//! wrote before starting, fresh mappings, or atomics that write (a write faults and
//! refreshes the page).

use crate::cfork::{patiently, Child};
use crate::obj::{
    self, ar_mappings_all, obj_get_name, pcore_alloc, pcore_run, root_ar, root_share, share_addobj,
    share_delobj, ObjRef, Status,
};
use crate::private;
use abi::{Error, PcoreRun};
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU8, Ordering};

/// Each thread's stack (pages are filled on first touch, so only what is used costs).
pub const STACK_BYTES: u64 = 256 * 1024;

/// The start gate: threads wait until every context has started.
const WAIT: u8 = 0;
const GO: u8 = 1;
const ABORT: u8 = 2;

/// What a thread runs: `work(index)` once `gate` says go. Lives in the caller's heap
/// until every thread has ended.
struct Job<'a> {
    work: &'a (dyn Fn(usize) + Sync),
    index: usize,
    gate: &'a AtomicU8,
}

/// Runs `work(i)` on core `cores[i]` for every `i` at once, all in the caller's address
/// space, and returns when all have ended: `Ok` if each returned. The caller's own core
/// (if listed) runs its part itself. Fails without running any work if a core is not
/// online, listed twice, or cannot be started.
pub fn run(cores: &[usize], work: &(dyn Fn(usize) + Sync)) -> Result<(), Error> {
    let me = crate::pcore_current();
    let online = crate::cores_online();
    for (i, &core) in cores.iter().enumerate() {
        if core >= online || cores[..i].contains(&core) {
            return Err(Error::InvalidArgument);
        }
    }
    let mine = cores.iter().position(|&c| c == me);
    if cores.len() == usize::from(mine.is_some()) {
        if let Some(i) = mine {
            work(i);
        }
        return Ok(());
    }
    let root = root_share();
    let ar = root_ar();
    let home = open_home()?;
    let gate = AtomicU8::new(WAIT);
    let jobs: Vec<Job> = (0..cores.len()).map(|index| Job { work, index, gate: &gate }).collect();
    let mut started: Vec<Child> = Vec::with_capacity(cores.len());
    let mut stacks = Vec::with_capacity(cores.len());
    let mut failed = None;
    for (i, &core) in cores.iter().enumerate() {
        if Some(i) == mine {
            continue;
        }
        match start(core, home, ar, &jobs[i]) {
            Ok((child, stack)) => {
                started.push(child);
                stacks.push(stack);
            }
            Err(e) => {
                crate::println!("threads: cannot start core {core}: {e:?}");
                failed = Some(e);
                break;
            }
        }
    }
    gate.store(if failed.is_some() { ABORT } else { GO }, Ordering::Release);
    if failed.is_none() {
        if let Some(i) = mine {
            work(i);
        }
    }
    let mut bad = false;
    for child in started {
        let (core, status) = (child.core, child.join());
        if status != Status::Exited(0) {
            crate::println!("threads: core {core}: {status:?}");
            bad = true;
        }
    }
    obj::set_home_share(0);
    take_up(root, home);
    for stack in stacks {
        private::free(stack, STACK_BYTES);
    }
    obj::share_free(home);
    drop(jobs);
    match failed {
        Some(e) => Err(e),
        None if bad => Err(Error::Busy),
        None => Ok(()),
    }
}

/// Makes the home share, holding the root range, and names it home (new objects of the
/// address space go there): the share every thread's context holds. Returns it.
pub(crate) fn open_home() -> Result<u64, Error> {
    let home = obj::share_new()?;
    if let Err(e) = share_addobj(home, ObjRef::new(root_share(), root_ar())) {
        obj::share_free(home);
        return Err(e);
    }
    obj::set_home_share(home);
    Ok(home)
}

/// Starts `job` on `core`: its pcore (in the root share), a stack mapped in the root
/// range, then the context, holding the home share. Returns it and its stack's address.
fn start(core: usize, home: u64, ar: u64, job: &Job) -> Result<(Child, u64), Error> {
    let root = root_share();
    let pcore = ObjRef::new(root, patiently(|| pcore_alloc(root, core))?);
    let stack = match private::map_new(STACK_BYTES) {
        Ok(m) => m,
        Err(e) => {
            let _ = share_delobj(pcore);
            return Err(e);
        }
    };
    let mut run = PcoreRun {
        pcore: [pcore.share, pcore.object],
        entry: thread_entry as *const () as u64,
        // As if `thread_entry` had been called: 8 below a 16-byte boundary.
        stack: stack.va + stack.bytes - 8,
        ar: [root, ar],
        arg: job as *const Job as u64,
        nshares: 1,
        shares: [0; PcoreRun::MAX_SHARES],
        flags: 0,
    };
    run.shares[0] = home;
    match patiently(|| pcore_run(&run)) {
        Ok(_) => Ok((Child::started(core, pcore), stack.va)),
        Err(e) => {
            private::free(stack.va, stack.bytes);
            let _ = share_delobj(pcore);
            Err(e)
        }
    }
}

/// Where a thread starts (`rdi` = its [`Job`], in the caller's heap): waits at the gate,
/// runs its part, ends.
extern "C" fn thread_entry(job: *const Job) -> ! {
    // SAFETY: `run` keeps the job (and what it borrows) alive until this context has
    // ended, and only reads it meanwhile.
    let job = unsafe { &*job };
    loop {
        match job.gate.load(Ordering::Acquire) {
            WAIT => core::hint::spin_loop(),
            GO => break,
            _ => crate::exit(0),
        }
    }
    crate::tls::run_thread(
        || {
            (job.work)(job.index);
            0
        },
        crate::exit,
    )
}

/// Puts every object the root range maps that the root share does not hold (made by
/// the threads, in `home`) into the root share.
pub(crate) fn take_up(root: u64, home: u64) {
    let Ok(maps) = ar_mappings_all(ObjRef::new(root, root_ar())) else { return };
    for (i, m) in maps.iter().enumerate() {
        if maps[..i].iter().any(|earlier| earlier.target == m.target)
            || obj_get_name(ObjRef::new(root, m.target)).is_ok()
        {
            continue;
        }
        let _ = share_addobj(root, ObjRef::new(home, m.target));
    }
}
