//! Thread-local storage for kernel threads (issue M15): [`thread_local!`](crate::thread_local)
//! statics, each with a value of its own in every thread, made at the thread's first use
//! and dropped when the thread ends.
//!
//! Each thread has a *thread block* on its own stack, in the frame of its entry
//! ([`run_thread`]: the `main!` entry, [`crate::thread`]'s spawn, [`crate::threads`]'
//! contexts, a `cfork` child). The kernel keeps the thread's FS base (`set_fs_base`,
//! saved and loaded with its registers at every switch and migration), which points at
//! the block, and the block's first word is its own address (the x86-64 ELF TLS ABI's
//! convention), so `mov fs:[0]` finds it in one load, with no system call. A block holds
//! one pointer per key ([`KEYS_MAX`] keys in a program); a key's value is boxed at the
//! thread's first use.
//!
//! Rules:
//! - A context started at an entry of its own (a raw `pcore_run` or `thread_create`) has
//!   FS base 0 and no block: it must run its body through [`run_thread`] before it uses a
//!   thread-local (a use without a block faults at address 0).
//! - Destructors run when the thread's body returns from [`run_thread`] (from `main`, a
//!   spawned closure, a `cfork` function); a thread that calls `exit` itself skips them, as
//!   `std`'s do on `process::exit`. A value used after its destructor ran (from another
//!   destructor) is an [`AccessError`], never made again.
//! - **McRT threads** ([`crate::mcrt_host`]): McRT runs many McRT threads on one kernel
//!   thread (a processor) and switches them without the kernel, so the FS base, and every
//!   value here, is the *processor's*, shared by the McRT threads it runs; and a McRT
//!   thread may resume on another processor after any yield. McRT keeps its own
//!   per-McRT-thread pointer, the header at the base of each McRT stack (`mcrt::Key`,
//!   McRT-Malloc's heap of a McRT thread), and never touches FS, so the two do not meet:
//!   on a McRT thread, use `mcrt::Key` for data of the McRT thread, this for data of the
//!   processor, and never yield or block inside [`LocalKey::with`]'s closure (the McRT
//!   thread could go on on another processor while it still holds this one's value).

use core::cell::Cell;
use core::sync::atomic::{AtomicUsize, Ordering};

/// Most keys (`thread_local!` statics used) in a program; a key past them is refused
/// ([`AccessError`]) at its first use.
pub const KEYS_MAX: usize = 32;

/// A thread's block: where its FS base points.
#[repr(C)]
pub struct ThreadBlock {
    /// Its own address: `fs:[0]`.
    this: *const ThreadBlock,
    /// The heap arena the thread allocates from, plus one (0: the program's heap in the
    /// root range); see [`crate::arena`]. A field, not a key, because the allocator reads
    /// it and a key's value would be allocated.
    arena: Cell<usize>,
    /// Set when its destructors start: no value is made any more.
    ending: Cell<bool>,
    /// Each key's value (a `Box<T>`'s pointer), or null.
    slots: [Cell<*mut u8>; KEYS_MAX],
}

impl ThreadBlock {
    const fn new() -> ThreadBlock {
        ThreadBlock {
            this: core::ptr::null(),
            arena: Cell::new(0),
            ending: Cell::new(false),
            slots: [const { Cell::new(core::ptr::null_mut()) }; KEYS_MAX],
        }
    }

    /// Drops every value the thread made, in key order; afterwards no value is made.
    fn destroy(&self) {
        self.ending.set(true);
        for (i, slot) in self.slots.iter().enumerate() {
            let value = slot.replace(core::ptr::null_mut());
            if value.is_null() {
                continue;
            }
            let drop_fn = DROPS[i].load(Ordering::Acquire);
            if drop_fn != 0 {
                // SAFETY: `DROPS[i]` holds the `drop_boxed::<T>` of key i's `T` (stored
                // before any value of key i was made), and `value` is that key's `Box<T>`,
                // taken out of the slot so it is dropped once.
                let drop_fn: unsafe fn(*mut u8) = unsafe { core::mem::transmute(drop_fn) };
                // SAFETY: as above.
                unsafe { drop_fn(value) };
            }
        }
    }
}

