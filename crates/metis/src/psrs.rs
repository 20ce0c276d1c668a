//! Parallel sorting by regular sampling (PSRS; Shi & Schaeffer 1992), Metis's merge phase:
//! `p` parts are sorted in parallel; each gives `p` regular samples, whose sorted list
//! gives `p - 1` pivots; each part is cut at the pivots, and piece `j` of every part is
//! merged into output segment `j`, in parallel. Every element moves a bounded number of
//! times and no step is sequential in the data's size except the final concatenation.

use alloc::vec::Vec;
use core::cmp::Ordering;
use core::sync::atomic::{AtomicUsize, Ordering as Atomic};
use mcrt::sync::{Mutex, MutexKind};

/// A shared task counter on its own cache line (workers take the next task from it).
#[repr(align(64))]
pub struct Counter(AtomicUsize);

impl Counter {
    /// A counter at `first`.
    pub fn new(first: usize) -> Counter {
        Counter(AtomicUsize::new(first))
    }

    /// The next task below `limit`, or `None` when all are taken.
    #[inline]
    pub fn take(&self, limit: usize) -> Option<usize> {
        let t = self.0.fetch_add(1, Atomic::Relaxed);
        (t < limit).then_some(t)
    }
}

/// A slot one worker at a time fills or empties (the locks are never contended: the
/// counter hands each slot to one worker).
pub(crate) fn slots<T>(items: impl IntoIterator<Item = T>) -> Vec<Mutex<T>> {
    items.into_iter().map(|t| Mutex::new(MutexKind::Tts, t)).collect()
}

/// Sorts the concatenation of `parts` by `cmp` (a total order); a part is a list of runs
/// (the reduce outputs, each sorted by key), concatenated by the worker that sorts it.
/// `team` runs its argument once on every worker of a parallel team and returns when all
/// have finished; the number of parts is the parallelism.
pub fn sort<T, F>(parts: Vec<Vec<Vec<T>>>, cmp: &F, team: &dyn Fn(&(dyn Fn() + Sync))) -> Vec<T>
where
    T: Send + Sync,
    F: Fn(&T, &T) -> Ordering + Sync,
{
    let p = parts.len();
    let total: usize = parts.iter().flatten().map(Vec::len).sum();
    if p <= 1 || total == 0 {
        let mut all: Vec<T> = parts.into_iter().flatten().flatten().collect();
        all.sort_by(cmp);
        return all;
    }
    // 1. Concatenate and sort each part (the sort finds the sorted runs and merges them
    //    when the order is the key's).
    let sorting = slots(parts.into_iter().map(|runs| (runs, Vec::new())));
    let next = Counter::new(0);
    team(&|| {
        while let Some(i) = next.take(p) {
            let mut slot = sorting[i].lock();
            let (runs, part) = &mut *slot;
            let mut all = Vec::with_capacity(runs.iter().map(Vec::len).sum());
            for mut r in runs.drain(..) {
                all.append(&mut r);
            }
            all.sort_by(cmp);
            *part = all;
        }
    });
    let parts: Vec<Vec<T>> = sorting.into_iter().map(|s| s.into_inner().1).collect();

    // 2. Regular samples (p per part), sorted; p - 1 pivots at regular places among them.
    let mut samples: Vec<&T> = Vec::with_capacity(p * p);
    for part in &parts {
        samples.extend((0..p).filter_map(|k| part.get(k * part.len() / p)));
    }
    samples.sort_by(|a, b| cmp(a, b));
    let pivots: Vec<&T> = (1..p).map(|k| samples[k * samples.len() / p]).collect();

    // 3. Where each part is cut: before its first element not below each pivot.
    let cuts: Vec<Vec<usize>> = parts
        .iter()
        .map(|part| {
            let mut c = Vec::with_capacity(p + 1);
            c.push(0);
            c.extend(
                pivots.iter().map(|pv| part.partition_point(|x| cmp(x, pv) == Ordering::Less)),
            );
            c.push(part.len());
            c
        })
        .collect();
    drop(pivots);
    drop(samples);

    // 4. Cut each part into its p pieces, in parallel.
    let whole = slots(parts);
    let pieces = slots((0..p).map(|_| Vec::<Vec<T>>::new()));
    let next = Counter::new(0);
    team(&|| {
        while let Some(i) = next.take(p) {
            let mut part = core::mem::take(&mut *whole[i].lock());
            let mut mine = Vec::with_capacity(p);
            for k in (1..p).rev() {
                mine.push(part.split_off(cuts[i][k]));
            }
            mine.push(part);
            mine.reverse();
            *pieces[i].lock() = mine;
        }
    });

    // 5. Merge piece j of every part into segment j, in parallel.
    let segments = slots((0..p).map(|_| Vec::<T>::new()));
    let next = Counter::new(0);
    team(&|| {
        while let Some(j) = next.take(p) {
            let runs: Vec<Vec<T>> =
                pieces.iter().map(|ps| core::mem::take(&mut ps.lock()[j])).collect();
            *segments[j].lock() = merge_all(runs, cmp);
        }
    });

    // 6. The segments are in order: concatenate them.
    let mut out = Vec::with_capacity(total);
    for s in segments {
        out.append(&mut s.into_inner());
    }
    out
}

