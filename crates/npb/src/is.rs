//! IS, the integer sort kernel (NPB 3.x OpenMP `is.c`, with `USE_BUCKETS`): 2^TOTAL keys
//! in [0, 2^MAXKEY), each the sum of four `randlc` numbers times MAXKEY/4 (so roughly
//! Gaussian), are ranked ten times. Each ranking (`rank`) first plants two keys that
//! depend on the iteration, then: every thread counts its static share of keys per bucket
//! (the keys' top bits); the counts give every thread, for every bucket, where its keys
//! go; each thread scatters its keys into buckets; then the buckets, taken dynamically,
//! are ranked by counting each key value and summing the counts (a key's rank is the
//! number of keys less than it).
//!
//! Verification, NPB's: the *partial* test checks the ranks of five keys at known
//! positions after each of the ten timed rankings against NPB's `test_rank_array` (shifted
//! by the iteration as NPB's per-class rule says); the *full* test sorts the keys by their
//! ranks after the last one and counts keys out of order. Verified when all 5 × 10 partial
//! tests and the full test pass. Mop/s: keys ranked (10 × 2^TOTAL) per second.

use crate::par::share;
use crate::rand::{randlc, A, SEED};
use crate::{Class, Kernel, Report};
use alloc::format;
use alloc::vec;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicI32, Ordering::Relaxed};
use mcrt::omp::{self, Schedule};

/// Timed rankings (NPB's `MAX_ITERATIONS`).
const ITERATIONS: i32 = 10;

/// A class's sizes: log2 of the keys, of the key range, of the buckets; and NPB's test
/// positions and ranks (`*_test_index_array`, `*_test_rank_array`).
struct Params {
    total_log2: u32,
    max_key_log2: u32,
    buckets_log2: u32,
    test_index: [usize; 5],
    test_rank: [i32; 5],
}

fn params(class: Class) -> Params {
    match class {
        Class::S => Params {
            total_log2: 16,
            max_key_log2: 11,
            buckets_log2: 9,
            test_index: [48427, 17148, 23627, 62548, 4431],
            test_rank: [0, 18, 346, 64917, 65463],
        },
        Class::W => Params {
            total_log2: 20,
            max_key_log2: 16,
            buckets_log2: 10,
            test_index: [357773, 934767, 875723, 898999, 404505],
            test_rank: [1249, 11698, 1039987, 1043896, 1048018],
        },
        Class::A => Params {
            total_log2: 23,
            max_key_log2: 19,
            buckets_log2: 10,
            test_index: [2112377, 662041, 5336171, 3642833, 4250760],
            test_rank: [104, 17523, 123928, 8288932, 8388264],
        },
    }
}

/// NPB's expected rank of test key `i` at `iteration` (the per-class shift of `rank`).
fn expected_rank(class: Class, base: i32, i: usize, iteration: i32) -> i32 {
    match class {
        Class::S if i <= 2 => base + iteration,
        Class::S => base - iteration,
        Class::W if i < 2 => base + (iteration - 2),
        Class::W => base - iteration,
        Class::A if i <= 2 => base + (iteration - 1),
        Class::A => base - (iteration - 1),
    }
}

/// The benchmark's state: keys, the bucketed copy, the ranks, per-thread bucket counts.
struct Sort {
    class: Class,
    p: Params,
    threads: usize,
    keys: Vec<i32>,
    /// `key_buff2`: the keys grouped by bucket.
    grouped: Vec<AtomicI32>,
    /// `key_buff1`: for each key value, the number of keys ≤ it.
    ranks: Vec<AtomicI32>,
    /// `bucket_size[thread][bucket]`.
    counts: Vec<Vec<AtomicI32>>,
    /// The end of each bucket in `grouped` after the last ranking.
    bucket_ends: Vec<i32>,
    passed: i32,
}

