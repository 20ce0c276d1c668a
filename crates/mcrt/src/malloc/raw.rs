//! The allocator's raw memory: every operation of McRT-Malloc that the compiler cannot
//! check is here, each behind a small safe function whose doc says what the allocator
//! guarantees about its arguments. The rest of `malloc/` (blocks, heaps, the pool) is safe
//! code over these.
//!
//! The STM keeps its descriptors the same way as the allocator its blocks and heaps (made
//! once, never freed, passed around as addresses): [`Forever`], [`leak`], [`forever`].
//! And the memory its transactions read and write in place (McRT §2.4) is copied here,
//! word by word, with atomics: [`load_bytes`], [`store_bytes`], [`alloc_value`],
//! [`logged`].
//!
//! The allocator keeps three invariants, on which these functions rely:
//! 1. **Blocks are forever.** Every block address the allocator holds (on a heap's lists,
//!    in the pool, in a block's `owner`, from an object's address with the low bits
//!    cleared) was made by [`new_block`], and no block is ever given back to the system
//!    (McRT §2.3: blocks are recycled through the pool, not freed).
//! 2. **Heaps are forever.** Every heap address (`Task::heap`, a [`super::ThreadHeap`]
//!    slot, a block's `owner`, the unused list) was made by [`leak`], and no heap is
//!    freed: a released heap waits on the unused list for the next thread.
//! 3. **Free objects have one linker.** An object handed to [`next_of`] or [`set_next`]
//!    is free (the program gave it back through `malloc::free`, whose caller promised it
//!    is not used again, or it was never handed out), and only the caller links it: its
//!    block's owner for the block's private list, the freeing heap for its remote buffer,
//!    the pusher for a chain being pushed, the owner again once it took the remote list.
//!
//! And the STM keeps a fourth:
//! 4. **Transactional memory is reached while the transaction lives.** The addresses a
//!    transaction copies to and from are a `TCell`'s value (8-aligned, its size long; the
//!    cell is borrowed for the whole `atomic` call, `'env`), a local of that size, or an
//!    undo entry's old bytes; it stores into a cell only while it owns the cell's lock
//!    word. The lock words it logs are `'env` cells' or the static stripe table's, and its
//!    logs are cleared before `atomic` returns.
//!
//! Two more rules, for memory other parts of the crate pass around by address:
//! 5. **A box passed by address has one owner.** A `Box` turned into an address (an MCS
//!    queue node, a pthread handle or per-thread block) is turned back ([`unbox`]) once,
//!    by its one owner, when no one reaches it any more; until then it is reached
//!    ([`boxed`], [`boxed_mut`]) only as its owner's protocol allows.
//! 6. **Memory given back is unreachable.** What the crate gives back with [`give_back`]
//!    or [`take_value`] came from `malloc::alloc` (or [`alloc_value`]) with that layout,
//!    and nothing reaches it any more (the STM: an undone allocation, a limbo block past
//!    quiescence; the self-test: an object it took from its slot).

use super::{McrtMalloc, ThreadHeap};
use core::alloc::{GlobalAlloc, Layout};
use core::sync::atomic::{self, AtomicU64, Ordering};

/// A new block: `bytes` (a power of two) from the system, aligned to their size, with the
/// header `make(base)` builds at its start; `None` when memory is short, or when its
/// address does not fit the pool's tagged word (over 48 bits).
///
/// # Panics
/// When the header does not fit `bytes` or its alignment (a bug of the caller).
#[cfg(not(loom))]
pub(super) fn new_block<B: Forever>(
    bytes: usize,
    make: impl FnOnce(usize) -> B,
) -> Option<&'static B> {
    assert!(core::mem::size_of::<B>() <= bytes && core::mem::align_of::<B>() <= bytes);
    let layout = Layout::from_size_align(bytes, bytes).expect("block layout");
    // SAFETY: the layout is not zero-sized.
    let base = unsafe { alloc::alloc::alloc(layout) };
    if base.is_null() {
        return None;
    }
    if base as usize >= 1 << 48 {
        // SAFETY: just allocated with this layout, and nobody has seen it.
        unsafe { alloc::alloc::dealloc(base, layout) };
        return None;
    }
    let block = base as *mut B;
    // SAFETY: `base` is ours, aligned to `bytes` and big enough for the header (both
    // checked above). It is never freed (invariant 1), so the reference lives for good.
    unsafe {
        block.write(make(base as usize));
        Some(&*block)
    }
}

