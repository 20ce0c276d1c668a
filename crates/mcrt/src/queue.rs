//! A task queue (McRT §2.2): threads ready to run, or waiting for a predicate, in FIFO
//! order, under a TTS or a ticket lock (Figure 7 compares the two). A processor takes the
//! first thread whose predicate holds; the others keep their places.

use crate::atomics::{AtomicUsize, Ordering};
use crate::config::QueueLock;
use alloc::collections::VecDeque;
use locks::{TicketLock, TtsLock};

/// Threads in a queue, by pointer to their headers.
pub(crate) type Entry = usize;

/// One task queue.
pub(crate) struct TaskQueue {
    entries: Locked,
    /// How many entries it holds, kept under the lock and read without it: an idle
    /// processor looks at this before it takes the lock, so it does not hammer the lock
    /// of an empty queue that a busy processor needs.
    queued: AtomicUsize,
}

enum Locked {
    Tts(TtsLock<VecDeque<Entry>>),
    Ticket(TicketLock<VecDeque<Entry>>),
}

impl TaskQueue {
    pub(crate) fn new(lock: QueueLock) -> TaskQueue {
        let entries = match lock {
            QueueLock::Tts => Locked::Tts(TtsLock::new(VecDeque::with_capacity(64))),
            QueueLock::Ticket => Locked::Ticket(TicketLock::new(VecDeque::with_capacity(64))),
        };
        TaskQueue { entries, queued: AtomicUsize::new(0) }
    }

    /// Runs `f` on the queue with its lock held.
    fn with<R>(&self, f: impl FnOnce(&mut VecDeque<Entry>) -> R) -> R {
        let f = |q: &mut VecDeque<Entry>| {
            let r = f(q);
            self.queued.store(q.len(), Ordering::Relaxed);
            r
        };
        match &self.entries {
            Locked::Tts(l) => l.with(f),
            Locked::Ticket(l) => l.with(f),
        }
    }

    /// Appends `t`.
    pub(crate) fn push(&self, t: Entry) {
        self.with(|q| q.push_back(t));
    }

    /// Takes the first entry `ready` accepts and puts `me` at the back in its place, under
    /// one hold of the lock (a yield's fast path); `None`, and `me` not queued, if no entry
    /// is ready.
    pub(crate) fn swap(&self, me: Entry, ready: impl Fn(Entry) -> bool) -> Option<Entry> {
        if self.queued.load(Ordering::Relaxed) == 0 {
            return None;
        }
        self.with(|q| {
            let t = take_first(q, &ready)?;
            q.push_back(me);
            Some(t)
        })
    }

    /// Takes the first entry `ready` accepts.
    pub(crate) fn take(&self, ready: impl Fn(Entry) -> bool) -> Option<Entry> {
        if self.queued.load(Ordering::Relaxed) == 0 {
            return None;
        }
        self.with(|q| take_first(q, &ready))
    }
}

/// Removes and returns the first entry `ready` accepts (the front, most often, taken at
/// once).
fn take_first(q: &mut VecDeque<Entry>, ready: &impl Fn(Entry) -> bool) -> Option<Entry> {
    if ready(*q.front()?) {
        return q.pop_front();
    }
    let at = q.iter().position(|&t| ready(t))?;
    q.remove(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn take_skips_entries_not_ready_and_keeps_their_order() {
        for lock in [QueueLock::Tts, QueueLock::Ticket] {
            let q = TaskQueue::new(lock);
            for t in [1, 2, 3, 4] {
                q.push(t);
            }
            assert_eq!(q.take(|t| t % 2 == 0), Some(2));
            assert_eq!(q.take(|t| t > 10), None);
            assert_eq!(q.take(|_| true), Some(1));
            assert_eq!(q.take(|_| true), Some(3));
            assert_eq!(q.take(|_| true), Some(4));
            assert_eq!(q.take(|_| true), None);
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    /// An owner queues two threads and takes one while a thief steals: each entry is taken
    /// exactly once (by the owner, the thief, or the final drain), whatever the thief's
    /// lock-free look at the count saw.
    #[test]
    fn stealing_never_loses_or_duplicates_an_entry() {
        for lock in [QueueLock::Tts, QueueLock::Ticket] {
            loom::model(move || {
                let q = Arc::new(TaskQueue::new(lock));
                let thief_q = q.clone();
                let thief = loom::thread::spawn(move || thief_q.take(|_| true));
                q.push(1);
                q.push(2);
                let mine = q.take(|t| t == 1 || t == 2);
                let stolen = thief.join().unwrap();
                let mut seen: alloc::vec::Vec<Entry> =
                    [mine, stolen].into_iter().flatten().collect();
                while let Some(t) = q.take(|_| true) {
                    seen.push(t);
                }
                seen.sort_unstable();
                assert_eq!(seen, [1, 2]);
            });
        }
    }
}