/// Sets the calling thread's FS base (`set_fs_base`): `fs:[x]` then reads `base + x`, on
/// whatever core the thread runs, until it sets another. A base outside the user half is
/// `InvalidArgument`. Pointing it away from the thread's block leaves its thread-locals
/// unreachable until the block's address ([`block_address`], read before) is set back.
pub fn set_fs_base(base: u64) -> Result<(), abi::Error> {
    crate::sys::syscall3(abi::nr::SET_FS_BASE, base, 0, 0).map(|_| ())
}

/// Runs `body` as the calling thread's life with a thread block of its own (in this
/// frame, which never returns), then the thread's destructors, then `end(code)`, which
/// ends the thread (`exit`). Every entry libatoll gives a thread runs through this.
pub fn run_thread(body: impl FnOnce() -> i32, end: fn(i32) -> !) -> ! {
    let mut block = ThreadBlock::new();
    block.this = &block;
    // Refused only for an address outside the user half, which a stack never is.
    let _ = set_fs_base(&block as *const ThreadBlock as u64);
    let code = body();
    // The block itself, not through FS: the thread may have set another base.
    block.destroy();
    // `block` lives until `end` ends the thread: this frame is never left.
    end(code)
}

/// The calling thread's block address (its FS base), as the kernel has it loaded.
///
/// The thread must have a block ([`run_thread`]); otherwise this reads address 0 and
/// faults.
#[inline]
pub fn block_address() -> u64 {
    let block: u64;
    // SAFETY: reads `fs:[0]`, the first word of the calling thread's block (its own
    // address), which lives for the thread's life; no other effect.
    unsafe {
        core::arch::asm!("mov {}, fs:[0]", out(reg) block, options(nostack, readonly, preserves_flags))
    };
    block
}

/// The calling thread's arena choice ([`ThreadBlock`]'s `arena`: 0 for the program's
/// heap, `i + 1` for arena `i`). The thread must have a block ([`run_thread`]).
#[inline]
pub(crate) fn arena_choice() -> usize {
    // SAFETY: the calling thread's block lives for the thread's life (the caller's
    // promise that it has one); `arena` is a `Cell` only this thread touches.
    unsafe { (*(block_address() as *const ThreadBlock)).arena.get() }
}

/// Sets the calling thread's arena choice (see [`arena_choice`]).
pub(crate) fn set_arena_choice(choice: usize) {
    // SAFETY: as in `arena_choice`.
    unsafe { (*(block_address() as *const ThreadBlock)).arena.set(choice) }
}

/// A value used after its thread's destructors ran, or a key past [`KEYS_MAX`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AccessError;

/// Keys handed out so far (a key's index is its number among them).
static KEYS: locks::TtsLock<usize> = locks::TtsLock::new(0);
/// Each key's destructor (an `unsafe fn(*mut u8)` as an address), stored once when the
/// key gets its index.
static DROPS: [AtomicUsize; KEYS_MAX] = [const { AtomicUsize::new(0) }; KEYS_MAX];

/// A key's `index` before it has one.
const UNSET: usize = 0;
/// A key's `index` once the program ran out of keys.
const NONE_LEFT: usize = usize::MAX;

/// Drops a key's boxed value.
///
/// # Safety
/// `value` is a `Box<T>`'s pointer, not used again.
unsafe fn drop_boxed<T>(value: *mut u8) {
    // SAFETY: as the caller promised.
    drop(unsafe { alloc::boxed::Box::from_raw(value as *mut T) });
}

/// A thread-local static: declare it with [`thread_local!`](crate::thread_local), reach
/// the calling thread's value with [`LocalKey::with`].
pub struct LocalKey<T: 'static> {
    /// Its index + 1 among the program's keys ([`UNSET`] until first used).
    index: AtomicUsize,
    /// Makes a thread's value at its first use.
    init: fn() -> T,
}

