//! What crosses system threads: the crate's cells that more than one thread reaches, and
//! so every `Sync` or `Send` the compiler cannot derive. Each cell is a small type with
//! safe methods, whose docs say the one rule its users keep; the types of other modules
//! that cross threads hold their non-`Sync` parts in one of these, so this module names
//! none of them and every module builds on it.
//!
//! - [`Slot`]: a value handed over once, from one thread to another, ordered by a flag
//!   its users publish (a thread's result for its joiner, a future's function and value).
//! - [`Held`]: a value behind a lock its user implements, reached by one holder at a time
//!   (a mutex's value, the STM's limbo list).
//! - [`HeldLogs`]: as `Held`, for a value that holds addresses only its holder uses (an
//!   STM descriptor's logs).
//! - [`ReadShared`]: a value behind a reader-writer lock its user implements.
//! - [`Confined`]: a value one system thread changes inside a structure all share (a
//!   processor's own state in the runtime's).
//! - [`AtomicallyCopied`]: a value copied only word by word with atomics (a transactional
//!   cell's).

use core::cell::UnsafeCell;

/// A value handed over once between threads: put by one thread (or made full), then taken
/// by one other, after a Release store by the putter and an Acquire load by the taker of
/// some flag of theirs (a thread's `DONE`, a future's state) that orders the two.
pub(crate) struct Slot<T> {
    value: UnsafeCell<Option<T>>,
}

// SAFETY: the value moves between threads (so `T: Send`) and is never shared: one thread
// puts it, then (ordered by its users' flag, as the type's rule says) one thread takes it.
unsafe impl<T: Send> Sync for Slot<T> {}

impl<T> Slot<T> {
    /// An empty slot.
    pub(crate) const fn new() -> Slot<T> {
        Slot { value: UnsafeCell::new(None) }
    }

    /// A slot holding `value`, for the one thread that will take it.
    pub(crate) const fn full(value: T) -> Slot<T> {
        Slot { value: UnsafeCell::new(Some(value)) }
    }

    /// Puts the value: by the one thread that puts, before it publishes its flag, while
    /// no one takes.
    pub(crate) fn put(&self, v: T) {
        // SAFETY: the type's rule: only the putter touches the value until it publishes,
        // and nobody takes before that.
        unsafe { *self.value.get() = Some(v) }
    }

    /// Takes the value: by the one thread that takes, after it saw the putter's flag (or,
    /// for a full slot, after it won the right to run what it holds).
    pub(crate) fn take(&self) -> Option<T> {
        // SAFETY: the type's rule: the put happened before (its flag was acquired), and
        // nobody else touches the value now.
        unsafe { (*self.value.get()).take() }
    }
}

/// A value behind a lock that its user implements (a word it takes with Acquire and
/// releases with Release): reached only by the thread holding that lock, so one thread at
/// a time.
pub(crate) struct Held<T> {
    value: UnsafeCell<T>,
}

// SAFETY: one thread at a time reaches the value (the lock's holder, as the type's rule
// says), and the lock's Acquire/Release orders them: it moves between threads, `T: Send`.
unsafe impl<T: Send> Sync for Held<T> {}

impl<T> Held<T> {
    /// `value`, behind its user's lock.
    pub(crate) const fn new(value: T) -> Held<T> {
        Held { value: UnsafeCell::new(value) }
    }

    /// The value, for the lock's holder while it holds it.
    pub(crate) fn get(&self) -> &T {
        // SAFETY: the caller holds the lock (the type's rule): nobody else reaches it.
        unsafe { &*self.value.get() }
    }

    /// The value to change, for the lock's holder while it holds it, which keeps no other
    /// reference to it meanwhile.
    #[allow(clippy::mut_from_ref)] // (the lock, not the borrow, makes it unique)
    pub(crate) fn get_mut(&self) -> &mut T {
        // SAFETY: the caller holds the lock (the type's rule) and no other reference.
        unsafe { &mut *self.value.get() }
    }

    /// The value, owned.
    pub(crate) fn into_inner(self) -> T {
        self.value.into_inner()
    }
}

/// A value behind a reader-writer lock that its user implements: readers share it while
/// no writer holds the lock; a writer has it alone.
pub(crate) struct ReadShared<T> {
    value: UnsafeCell<T>,
}

// SAFETY: readers share `&T` across threads (so `T: Sync`), a writer has it alone and it
// moves between writers (so `T: Send`); the lock orders them (the type's rule).
unsafe impl<T: Send + Sync> Sync for ReadShared<T> {}

