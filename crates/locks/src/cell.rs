//! The one place a lock's protected value lives: an `UnsafeCell` (loom's under `cfg(loom)`,
//! which checks that accesses are ordered by happens-before) whose accessors are `unsafe`
//! because only the lock that owns the cell knows when access is exclusive or shared.

use crate::sync::UnsafeCell;

/// The value a lock protects. It is `!Sync` on its own; each lock states with its own
/// `unsafe impl Sync` which `T` it may be shared for.
pub(crate) struct LockCell<T> {
    value: UnsafeCell<T>,
}

impl<T> LockCell<T> {
    /// Wraps `value`.
    #[cfg(not(loom))]
    pub(crate) const fn new(value: T) -> Self {
        LockCell { value: UnsafeCell::new(value) }
    }

    /// Wraps `value` (loom's cell cannot be built in a `const fn`).
    #[cfg(loom)]
    pub(crate) fn new(value: T) -> Self {
        LockCell { value: UnsafeCell::new(value) }
    }

    /// Unwraps the value; owning the lock by value proves nobody else can hold it.
    pub(crate) fn into_inner(self) -> T {
        self.value.into_inner()
    }

    /// Runs `f` on the value mutably.
    ///
    /// # Safety
    /// The caller holds the owning lock exclusively for the whole call: no other `with` or
    /// `with_mut` on this cell runs concurrently, and every earlier one happens-before this
    /// call (the lock's acquire synchronised with the previous release).
    pub(crate) unsafe fn with_mut<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        #[cfg(loom)]
        return self.value.with_mut(|ptr| {
            // SAFETY: exclusive access for the call, by this function's contract.
            f(unsafe { &mut *ptr })
        });

        #[cfg(not(loom))]
        // SAFETY: exclusive access for the call, by this function's contract.
        f(unsafe { &mut *self.value.get() })
    }

    /// Runs `f` on the value shared.
    ///
    /// # Safety
    /// The caller holds the owning lock for reading for the whole call: only other `with`
    /// calls may overlap it, and every earlier `with_mut` happens-before this call.
    pub(crate) unsafe fn with<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        #[cfg(loom)]
        return self.value.with(|ptr| {
            // SAFETY: no writer overlaps the call, by this function's contract.
            f(unsafe { &*ptr })
        });

        #[cfg(not(loom))]
        // SAFETY: no writer overlaps the call, by this function's contract.
        f(unsafe { &*self.value.get() })
    }
}
