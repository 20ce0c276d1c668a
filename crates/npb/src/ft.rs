//! FT, the 3-D FFT kernel (NPB 3.x `ft`): solves the diffusion equation ∂u/∂t = α∇²u
//! spectrally on an NX × NY × NZ periodic grid. The initial state is `randlc`'s numbers
//! (pairs: real, imaginary; x fastest), transformed forward once; then each of NITER
//! steps multiplies every Fourier mode by exp(−4απ²|k|²) (`evolve`, the factors
//! precomputed as NPB 3.3's `twiddle`), transforms back (unnormalised), and takes NPB's
//! checksum: the sum of 1024 fixed elements over NX·NY·NZ. The transforms are NPB's:
//! `cfftz`, a radix-2 Stockham FFT (`fftz2` steps, ping-ponging two buffers) with the
//! roots of unity of `fft_init`, run on every line of each axis (`cffts1..3`); lines of
//! the first two axes are parallel over planes, lines of the third over rows.
//!
//! Verification: each step's checksum, real and imaginary parts, against NPB's
//! `vdata_real`/`vdata_imag`, relative error ≤ 1e-12. Mop/s: NPB's count,
//! N·(14.8157 + 7.19641·ln N + (5.23518 + 7.21113·ln N)·NITER) with N = NX·NY·NZ, per second.

use crate::par::{self, Planes, Rows};
use crate::rand::{power, randlc, vranlc, A, SEED};
use crate::{relative_error, Class, Kernel, Report};
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::fmt::Write;

/// NPB's tolerance.
const EPSILON: f64 = 1e-12;
/// The diffusion constant α.
const ALPHA: f64 = 1e-6;
/// Steps (NITER) in every class here.
const NITER: usize = 6;
/// π (NPB's 3.141592653589793238 rounds to this double).
const PI: f64 = core::f64::consts::PI;

/// A complex number.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct C {
    re: f64,
    im: f64,
}

/// A class's NX, NY, NZ and NPB's checksums (real, imaginary) for steps 1..=6.
fn params(class: Class) -> (usize, usize, usize, [(f64, f64); NITER]) {
    match class {
        Class::S => (
            64,
            64,
            64,
            [
                (5.546_087_004_964e2, 4.845_363_331_978e2),
                (5.546_385_409_189e2, 4.865_304_269_511e2),
                (5.546_148_406_171e2, 4.883_910_722_336e2),
                (5.545_423_607_415e2, 4.901_273_169_046e2),
                (5.544_255_039_624e2, 4.917_475_857_993e2),
                (5.542_683_411_902e2, 4.932_597_244_941e2),
            ],
        ),
        Class::W => (
            128,
            128,
            32,
            [
                (5.673_612_178_944e2, 5.293_246_849_175e2),
                (5.631_436_885_271e2, 5.282_149_986_629e2),
                (5.594_024_089_970e2, 5.270_996_558_037e2),
                (5.560_698_047_020e2, 5.260_027_904_925e2),
                (5.530_898_991_250e2, 5.249_400_845_633e2),
                (5.504_159_734_538e2, 5.239_212_247_086e2),
            ],
        ),
        Class::A => (
            256,
            256,
            128,
            [
                (5.046_735_008_193e2, 5.114_047_905_510e2),
                (5.059_412_319_734e2, 5.098_809_666_433e2),
                (5.069_376_896_287e2, 5.098_144_042_213e2),
                (5.077_892_868_474e2, 5.101_336_130_759e2),
                (5.085_233_095_391e2, 5.104_914_655_194e2),
                (5.091_487_099_959e2, 5.107_917_842_803e2),
            ],
        ),
    }
}

/// `fft_init`: roots of unity; entry `ln + i` (ln = 1, 2, 4 …) is e^(iπ·i/ln).
fn fft_init(n: usize) -> Vec<C> {
    let mut u = vec![C::default(); n.max(2)];
    let (mut ku, mut ln) = (1, 1);
    for _ in 0..n.trailing_zeros() {
        let t = PI / ln as f64;
        for i in 0..ln {
            let ti = i as f64 * t;
            u[i + ku] = C { re: libm::cos(ti), im: libm::sin(ti) };
        }
        ku += ln;
        ln *= 2;
    }
    u
}