/// A type whose values the crate makes once, never frees, and keeps as bare addresses (in
/// atomic words, thread headers, lock words): the allocator's blocks (invariant 1) and
/// heaps (invariant 2), the STM's descriptors. Implement it only for such a type, whose
/// every value the crate holds an address of was made by [`leak`] (blocks: by
/// [`new_block`]); that makes [`forever`] sound.
pub(crate) trait Forever {}

/// Makes `value` a [`Forever`] value: on the heap, never freed.
pub(crate) fn leak<T: Forever>(value: T) -> &'static T {
    alloc::boxed::Box::leak(alloc::boxed::Box::new(value))
}

/// The [`Forever`] value at `addr` (non-zero), an address the crate holds of one.
#[inline(always)]
pub(crate) fn forever<T: Forever>(addr: usize) -> &'static T {
    debug_assert!(addr != 0 && addr.is_multiple_of(core::mem::align_of::<T>()));
    // SAFETY: a `Forever` type's values that the crate holds addresses of were made by
    // `leak` or `new_block` and are never freed (the trait's rule): live, initialised,
    // aligned, for good. What may be done through the shared reference is the type's
    // own business (a heap's cells are used by its one thread).
    unsafe { &*(addr as *const T) }
}

/// The object linked after the free object `obj` (invariant 3).
#[cfg(not(loom))]
#[inline(always)]
pub(super) fn next_of(obj: usize) -> usize {
    // SAFETY: by invariant 3, `obj` is free and only we link it: its first word is a
    // link. Objects are at least 16 bytes and 16-aligned.
    unsafe { *(obj as *const usize) }
}

/// Links the free object `obj` to `next` (invariant 3).
#[cfg(not(loom))]
#[inline(always)]
pub(super) fn set_next(obj: usize, next: usize) {
    // SAFETY: by invariant 3, `obj` is free and only we link it, so we may write its
    // first word. Objects are at least 16 bytes and 16-aligned.
    unsafe { *(obj as *mut usize) = next }
}

/// The layout a large object is allocated with (at least one byte).
fn large_layout(layout: Layout) -> Layout {
    Layout::from_size_align(layout.size().max(1), layout.align()).unwrap_or(layout)
}

/// A large object (over 2 KiB, or aligned past what a class gives), straight from the
/// system; null when memory is short.
pub(super) fn large_alloc(layout: Layout) -> *mut u8 {
    // SAFETY: the size is not zero.
    unsafe { alloc::alloc::alloc(large_layout(layout)) }
}

/// Gives the large object `ptr` back to the system. The allocator passes only what its
/// caller gave `malloc::free` (or `Heap::free`), whose contract is that `ptr` came from
/// [`large_alloc`] with this `layout` (a layout no class serves) and is not used again.
pub(super) fn large_free(ptr: *mut u8, layout: Layout) {
    // SAFETY: as the public `free`'s caller promised (above).
    unsafe { alloc::alloc::dealloc(ptr, large_layout(layout)) }
}

/// A destructor (`fn(usize)`, or none) in an atomic word, as no atomic holds a `fn`: the
/// thread-local keys' destructors (`thread::Key`, the pthread adaptor's keys). Only `store`
/// writes the word, always from a `fn(usize)` (or 0), so `load` gives back what was
/// stored.
pub(crate) struct AtomicDestructor(core::sync::atomic::AtomicPtr<()>);

impl AtomicDestructor {
    /// No destructor.
    pub(crate) const fn new() -> AtomicDestructor {
        AtomicDestructor(core::sync::atomic::AtomicPtr::new(core::ptr::null_mut()))
    }

    /// Sets the destructor (Release: whoever loads it sees what was written before).
    pub(crate) fn store(&self, destructor: Option<fn(usize)>) {
        let word = destructor.map_or(core::ptr::null_mut(), |d| d as *mut ());
        self.0.store(word, Ordering::Release);
    }

    /// The destructor (Acquire).
    pub(crate) fn load(&self) -> Option<fn(usize)> {
        let word = self.0.load(Ordering::Acquire);
        // SAFETY: a non-null word was stored by `store`, from a `fn(usize)`.
        (!word.is_null()).then(|| unsafe { core::mem::transmute::<*mut (), fn(usize)>(word) })
    }
}

