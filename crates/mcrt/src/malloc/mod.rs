//! The allocator, McRT-Malloc (McRT §2.3; Hudson et al., "McRT-Malloc: a scalable
//! transactional memory allocator", ISMM 2006, the paper's [38]).
//!
//! - **Per-thread blocks.** Small requests (up to 2 KiB, [`class`]) are served from
//!   32 KiB blocks aligned to their size ([`block`]), each holding one size class and owned
//!   by one thread's heap ([`heap`]), which allocates and frees in it without atomics.
//!   Larger requests go straight to the system (`alloc::alloc`).
//! - **Recycling.** When a McRT thread that allocated ends, the scheduler calls
//!   [`on_thread_exit`], which puts its blocks in a recycling pool ([`pool`]); new heaps
//!   take blocks there before asking the system. Blocks are never given back.
//! - **Remote frees, batched.** An object freed by a thread that does not own its block is
//!   buffered in the freeing heap; a block's buffer is handed over in one push (one CAS, or
//!   one lock) once it holds 32 objects, when it is evicted by another block's, or at thread
//!   exit. The owner takes its block's remote list, in one swap, when its free list runs dry.
//! - **Two versions** ([`Version`]), chosen by [`set_version`] before heaps are made:
//!   lock-based (the pool and the remote lists under TTS locks) and non-blocking (a tagged
//!   Treiber stack per class, CAS-pushed remote lists). Each heap and block keeps the
//!   version it was made with, so switching affects only heaps made afterwards.
//!
//! Which heap serves a call:
//! - on a McRT thread, the thread's own, hanging off its header (`Task::heap`), made at its
//!   first allocation and released by [`on_thread_exit`];
//! - on any other system thread, a heap of its own ([`ThreadHeap`]) kept in that thread's
//!   thread-local storage and released when the thread ends: `std`'s thread-locals when
//!   hosted, and on a host without `std` the host's own, which it names with
//!   [`set_thread_heaps`] (Atoll: `libatoll::tls`, a kernel thread's FS base). This is
//!   McRT-Malloc's per-thread heap for threads McRT does not schedule (§2.3: "each thread
//!   has its own heap"; ISMM'06 §2: a thread-local heap, found through thread-local
//!   storage, so no allocation takes a lock);
//! - otherwise (a host that named no thread-local storage, or a thread whose thread-locals
//!   are being destroyed), one global heap under a lock;
//! - or an explicit [`Heap`] that the caller holds.
//!
//! Not for `#[global_allocator]`: blocks, heaps and large objects come from the global
//! allocator. Under `cfg(loom)` everything goes to the system allocator.

#[cfg(not(loom))]
mod block;
#[cfg(not(loom))]
mod class;
#[cfg(not(loom))]
mod heap;
#[cfg(not(loom))]
mod pool;
#[allow(unsafe_code)]
pub(crate) mod raw;

use crate::runtime::Task;
use core::alloc::Layout;
use core::sync::atomic::{AtomicU64, AtomicU8, Ordering};

/// Which protocol the pool and remote-free lists use (McRT §3.2.4, Figure 11).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    /// The pool and each block's remote list under a TTS lock: simple, and safe under
    /// cooperative scheduling, where no thread is switched out inside a critical section.
    Locked,
    /// A lock-free pool (a Treiber stack with an ABA tag) and CAS-pushed remote lists.
    NonBlocking,
}

/// The version new heaps use (0: `Locked`, 1: `NonBlocking`).
static VERSION: AtomicU8 = AtomicU8::new(0);

/// Chooses the version of heaps made from now on (default: [`Version::Locked`]). Set it
/// before the threads that should use it allocate; heaps already made keep theirs.
pub fn set_version(version: Version) {
    VERSION.store(version as u8, Ordering::Relaxed);
}

/// The version new heaps use.
pub fn version() -> Version {
    match VERSION.load(Ordering::Relaxed) {
        0 => Version::Locked,
        _ => Version::NonBlocking,
    }
}

/// Process-wide counters, bumped on slow paths only.
struct Counters {
    created: AtomicU64,
    recycled: AtomicU64,
    pooled: AtomicU64,
    batches: AtomicU64,
}

static COUNTERS: Counters = Counters {
    created: AtomicU64::new(0),
    recycled: AtomicU64::new(0),
    pooled: AtomicU64::new(0),
    batches: AtomicU64::new(0),
};

/// A snapshot of the allocator's counters (process-wide, since start).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Blocks taken from the system.
    pub blocks_created: u64,
    /// Blocks a heap took from the recycling pool.
    pub blocks_recycled: u64,
    /// Blocks put in the pool by ending threads (and released heaps).
    pub blocks_pooled: u64,
    /// Batches of remote frees handed over, counted when the freeing heap is released.
    pub remote_batches: u64,
}