/// `fftz2`: Stockham step `l` of `m` on one line, `x` into `y`; `inverse` conjugates.
fn fftz2(inverse: bool, l: u32, m: u32, u: &[C], x: &[C], y: &mut [C]) {
    let n1 = x.len() / 2;
    let lk = 1usize << (l - 1);
    let li = 1usize << (m - l);
    let lj = 2 * lk;
    for i in 0..li {
        let (i11, i12, i21, i22) = (i * lk, i * lk + n1, i * lj, i * lj + lk);
        let w = u[li + i];
        let w = if inverse { C { re: w.re, im: -w.im } } else { w };
        for k in 0..lk {
            let (a, b) = (x[i11 + k], x[i12 + k]);
            y[i21 + k] = C { re: a.re + b.re, im: a.im + b.im };
            let (dr, di) = (a.re - b.re, a.im - b.im);
            y[i22 + k] = C { re: w.re * dr - w.im * di, im: w.re * di + w.im * dr };
        }
    }
}

/// `cfftz`: the FFT of the line `x` in place (`y` is scratch of the same length).
fn cfftz(inverse: bool, u: &[C], x: &mut [C], y: &mut [C]) {
    let m = x.len().trailing_zeros();
    let mut l = 1;
    while l <= m {
        fftz2(inverse, l, m, u, x, y);
        if l == m {
            x.copy_from_slice(y);
            break;
        }
        fftz2(inverse, l + 1, m, u, y, x);
        l += 2;
    }
}

/// The grid's shape: element (k, j, i) at `(k·NY + j)·NX + i`.
#[derive(Clone, Copy)]
struct Shape {
    nx: usize,
    ny: usize,
    nz: usize,
}

/// `fft(dir, x)`: the 3-D transform of `x` in place (forward: axes 1, 2, 3; inverse:
/// 3, 2, 1).
fn fft3(threads: usize, inverse: bool, u: &[C], x: &mut [C], s: Shape) {
    let axes: [u8; 3] = if inverse { [3, 2, 1] } else { [1, 2, 3] };
    let plane = s.nx * s.ny;
    for axis in axes {
        match axis {
            // Lines along x and along y: a thread takes whole planes.
            1 | 2 => par::for_rows(threads, s.nz, Rows(&mut *x, plane), |planes, Rows(x, _)| {
                let len = if axis == 1 { s.nx } else { s.ny };
                let (mut line, mut y) = (vec![C::default(); len], vec![C::default(); len]);
                for p in 0..planes.len() {
                    let x = &mut x[p * plane..(p + 1) * plane];
                    if axis == 1 {
                        for row in x.chunks_exact_mut(s.nx) {
                            cfftz(inverse, u, row, &mut y);
                        }
                    } else {
                        for i in 0..s.nx {
                            for j in 0..s.ny {
                                line[j] = x[j * s.nx + i];
                            }
                            cfftz(inverse, u, &mut line, &mut y);
                            for j in 0..s.ny {
                                x[j * s.nx + i] = line[j];
                            }
                        }
                    }
                }
            }),
            // Lines along z: a thread takes the same rows of every plane.
            _ => par::for_rows(threads, s.ny, Planes::new(&mut *x, plane, s.nx), |rows, part| {
                let (mut line, mut y) = (vec![C::default(); s.nz], vec![C::default(); s.nz]);
                let mut pieces = part.pieces;
                for jj in 0..rows.len() {
                    for i in 0..s.nx {
                        for (k, piece) in pieces.iter().enumerate() {
                            line[k] = piece[jj * s.nx + i];
                        }
                        cfftz(inverse, u, &mut line, &mut y);
                        for (k, piece) in pieces.iter_mut().enumerate() {
                            piece[jj * s.nx + i] = line[k];
                        }
                    }
                }
            }),
        }
    }
}

/// `compute_initial_conditions`: plane k from the seed skipped 2·NX·NY·k numbers.
fn initial(threads: usize, x: &mut [C], s: Shape) {
    let plane = s.nx * s.ny;
    let an = power(A, 2 * plane as u64);
    par::for_rows(threads, s.nz, Rows(x, plane), |planes, Rows(x, _)| {
        let mut start = SEED;
        randlc(&mut start, power(an, planes.start as u64));
        let mut tmp = vec![0.0; 2 * plane];
        for p in 0..planes.len() {
            let mut x0 = start;
            vranlc(&mut x0, A, &mut tmp);
            for (c, pair) in x[p * plane..(p + 1) * plane].iter_mut().zip(tmp.chunks_exact(2)) {
                *c = C { re: pair[0], im: pair[1] };
            }
            randlc(&mut start, an);
        }
    });
}