/// NPB's `create_seq`: key i is MAXKEY/4 × (the sum of numbers 4i … 4i+3 of `randlc`),
/// made in parallel, each thread starting from the seed skipped to its share
/// (`find_my_seed`).
fn create_seq(threads: usize, total: usize, max_key: i32) -> Vec<i32> {
    let mut keys = vec![0i32; total];
    crate::par::for_rows(
        threads,
        total,
        crate::par::Rows(&mut keys, 1),
        |mine, crate::par::Rows(out, _)| {
            // The seed times A^(4·start): the number just before the share's first.
            let mut s = SEED;
            randlc(&mut s, crate::rand::power(A, 4 * mine.start as u64));
            let k = f64::from(max_key / 4);
            for key in out.iter_mut() {
                let mut x = randlc(&mut s, A);
                x += randlc(&mut s, A);
                x += randlc(&mut s, A);
                x += randlc(&mut s, A);
                *key = (k * x) as i32;
            }
        },
    );
    keys
}

impl Sort {
    fn new(class: Class, threads: usize) -> Sort {
        let p = params(class);
        let total = 1usize << p.total_log2;
        let max_key = 1i32 << p.max_key_log2;
        let buckets = 1usize << p.buckets_log2;
        Sort {
            class,
            keys: create_seq(threads, total, max_key),
            grouped: (0..total).map(|_| AtomicI32::new(0)).collect(),
            ranks: (0..max_key).map(|_| AtomicI32::new(0)).collect(),
            counts: (0..threads)
                .map(|_| (0..buckets).map(|_| AtomicI32::new(0)).collect())
                .collect(),
            bucket_ends: vec![0; buckets],
            threads,
            p,
            passed: 0,
        }
    }

    /// NPB's `rank(iteration)`, then its partial verification.
    fn rank(&mut self, iteration: i32) {
        let it = iteration as usize;
        let max_key = 1i32 << self.p.max_key_log2;
        let total = self.keys.len();
        self.keys[it] = iteration;
        self.keys[it + ITERATIONS as usize] = max_key - iteration;
        let tests: Vec<i32> = self.p.test_index.iter().map(|&i| self.keys[i]).collect();
        let shift = self.p.max_key_log2 - self.p.buckets_log2;
        let buckets = 1usize << self.p.buckets_log2;
        let phases = Phases {
            keys: &self.keys,
            grouped: &self.grouped,
            ranks: &self.ranks,
            counts: &self.counts,
            shift,
            buckets,
            per_bucket: 1usize << shift,
        };
        let n = self.threads;
        let end = if let Some(team) = crate::par::team() {
            // Another runtime (the hosted rayon peer): the three phases as three loops.
            team.run(n, &|me| phases.count(me, n));
            team.run(n, &|me| phases.scatter(me, n));
            let end = phases.bucket_ends(n);
            team.run(buckets, &|b| phases.rank_bucket(b, &end));
            end
        } else {
            let ends = mcrt::sync::Mutex::new(mcrt::sync::MutexKind::Tts, Vec::new());
            omp::parallel(n, |ctx| {
                let (me, n) = (ctx.thread_num(), ctx.num_threads());
                phases.count(me, n);
                ctx.barrier();
                phases.scatter(me, n);
                let end = phases.bucket_ends(n);
                ctx.barrier();
                // The buckets, taken dynamically.
                ctx.for_each(0..buckets, Schedule::Dynamic(1), |b| phases.rank_bucket(b, &end));
                ctx.master(|| *ends.lock() = end);
            });
            ends.into_inner()
        };
        self.bucket_ends = end;
        // Partial verification (NPB's test keys).
        for (i, &k) in tests.iter().enumerate() {
            if 0 < k && (k as usize) < total {
                let rank = self.ranks[k as usize - 1].load(Relaxed);
                if rank == expected_rank(self.class, self.p.test_rank[i], i, iteration) {
                    self.passed += 1;
                }
            }
        }
    }

    /// NPB's `full_verify`: places every key at its rank (the ranks of equal keys counted
    /// down) and counts keys out of order.
    fn full_verify(&mut self) -> usize {
        let mut start = 0usize;
        for &end in &self.bucket_ends {
            for g in &self.grouped[start..end as usize] {
                let k = g.load(Relaxed);
                let r = &self.ranks[k as usize];
                let at = r.load(Relaxed) - 1;
                r.store(at, Relaxed);
                self.keys[at as usize] = k;
            }
            start = end as usize;
        }
        let out_of_order = self.keys.windows(2).filter(|w| w[0] > w[1]).count();
        if out_of_order == 0 {
            self.passed += 1;
        }
        out_of_order
    }
}

