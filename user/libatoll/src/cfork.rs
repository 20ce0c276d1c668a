//! `cfork` (Corey §5.1): extends the program to another core. The child gets a new root
//! address range holding, at the same addresses, a copy-on-write copy of every private
//! segment of the caller's root range (image data, stack, heap), the caller's nested
//! (SLOT) ranges as they are (shared page tables, Corey §3.1), and the segments the
//! caller names as they are (shared). Read-only segments are shared too: nobody can
//! write them, so sharing and copying look the same. It starts at [`child_entry`], which
//! calls `f(arg)` and exits with its result.
//!
//! How the child names its objects: everything the child's root range maps, and the
//! range itself, goes into a fresh "hand-over" share passed to the child; `child_entry`
//! moves them into the child's own root share and leaves the hand-over share. So in the
//! child, as in the parent, every object of the root range is ⟨root_share(), id⟩, and
//! the child can grow its heap, map memory and `cfork` in turn.

use crate::obj::{
    self, ar_alloc, ar_mappings_all, ar_set_ar, ar_set_seg, pcore_alloc, pcore_run, pcore_status,
    root_share, segment_copy, share_addobj, share_delobj, ObjRef, Status,
};
use abi::{
    ar_kind, copy_mode, map, ArSetAr, ArSetSeg, Error, MappingInfo, ObjectKind, PcoreRun, SysResult,
};
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};

/// What a child shares with its parent beyond the default (Corey §5.1: "callers can
/// instruct cfork to share specified segments and address ranges ... by passing a set of
/// shares").
#[derive(Clone, Copy, Debug, Default)]
pub struct CforkOptions<'a> {
    /// Segments of the caller's root range (ids in its root share) the child maps as they
    /// are, not copy-on-write: writes are seen by both (the child still has its own page
    /// tables for them, so it faults the pages in itself).
    pub share_segments: &'a [u64],
    /// Shares of the caller's share set that go into the child's share set (at most
    /// `PcoreRun::MAX_SHARES - 1`; one slot carries the hand-over share).
    pub shares: &'a [u64],
    /// The top of the stack the child starts on (16-byte aligned, in a writable segment of
    /// the root range, which the child gets a copy of), or 0 for the top of its copy of the
    /// caller's stack. A stack of its own leaves the child's copy of the caller's stack
    /// frames intact, so the child may use what they hold (a closure, its captures).
    pub stack: u64,
}

/// A context started by [`cfork`]. [`Child::join`] waits for it and frees its pcore;
/// a child never joined keeps its core's pcore object until the program ends.
#[must_use = "a child's pcore stays allocated until it is joined"]
#[derive(Debug)]
pub struct Child {
    /// The core it runs on.
    pub core: usize,
    /// Its pcore object, in the caller's root share.
    pub pcore: ObjRef,
}

/// Pcore ids (in the root share) of the children started and not yet joined, so a program
/// that ends or panics can stop them ([`halt_children`]) instead of leaving them running
/// until their time limit. 0 marks a free slot.
static LIVE: [AtomicU64; 64] = [const { AtomicU64::new(0) }; 64];

impl Child {
    /// A started child, remembered until it is joined.
    pub(crate) fn started(core: usize, pcore: ObjRef) -> Child {
        for slot in &LIVE {
            if slot.compare_exchange(0, pcore.object, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
                break;
            }
        }
        Child { core, pcore }
    }

    /// What the child is doing now (non-blocking).
    pub fn status(&self) -> Result<Status, Error> {
        pcore_status(self.pcore)
    }

    /// Waits until the child has ended, frees its pcore object and returns how it ended.
    pub fn join(self) -> Status {
        let mut spins = 0u64;
        let status = loop {
            match pcore_status(self.pcore) {
                Ok(Status::Running) => {}
                Ok(s) => break s,
                Err(_) => break Status::Failed,
            }
            // Ask the kernel only now and then: the status word lives on another core.
            for _ in 0..256 {
                core::hint::spin_loop();
            }
            spins += 1;
            if spins.is_multiple_of(64) {
                let _ = crate::null();
            }
        };
        for slot in &LIVE {
            let _ =
                slot.compare_exchange(self.pcore.object, 0, Ordering::AcqRel, Ordering::Relaxed);
        }
        let _ = share_delobj(self.pcore);
        status
    }
}

