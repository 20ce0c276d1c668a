//! OpenMP-style parallel loops over data split between a team's threads, on McRT's `omp`
//! adaptor, in safe Rust: a loop's output is cut into one part per thread before the
//! region (`#pragma omp for schedule(static)`'s contiguous shares), each part goes to its
//! thread through a lock it alone takes, and inputs are shared read-only. A loop that
//! writes several arrays splits them all along the same rows ([`Split`] for tuples).

use alloc::vec::Vec;
use core::ops::Range;
use mcrt::omp;
use mcrt::sync::{Mutex, MutexKind};

/// Another runtime to run the loops' parts on instead of McRT's team: the host's rayon
/// peer (`bench-host npb --impl rayon`) runs the same loops, split the same way, on
/// rayon's pool.
pub trait Team: Sync {
    /// Runs `part(p)` for every `p` in `0..parts`, in parallel as the runtime sees fit,
    /// and returns when all have.
    fn run(&self, parts: usize, part: &(dyn Fn(usize) + Sync));
}

/// The team set by [`with_team`] (`None`: McRT's).
static TEAM: Mutex<Option<&'static dyn Team>> = Mutex::new(MutexKind::Tts, None);

/// Runs `f` with every parallel loop on `team` instead of McRT (one caller at a time: the
/// hosted benchmark, outside any McRT runtime).
pub fn with_team<R>(team: &'static dyn Team, f: impl FnOnce() -> R) -> R {
    *TEAM.lock() = Some(team);
    let r = f();
    *TEAM.lock() = None;
    r
}

/// The team [`with_team`] set, if any.
pub fn team() -> Option<&'static dyn Team> {
    *TEAM.lock()
}

/// OpenMP's static share of `0..len` for thread `t` of `n`: contiguous blocks whose sizes
/// differ by one at most, the larger first (as `mcrt::omp::Schedule::Static`).
pub fn share(len: usize, t: usize, n: usize) -> Range<usize> {
    let (base, extra) = (len / n, len % n);
    let lo = t * base + t.min(extra);
    lo..lo + base + usize::from(t < extra)
}

/// Output data a parallel loop writes, cut along rows into one part per share.
pub trait Split: Sized + Send {
    /// The parts for `shares` (contiguous, in order, covering every row).
    fn split(self, shares: &[Range<usize>]) -> Vec<Self>;
}

/// A mutable slice cut into rows of `len` elements (one element a row: `Rows(s, 1)`).
pub struct Rows<'a, T>(pub &'a mut [T], pub usize);

impl<'a, T: Send> Split for Rows<'a, T> {
    fn split(self, shares: &[Range<usize>]) -> Vec<Self> {
        let Rows(mut rest, len) = self;
        let mut parts = Vec::with_capacity(shares.len());
        for s in shares {
            let (head, tail) = rest.split_at_mut(s.len() * len);
            parts.push(Rows(head, len));
            rest = tail;
        }
        parts
    }
}

/// Planes of `plane` elements, each cut into rows of `row` elements: a part holds the same
/// rows of every plane (FT's lines along the third axis, strided by a plane).
pub struct Planes<'a, T> {
    /// The part's piece of each plane, in plane order.
    pub pieces: Vec<&'a mut [T]>,
    /// Elements per row.
    pub row: usize,
}

impl<'a, T: Send> Planes<'a, T> {
    /// All of `data`, planes of `plane` elements, rows of `row`.
    pub fn new(data: &'a mut [T], plane: usize, row: usize) -> Self {
        Planes { pieces: data.chunks_mut(plane).collect(), row }
    }
}

impl<'a, T: Send> Split for Planes<'a, T> {
    fn split(self, shares: &[Range<usize>]) -> Vec<Self> {
        let row = self.row;
        let mut parts: Vec<Planes<'a, T>> =
            shares.iter().map(|_| Planes { pieces: Vec::new(), row }).collect();
        for mut rest in self.pieces {
            for (p, s) in parts.iter_mut().zip(shares) {
                let (head, tail) = rest.split_at_mut(s.len() * row);
                p.pieces.push(head);
                rest = tail;
            }
        }
        parts
    }
}

impl<A: Split, B: Split> Split for (A, B) {
    fn split(self, shares: &[Range<usize>]) -> Vec<Self> {
        self.0.split(shares).into_iter().zip(self.1.split(shares)).collect()
    }
}

impl<A: Split, B: Split, C: Split> Split for (A, B, C) {
    fn split(self, shares: &[Range<usize>]) -> Vec<Self> {
        let bc = (self.1, self.2).split(shares);
        self.0.split(shares).into_iter().zip(bc).map(|(a, (b, c))| (a, b, c)).collect()
    }
}

impl<A: Split, B: Split, C: Split, D: Split> Split for (A, B, C, D) {
    fn split(self, shares: &[Range<usize>]) -> Vec<Self> {
        let cd = (self.2, self.3).split(shares);
        let ab = (self.0, self.1).split(shares);
        ab.into_iter().zip(cd).map(|((a, b), (c, d))| (a, b, c, d)).collect()
    }
}