/// One ranking's data, shared by the threads of its three phases.
struct Phases<'a> {
    keys: &'a [i32],
    grouped: &'a [AtomicI32],
    ranks: &'a [AtomicI32],
    counts: &'a [Vec<AtomicI32>],
    /// Key bits below the bucket number.
    shift: u32,
    buckets: usize,
    per_bucket: usize,
}

impl Phases<'_> {
    /// Phase 1: thread `me` of `n` counts its static share of keys per bucket.
    fn count(&self, me: usize, n: usize) {
        let work = &self.counts[me];
        for c in work.iter() {
            c.store(0, Relaxed);
        }
        for &k in &self.keys[share(self.keys.len(), me, n)] {
            let c = &work[(k >> self.shift) as usize];
            c.store(c.load(Relaxed) + 1, Relaxed);
        }
    }

    /// Phase 2 (after every thread counted): thread `me` puts its keys of each bucket
    /// after all keys of lower buckets and the keys of this bucket of lower threads.
    fn scatter(&self, me: usize, n: usize) {
        let mut ptrs = vec![0i32; self.buckets];
        let mut below = 0;
        for (b, ptr) in ptrs.iter_mut().enumerate() {
            let mut before = 0;
            let mut all = 0;
            for (t, c) in self.counts[..n].iter().enumerate() {
                let v = c[b].load(Relaxed);
                if t < me {
                    before += v;
                }
                all += v;
            }
            *ptr = below + before;
            below += all;
        }
        for &k in &self.keys[share(self.keys.len(), me, n)] {
            let p = &mut ptrs[(k >> self.shift) as usize];
            self.grouped[*p as usize].store(k, Relaxed);
            *p += 1;
        }
    }

    /// The end of each bucket in `grouped` (every thread's keys of it counted).
    fn bucket_ends(&self, n: usize) -> Vec<i32> {
        let mut end = vec![0i32; self.buckets];
        let mut acc = 0;
        for (b, e) in end.iter_mut().enumerate() {
            acc += self.counts[..n].iter().map(|c| c[b].load(Relaxed)).sum::<i32>();
            *e = acc;
        }
        end
    }

    /// Phase 3 (after every thread scattered): ranks bucket `b`'s key values: counts
    /// them, then prefix sums from the bucket's start.
    fn rank_bucket(&self, b: usize, end: &[i32]) {
        let (k1, k2) = (b * self.per_bucket, (b + 1) * self.per_bucket);
        let ranks = self.ranks;
        for r in &ranks[k1..k2] {
            r.store(0, Relaxed);
        }
        let m = if b > 0 { end[b - 1] } else { 0 };
        for g in &self.grouped[m as usize..end[b] as usize] {
            let r = &ranks[g.load(Relaxed) as usize];
            r.store(r.load(Relaxed) + 1, Relaxed);
        }
        let mut sum = ranks[k1].load(Relaxed) + m;
        ranks[k1].store(sum, Relaxed);
        for r in &ranks[k1 + 1..k2] {
            sum += r.load(Relaxed);
            r.store(sum, Relaxed);
        }
    }
}

/// Runs IS at `class` on `threads` threads (see the module's doc).
pub fn run(class: Class, threads: usize, clock: fn() -> u64) -> Report {
    let mut sort = Sort::new(class, threads);
    // One ranking untimed, as NPB does, to touch every page.
    sort.rank(1);
    sort.passed = 0;
    let start = clock();
    for iteration in 1..=ITERATIONS {
        sort.rank(iteration);
    }
    let ticks = clock().wrapping_sub(start);
    let partial = sort.passed;
    let out_of_order = sort.full_verify();
    let want = 5 * ITERATIONS + 1;
    let total = 1u64 << sort.p.total_log2;
    Report {
        kernel: Kernel::Is,
        class,
        threads,
        ticks,
        ops: (ITERATIONS as u64 * total) as f64,
        verified: sort.passed == want,
        detail: format!(
            "partial verification {partial} of {} test ranks right; full verification: {out_of_order} keys out of order ({} of {want} tests passed)",
            5 * ITERATIONS,
            sort.passed
        ),
    }
}