/// Keeps the host's finder of system threads' heap slots ([`super::set_thread_heaps`]):
/// a `fn() -> *const ThreadHeap` stored as an address, as no atomic holds a `fn`.
pub(super) struct Finder(core::sync::atomic::AtomicPtr<()>);

impl Finder {
    /// None named yet.
    pub(super) const fn new() -> Finder {
        Finder(core::sync::atomic::AtomicPtr::new(core::ptr::null_mut()))
    }

    /// Names `find`.
    pub(super) fn set(&self, find: fn() -> *const ThreadHeap) {
        self.0.store(find as *mut (), core::sync::atomic::Ordering::Relaxed);
    }

    /// The calling thread's slot: `None` when no finder is named; `Some(None)` when the
    /// finder says the thread has none (no thread-local storage, or it is being
    /// destroyed).
    #[cfg(not(loom))]
    pub(super) fn slot(&self) -> Option<Option<&ThreadHeap>> {
        let find = self.0.load(core::sync::atomic::Ordering::Relaxed);
        if find.is_null() {
            return None;
        }
        // SAFETY: only `set` stores here, and it stores a `fn() -> *const ThreadHeap`.
        let find = unsafe { core::mem::transmute::<*mut (), fn() -> *const ThreadHeap>(find) };
        let slot = find();
        // SAFETY: the host's promise (`set_thread_heaps`): null, or the calling thread's
        // own slot, used by no other thread and at its address until the thread's
        // thread-locals are destroyed, after which `find` returns null.
        Some(unsafe { slot.as_ref() })
    }
}

// SAFETY: `alloc` returns fresh memory fitting the layout, or null; `dealloc` takes back
// what `alloc` gave with the same layout (the trait's contract on its caller).
unsafe impl GlobalAlloc for McrtMalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        super::alloc(layout)
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as the caller promised: `ptr` came from `alloc` with `layout`.
        unsafe { super::free(ptr, layout) }
    }
}

// ---------------------------------------------------------------------------------------
// Transactional memory (the STM's, McRT §2.4): invariant 4.

/// Copies `len` bytes from shared memory at `src` to private memory at `dst` with Relaxed
/// atomic loads (8, then 4, 2 and 1 bytes wide). The STM passes (invariant 4) as `src`
/// a cell's value or an undo entry's old bytes, and as `dst` a local or an undo entry.
#[inline]
pub(crate) fn load_bytes(dst: *mut u8, src: *const u8, len: usize) {
    let mut i = 0;
    // SAFETY: (all four) by invariant 4 both are valid for `len` bytes, so in bounds,
    // and `src + i` is aligned to the width (8-aligned base, offsets stepping down from
    // 8); `dst` may be unaligned. Other threads only touch `src` atomically.
    unsafe {
        while i + 8 <= len {
            let w = AtomicU64::from_ptr(src.add(i) as *mut u64).load(Ordering::Relaxed);
            (dst.add(i) as *mut u64).write_unaligned(w);
            i += 8;
        }
        if i + 4 <= len {
            let w = atomic::AtomicU32::from_ptr(src.add(i) as *mut u32).load(Ordering::Relaxed);
            (dst.add(i) as *mut u32).write_unaligned(w);
            i += 4;
        }
        if i + 2 <= len {
            let w = atomic::AtomicU16::from_ptr(src.add(i) as *mut u16).load(Ordering::Relaxed);
            (dst.add(i) as *mut u16).write_unaligned(w);
            i += 2;
        }
        if i < len {
            let w = atomic::AtomicU8::from_ptr(src.add(i) as *mut u8).load(Ordering::Relaxed);
            dst.add(i).write(w);
        }
    }
}