impl<T: 'static> LocalKey<T> {
    /// A key whose value in each thread starts as `init()` (for `thread_local!`).
    pub const fn new(init: fn() -> T) -> LocalKey<T> {
        LocalKey { index: AtomicUsize::new(UNSET), init }
    }

    /// Runs `f` with the calling thread's value (made now if this is the thread's first
    /// use). Panics where [`LocalKey::try_with`] fails.
    #[inline]
    pub fn with<R>(&'static self, f: impl FnOnce(&T) -> R) -> R {
        match self.try_with(f) {
            Ok(r) => r,
            Err(AccessError) => panic!("thread_local: used after its destructor, or no key left"),
        }
    }

    /// Runs `f` with the calling thread's value; an [`AccessError`] once the thread's
    /// destructors have run (or with no key left). The common case (a key with its index,
    /// a value made) is a few loads, inlined: `fs:[0]`, the key's index, the slot.
    #[inline]
    pub fn try_with<R>(&'static self, f: impl FnOnce(&T) -> R) -> Result<R, AccessError> {
        let i = match self.index.load(Ordering::Acquire) {
            UNSET | NONE_LEFT => self.assign_index()?,
            i => i - 1,
        };
        // SAFETY: the calling thread's block (its FS base), alive while the thread runs
        // (`run_thread`); only this thread uses it, and it hands out no `&mut`.
        let block = unsafe { &*(block_address() as *const ThreadBlock) };
        let slot = block.slots.get(i).ok_or(AccessError)?;
        let mut value = slot.get();
        if value.is_null() {
            value = self.make_value(block, slot)?;
        }
        // SAFETY: key i's value in this thread, a `Box<T>` that lives until the thread's
        // destructors take it out of the slot (never while `f` runs on this thread).
        Ok(f(unsafe { &*(value as *const T) }))
    }

    /// Makes the calling thread's value in `slot` (its first use), unless its destructors
    /// have started.
    #[cold]
    #[inline(never)]
    fn make_value(
        &self,
        block: &ThreadBlock,
        slot: &Cell<*mut u8>,
    ) -> Result<*mut u8, AccessError> {
        if block.ending.get() {
            return Err(AccessError);
        }
        let value = alloc::boxed::Box::into_raw(alloc::boxed::Box::new((self.init)()));
        if slot.get().is_null() {
            slot.set(value as *mut u8);
        } else {
            // `init` used this key itself and made a value first: keep that one.
            // SAFETY: ours, never shared.
            drop(unsafe { alloc::boxed::Box::from_raw(value) });
        }
        Ok(slot.get())
    }

    /// Gives the key its index among the program's keys (its first use anywhere).
    #[cold]
    #[inline(never)]
    fn assign_index(&self) -> Result<usize, AccessError> {
        KEYS.with(|next| {
            // Another thread may have given it one while this one waited.
            match self.index.load(Ordering::Acquire) {
                UNSET => {}
                NONE_LEFT => return Err(AccessError),
                i => return Ok(i - 1),
            }
            if *next == KEYS_MAX {
                self.index.store(NONE_LEFT, Ordering::Release);
                return Err(AccessError);
            }
            let i = *next;
            *next += 1;
            DROPS[i].store(drop_boxed::<T> as unsafe fn(*mut u8) as usize, Ordering::Release);
            self.index.store(i + 1, Ordering::Release);
            Ok(i)
        })
    }
}

/// Declares thread-local statics, as `std::thread_local!`:
///
/// ```ignore
/// libatoll::thread_local! {
///     static COUNT: core::cell::Cell<u64> = core::cell::Cell::new(0);
/// }
/// COUNT.with(|c| c.set(c.get() + 1));
/// ```
#[macro_export]
macro_rules! thread_local {
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = $init:expr; $($rest:tt)*) => {
        $(#[$attr])* $vis static $name: $crate::tls::LocalKey<$t> =
            $crate::tls::LocalKey::new(|| $init);
        $crate::thread_local!($($rest)*);
    };
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = $init:expr) => {
        $(#[$attr])* $vis static $name: $crate::tls::LocalKey<$t> =
            $crate::tls::LocalKey::new(|| $init);
    };
    () => {};
}
