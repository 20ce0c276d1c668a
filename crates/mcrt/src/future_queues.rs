//! The futures queued for idle processors (McRT §2.1): each processor's queue of futures
//! not yet started, which [`crate::future`] fills and a processor's idle loop empties
//! (`runtime/idle.rs`). A queued future is a [`Job`]: something a processor can evaluate;
//! this module knows no more of it, so the runtime keeps the queues without naming
//! futures.

use alloc::collections::VecDeque;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicUsize, Ordering};
use locks::TtsLock;

/// Something a processor can evaluate.
pub(crate) trait Job: Send + Sync {
    /// Evaluates it if nobody has started it; true if this call did.
    fn run_if_pending(&self) -> bool;
}

/// Each processor's queue of futures not yet started.
pub(crate) struct FutureQueues {
    queues: Vec<TtsLock<VecDeque<Arc<dyn Job>>>>,
    /// Futures queued in all (kept under the queues' locks, read without them: idle
    /// processors look here before they take any lock).
    queued: AtomicUsize,
}

impl FutureQueues {
    /// Empty queues, one for each of `processors` processors.
    pub(crate) fn new(processors: usize) -> FutureQueues {
        FutureQueues {
            queues: (0..processors).map(|_| TtsLock::new(VecDeque::new())).collect(),
            queued: AtomicUsize::new(0),
        }
    }

    /// Futures queued in all (read without the locks).
    pub(crate) fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    /// Queues `job` on `processor`'s queue.
    pub(crate) fn push(&self, processor: usize, job: Arc<dyn Job>) {
        self.queues[processor].with(|q| {
            q.push_back(job);
            self.queued.fetch_add(1, Ordering::Relaxed);
        });
    }

    /// An idle processor's turn: evaluates one queued future (its own queue's newest
    /// first, then the oldest of another's); true if it ran one.
    pub(crate) fn run_one(&self, processor: usize) -> bool {
        if self.queued.load(Ordering::Relaxed) == 0 {
            return false;
        }
        let n = self.queues.len();
        for k in 0..n {
            let q = &self.queues[(processor + k) % n];
            let job = q.with(|q| {
                let job = if k == 0 { q.pop_back() } else { q.pop_front() };
                if job.is_some() {
                    self.queued.fetch_sub(1, Ordering::Relaxed);
                }
                job
            });
            if let Some(job) = job {
                if job.run_if_pending() {
                    return true;
                }
            }
        }
        false
    }

    /// True if any future is queued.
    pub(crate) fn any_queued(&self) -> bool {
        self.queued.load(Ordering::Relaxed) != 0
    }

    /// Drops every queued future (the runtime stopped).
    pub(crate) fn drain(&self) {
        for q in &self.queues {
            q.with(|q| q.clear());
        }
        self.queued.store(0, Ordering::Relaxed);
    }
}
