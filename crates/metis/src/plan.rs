//! The job's plan: map tasks from the input, the number of reduce tasks from the sample
//! (Corey §6.1; Metis sizes the table so a column holds about ten keys), and which column
//! a key goes to.

use alloc::vec::Vec;
use core::ops::Range;

/// Keys a reduce task should get (Metis: a cell small enough to search fast).
pub const KEYS_PER_REDUCE_TASK: u64 = 10;
/// Reduce tasks per worker, at least and at most.
pub const REDUCE_TASKS_PER_THREAD: Range<usize> = 16..100;
/// Columns of the sampling phase's table (Metis's default sample hash-table size).
pub const SAMPLE_COLUMNS: usize = 256;
/// Pairs between two looks at a worker's rate of new keys while sampling.
pub const SAMPLE_WINDOW: u64 = 1000;

/// Cuts `0 .. len` into at most `tasks` non-empty ranges of about equal length, each
/// starting at a boundary `split_at` gives (the first at 0, the last ending at `len`).
pub fn split(len: usize, tasks: usize, split_at: impl Fn(usize) -> usize) -> Vec<Range<usize>> {
    let tasks = tasks.max(1);
    let mut out = Vec::with_capacity(tasks);
    let mut start = 0;
    for i in 1..=tasks {
        // i * len / tasks without overflow for any len (u128).
        let ideal = ((i as u128 * len as u128) / tasks as u128) as usize;
        let end = if i == tasks { len } else { split_at(ideal).clamp(start, len) };
        if end > start {
            out.push(start..end);
            start = end;
        }
    }
    out
}

/// Map tasks the sampling phase runs: `percent` of `tasks`, but at least one per worker
/// (so no worker idles through the phase: the sampled tasks' output is kept, so sampling
/// more costs nothing), and at most all of them.
pub fn sampled_tasks(tasks: usize, percent: usize, threads: usize) -> usize {
    if tasks == 0 || percent == 0 {
        return 0;
    }
    (tasks * percent / 100).max(threads).clamp(1, tasks)
}

/// What one worker saw while sampling: pairs emitted, keys new to its table, and its
/// rate of new keys per [`SAMPLE_WINDOW`] pairs, halved into the next window's count at
/// every window (so the recent windows weigh most: the rate falls as the keys repeat).
#[derive(Clone, Copy, Debug, Default)]
pub struct Sampler {
    /// Pairs emitted.
    pub pairs: u64,
    /// Distinct keys in this worker's sample table.
    pub keys: u64,
    keys_at_window: u64,
    /// New keys per window, smoothed.
    rate: u64,
}

impl Sampler {
    /// Counts one emitted pair; `new`: its key was not in the table.
    pub fn pair(&mut self, new: bool) {
        self.pairs += 1;
        self.keys += new as u64;
        if self.pairs.is_multiple_of(SAMPLE_WINDOW) {
            let fresh = self.keys - self.keys_at_window;
            self.rate = if self.pairs == SAMPLE_WINDOW { fresh } else { self.rate / 2 + fresh / 2 };
            self.keys_at_window = self.keys;
        }
    }
}

/// The predicted number of distinct keys after all `tasks` map tasks, from the workers'
/// samplers after `sampled` of them. Each worker's keys are added (workers sampling the
/// same keys count them twice: an over-estimate, which the clamp in [`reduce_tasks`]
/// bounds), plus the remaining pairs (as many per task as sampled) at the workers'
/// mean rate of new keys.
pub fn predict_keys(samplers: &[Sampler], sampled: usize, tasks: usize) -> u64 {
    let pairs: u64 = samplers.iter().map(|s| s.pairs).sum();
    let keys: u64 = samplers.iter().map(|s| s.keys).sum();
    let active = samplers.iter().filter(|s| s.pairs > 0).count() as u64;
    if sampled == 0 || active == 0 {
        return keys;
    }
    let rate = samplers.iter().map(|s| s.rate).sum::<u64>() / active;
    let remaining_pairs = pairs / sampled as u64 * (tasks - sampled) as u64;
    keys.saturating_add(rate.saturating_mul(remaining_pairs / SAMPLE_WINDOW))
}

/// Reduce tasks for `keys` predicted keys and `threads` workers: keys / 10, clamped to
/// `[16 × threads, 100 × threads]`, rounded up to a prime (Corey §6.1, Metis).
pub fn reduce_tasks(keys: u64, threads: usize) -> usize {
    let lo = REDUCE_TASKS_PER_THREAD.start * threads;
    let hi = REDUCE_TASKS_PER_THREAD.end * threads;
    let want = (keys / KEYS_PER_REDUCE_TASK).min(hi as u64) as usize;
    next_prime(want.clamp(lo, hi))
}

/// The smallest prime at or above `n` (trial division: `n` is at most 100 × 256 here).
pub fn next_prime(n: usize) -> usize {
    let is_prime =
        |p: usize| p >= 2 && (2..).take_while(|d| d * d <= p).all(|d| !p.is_multiple_of(d));
    (n..).find(|&p| is_prime(p)).unwrap_or(n)
}

/// The column of a key with hash `hash` among `columns`: Fibonacci hashing (one
/// multiply by 2^64/φ, whose high bits depend on every bit of the hash), then scaled into
/// range by the high half of a second multiply rather than a division (this runs once per
/// emitted pair).
#[inline]
pub fn column(hash: u64, columns: usize) -> usize {
    let z = hash.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    ((z as u128 * columns as u128) >> 64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn splits_cover_the_input_at_boundaries() {
        let r = split(100, 7, |at| at.next_multiple_of(10));
        assert_eq!(r.first().map(|r| r.start), Some(0));
        assert_eq!(r.last().map(|r| r.end), Some(100));
        assert!(r.windows(2).all(|w| w[0].end == w[1].start));
        assert!(r.iter().all(|r| r.start % 10 == 0 && !r.is_empty()));
        assert!(split(0, 4, |a| a).is_empty());
        // One long record: one task.
        assert_eq!(split(50, 8, |_| 50), vec![0..50]);
    }

    #[test]
    fn reduce_tasks_are_clamped_primes() {
        assert_eq!(reduce_tasks(17_576, 2), 211); // wrmem's 26^3 keys: 1757, clamped to 200
        assert_eq!(reduce_tasks(0, 1), 17);
        assert_eq!(reduce_tasks(1000, 4), 101);
        assert_eq!(next_prime(200), 211);
        assert_eq!(next_prime(2), 2);
        assert_eq!(sampled_tasks(16, 5, 1), 1);
        assert_eq!(sampled_tasks(32, 5, 2), 2);
        assert_eq!(sampled_tasks(400, 5, 4), 20);
        assert_eq!(sampled_tasks(0, 5, 4), 0);
        assert_eq!(sampled_tasks(3, 5, 4), 3);
    }

    #[test]
    fn the_prediction_grows_with_new_keys() {
        let mut all_new = Sampler::default();
        let mut repeats = Sampler::default();
        for i in 0..10_000 {
            all_new.pair(true);
            repeats.pair(i < 100);
        }
        assert_eq!(predict_keys(&[repeats], 1, 10), 100);
        assert_eq!(predict_keys(&[all_new], 1, 10), 10_000 + 9 * 10_000);
    }

    #[test]
    fn columns_are_in_range_and_spread() {
        let mut seen = [0usize; 211];
        for k in 0..21_100u64 {
            seen[column(k, 211)] += 1;
        }
        assert!(seen.iter().all(|&n| (50..150).contains(&n)), "{seen:?}");
    }
}
