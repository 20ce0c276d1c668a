//! NPB's pseudorandom generator (`randdp`: `randlc`, `vranlc`) and MG's `power`: the
//! linear congruential generator x_{k+1} = a·x_k mod 2^46, with the 46-bit products done
//! exactly in `f64` by splitting each operand into 23-bit halves (D. H. Bailey, 1990), so
//! every machine with IEEE doubles draws the same numbers. Rust never fuses `a*b + c`
//! into an FMA on its own, which keeps the arithmetic exactly NPB's.

/// 2^-23.
const R23: f64 = 1.0 / 8_388_608.0;
/// 2^23.
const T23: f64 = 8_388_608.0;
/// 2^-46.
const R46: f64 = R23 * R23;
/// 2^46.
const T46: f64 = T23 * T23;

/// NPB's multiplier, 5^13.
pub const A: f64 = 1_220_703_125.0;
/// NPB's usual seed (IS, CG, MG, FT).
pub const SEED: f64 = 314_159_265.0;

/// Truncation toward zero, as C's conversion `int j = T1` does (operands are positive).
fn trunc(x: f64) -> f64 {
    x as i64 as f64
}

/// `randlc(x, a)`: advances `x` to a·x mod 2^46 and returns the new `x` × 2^-46, in (0, 1).
pub fn randlc(x: &mut f64, a: f64) -> f64 {
    let a1 = trunc(R23 * a);
    let a2 = a - T23 * a1;
    let x1 = trunc(R23 * *x);
    let x2 = *x - T23 * x1;
    let t1 = a1 * x2 + a2 * x1;
    let t2 = trunc(R23 * t1);
    let z = t1 - T23 * t2;
    let t3 = T23 * z + a2 * x2;
    let t4 = trunc(R46 * t3);
    *x = t3 - T46 * t4;
    R46 * *x
}

/// `vranlc(n, x, a, y)`: the next `y.len()` numbers of the sequence into `y`.
pub fn vranlc(x: &mut f64, a: f64, y: &mut [f64]) {
    for v in y {
        *v = randlc(x, a);
    }
}

/// MG's `power(a, n)` (FT's `ipow46`): a^n mod 2^46, by repeated squaring with `randlc`;
/// the seed that skips `n` numbers of the sequence of multiplier `a`.
pub fn power(a: f64, n: u64) -> f64 {
    let mut p = 1.0;
    let mut aj = a;
    let mut nj = n;
    while nj != 0 {
        if nj % 2 == 1 {
            randlc(&mut p, aj);
        }
        let square = aj;
        randlc(&mut aj, square);
        nj /= 2;
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn randlc_is_the_46_bit_lcg() {
        // x1 = a·x0 mod 2^46, checked in exact integer arithmetic.
        let mut x = SEED;
        let mut exact: u128 = SEED as u128;
        for _ in 0..1000 {
            let r = randlc(&mut x, A);
            exact = (exact * A as u128) % (1u128 << 46);
            assert_eq!(x, exact as f64);
            assert!(r > 0.0 && r < 1.0);
        }
    }

    #[test]
    fn power_skips_ahead() {
        let mut x = SEED;
        for _ in 0..777 {
            randlc(&mut x, A);
        }
        let mut y = SEED;
        randlc(&mut y, power(A, 777));
        assert_eq!(x, y);
        assert_eq!(power(A, 0), 1.0);
    }
}
