//! K-means (Phoenix): points in three dimensions, clustered around `k` means. One job
//! per iteration ([`Step`]): map assigns each point to its nearest mean and emits
//! `(mean, (coordinate sums, 1))`, combined; reduce makes the new mean. [`kmeans`]
//! iterates until no mean moves (or a limit).

use super::Lcg;
use crate::job::{Emit, Groups, Job};
use crate::{Config, Error};
use alloc::vec::Vec;
use core::ops::Range;

/// A point (or a mean).
pub type Point = [i64; 3];

/// One iteration: the points' new means given `means`.
pub struct Step<'a> {
    /// The points.
    pub points: &'a [Point],
    /// The current means.
    pub means: &'a [Point],
}

fn nearest(p: &Point, means: &[Point]) -> usize {
    let d = |m: &Point| (0..3).map(|i| (p[i] - m[i]) * (p[i] - m[i])).sum::<i64>();
    // The first of equally near means, so every run assigns alike.
    (0..means.len()).min_by_key(|&i| (d(&means[i]), i)).unwrap_or(0)
}

impl Job for Step<'_> {
    type Key = u32;
    type Value = (Point, u64);
    type Out = Point;
    const COMBINES: bool = true;

    fn input_len(&self) -> usize {
        self.points.len()
    }

    fn map(&self, range: Range<usize>, out: &mut impl Emit<u32, (Point, u64)>) {
        for p in &self.points[range] {
            out.emit(nearest(p, self.means) as u32, (*p, 1));
        }
    }

    fn combine(&self, into: &mut (Point, u64), value: (Point, u64)) {
        for i in 0..3 {
            into.0[i] += value.0[i];
        }
        into.1 += value.1;
    }

    fn reduce(&self, _key: &u32, values: Groups<'_, (Point, u64)>) -> Point {
        let mut sum = [0i64; 3];
        let mut n = 0;
        for (s, c) in values.iter() {
            for i in 0..3 {
                sum[i] += s[i];
            }
            n += c;
        }
        sum.map(|s| s / n.max(1) as i64)
    }
}

/// Clusters `points` around `k` means (the first `k` points to start), for at most
/// `limit` iterations: the means and the iterations run. Call it on a McRT thread.
pub fn kmeans(
    points: &[Point],
    k: usize,
    limit: usize,
    config: &Config,
) -> Result<(Vec<Point>, usize), Error> {
    let mut means: Vec<Point> = points.iter().take(k).copied().collect();
    for iteration in 1..=limit {
        let out = crate::run(&Step { points, means: &means }, config)?;
        let mut next = means.clone();
        for (m, p) in out.pairs {
            next[m as usize] = p;
        }
        if next == means {
            return Ok((means, iteration));
        }
        means = next;
    }
    Ok((means, limit))
}

/// `n` points in a 1000-wide cube, from seed `seed`.
pub fn points(n: usize, seed: u32) -> Vec<Point> {
    let mut r = Lcg(seed);
    (0..n).map(|_| [0; 3].map(|_: i64| (r.next_u31() % 1000) as i64)).collect()
}