/// The allocator's counters now.
pub fn stats() -> Stats {
    Stats {
        blocks_created: COUNTERS.created.load(Ordering::Relaxed),
        blocks_recycled: COUNTERS.recycled.load(Ordering::Relaxed),
        blocks_pooled: COUNTERS.pooled.load(Ordering::Relaxed),
        remote_batches: COUNTERS.batches.load(Ordering::Relaxed),
    }
}

// ---------------------------------------------------------------------------------------
// The interface the runtime uses.

/// Allocates `layout` from the calling thread's heap (null when memory is short). A zero
/// size gets a 1-byte object.
#[inline]
pub fn alloc(layout: Layout) -> *mut u8 {
    #[cfg(not(loom))]
    if let Some(class) = class::class_of(layout.size(), layout.align()) {
        let h = current_heap();
        if h.is_null() {
            return core::ptr::null_mut();
        }
        // The calling thread's heap, used only by it (or under the fallback lock).
        return with_current(h, |h| h.alloc(class));
    }
    raw::large_alloc(layout)
}

/// Frees `ptr`, allocated by [`alloc`] (or a [`Heap`], or [`McrtMalloc`]) with `layout`;
/// any thread may free any object.
///
/// # Safety
/// `ptr` came from this allocator with this `layout` and is not used again.
#[inline]
#[allow(unsafe_code)] // (the contract of `free`, as `GlobalAlloc::dealloc`'s)
pub unsafe fn free(ptr: *mut u8, layout: Layout) {
    #[cfg(not(loom))]
    if let Some(class) = class::class_of(layout.size(), layout.align()) {
        let h = current_heap();
        if h.is_null() {
            // The caller gave us the object.
            heap::free_unbatched(ptr as usize);
            return;
        }
        // The caller gave us the object; the heap is the calling thread's.
        with_current(h, |h| h.free(ptr as usize, class));
        return;
    }
    // Large objects come from the system with this layout.
    raw::large_free(ptr, layout)
}

/// The scheduler's callbacks ([`crate::Subsystems`]): a thread's heap is released when
/// it will never run again.
pub(crate) struct ThreadHooks;

impl crate::hooks::ThreadHooks<Task> for ThreadHooks {
    fn release(t: &Task) {
        on_thread_exit(t);
    }
}

/// The scheduler's callback when a thread that allocated ends (McRT §2.3): its remote
/// frees are handed over and its blocks go to the recycling pool. Nothing to do for a
/// thread that never allocated.
fn on_thread_exit(t: &Task) {
    let h = t.heap.replace(0);
    #[cfg(not(loom))]
    if h != 0 {
        // The thread's heap, made by `current_heap`; the thread is ending.
        heap::Heap::release(h as *const heap::Heap);
    }
    #[cfg(loom)]
    let _ = h;
}

// ---------------------------------------------------------------------------------------
// Whose heap: the McRT thread's, the system thread's, or the global one.

/// Marks the global fallback heap (its lock is taken around the call).
#[cfg(not(loom))]
const FALLBACK: *const heap::Heap = core::ptr::dangling();

/// The global heap for threads with no heap of their own (an address, 0 until made).
#[cfg(not(loom))]
static GLOBAL: locks::TtsLock<usize> = locks::TtsLock::new(0);

/// The calling thread's heap, made on first use; [`FALLBACK`] for the global one; null
/// when memory is short.
#[cfg(not(loom))]
#[inline]
fn current_heap() -> *const heap::Heap {
    if crate::in_runtime() {
        let t = crate::runtime::current();
        let h = t.heap.get();
        if h != 0 {
            return h as *const heap::Heap;
        }
        let h = heap::Heap::make(version());
        t.heap.set(h as usize);
        return h;
    }
    if let Some(slot) = THREAD_HEAPS.slot() {
        return slot.map_or(FALLBACK, ThreadHeap::get);
    }
    #[cfg(feature = "std")]
    if let Ok(h) = OS_HEAP.try_with(ThreadHeap::get) {
        return h;
    }
    FALLBACK
}

/// Runs `f` on heap `h` (from [`current_heap`], not null), under the global lock if it is
/// the fallback.
#[cfg(not(loom))]
#[inline]
fn with_current<R>(h: *const heap::Heap, f: impl FnOnce(&heap::Heap) -> R) -> R {
    if h != FALLBACK {
        // The calling thread's own heap.
        return f(heap::Heap::at(h as usize));
    }
    GLOBAL.with(|g| {
        if *g == 0 {
            *g = heap::Heap::make(version()) as usize;
        }
        assert!(*g != 0, "mcrt::malloc: no memory for the global heap");
        // The global heap is never released; we hold its lock.
        f(heap::Heap::at(*g))
    })
}

