//! EP, the embarrassingly parallel kernel (NPB 3.x `ep.f`/`ep.c`): 2^(M+1) uniform numbers
//! of `randlc` (seed 271828183, multiplier 5^13) taken in pairs (x, y) in (-1, 1)²; each
//! pair inside the unit circle gives two Gaussian deviates by the polar (Marsaglia) method,
//! X = x·√(−2 ln t / t), Y = y·√(−2 ln t / t) with t = x² + y², which are summed and
//! counted by square annulus l = ⌊max(|X|, |Y|)⌋. The numbers are made in batches of
//! 2^16 pairs; batch k starts from the seed advanced 2^17·k numbers (by squaring), so the
//! batches are independent and shared statically among the team.
//!
//! Verification: the sums of X and of Y against NPB's values, relative error ≤ 1e-8.
//! Mop/s: 2^(M+1) random numbers per second.

use crate::par;
use crate::rand::{randlc, vranlc, A};
use crate::{relative_error, Class, Kernel, Report};
use alloc::format;
use alloc::vec;

/// log2 of the pairs in a batch (NPB's `MK`).
const MK: u32 = 16;
/// Annuli counted (NPB's `NQ`).
const NQ: usize = 10;
/// EP's seed.
const S: f64 = 271_828_183.0;
/// NPB's tolerance.
const EPSILON: f64 = 1e-8;

/// NPB's `M` (2^M pairs) and the verification sums (sx, sy) of a class (NPB's digits).
#[allow(clippy::excessive_precision)]
fn params(class: Class) -> (u32, f64, f64) {
    match class {
        Class::S => (24, -3.247_834_652_034_740e3, -6.958_407_078_382_297e3),
        Class::W => (25, -2.863_319_731_645_753e3, -6.320_053_679_109_499e3),
        Class::A => (28, -4.295_875_165_629_892e3, -1.580_732_573_678_431e4),
    }
}

/// A team's partial result: the sums of X and Y, and the counts per annulus.
type Sums = (f64, f64, [f64; NQ]);

fn add(a: Sums, b: Sums) -> Sums {
    let mut q = a.2;
    for (x, y) in q.iter_mut().zip(b.2) {
        *x += y;
    }
    (a.0 + b.0, a.1 + b.1, q)
}

/// Runs EP at `class` on `threads` threads (see the module's doc).
pub fn run(class: Class, threads: usize, clock: fn() -> u64) -> Report {
    let (m, sx_ref, sy_ref) = params(class);
    let nk = 1usize << MK;
    let nn = 1usize << (m - MK);
    // an = A^(2^(MK+1)): the multiplier that skips one batch of 2·NK numbers.
    let mut an = A;
    for _ in 0..=MK {
        let a = an;
        randlc(&mut an, a);
    }
    let start = clock();
    let (sx, sy, q) = par::reduce(
        threads,
        nn,
        (0.0, 0.0, [0.0; NQ]),
        |batches| {
            let mut x = vec![0.0f64; 2 * nk];
            let (mut sx, mut sy, mut q) = (0.0, 0.0, [0.0; NQ]);
            for k in batches {
                // The batch's seed: S · an^k, by the binary digits of k.
                let (mut t1, mut t2, mut kk) = (S, an, k);
                for _ in 0..100 {
                    let ik = kk / 2;
                    if 2 * ik != kk {
                        randlc(&mut t1, t2);
                    }
                    if ik == 0 {
                        break;
                    }
                    let a = t2;
                    randlc(&mut t2, a);
                    kk = ik;
                }
                vranlc(&mut t1, A, &mut x);
                for pair in x.chunks_exact(2) {
                    let x1 = 2.0 * pair[0] - 1.0;
                    let x2 = 2.0 * pair[1] - 1.0;
                    let t = x1 * x1 + x2 * x2;
                    if t <= 1.0 {
                        let f = libm::sqrt(-2.0 * libm::log(t) / t);
                        let (t3, t4) = (x1 * f, x2 * f);
                        let l = libm::fmax(libm::fabs(t3), libm::fabs(t4)) as usize;
                        q[l.min(NQ - 1)] += 1.0;
                        sx += t3;
                        sy += t4;
                    }
                }
            }
            (sx, sy, q)
        },
        add,
    );
    let ticks = clock().wrapping_sub(start);
    let gc: f64 = q.iter().sum();
    let (ex, ey) = (relative_error(sx, sx_ref), relative_error(sy, sy_ref));
    let verified = ex <= EPSILON && ey <= EPSILON;
    Report {
        kernel: Kernel::Ep,
        class,
        threads,
        ticks,
        ops: libm::pow(2.0, f64::from(m + 1)),
        verified,
        detail: format!(
            "sx {sx:.15e} (NPB {sx_ref:.15e}, rel. error {ex:.1e}), sy {sy:.15e} (NPB {sy_ref:.15e}, rel. error {ey:.1e}), {gc} Gaussian pairs; counts {q:?}"
        ),
    }
}
