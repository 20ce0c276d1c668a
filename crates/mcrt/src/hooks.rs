//! The subsystems' hooks: how the runtime reaches the state that subsystems hang off a
//! thread's header without naming them (McRT §2.3: "when a thread exits, the scheduler
//! uses a fast callback to notify the memory manager").
//!
//! A subsystem implements [`ThreadHooks`] on a unit type; [`crate::Subsystems`] lists
//! them (a tuple, which is itself a [`ThreadHooks`] that walks its members in order), and
//! the runtime calls that list's hooks when a thread ends, is switched in, or is freed.
//! This module names no subsystem, so the runtime and the subsystems both build on it and
//! neither imports the other; the list itself is in `lib.rs`, above both. Nor does it name
//! the runtime: the hooks take the thread's header as a type parameter, `Header` (the
//! runtime's `Task`), so this module stands below the runtime that calls it.

/// What a subsystem that keeps per-thread state in the thread's header wants done when
/// a thread ends, is switched in, or is freed. Each hook does nothing unless the
/// subsystem overrides it; a hook checks its own header field (0: nothing there) and
/// returns at once when it has nothing to do. A subsystem implements it on a unit type,
/// and [`crate::Subsystems`] lists those types; a tuple of subsystems runs each hook
/// for its members in order. The calls are resolved at compile time, so the switch path
/// costs what it did when the runtime named the STM's hook (an indirect call through a
/// table of `fn` pointers was not inlined there).
pub(crate) trait ThreadHooks<Header> {
    /// Runs on the ending thread's own stack, before any `release`: work that may still
    /// use the runtime (thread-local destructors may allocate, lock, even yield).
    fn ending(_t: &Header) {}

    /// Gives back what the subsystem hangs off a header whose thread will never run
    /// again: a thread that ended (on its stack, after every `ending`), a thread left
    /// queued when the runtime stops, and a processor's stopped idle loop (on the
    /// processor's system stack). It must not yield.
    fn release(_t: &Header) {}

    /// Runs on a thread each time it is switched in, before it goes on: on every switch,
    /// so it must be cheap when it has nothing to do.
    fn resume(_t: &Header) {}
}

/// A list of subsystems (a tuple) is one too: each hook runs for every member, in order.
macro_rules! thread_hooks_for_tuple {
    ($($s:ident),+) => {
        impl<Header, $($s: ThreadHooks<Header>),+> ThreadHooks<Header> for ($($s,)+) {
            #[inline(always)]
            fn ending(t: &Header) {
                $($s::ending(t);)+
            }
            #[inline(always)]
            fn release(t: &Header) {
                $($s::release(t);)+
            }
            #[inline(always)]
            fn resume(t: &Header) {
                $($s::resume(t);)+
            }
        }
    };
}
thread_hooks_for_tuple!(A);
thread_hooks_for_tuple!(A, B);
thread_hooks_for_tuple!(A, B, C);
thread_hooks_for_tuple!(A, B, C, D);
thread_hooks_for_tuple!(A, B, C, D, E);