/// NPB 3.3's `compute_indexmap`: exp(−4απ²(ī² + j̄² + k̄²)), ī the signed frequency.
fn twiddles(threads: usize, t: &mut [f64], s: Shape) {
    let plane = s.nx * s.ny;
    let ap = -4.0 * ALPHA * PI * PI;
    let freq = |i: usize, n: usize| ((i + n / 2) % n) as i64 - (n / 2) as i64;
    par::for_rows(threads, s.nz, Rows(t, plane), |planes, Rows(t, _)| {
        for (p, k) in planes.enumerate() {
            let kk = freq(k, s.nz);
            for j in 0..s.ny {
                let jj = freq(j, s.ny);
                for i in 0..s.nx {
                    let ii = freq(i, s.nx);
                    t[p * plane + j * s.nx + i] =
                        libm::exp(ap * (ii * ii + jj * jj + kk * kk) as f64);
                }
            }
        }
    });
}

/// NPB's `checksum`: 1024 elements, (j mod NX, 3j mod NY, 5j mod NZ), over NX·NY·NZ.
fn checksum(x: &[C], s: Shape) -> C {
    let mut chk = C::default();
    for j in 1..=1024 {
        let at = ((5 * j % s.nz) * s.ny + 3 * j % s.ny) * s.nx + j % s.nx;
        chk.re += x[at].re;
        chk.im += x[at].im;
    }
    let total = (s.nx * s.ny * s.nz) as f64;
    C { re: chk.re / total, im: chk.im / total }
}

/// Runs FT at `class` on `threads` threads (see the module's doc).
pub fn run(class: Class, threads: usize, clock: fn() -> u64) -> Report {
    let (nx, ny, nz, reference) = params(class);
    let s = Shape { nx, ny, nz };
    let total = nx * ny * nz;
    let u = fft_init(nx.max(ny).max(nz));
    let mut u0 = vec![C::default(); total];
    let mut u1 = vec![C::default(); total];
    let mut tw = vec![0.0f64; total];
    // The whole set-up once untimed, as NPB does, to touch every page.
    twiddles(threads, &mut tw, s);
    initial(threads, &mut u0, s);
    fft3(threads, false, &u, &mut u0, s);
    let start = clock();
    twiddles(threads, &mut tw, s);
    initial(threads, &mut u0, s);
    fft3(threads, false, &u, &mut u0, s);
    let mut sums = [C::default(); NITER];
    for sum in sums.iter_mut() {
        // evolve: u0 = u0 · twiddle, u1 = u0.
        let tw = &tw;
        par::for_rows(
            threads,
            nz,
            (Rows(&mut u0, nx * ny), Rows(&mut u1, nx * ny)),
            |planes, (Rows(u0, _), Rows(u1, _))| {
                let t = &tw[planes.start * nx * ny..planes.end * nx * ny];
                for ((a, b), &f) in u0.iter_mut().zip(u1.iter_mut()).zip(t) {
                    a.re *= f;
                    a.im *= f;
                    *b = *a;
                }
            },
        );
        fft3(threads, true, &u, &mut u1, s);
        *sum = checksum(&u1, s);
    }
    let ticks = clock().wrapping_sub(start);
    let mut verified = true;
    let mut detail = String::new();
    for (i, (c, &(re, im))) in sums.iter().zip(&reference).enumerate() {
        let (er, ei) = (relative_error(c.re, re), relative_error(c.im, im));
        verified &= er <= EPSILON && ei <= EPSILON;
        let _ = write!(
            detail,
            "{}T={} {:.12e} {:.12e} (rel. errors {er:.1e} {ei:.1e})",
            if i == 0 { "" } else { "; " },
            i + 1,
            c.re,
            c.im
        );
    }
    let n = total as f64;
    let ln = libm::log(n);
    Report {
        kernel: Kernel::Ft,
        class,
        threads,
        ticks,
        ops: n * (14.8157 + 7.19641 * ln + (5.23518 + 7.21113 * ln) * NITER as f64),
        verified,
        detail,
    }
}
