//! The user-word wait queues of one core: the futex pair `wait(addr, expected, timeout)` and
//! `wake(addr, n)` that McRT's blocking and a pthread adaptor need (issue 11). A thread that
//! waits is parked here, under its address space and the word's address, until a `wake` on
//! that word takes it (first come, first woken) or its deadline passes.
//!
//! The kernel checks `*addr == expected` and parks the thread under the same critical
//! section as a `wake` on this core runs in, so a wake that follows the store that changed
//! the word cannot be lost. Each core keeps its own queues; a `wake` from another core
//! reaches this one by message (the kernel's part).

use alloc::collections::{BTreeMap, VecDeque};
use alloc::vec::Vec;

/// The word a thread waits on: its address space (e.g. the root range's id) and the user
/// address of the word.
pub type WaitKey = (u64, u64);

/// The wait-key space of joins: a joiner waits on `(JOIN_SPACE, uid)` of the thread it
/// joins. Neither this nor [`SLEEP_SPACE`] is an address space (the kernel's address-space
/// ids never reach them: an id's top 16 bits are its creating core).
pub const JOIN_SPACE: u64 = u64::MAX;
/// The wait-key space of sleeps: a sleeper waits on `(SLEEP_SPACE, its uid)`.
pub const SLEEP_SPACE: u64 = u64::MAX - 1;

/// One core's parked threads `T`, by the word they wait on.
#[derive(Debug)]
pub struct WaitQueues<T> {
    /// Per word, the waiters in arrival order, each with its deadline (`None`: none).
    queues: BTreeMap<WaitKey, VecDeque<(T, Option<u64>)>>,
    /// How many are parked.
    len: usize,
}

impl<T> Default for WaitQueues<T> {
    fn default() -> Self {
        WaitQueues::new()
    }
}

impl<T> WaitQueues<T> {
    /// No one waiting.
    pub const fn new() -> WaitQueues<T> {
        WaitQueues { queues: BTreeMap::new(), len: 0 }
    }

    /// How many threads are parked.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when none is.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Parks `thread` on `key` until a wake or the time `deadline` (in any monotonic unit,
    /// e.g. ticks or TSC cycles).
    pub fn park(&mut self, key: WaitKey, thread: T, deadline: Option<u64>) {
        self.queues.entry(key).or_default().push_back((thread, deadline));
        self.len += 1;
    }

    /// Wakes up to `n` threads parked on `key`, first parked first; returns them.
    pub fn wake(&mut self, key: WaitKey, n: usize) -> Vec<T> {
        let mut woken = Vec::new();
        if let Some(queue) = self.queues.get_mut(&key) {
            while woken.len() < n {
                let Some((thread, _)) = queue.pop_front() else { break };
                woken.push(thread);
            }
            if queue.is_empty() {
                self.queues.remove(&key);
            }
        }
        self.len -= woken.len();
        self.release_if_empty();
        woken
    }

    /// Gives back the map's last node once no thread is parked (a map emptied by
    /// removals keeps its root node; the kernel's tests check heaps come back to where
    /// they were).
    fn release_if_empty(&mut self) {
        if self.len == 0 {
            self.queues = BTreeMap::new();
        }
    }

    /// True when some thread waits on a word of address space `space`.
    pub fn has_space(&self, space: u64) -> bool {
        self.queues.range((space, 0)..=(space, u64::MAX)).next().is_some()
    }

    /// Takes every thread whose deadline is at or before `now` (they return "timed out").
    pub fn expire(&mut self, now: u64) -> Vec<T> {
        let mut expired = Vec::new();
        self.queues.retain(|_, queue| {
            let mut kept = VecDeque::with_capacity(queue.len());
            while let Some((thread, deadline)) = queue.pop_front() {
                if deadline.is_some_and(|d| d <= now) {
                    expired.push(thread);
                } else {
                    kept.push_back((thread, deadline));
                }
            }
            *queue = kept;
            !queue.is_empty()
        });
        self.len -= expired.len();
        self.release_if_empty();
        expired
    }

    /// The earliest deadline of any parked thread (when the core must look again).
    pub fn next_deadline(&self) -> Option<u64> {
        self.queues.values().flat_map(|q| q.iter().filter_map(|(_, d)| *d)).min()
    }

    /// Takes out the first parked thread `is_it` accepts (it is killed, or migrates).
    pub fn remove(&mut self, is_it: impl Fn(&T) -> bool) -> Option<T> {
        let mut found = None;
        for (key, queue) in self.queues.iter_mut() {
            if let Some(at) = queue.iter().position(|(t, _)| is_it(t)) {
                found = queue.remove(at).map(|(t, _)| (*key, t));
                break;
            }
        }
        let (key, thread) = found?;
        if self.queues.get(&key).is_some_and(|q| q.is_empty()) {
            self.queues.remove(&key);
        }
        self.len -= 1;
        self.release_if_empty();
        Some(thread)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wakes_in_arrival_order_and_only_on_the_word() {
        let mut w = WaitQueues::new();
        for t in 1..=3 {
            w.park((7, 0x1000), t, None);
        }
        w.park((7, 0x2000), 9, None);
        w.park((8, 0x1000), 10, None); // another address space, same address
        assert_eq!(w.wake((7, 0x1000), 2), [1, 2]);
        assert_eq!(w.wake((7, 0x1000), 5), [3]);
        assert!(w.wake((7, 0x1000), 1).is_empty());
        assert_eq!(w.len(), 2);
        assert_eq!(w.wake((8, 0x1000), 0), Vec::<i32>::new());
        assert!(w.has_space(8) && !w.has_space(9));
        assert_eq!(w.remove(|&t| t == 10), Some(10));
        assert_eq!(w.len(), 1);
    }

    #[test]
    fn deadlines_expire_and_the_next_one_is_known() {
        let mut w = WaitQueues::new();
        w.park((1, 8), 'a', Some(100));
        w.park((1, 8), 'b', None);
        w.park((1, 16), 'c', Some(50));
        assert_eq!(w.next_deadline(), Some(50));
        assert_eq!(w.expire(49), Vec::<char>::new());
        assert_eq!(w.expire(100), ['a', 'c']);
        assert_eq!(w.next_deadline(), None);
        assert_eq!(w.wake((1, 8), 1), ['b']);
        assert!(w.is_empty());
    }
}
