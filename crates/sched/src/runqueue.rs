//! One core's run queue: round robin with a time slice of whole ticks. It lives in that
//! core's kernel state and no other core touches it; other cores learn its length by
//! message ([`crate::LoadTable`]) and ask for a thread by message.

use alloc::collections::VecDeque;

/// A round-robin run queue of threads `T`: the running thread and the ready ones.
#[derive(Debug)]
pub struct RunQueue<T> {
    running: Option<T>,
    ready: VecDeque<T>,
    /// Ticks per slice (`pcore_set_interval` sets it).
    slice: u32,
    /// Ticks the running thread has used of its slice.
    used: u32,
}

impl<T> RunQueue<T> {
    /// An empty queue with slices of `slice` ticks (at least 1).
    pub fn new(slice: u32) -> RunQueue<T> {
        RunQueue { running: None, ready: VecDeque::new(), slice: slice.max(1), used: 0 }
    }

    /// An empty queue with room for `capacity` ready threads before it grows.
    pub fn with_capacity(slice: u32, capacity: usize) -> RunQueue<T> {
        RunQueue {
            running: None,
            ready: VecDeque::with_capacity(capacity),
            slice: slice.max(1),
            used: 0,
        }
    }

    /// Gives back the room a burst of threads grew the queue to, once no thread is ready
    /// (down to `capacity`).
    pub fn shrink_when_empty(&mut self, capacity: usize) {
        if self.ready.is_empty() && self.ready.capacity() > capacity {
            self.ready.shrink_to(capacity);
        }
    }

    /// Threads on this core: the running one and the ready ones (the load AMPS counts).
    pub fn len(&self) -> usize {
        self.ready.len() + usize::from(self.running.is_some())
    }

    /// True when no thread is here.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The running thread.
    pub fn running(&self) -> Option<&T> {
        self.running.as_ref()
    }

    /// The running thread, to change.
    pub fn running_mut(&mut self) -> Option<&mut T> {
        self.running.as_mut()
    }

    /// Ticks per slice.
    pub fn slice(&self) -> u32 {
        self.slice
    }

    /// Sets the ticks per slice (at least 1).
    pub fn set_slice(&mut self, slice: u32) {
        self.slice = slice.max(1);
    }

    /// Queues a ready thread at the back.
    pub fn push(&mut self, thread: T) {
        self.ready.push_back(thread);
    }

    /// Counts a tick against the running thread; true when its slice is over and another
    /// thread is ready (time to [`RunQueue::switch`]).
    pub fn tick(&mut self) -> bool {
        if self.running.is_none() {
            return !self.ready.is_empty();
        }
        self.used = self.used.saturating_add(1);
        self.used >= self.slice && !self.ready.is_empty()
    }

    /// Round robin: the running thread (if any) goes to the back, the front one runs with a
    /// fresh slice. Returns the thread now running.
    pub fn switch(&mut self) -> Option<&mut T> {
        if let Some(t) = self.running.take() {
            self.ready.push_back(t);
        }
        self.running = self.ready.pop_front();
        self.used = 0;
        self.running.as_mut()
    }

    /// Takes the running thread off the core (it blocked, exited or migrates); the next
    /// [`RunQueue::switch`] runs the next ready one.
    pub fn take_running(&mut self) -> Option<T> {
        self.used = 0;
        self.running.take()
    }

    /// Takes the most recently queued ready thread that `may_move` accepts (e.g. one whose
    /// affinity allows the puller), for migration: the one that ran here longest ago is
    /// left, as it is the next to run.
    pub fn take_ready(&mut self, may_move: impl Fn(&T) -> bool) -> Option<T> {
        let at = self.ready.iter().rposition(may_move)?;
        self.ready.remove(at)
    }

    /// Takes the first ready thread `is_it` accepts (e.g. one being woken or killed).
    pub fn remove(&mut self, is_it: impl Fn(&T) -> bool) -> Option<T> {
        let at = self.ready.iter().position(is_it)?;
        self.ready.remove(at)
    }

    /// The ready threads, in the order they will run.
    pub fn ready(&self) -> impl Iterator<Item = &T> {
        self.ready.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_robin_with_a_slice_of_two_ticks() {
        let mut q = RunQueue::new(2);
        for t in [1, 2, 3] {
            q.push(t);
        }
        assert_eq!(q.switch().copied(), Some(1));
        let mut order = alloc::vec::Vec::new();
        for _ in 0..12 {
            if q.tick() {
                q.switch();
            }
            order.push(*q.running().unwrap());
        }
        assert_eq!(order, [1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3, 1]);
        assert_eq!(q.len(), 3);
    }

    #[test]
    fn a_burst_grows_the_queue_and_emptying_it_shrinks_it_back() {
        let mut q = RunQueue::with_capacity(1, 4);
        for t in 0..100 {
            q.push(t);
        }
        assert!(q.ready.capacity() >= 100);
        q.shrink_when_empty(4);
        assert!(q.ready.capacity() >= 100, "not while threads are ready");
        while q.switch().is_some() {
            q.take_running();
        }
        q.shrink_when_empty(4);
        assert!(q.ready.capacity() < 100);
    }

    #[test]
    fn a_lone_thread_keeps_running() {
        let mut q = RunQueue::new(1);
        q.push('a');
        q.switch();
        for _ in 0..5 {
            assert!(!q.tick());
        }
        assert_eq!(q.take_running(), Some('a'));
        assert!(q.is_empty() && !q.tick());
    }

    #[test]
    fn migration_takes_the_most_recently_queued_allowed_thread() {
        let mut q = RunQueue::new(1);
        for t in [1, 2, 3, 4] {
            q.push(t);
        }
        q.switch(); // 1 runs
        assert_eq!(q.take_ready(|&t| t != 4), Some(3));
        assert_eq!(q.ready().copied().collect::<alloc::vec::Vec<_>>(), [2, 4]);
        assert_eq!(q.remove(|&t| t == 4), Some(4));
        assert_eq!(q.take_ready(|_| false), None);
    }
}