impl<T> ReadShared<T> {
    /// `value`, behind its user's lock.
    pub(crate) const fn new(value: T) -> ReadShared<T> {
        ReadShared { value: UnsafeCell::new(value) }
    }

    /// The value, for a reader while it holds a reader's share (no writer is in).
    pub(crate) fn read(&self) -> &T {
        // SAFETY: the type's rule: no writer holds the lock, so nothing changes the value.
        unsafe { &*self.value.get() }
    }

    /// The value to change, for the writer while it holds the lock alone.
    #[allow(clippy::mut_from_ref)] // (the lock, not the borrow, makes it unique)
    pub(crate) fn write(&self) -> &mut T {
        // SAFETY: the type's rule: the writer holds the lock alone, and keeps no other
        // reference meanwhile.
        unsafe { &mut *self.value.get() }
    }
}

/// A holder's private logs: as [`Held`], a value behind a lock its user implements and
/// reached only by the thread holding it, but one that may hold raw addresses (an STM
/// descriptor's read, write and undo logs, its allocations and frees). They are addresses
/// the holder itself logged and only a holder uses, so the value moves with the lock from
/// thread to thread whatever it holds.
pub(crate) struct HeldLogs<T> {
    value: UnsafeCell<T>,
}

// SAFETY: one thread at a time reaches the value (the lock's holder, as the type's rule
// says), and the lock's Acquire/Release orders them; the addresses in it are used only by
// the holder (the type's rule), so it may move between threads.
unsafe impl<T> Sync for HeldLogs<T> {}
// SAFETY: as above.
unsafe impl<T> Send for HeldLogs<T> {}

impl<T> HeldLogs<T> {
    /// `value`, behind its user's lock.
    pub(crate) const fn new(value: T) -> HeldLogs<T> {
        HeldLogs { value: UnsafeCell::new(value) }
    }

    /// The value to change, for the lock's holder while it holds it, which keeps no other
    /// reference to it meanwhile.
    #[allow(clippy::mut_from_ref)] // (the lock, not the borrow, makes it unique)
    pub(crate) fn get_mut(&self) -> &mut T {
        // SAFETY: the caller holds the lock (the type's rule) and no other reference.
        unsafe { &mut *self.value.get() }
    }
}

/// A value confined to one system thread inside a structure that all share: a processor's
/// own state in the runtime's (`runtime::Processor`), whose cells only the system thread
/// running that processor touches (its idle loop and the McRT threads it has switched
/// in). Other threads read only what in it is atomic or never changes.
pub(crate) struct Confined<T> {
    value: T,
}

// SAFETY: the type's rule: only the one system thread it is confined to touches what in
// it is not atomic or constant; others read only those parts, which may be shared.
unsafe impl<T> Sync for Confined<T> {}

impl<T> Confined<T> {
    /// `value`, confined to the system thread that will run it.
    pub(crate) const fn new(value: T) -> Confined<T> {
        Confined { value }
    }

    /// The value: all of it for the system thread it is confined to; its atomic and
    /// constant parts for others.
    pub(crate) fn get(&self) -> &T {
        &self.value
    }
}

/// A value copied only word by word with atomics: loaded by anyone with atomic loads, and
/// stored with atomic stores only by whoever owns the lock word its user keeps (a
/// transactional cell's value: `malloc::raw`, invariant 4). Word-aligned for those copies.
#[repr(C, align(8))]
pub(crate) struct AtomicallyCopied<T> {
    value: UnsafeCell<T>,
}

// SAFETY: the value is only copied with atomic loads, and stored with atomic stores by
// the owner of its user's lock word (the type's rule); a `T: Send` may thus be shared (it
// is `Copy`: a copy is the value).
unsafe impl<T: Copy + Send> Sync for AtomicallyCopied<T> {}

impl<T> AtomicallyCopied<T> {
    /// `value`.
    pub(crate) const fn new(value: T) -> AtomicallyCopied<T> {
        AtomicallyCopied { value: UnsafeCell::new(value) }
    }

    /// Where the value is, for the word-wise atomic copies.
    pub(crate) fn as_ptr(&self) -> *mut T {
        self.value.get()
    }

    /// The value, when nobody else can reach it.
    pub(crate) fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }

    /// The value, owned.
    pub(crate) fn into_inner(self) -> T {
        self.value.into_inner()
    }
}
