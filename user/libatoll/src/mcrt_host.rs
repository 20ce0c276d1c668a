//! McRT's host adaptor on Atoll (McRT §2.5; issue M8): each logical processor is a kernel
//! thread (M7) pinned to a core, processor i on the i-th core counted from the caller's
//! (more processors than cores share cores, time-shared by the kernel), and an idle
//! processor parks in the kernel's `wait` on the runtime's word.
//!
//! Thread stacks come from segments of their own (issue M15), [`STACKS_PER_SEGMENT`] at a
//! time, mapped one after another from [`STACKS_BASE`]: a segment may not exceed its
//! core's free memory and a page is filled from the memory of the core that first touches
//! it, so each segment is made on a core with memory to spare, the caller's first, then
//! the next ones, where a short-lived kernel thread makes it and touches the page of each
//! stack that its thread's header and first frames use. Ten thousand live threads then
//! spread over the cores' memory instead of exhausting one core's (the heap, from which
//! stacks came before, grows only from the core that allocates).
//!
//! A processor whose kernel thread ends badly (a fault, a panic) ends the program: the
//! others notice it when they park ([`AtollHost`]'s `wait`).
//!
//! McRT-Malloc's heaps for kernel threads outside the runtime live in their thread-local
//! storage ([`crate::tls`]): [`name_thread_heaps`], called at every program's start, tells
//! McRT where, so each kernel thread allocates from a heap of its own (McRT §2.3), as a
//! McRT thread does, instead of one global heap under a lock. Its blocks go to the pool
//! when the thread's destructors run.

use crate::obj::{home_share, segment_alloc, share_delobj, ObjRef};
use crate::thread::{self, Builder};
use crate::{cores_online, pcore_current, Status};
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// Where McRT's stack segments are mapped (24 TiB: above the heap's terabyte at 16 TiB).
pub const STACKS_BASE: u64 = 0x1800_0000_0000;
/// Most address space the stack segments take (1 TiB).
const STACKS_LIMIT: u64 = 1 << 40;
/// Stacks in one segment (64 of 64 KiB: 4 MiB of address space, 64 pages touched).
pub const STACKS_PER_SEGMENT: usize = 64;
/// Free frames a core must keep beyond a segment's pages to be given one: room for its
/// heap and for the pages that threads touch as they run.
const MARGIN_PAGES: u64 = 1024;
const PAGE: u64 = 4096;

/// The next stack segment's address.
static NEXT_VA: AtomicU64 = AtomicU64::new(STACKS_BASE);
/// The core that made the last segment, plus one (0: none yet); the next is tried there
/// first.
static LAST_CORE: AtomicUsize = AtomicUsize::new(0);

/// Makes a stack segment of `bytes` at `va` on the calling core, if the core can spare
/// the segment and [`MARGIN_PAGES`] more, and touches the top page of each of its stacks
/// (so their frames are this core's). False if it cannot.
fn make_segment_here(va: u64, bytes: u64) -> bool {
    let home = home_share();
    // A segment may not exceed its core's free memory: one of the segment's size and the
    // margin tells whether this core can spare them, and costs nothing (never touched).
    match segment_alloc(home, bytes + MARGIN_PAGES * PAGE) {
        Ok(probe) => {
            let _ = share_delobj(ObjRef::new(home, probe));
        }
        Err(_) => return false,
    }
    if crate::private::map_segment_at(va, bytes).is_err() {
        return false;
    }
    // As the heap's segments, it stays in the home share, named by everything the root
    // range maps.
    let stack = mcrt::context::STACK_BYTES as u64;
    for k in 0..bytes / stack {
        // SAFETY: the word lies in the segment just mapped writable at `va`, which nobody
        // else uses yet (the runtime gets it when this returns).
        unsafe { core::ptr::write_volatile((va + (k + 1) * stack - 8) as *mut u64, 0) };
    }
    true
}

/// Runs `body(i)` for each processor `i` in `0..count`: processor 0 on the calling
/// thread, each other on a kernel thread of its own pinned to core `core_of(i)`; joins
/// them all.
fn run_processors_on(
    count: usize,
    body: &(dyn Fn(usize) + Sync),
    core_of: impl Fn(usize) -> usize,
) -> Result<(), &'static str> {
    // SAFETY: every thread started here is joined below before this function returns,
    // so `body` outlives every use the threads make of it.
    let body: &'static (dyn Fn(usize) + Sync) = unsafe { core::mem::transmute(body) };
    let mut threads = Vec::with_capacity(count);
    let mut failed = false;
    for i in 1..count {
        let core = core_of(i);
        match Builder::new().core(core).affinity(1 << core).spawn(move || {
            body(i);
            0
        }) {
            Ok(t) => threads.push(t),
            Err(_) => {
                failed = true;
                break;
            }
        }
    }
    // Processor 0 runs even if another could not start (the runtime must run to stop
    // the ones that did); `mcrt::run` then reports the failure.
    body(0);
    let mut bad = false;
    for t in threads {
        bad |= t.join() != Status::Exited(0);
    }
    match (failed, bad) {
        (true, _) => Err("mcrt: a processor's thread could not start"),
        (_, true) => Err("mcrt: a processor's thread failed"),
        _ => Ok(()),
    }
}

