//! McRT, the many-core runtime (Saha et al., "Enabling Scalability and Performance in a
//! Large Scale CMP Environment", EuroSys 2007): the user-level layer that carries
//! fine-grained parallelism, portable across hosts (§2, Figure 1).
//!
//! | part | module | paper |
//! | --- | --- | --- |
//! | user-level threads: create, join, exit, yield, thread-local data | [`thread`] | §2 |
//! | the FPU control words a switch keeps, and their setter | [`fpu`] | §2 |
//! | futures: `spawn(f, arg)`, `read(handle)` | [`future`] | §2.1 |
//! | the configurable scheduler: P processors, Q queues, the mapping, domains | [`config`], [`runtime`] | §2.2 |
//! | predicate yield, on which every blocking primitive is built | [`yield_until`] | §2.2 |
//! | mutexes (TTS, ticket, MCS), reader-writer lock, condition variable, semaphore, barrier | [`sync`] | §2, [38] |
//! | the allocator: per-thread blocks, recycled at thread exit, remote frees batched | [`malloc`] | §2.3 |
//! | software transactional memory | [`stm`] | §2.4 |
//! | the pthread-like and OpenMP-like adaptors | [`pthread`], [`omp`] | §2.5 |
//! | the host adaptor interface; Linux's host | [`host`], [`hosted`] | §2.5 |
//!
//! Start with [`run`]: it runs a closure as the first McRT thread on P logical processors
//! that the [`Host`] provides (Linux: pinned OS threads; Atoll: kernel threads), and
//! returns its result.
//!
//! Threads are cooperative (§2.2): a thread runs until it yields, blocks or ends. A switch
//! saves only the callee-saved registers and the FPU control words ([`context`]).
//!
//! **Per-thread state of the subsystems.** The allocator's heap, the STM's descriptors
//! and thread-local values hang off a thread's header. The scheduler does not name those
//! subsystems: each implements `hooks::ThreadHooks` (what to run when a thread ends,
//! is switched in, or is freed unfinished) and is listed in one place, `Subsystems`,
//! here, whose hooks the runtime calls (§2.3: "when a thread exits, the scheduler uses a
//! fast callback to notify the memory manager"). So `runtime/` imports none of them;
//! `hooks.rs` holds the trait and walks the list.
//!
//! **Where the `unsafe` code is.** In four modules, each a small set of safe types and
//! functions whose docs state what the rest of the crate guarantees about their
//! arguments; the crate denies `unsafe_code`, and only these allow it:
//! - [`context`]: the context switch: stacks, thread headers, the switch, the FPU control
//!   words, and what a thread's borrows become across a switch or a run (a suspended
//!   thread's predicate word, an OpenMP reduction's contributions, the host and runtime
//!   `run` lends its threads, a scoped thread's body).
//! - `malloc::raw`: the allocator's blocks, heaps and object links, memory the crate
//!   keeps for good such as STM descriptors, the STM's word-wise copies, destructors kept
//!   in atomic words, and boxes passed around by address (MCS queue nodes, pthread
//!   handles and per-thread blocks) and memory given back (STM undo, limbo, self-test).
//! - `cells`: what crosses system threads: a value handed over once (a thread's result,
//!   a future's function and value), a value behind a lock its user implements (a
//!   mutex's, a reader-writer lock's, the STM limbo list, a descriptor's logs), a value
//!   confined to one system thread in shared state (a processor's, in the runtime's), and
//!   a value copied only word by word with atomics (an STM cell's): the cells in which the
//!   other modules keep what the compiler cannot prove `Sync`, each with the rule its
//!   users keep. It names no other module.
//! - [`hosted`]: Linux's system calls (`mmap`, `futex`, CPU affinity) and `rdtsc`, which
//!   no safe module can make.
//!
//! Besides these, four public functions are `unsafe fn` because their contract is one
//! the caller keeps: `malloc::free`, `Heap::free` and the STM's `Tx::free` and
//! `Tx::free_value` (as `GlobalAlloc::dealloc`: the pointer came from this allocator and
//! is not used again). Every `unsafe` block says why it is sound in a `// SAFETY:` comment
//! (`clippy::undocumented_unsafe_blocks` is on).
#![no_std]
// Every `unsafe` block says why it is sound (issue 23): an error, not a warning, so it
// holds for any build that runs clippy.
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]
// `unsafe` only where the crate's doc says (issue 23): each of those modules, and each
// public `unsafe fn` (an API contract), allows it by name.
#![deny(unsafe_code)]
#![warn(missing_docs)]

extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

mod atomics;
#[allow(unsafe_code)]
mod cells;
pub mod config;
#[allow(unsafe_code)]
pub mod context;
pub mod fpu;
pub mod future;
mod future_queues;
mod hooks;
pub mod host;
#[cfg(feature = "std")]
#[allow(unsafe_code)]
pub mod hosted;
pub mod malloc;
pub mod omp;
mod park;
mod predicate;
pub mod pthread;
mod queue;
pub mod runtime;
pub mod selftest;
pub mod stm;
pub mod sync;
pub mod thread;

pub use config::{Config, FpuControl, Policy, QueueLock};
pub use host::Host;
pub use predicate::Op;
pub use runtime::{
    exit, notify, notify_all, processor, processors, run, stats, switch_to_queue, yield_now,
};
pub use thread::{spawn, spawn_to, yield_until, JoinHandle, Key};

/// The subsystems that keep per-thread state in a thread's header, each with what the
/// scheduler must call when a thread ends, is switched in, or is freed
/// ([`hooks::ThreadHooks`]; McRT §2.3, the scheduler's "fast callback" to the memory
/// manager at thread exit). The one place that names them: the runtime calls this
/// list's hooks and imports none of them, and a new subsystem adds itself here. Order
/// matters: thread-local destructors run first (they may allocate or use a
/// transaction), then the allocator's and the STM's state is given back.
pub(crate) type Subsystems = (thread::ThreadHooks, malloc::ThreadHooks, stm::ThreadHooks);

/// Why a runtime call failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// A bad argument: a queue past Q, a broken configuration, a runtime inside a runtime.
    InvalidArgument,
    /// No memory for a stack or a header.
    NoMemory,
    /// The host could not start a processor.
    HostFailed,
}

#[cfg(feature = "std")]
std::thread_local! {
    /// Set while the system thread is one of a runtime's processors.
    static INSIDE: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
}

/// Processors running, in every runtime of the process.
#[cfg(not(feature = "std"))]
static PROCESSORS: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);

/// True when the caller runs on a McRT processor. Hosted (`std`), this is the system
/// thread's own flag. On a host without thread-local storage (Atoll) it is true while any
/// runtime of the process runs: there, only McRT threads may call the runtime while one
/// runs, and one runtime runs at a time.
pub fn in_runtime() -> bool {
    #[cfg(feature = "std")]
    {
        INSIDE.with(|i| i.get())
    }
    #[cfg(not(feature = "std"))]
    {
        PROCESSORS.load(core::sync::atomic::Ordering::Acquire) > 0
    }
}

/// Marks the system thread as a processor while it lives.
pub(crate) struct EnterRuntime;

impl EnterRuntime {
    pub(crate) fn new() -> EnterRuntime {
        #[cfg(feature = "std")]
        INSIDE.with(|i| i.set(true));
        #[cfg(not(feature = "std"))]
        PROCESSORS.fetch_add(1, core::sync::atomic::Ordering::AcqRel);
        EnterRuntime
    }
}

impl Drop for EnterRuntime {
    fn drop(&mut self) {
        #[cfg(feature = "std")]
        INSIDE.with(|i| i.set(false));
        #[cfg(not(feature = "std"))]
        PROCESSORS.fetch_sub(1, core::sync::atomic::Ordering::AcqRel);
    }
}