/// A system thread's heap slot (a thread outside the runtime): its heap, made at its
/// first allocation and released (its blocks to the pool, its remote frees handed over)
/// when the slot is dropped, as the thread's thread-locals are destroyed. Keep one in
/// each thread's thread-local storage and name it with [`set_thread_heaps`].
pub struct ThreadHeap(core::cell::Cell<usize>);

impl ThreadHeap {
    /// An empty slot (the heap comes at the thread's first allocation).
    pub const fn new() -> ThreadHeap {
        ThreadHeap(core::cell::Cell::new(0))
    }

    /// The heap, made now if the thread has none yet (null when memory is short).
    #[cfg(not(loom))]
    fn get(&self) -> *const heap::Heap {
        let h = self.0.get();
        if h != 0 {
            return h as *const heap::Heap;
        }
        let h = heap::Heap::make(version());
        self.0.set(h as usize);
        h
    }
}

impl Default for ThreadHeap {
    fn default() -> ThreadHeap {
        ThreadHeap::new()
    }
}

impl Drop for ThreadHeap {
    fn drop(&mut self) {
        let h = self.0.replace(0);
        #[cfg(not(loom))]
        if h != 0 {
            // This thread's heap; the thread is ending and will not use it again (later
            // calls find the thread-local gone and use the global heap).
            heap::Heap::release(h as *const heap::Heap);
        }
        #[cfg(loom)]
        let _ = h;
    }
}

/// The host's way to find the calling system thread's [`ThreadHeap`] (none named at
/// first).
static THREAD_HEAPS: raw::Finder = raw::Finder::new();

/// Names where system threads keep their [`ThreadHeap`]s, on a host whose thread-local
/// storage McRT cannot reach itself (without `std`): `find` returns the calling thread's
/// slot, or null if it has none (its thread-locals are being destroyed, or it has no
/// thread-local storage), when the global heap serves it. The slot must stay at its
/// address, and be used by no other thread, until the thread's thread-locals are
/// destroyed. Once named, it serves every system thread outside the runtime (hosted,
/// in place of `std`'s thread-locals, which serve while none is named).
pub fn set_thread_heaps(find: fn() -> *const ThreadHeap) {
    THREAD_HEAPS.set(find);
}

#[cfg(all(feature = "std", not(loom)))]
std::thread_local! {
    static OS_HEAP: ThreadHeap = const { ThreadHeap::new() };
}

// ---------------------------------------------------------------------------------------
// Explicit heaps and the `GlobalAlloc` face.

/// A heap the caller holds (for tests and for code that wants a given version on its own
/// terms): its blocks are its own; dropping it hands its remote frees over and puts its
/// blocks in the pool. Objects outlive it: any heap, or [`free`], may free them later.
#[cfg(not(loom))]
pub struct Heap {
    raw: *const heap::Heap,
}

#[cfg(not(loom))]
impl Heap {
    /// A heap of `version`; `None` when memory is short.
    pub fn new(version: Version) -> Option<Heap> {
        let raw = heap::Heap::make(version);
        (!raw.is_null()).then_some(Heap { raw })
    }

    /// Allocates `layout` (null when memory is short).
    pub fn alloc(&self, layout: Layout) -> *mut u8 {
        match class::class_of(layout.size(), layout.align()) {
            // Our heap, alive while we are; not `Sync`, so used by one thread.
            Some(class) => heap::Heap::at(self.raw as usize).alloc(class),
            None => raw::large_alloc(layout),
        }
    }

    /// Frees `ptr` (from any heap of this allocator) with `layout`.
    ///
    /// # Safety
    /// `ptr` came from this allocator with this `layout` and is not used again.
    #[allow(unsafe_code)] // (the contract of `free`)
    pub unsafe fn free(&self, ptr: *mut u8, layout: Layout) {
        match class::class_of(layout.size(), layout.align()) {
            // Our heap; the caller gave us the object.
            Some(class) => heap::Heap::at(self.raw as usize).free(ptr as usize, class),
            // As the caller promised.
            None => raw::large_free(ptr, layout),
        }
    }
}

#[cfg(not(loom))]
impl Drop for Heap {
    fn drop(&mut self) {
        // Made by `Heap::make`, not used again.
        heap::Heap::release(self.raw);
    }
}

/// The allocator as a [`GlobalAlloc`](core::alloc::GlobalAlloc) (the calling thread's
/// heap; the impl is in `raw`), for code generic over
/// allocators. Not for `#[global_allocator]` (it draws its blocks from the global one).
#[derive(Clone, Copy, Debug, Default)]
pub struct McrtMalloc;