/// `#pragma omp parallel for schedule(static) reduction(...)` over `rows` rows: `body`
/// runs on each thread's share of the rows with its part of `data` (row `share.start` is
/// the part's first) and returns its contribution; the contributions are combined in
/// thread order (the same result on every run with the same team size, floating point
/// included) and returned. A team smaller than `threads` (McRT out of memory for
/// threads, as OpenMP allows) deals the parts round robin.
pub fn for_rows_reduce<P, R>(
    threads: usize,
    rows: usize,
    data: P,
    identity: R,
    body: impl Fn(Range<usize>, P) -> R + Sync,
    combine: impl Fn(R, R) -> R + Sync,
) -> R
where
    P: Split,
    R: Clone + Send + Sync + 'static,
{
    let n = threads.max(1);
    let shares: Vec<Range<usize>> = (0..n).map(|t| share(rows, t, n)).collect();
    let parts: Vec<Mutex<Option<P>>> =
        data.split(&shares).into_iter().map(|p| Mutex::new(MutexKind::Tts, Some(p))).collect();
    if let Some(team) = team() {
        // Each part's contribution, then combined in part order, as McRT's reduction does.
        let results: Vec<Mutex<Option<R>>> =
            (0..n).map(|_| Mutex::new(MutexKind::Tts, None)).collect();
        team.run(n, &|p| {
            if let Some(part) = parts[p].lock().take() {
                *results[p].lock() = Some(body(shares[p].clone(), part));
            }
        });
        return results.into_iter().filter_map(|r| r.into_inner()).fold(identity, &combine);
    }
    let out = Mutex::new(MutexKind::Tts, None);
    omp::parallel(n, |ctx| {
        let mut acc = identity.clone();
        for p in (ctx.thread_num()..n).step_by(ctx.num_threads()) {
            let part = parts[p].lock().take();
            if let Some(part) = part {
                acc = combine(acc, body(shares[p].clone(), part));
            }
        }
        let all = ctx.reduce(acc, &combine);
        ctx.master(|| *out.lock() = Some(all));
    });
    match out.into_inner() {
        Some(r) => r,
        None => unreachable!("npb: thread 0 of a team always runs"),
    }
}

/// `#pragma omp parallel for schedule(static)` over `rows` rows writing `data` (as
/// [`for_rows_reduce`] without the reduction).
pub fn for_rows<P: Split>(
    threads: usize,
    rows: usize,
    data: P,
    body: impl Fn(Range<usize>, P) + Sync,
) {
    let n = threads.max(1);
    let shares: Vec<Range<usize>> = (0..n).map(|t| share(rows, t, n)).collect();
    let parts: Vec<Mutex<Option<P>>> =
        data.split(&shares).into_iter().map(|p| Mutex::new(MutexKind::Tts, Some(p))).collect();
    if let Some(team) = team() {
        team.run(n, &|p| {
            if let Some(part) = parts[p].lock().take() {
                body(shares[p].clone(), part);
            }
        });
        return;
    }
    omp::parallel(n, |ctx| {
        for p in (ctx.thread_num()..n).step_by(ctx.num_threads()) {
            let part = parts[p].lock().take();
            if let Some(part) = part {
                body(shares[p].clone(), part);
            }
        }
    });
}

/// `#pragma omp parallel for schedule(static) reduction(...)` over `0..len` reading only:
/// `fold` gets each thread's share; results combined in thread order.
pub fn reduce<R: Clone + Send + Sync + 'static>(
    threads: usize,
    len: usize,
    identity: R,
    fold: impl Fn(Range<usize>) -> R + Sync,
    combine: impl Fn(R, R) -> R + Sync,
) -> R {
    for_rows_reduce(threads, len, Nothing, identity, |s, Nothing| fold(s), combine)
}

/// No output data (a loop that only reads).
pub struct Nothing;

impl Split for Nothing {
    fn split(self, shares: &[Range<usize>]) -> Vec<Self> {
        shares.iter().map(|_| Nothing).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_cover_the_range_in_order() {
        for len in 0..40 {
            for n in 1..9 {
                let mut next = 0;
                for t in 0..n {
                    let s = share(len, t, n);
                    assert_eq!(s.start, next);
                    next = s.end;
                }
                assert_eq!(next, len);
            }
        }
    }

    #[test]
    fn planes_split_rows_of_every_plane() {
        let mut v: Vec<u32> = (0..24).collect();
        let parts = Planes::new(&mut v, 12, 3).split(&[0..1, 1..4]);
        assert_eq!(parts[0].pieces.len(), 2);
        assert_eq!(&*parts[0].pieces[1], &[12, 13, 14]);
        assert_eq!(&*parts[1].pieces[0], &[3, 4, 5, 6, 7, 8, 9, 10, 11]);
    }
}
