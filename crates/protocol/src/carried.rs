//! Kernel objects that travel between cores: owned ([`Carried`]) or lent ([`Lent`]).
//! Objects live in memory every core reaches (Corey §4.1), so a message hands over a
//! pointer, never a copy; the handle's type says what it points to on both ends.

use crate::{Field, Malformed};
use alloc::boxed::Box;
use core::marker::PhantomData;
use core::ptr::NonNull;

/// Whether `word` may be a pointer to a `T` made by this kernel: not null, aligned, and
/// (on the kernel's own target) in the kernel half.
fn plausible<T>(word: u64) -> bool {
    let in_kernel_half = cfg!(not(target_os = "none")) || word >= 0xffff_8000_0000_0000;
    word != 0 && word.is_multiple_of(core::mem::align_of::<T>() as u64) && in_kernel_half
}

/// An owned `T` on its way to another core: the sender gives up its box, the receiver
/// gets it. Dropped unsent, it frees the box as the box would.
pub struct Carried<T> {
    ptr: NonNull<T>,
    _owns: PhantomData<Box<T>>,
}

// SAFETY: a `Carried<T>` is a `Box<T>` in another form: sending it sends the `T`.
unsafe impl<T: Send> Send for Carried<T> {}

impl<T> Carried<T> {
    /// Hands `value` over: it travels in a message as one word.
    pub fn new(value: Box<T>) -> Carried<T> {
        Carried { ptr: NonNull::from(Box::leak(value)), _owns: PhantomData }
    }

    /// The box again, at the receiving end (or at the sender, when a send failed).
    pub fn into_box(self) -> Box<T> {
        let ptr = self.ptr;
        core::mem::forget(self);
        // SAFETY: `ptr` came from `Box::leak` in `new` (directly, or through `put` and
        // `take` of exactly one message), and `self` was its only owner.
        unsafe { Box::from_raw(ptr.as_ptr()) }
    }
}

impl<T> Drop for Carried<T> {
    fn drop(&mut self) {
        // SAFETY: as in `into_box`: this handle is the box's only owner.
        drop(unsafe { Box::from_raw(self.ptr.as_ptr()) });
    }
}

impl<T> Field for Carried<T> {
    const WORDS: usize = 1;
    fn put(self, out: &mut [u64]) {
        out[0] = self.ptr.as_ptr() as u64;
        core::mem::forget(self); // ownership is in the word now
    }
    unsafe fn take(words: &[u64]) -> Result<Self, Malformed> {
        if !plausible::<T>(words[0]) {
            return Err(Malformed::BadField);
        }
        let ptr = NonNull::new(words[0] as *mut T).ok_or(Malformed::BadField)?;
        Ok(Carried { ptr, _owns: PhantomData })
    }
}

/// A `T` lent to another core: the lender keeps it alive, and owns it, until the receiver
/// answers (or the lender gives up and says so in the `T` itself).
pub struct Lent<T> {
    ptr: NonNull<T>,
}

impl<T> core::fmt::Debug for Carried<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Carried({:p})", self.ptr)
    }
}

impl<T> core::fmt::Debug for Lent<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Lent({:p})", self.ptr)
    }
}

impl<T> Clone for Lent<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Lent<T> {}

// SAFETY: a `Lent<T>` is a shared reference sent to another core.
unsafe impl<T: Sync> Send for Lent<T> {}

impl<T> Lent<T> {
    /// Lends `value`: the caller keeps it alive until the receiver is done with it.
    pub fn new(value: *const T) -> Option<Lent<T>> {
        NonNull::new(value as *mut T).map(|ptr| Lent { ptr })
    }

    /// The lent pointer (the lender's own, or the receiver's to read while it may).
    pub fn as_ptr(self) -> *mut T {
        self.ptr.as_ptr()
    }
}

impl<T> Field for Lent<T> {
    const WORDS: usize = 1;
    fn put(self, out: &mut [u64]) {
        out[0] = self.ptr.as_ptr() as u64;
    }
    unsafe fn take(words: &[u64]) -> Result<Self, Malformed> {
        if !plausible::<T>(words[0]) {
            return Err(Malformed::BadField);
        }
        NonNull::new(words[0] as *mut T).map(|ptr| Lent { ptr }).ok_or(Malformed::BadField)
    }
}
