//! A program's lifetime: what every thread of one program shares, wherever it runs.
//!
//! A program is the context the loader, `program_run` or `pcore_run` started (its *main*
//! thread) and every thread that context or its threads made with `thread_create`. Its
//! threads may run, wait in a queue, park or travel between cores; a stop must reach them
//! in each of those places (issue M14):
//! - **the time limit** is the program's, set when it starts: a thread made later inherits
//!   it, so a program cannot outrun its limit by spawning successors;
//! - **`pcore_halt`** of the pcore it was started on stops every thread of it;
//! - **the main thread's end** (exit, fault, time limit, halt) ends the rest (`Halted`):
//!   its cores, frames and objects go back.
//!
//! How a stop reaches a thread: a running one at its next tick or at the end of its
//! call, a queued one before it is switched in, one on its way to another core on arrival
//! (it is queued there), and a parked one by a `REAP` message to each core that may hold
//! it (or by its park deadline, which is never later than the program's).

use crate::arch::cpu;
use crate::corey::{self, Ptr};
use crate::thread::ExitStatus;
use alloc::sync::Arc;
use core::sync::atomic::{AtomicU64, Ordering};

/// What every thread of one program shares (see the module comment).
pub struct Program {
    /// TSC value past which every thread of it is stopped (`TimedOut`).
    deadline: u64,
    /// 0 while it runs; once stopped, the status word (`pcore_status`) of the
    /// [`ExitStatus`] its threads end with (never 0).
    stop: AtomicU64,
    /// The pcore it was started on, if any: `pcore_halt` of it stops the program.
    pcore: Option<Ptr>,
    /// Cores that have held one of its threads (bit i: core i), for the stop's `REAP`.
    cores: AtomicU64,
}

impl Program {
    /// A program started now on this core that may run for `limit_us`, started through
    /// `pcore` if it was.
    pub fn new(limit_us: u64, pcore: Option<Ptr>) -> Arc<Program> {
        let limit = crate::arch::timer::us_to_tsc(limit_us);
        Arc::new(Program {
            deadline: cpu::rdtsc().saturating_add(limit),
            stop: AtomicU64::new(0),
            pcore,
            cores: AtomicU64::new(0),
        })
    }

    /// The TSC value at which its time limit ends.
    pub fn deadline(&self) -> u64 {
        self.deadline
    }

    /// How its threads must end now, if they must: it was stopped, its pcore was halted,
    /// or its time limit passed.
    pub fn stopping(&self) -> Option<ExitStatus> {
        match self.stop.load(Ordering::SeqCst) {
            0 => {}
            word => return Some(ExitStatus::from_status_word(word)),
        }
        let halted = self
            .pcore
            .as_ref()
            .and_then(corey::pcore)
            .is_some_and(|p| p.halt.load(Ordering::Acquire));
        if halted {
            Some(ExitStatus::Halted)
        } else if cpu::rdtsc() > self.deadline {
            Some(ExitStatus::TimedOut)
        } else {
            None
        }
    }

    /// Stops every thread of it with `status` (the first stop wins); returns the cores
    /// that may hold one of them, to be sent a `REAP`.
    pub fn stop(&self, status: ExitStatus) -> u64 {
        let _ =
            self.stop.compare_exchange(0, status.status_word(), Ordering::SeqCst, Ordering::SeqCst);
        // After the store (both SeqCst): a core marked later runs a thread of it only
        // after it was marked, and checks before it runs it.
        self.cores.load(Ordering::SeqCst)
    }

    /// Notes that core `core` is about to hold one of its threads.
    pub fn touch(&self, core: usize) {
        if core < 64 {
            self.cores.fetch_or(1 << core, Ordering::SeqCst);
        }
    }
}