/// Merges sorted runs into one, pairwise (log₂ runs passes over the data).
pub fn merge_all<T, F: Fn(&T, &T) -> Ordering>(mut runs: Vec<Vec<T>>, cmp: &F) -> Vec<T> {
    runs.retain(|r| !r.is_empty());
    while runs.len() > 1 {
        let mut next = Vec::with_capacity(runs.len().div_ceil(2));
        let mut it = runs.into_iter();
        while let Some(a) = it.next() {
            next.push(match it.next() {
                Some(b) => merge2(a, b, cmp),
                None => a,
            });
        }
        runs = next;
    }
    runs.pop().unwrap_or_default()
}

/// Merges two sorted runs; on ties, `a`'s element first (stable).
fn merge2<T, F: Fn(&T, &T) -> Ordering>(a: Vec<T>, b: Vec<T>, cmp: &F) -> Vec<T> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let mut a = a.into_iter().peekable();
    let mut b = b.into_iter().peekable();
    loop {
        let take_b = match (a.peek(), b.peek()) {
            (Some(x), Some(y)) => cmp(y, x) == Ordering::Less,
            (Some(_), None) => false,
            (None, Some(_)) => true,
            (None, None) => break,
        };
        out.extend(if take_b { b.next() } else { a.next() });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    /// A sequential team (the parallel one is exercised through the engine's tests).
    fn serial(body: &(dyn Fn() + Sync)) {
        body();
        body();
    }

    #[test]
    fn sorts_any_parts() {
        let mut seed = 7u64;
        for p in [1, 2, 3, 8] {
            let parts: Vec<Vec<Vec<u64>>> = (0..p)
                .map(|i| {
                    vec![(0..(i * 37 % 50))
                        .map(|_| {
                            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
                            seed >> 40
                        })
                        .collect()]
                })
                .collect();
            let mut want: Vec<u64> = parts.iter().flatten().flatten().copied().collect();
            want.sort();
            assert_eq!(sort(parts, &|a: &u64, b: &u64| a.cmp(b), &serial), want);
        }
        let empty: Vec<Vec<Vec<u8>>> = vec![vec![], vec![vec![]]];
        assert!(sort(empty, &|a: &u8, b: &u8| a.cmp(b), &serial).is_empty());
    }

    #[test]
    fn merges_runs() {
        let runs = vec![vec![1, 4, 9], vec![], vec![2, 3], vec![0, 10]];
        assert_eq!(merge_all(runs, &|a: &i32, b: &i32| a.cmp(b)), [0, 1, 2, 3, 4, 9, 10]);
    }
}
