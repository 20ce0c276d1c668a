//! Linear regression (Phoenix): the least-squares line through points `(x, y)` of one
//! byte each. Map sums x, y, x², y² and xy over its points and emits the five sums under
//! keys 0–4 (combined); the line comes from the totals ([`fit`]).

use super::Lcg;
use crate::job::{Emit, Groups, Job};
use alloc::vec::Vec;
use core::ops::Range;

/// The five sums' keys.
pub const SX: u32 = 0;
/// Σy.
pub const SY: u32 = 1;
/// Σx².
pub const SXX: u32 = 2;
/// Σy².
pub const SYY: u32 = 3;
/// Σxy.
pub const SXY: u32 = 4;

/// Linear regression over `points` (bytes x, y, x, y, ...).
pub struct LinReg<'a> {
    /// The points, two bytes each; a trailing odd byte is ignored.
    pub points: &'a [u8],
}

impl Job for LinReg<'_> {
    type Key = u32;
    type Value = u64;
    type Out = u64;
    const COMBINES: bool = true;

    fn input_len(&self) -> usize {
        self.points.len() / 2
    }

    fn map(&self, range: Range<usize>, out: &mut impl Emit<u32, u64>) {
        let mut s = [0u64; 5];
        for p in self.points[range.start * 2..range.end * 2].chunks_exact(2) {
            let (x, y) = (p[0] as u64, p[1] as u64);
            s[SX as usize] += x;
            s[SY as usize] += y;
            s[SXX as usize] += x * x;
            s[SYY as usize] += y * y;
            s[SXY as usize] += x * y;
        }
        for (k, v) in s.into_iter().enumerate() {
            out.emit(k as u32, v);
        }
    }

    fn combine(&self, into: &mut u64, value: u64) {
        *into += value;
    }

    fn reduce(&self, _key: &u32, values: Groups<'_, u64>) -> u64 {
        values.iter().sum()
    }
}

/// The line `y = a + b·x` from the five sums over `n` points: `(a, b)`.
pub fn fit(sums: &[u64; 5], n: usize) -> (f64, f64) {
    let n = n as f64;
    let [sx, sy, sxx, _, sxy] = sums.map(|s| s as f64);
    let b = (n * sxy - sx * sy) / (n * sxx - sx * sx);
    ((sy - b * sx) / n, b)
}

/// `n` points near the line `y = 3 + x / 2`, from seed `seed`.
pub fn points(n: usize, seed: u32) -> Vec<u8> {
    let mut r = Lcg(seed);
    let mut out = Vec::with_capacity(n * 2);
    for _ in 0..n {
        let x = (r.next_u31() % 200) as u8;
        out.push(x);
        out.push(3 + x / 2 + (r.next_u31() % 8) as u8);
    }
    out
}