/// Atoll's host with McRT's processors on chosen cores (`--cores LIST`): processor `i` on
/// `cores[i]`, processor 0 being the calling thread, which should run on `cores[0]`
/// ([`move_to_core`]). More processors than cores wrap around the list. Otherwise as
/// [`AtollHost`].
pub struct AtollHostOn<'a> {
    /// The cores, in processor order (at least one, each below 64).
    pub cores: &'a [usize],
}

impl mcrt::Host for AtollHostOn<'_> {
    fn run_processors(
        &self,
        count: usize,
        body: &(dyn Fn(usize) + Sync),
    ) -> Result<(), &'static str> {
        if self.cores.is_empty() || self.cores.iter().any(|&c| c >= 64) {
            return Err("mcrt: no core, or a core past 63, for the processors");
        }
        run_processors_on(count, body, |i| self.cores[i % self.cores.len()])
    }

    fn wait(&self, word: &AtomicU32, expected: u32, timeout_us: u64) {
        mcrt::Host::wait(&AtollHost, word, expected, timeout_us)
    }

    fn wake(&self, word: &AtomicU32, n: u32) {
        mcrt::Host::wake(&AtollHost, word, n)
    }

    fn stack_memory(&self) -> Option<(usize, usize)> {
        mcrt::Host::stack_memory(&AtollHost)
    }

    fn now(&self) -> u64 {
        mcrt::Host::now(&AtollHost)
    }
}

/// Moves the calling kernel thread to `core` (below 64) for good: its affinity becomes
/// that core, and it yields until it runs there (`TimedOut` if it never does).
pub fn move_to_core(core: usize) -> Result<(), abi::Error> {
    if core >= 64 {
        return Err(abi::Error::InvalidArgument);
    }
    thread::set_my_affinity(1 << core)?;
    // The scheduler moves it at its next switch; a few yields at most.
    for _ in 0..10_000 {
        if pcore_current() == core {
            return Ok(());
        }
        thread::yield_now();
    }
    Err(abi::Error::TimedOut)
}

/// Atoll's host for `mcrt::run`.
pub struct AtollHost;

impl mcrt::Host for AtollHost {
    fn run_processors(
        &self,
        count: usize,
        body: &(dyn Fn(usize) + Sync),
    ) -> Result<(), &'static str> {
        let (me, cores) = (pcore_current(), cores_online());
        run_processors_on(count, body, |i| (me + i) % cores)
    }

    fn wait(&self, word: &AtomicU32, expected: u32, timeout_us: u64) {
        if let Ok(thread::Woken::TimedOut) = thread::wait(word, expected, timeout_us.max(1)) {
            if let Some(peer) = thread::peer_ended_badly() {
                crate::println!("mcrt: a processor ended badly ({peer}): the program stops");
                crate::exit(thread::PEER_ENDED_EXIT);
            }
        }
    }

    fn wake(&self, word: &AtomicU32, n: u32) {
        let _ = thread::wake(word, u64::from(n));
    }

    /// A new stack segment (see the module's doc), made on the core that made the last
    /// one or, when it cannot spare one, on the next core that can; `None` when none can.
    fn stack_memory(&self) -> Option<(usize, usize)> {
        let bytes = (STACKS_PER_SEGMENT * mcrt::context::STACK_BYTES) as u64;
        let va = NEXT_VA.fetch_add(bytes, Ordering::Relaxed);
        if va + bytes > STACKS_BASE + STACKS_LIMIT {
            return None;
        }
        let (me, cores) = (pcore_current(), cores_online().max(1));
        let first = LAST_CORE.load(Ordering::Relaxed).checked_sub(1).unwrap_or(me);
        for i in 0..cores {
            let core = (first + i) % cores;
            let made = if core == me {
                make_segment_here(va, bytes)
            } else {
                Builder::new()
                    .core(core)
                    .affinity(1 << core)
                    .spawn(move || if make_segment_here(va, bytes) { 0 } else { 1 })
                    .is_ok_and(|t| t.join() == Status::Exited(0))
            };
            if made {
                LAST_CORE.store(core + 1, Ordering::Relaxed);
                return Some((va as usize, STACKS_PER_SEGMENT));
            }
        }
        None
    }

    fn now(&self) -> u64 {
        // SAFETY: reads the time-stamp counter (user mode may: CR4.TSD is clear).
        unsafe { core::arch::x86_64::_rdtsc() }
    }
}

crate::thread_local! {
    /// The calling kernel thread's McRT-Malloc heap (for threads outside the runtime).
    static THREAD_HEAP: mcrt::malloc::ThreadHeap = mcrt::malloc::ThreadHeap::new();
}

/// The calling kernel thread's heap slot, or null once its destructors have run (McRT's
/// global heap serves it then).
fn thread_heap() -> *const mcrt::malloc::ThreadHeap {
    THREAD_HEAP.try_with(|h| h as *const mcrt::malloc::ThreadHeap).unwrap_or(core::ptr::null())
}

/// Tells McRT-Malloc to find each kernel thread's heap in its thread-local storage
/// (`mcrt::malloc::set_thread_heaps`). The `main!` entry calls it before `main`.
pub fn name_thread_heaps() {
    mcrt::malloc::set_thread_heaps(thread_heap);
}