/// Copies `len` bytes from private `src` to shared `dst` with Relaxed atomic stores. The
/// STM passes (invariant 4) as `dst` a cell's value whose lock word the calling
/// transaction owns, and as `src` a value or an undo entry's old bytes.
#[inline]
pub(crate) fn store_bytes(dst: *mut u8, src: *const u8, len: usize) {
    let mut i = 0;
    // SAFETY: (all four) as in `load_bytes`, the other way round; and by invariant 4 no
    // other transaction stores to `dst` meanwhile (we own its lock word), so what it
    // holds after is a whole value.
    unsafe {
        while i + 8 <= len {
            let w = (src.add(i) as *const u64).read_unaligned();
            AtomicU64::from_ptr(dst.add(i) as *mut u64).store(w, Ordering::Relaxed);
            i += 8;
        }
        if i + 4 <= len {
            let w = (src.add(i) as *const u32).read_unaligned();
            atomic::AtomicU32::from_ptr(dst.add(i) as *mut u32).store(w, Ordering::Relaxed);
            i += 4;
        }
        if i + 2 <= len {
            let w = (src.add(i) as *const u16).read_unaligned();
            atomic::AtomicU16::from_ptr(dst.add(i) as *mut u16).store(w, Ordering::Relaxed);
            i += 2;
        }
        if i < len {
            atomic::AtomicU8::from_ptr(dst.add(i)).store(src.add(i).read(), Ordering::Relaxed);
        }
    }
}

/// A `T` holding `value` in memory from the calling thread's heap ([`super::alloc`]);
/// null when memory is short.
pub(crate) fn alloc_value<T>(value: T) -> *mut T {
    let p = super::alloc(Layout::new::<T>()) as *mut T;
    if !p.is_null() {
        // SAFETY: fresh memory of `T`'s layout, ours alone.
        unsafe { p.write(value) };
    }
    p
}

/// The lock word `lock` that the running transaction logged (invariant 4: an `'env`
/// cell's or the stripe table's, alive until the transaction's `atomic` returns, and the
/// logs are cleared before that).
#[inline(always)]
pub(crate) fn logged<'a>(
    lock: *const core::sync::atomic::AtomicUsize,
) -> &'a core::sync::atomic::AtomicUsize {
    // SAFETY: by invariant 4, the word outlives every use of the logs that hold it.
    unsafe { &*lock }
}

/// The copy of a `T` that [`load_bytes`] made into `out` from a whole `T` of one version
/// (invariant 4: the lock word did not change across the copy, or the transaction owns
/// it).
#[inline(always)]
pub(crate) fn copied<T: Copy>(out: core::mem::MaybeUninit<T>) -> T {
    // SAFETY: `out` holds all `size_of::<T>()` bytes of a `T` that a commit, an abort or
    // `TCell::new` stored whole.
    unsafe { out.assume_init() }
}

// ---------------------------------------------------------------------------------------
// Memory passed around by address: invariants 5 and 6.

/// The box at `p` (from `Box::into_raw`), which its owner keeps alive while the caller
/// uses the result (invariant 5).
#[inline(always)]
pub(crate) fn boxed<'a, T>(p: *const T) -> &'a T {
    // SAFETY: by invariant 5, `p` is a live box, and its owner frees it only when no one
    // reaches it any more.
    unsafe { &*p }
}

/// The box at `p`, to change: only its owner's thread reaches it, and keeps no other
/// reference meanwhile (invariant 5).
#[inline(always)]
pub(crate) fn boxed_mut<'a, T>(p: *mut T) -> &'a mut T {
    // SAFETY: by invariant 5, `p` is a live box that only the caller reaches now.
    unsafe { &mut *p }
}

/// The box at `p` (from `Box::into_raw`) again, for its one owner, when nothing reaches
/// it any more (invariant 5).
pub(crate) fn unbox<T>(p: *mut T) -> alloc::boxed::Box<T> {
    // SAFETY: by invariant 5, `p` came from `Box::into_raw` and is turned back once.
    unsafe { alloc::boxed::Box::from_raw(p) }
}

/// Gives back `ptr`, from `malloc::alloc` with `layout`, which nothing reaches any more
/// (invariant 6).
pub(crate) fn give_back(ptr: *mut u8, layout: Layout) {
    // SAFETY: by invariant 6, as `malloc::free` asks.
    unsafe { super::free(ptr, layout) }
}

/// The value at `p`, made by [`alloc_value`] and reached by nothing else any more; its
/// memory is given back (invariant 6).
pub(crate) fn take_value<T>(p: *mut T) -> T {
    // SAFETY: by invariant 6, `p` holds a `T` that `alloc_value` wrote, ours alone; read
    // once, then its memory goes back with the layout it was allocated with.
    unsafe {
        let value = p.read();
        super::free(p as *mut u8, Layout::new::<T>());
        value
    }
}
