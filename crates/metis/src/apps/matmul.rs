//! Matrix multiply (Phoenix): `C = A × B` for square matrices; a map task computes some
//! rows of C and emits each under its row number; reduce passes the one row through.

use super::Lcg;
use crate::job::{Emit, Groups, Job};
use alloc::vec::Vec;
use core::ops::Range;

/// `a × b`, both `n × n`, row-major.
pub struct MatMul<'a> {
    /// The side.
    pub n: usize,
    /// The left matrix.
    pub a: &'a [i32],
    /// The right matrix.
    pub b: &'a [i32],
}

impl Job for MatMul<'_> {
    type Key = u32;
    type Value = Vec<i64>;
    type Out = Vec<i64>;

    fn input_len(&self) -> usize {
        self.n
    }

    fn map(&self, range: Range<usize>, out: &mut impl Emit<u32, Vec<i64>>) {
        let n = self.n;
        for i in range {
            let mut row = alloc::vec![0i64; n];
            // i-k-j order: B is read row by row.
            for (k, &aik) in self.a[i * n..(i + 1) * n].iter().enumerate() {
                for (c, &bkj) in row.iter_mut().zip(&self.b[k * n..(k + 1) * n]) {
                    *c += aik as i64 * bkj as i64;
                }
            }
            out.emit(i as u32, row);
        }
    }

    fn reduce(&self, _key: &u32, values: Groups<'_, Vec<i64>>) -> Vec<i64> {
        values.take_all().pop().unwrap_or_default()
    }
}

/// An `n × n` matrix of small pseudo-random numbers, from seed `seed`.
pub fn matrix(n: usize, seed: u32) -> Vec<i32> {
    let mut r = Lcg(seed);
    (0..n * n).map(|_| (r.next_u31() % 100) as i32 - 50).collect()
}