/// A child this context started and has not joined that ended badly (see
/// [`Status::ended_badly`]): its core and how it ended. Children of another context (their
/// pcores in a root share this one cannot name) are not seen.
pub fn child_ended_badly() -> Option<(usize, Status)> {
    let root = obj::root_share();
    LIVE.iter().map(|slot| slot.load(Ordering::Acquire)).filter(|&id| id != 0).find_map(|id| {
        let status = pcore_status(ObjRef::new(root, id)).ok()?;
        status.ended_badly().then_some((id as usize, status))
    })
}

/// Halts every child this context started and has not joined (their pcores are in its
/// root share): a program's end is its children's end. Called on `exit` from `main` and
/// on a panic.
pub fn halt_children() {
    let root = obj::root_share();
    for slot in &LIVE {
        let id = slot.swap(0, Ordering::AcqRel);
        if id != 0 {
            let _ = obj::pcore_halt(ObjRef::new(root, id));
        }
    }
}

/// What `child_entry` needs, written (on the heap) before the copies are made so the
/// child's copy of the heap holds it.
struct Start {
    f: fn(u64) -> i32,
    arg: u64,
    /// The hand-over share.
    handover: u64,
    /// The child's root range (in the hand-over share).
    ar: u64,
}

/// The child's stack pointer by default: the top of its own (copy-on-write) copy of the
/// stack, as if `child_entry` had been called (8 below a 16-byte boundary).
const CHILD_STACK: u64 = abi::USER_STACK_TOP - 16 - 8;

/// Corey §5.1 `cfork`: runs `f(arg)` on core `core` in a new context whose memory is the
/// caller's, copy-on-write, except what is shared (see the module comment and
/// [`CforkOptions`]). The child's result is `f`'s return value as its exit code.
/// `NotPermitted` for the caller's own core, and once heap arenas are on
/// ([`crate::arena::enabled`]).
pub fn cfork(
    core: usize,
    opts: &CforkOptions,
    f: fn(u64) -> i32,
    arg: u64,
) -> Result<Child, Error> {
    if opts.shares.len() >= PcoreRun::MAX_SHARES {
        return Err(Error::InvalidArgument);
    }
    if core == crate::pcore_current() {
        // The caller's own core is busy running the caller.
        return Err(Error::NotPermitted);
    }
    if crate::arena::enabled() {
        // The arenas' slot ranges would be spliced into the child as they are, shared,
        // under its copy of their free lists: two allocators over one memory.
        return Err(Error::NotPermitted);
    }
    let root = root_share();
    // The pcore first: a busy core fails before anything is copied.
    let pcore = ObjRef::new(root, patiently(|| pcore_alloc(root, core))?);
    let handover = match obj::share_new() {
        Ok(s) => s,
        Err(e) => {
            let _ = share_delobj(pcore);
            return Err(e);
        }
    };
    let started = build_and_run(pcore, handover, opts, f, arg);
    // The running context holds the hand-over share and its range; the caller lets go.
    obj::share_free(handover);
    match started {
        Ok(()) => Ok(Child::started(core, pcore)),
        Err(e) => {
            let _ = share_delobj(pcore);
            Err(e)
        }
    }
}

/// Builds the child's root range in the hand-over share and starts the child.
fn build_and_run(
    pcore: ObjRef,
    handover: u64,
    opts: &CforkOptions,
    f: fn(u64) -> i32,
    arg: u64,
) -> Result<(), Error> {
    let ar = ar_alloc(handover, ar_kind::ROOT)?;
    let start = Box::into_raw(Box::new(Start { f, arg, handover, ar }));
    let result = copy_root_range(handover, ar, opts.share_segments).and_then(|()| {
        let mut run = PcoreRun {
            pcore: [pcore.share, pcore.object],
            entry: child_entry as *const () as u64,
            stack: if opts.stack == 0 { CHILD_STACK } else { opts.stack - 8 },
            ar: [handover, ar],
            arg: start as u64,
            nshares: 1 + opts.shares.len() as u64,
            shares: [0; PcoreRun::MAX_SHARES],
            flags: 0,
        };
        run.shares[0] = handover;
        run.shares[1..=opts.shares.len()].copy_from_slice(opts.shares);
        patiently(|| pcore_run(&run)).map(|_| ())
    });
    // The child reads its own copy of `Start`; the parent's is done with.
    // SAFETY: `start` came from `Box::into_raw` above and is freed once, here.
    drop(unsafe { Box::from_raw(start) });
    result
}

/// How long [`patiently`] keeps asking (cycles; about 0.1 s).
const PATIENCE: u64 = 200_000_000;

