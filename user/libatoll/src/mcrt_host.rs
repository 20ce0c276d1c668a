//! McRT's host adaptor on Atoll (McRT §2.5; issue M8): each logical processor is a kernel
//! thread (M7) pinned to a core, processor i on the i-th core counted from the caller's
//! (more processors than cores share cores, time-shared by the kernel), and an idle
//! processor parks in the kernel's `wait` on the runtime's word.
//!
//! McRT-Malloc's heaps for kernel threads outside the runtime live in their thread-local
//! storage ([`crate::tls`]): [`name_thread_heaps`], called at every program's start, tells
//! McRT where, so each kernel thread allocates from a heap of its own (McRT §2.3), as a
//! McRT thread does, instead of one global heap under a lock. Its blocks go to the pool
//! when the thread's destructors run.

use crate::thread::{self, Builder};
use crate::{cores_online, pcore_current, Status};
use alloc::vec::Vec;
use core::sync::atomic::AtomicU32;

/// Atoll's host for `mcrt::run`.
pub struct AtollHost;

impl mcrt::Host for AtollHost {
    fn run_processors(
        &self,
        count: usize,
        body: &(dyn Fn(usize) + Sync),
    ) -> Result<(), &'static str> {
        let (me, cores) = (pcore_current(), cores_online());
        // SAFETY: every thread started here is joined below before this function returns,
        // so `body` outlives every use the threads make of it.
        let body: &'static (dyn Fn(usize) + Sync) = unsafe { core::mem::transmute(body) };
        let mut threads = Vec::with_capacity(count);
        let mut failed = false;
        for i in 1..count {
            let core = (me + i) % cores;
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

    fn wait(&self, word: &AtomicU32, expected: u32, timeout_us: u64) {
        let _ = thread::wait(word, expected, timeout_us.max(1));
    }

    fn wake(&self, word: &AtomicU32, n: u32) {
        let _ = thread::wake(word, u64::from(n));
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