/// Makes the call again while it answers `NotPermitted` or `Busy`, for a short while: a
/// context that has just ended (its status already says so) can hold its core's pcore
/// for a moment longer, until that core's kernel has collected it. A core that is really
/// taken still fails, after [`PATIENCE`].
pub fn patiently(mut call: impl FnMut() -> SysResult) -> SysResult {
    let start = crate::rdtsc();
    loop {
        match call() {
            Err(Error::NotPermitted | Error::Busy) if crate::rdtsc() - start < PATIENCE => {
                for _ in 0..1000 {
                    core::hint::spin_loop();
                }
            }
            result => return result,
        }
    }
}

/// Fills the child's root range `ar` (in `handover`) from the caller's root range.
fn copy_root_range(handover: u64, ar: u64, share_segments: &[u64]) -> Result<(), Error> {
    let root = root_share();
    let maps = ar_mappings_all(obj::root_ar_ref())?;
    // Each distinct target once: (the caller's id, the id the child's range maps).
    // Nothing may be allocated from here to the last copy: the heap's segments and the
    // allocator's state (in the image's data) are copied one after the other, and must
    // agree in the child.
    let mut given: Vec<(u64, u64)> = Vec::with_capacity(maps.len());
    for m in &maps {
        if given.iter().any(|&(from, _)| from == m.target) {
            continue;
        }
        let id = if must_copy(m.target, &maps, share_segments) {
            segment_copy(handover, ObjRef::new(root, m.target), copy_mode::COW)?
        } else {
            share_addobj(handover, ObjRef::new(root, m.target))?;
            m.target
        };
        given.push((m.target, id));
    }
    for m in &maps {
        let id = given.iter().find(|&&(from, _)| from == m.target).map_or(0, |&(_, to)| to);
        let flags = m.flags & (map::WRITE | map::EXEC);
        if m.kind == ObjectKind::AddressRange as u64 {
            let set = ArSetAr { ar: [handover, ar], va: m.va, child: [handover, id], flags };
            ar_set_ar(&set)?;
        } else {
            let set = ArSetSeg {
                ar: [handover, ar],
                va: m.va,
                seg: [handover, id],
                first_page: m.first_page,
                pages: m.pages,
                flags,
            };
            ar_set_seg(&set)?;
        }
    }
    Ok(())
}

/// Whether the child gets a copy-on-write copy of `target` (a private, writable segment)
/// rather than the object itself.
fn must_copy(target: u64, maps: &[MappingInfo], share_segments: &[u64]) -> bool {
    let segment = ObjectKind::Segment as u64;
    maps.iter().any(|m| m.target == target && m.kind == segment && m.flags & map::WRITE != 0)
        && !share_segments.contains(&target)
}

/// Where a `cfork` child starts (on its own core, `rdi` = the `Start` block in its copy of
/// the heap): takes up its objects, then runs `f(arg)` and exits with its result.
extern "C" fn child_entry(start: *mut Start) -> ! {
    // SAFETY: the parent wrote this block before copying the heap; the child owns its copy.
    let start = unsafe { Box::from_raw(start) };
    let (f, arg) = (start.f, start.arg);
    if take_up_objects(start.handover, start.ar).is_err() {
        crate::println!(
            "cfork: child on core {} could not take up its objects",
            crate::pcore_current()
        );
        crate::exit(126);
    }
    drop(start);
    crate::tls::run_thread(|| f(arg), crate::exit)
}

/// Moves the child's root range and everything it maps from the hand-over share into the
/// child's root share, then leaves the hand-over share.
fn take_up_objects(handover: u64, ar: u64) -> Result<(), Error> {
    let root = root_share();
    // The range first: the heap grows through it.
    take_up(root, handover, ar)?;
    let maps = ar_mappings_all(ObjRef::new(root, ar))?;
    for (i, m) in maps.iter().enumerate() {
        if maps[..i].iter().all(|earlier| earlier.target != m.target) {
            take_up(root, handover, m.target)?;
        }
    }
    obj::self_drop(handover)?;
    Ok(())
}

/// Puts object `id` of the hand-over share into the root share, unless it is there.
fn take_up(root: u64, handover: u64, id: u64) -> Result<(), Error> {
    if obj::obj_get_name(ObjRef::new(root, id)).is_ok() {
        return Ok(());
    }
    share_addobj(root, ObjRef::new(handover, id)).map(|_| ())
}
