//! MG, the multigrid kernel (NPB 3.x OpenMP `mg.c`): NIT V-cycles of a multigrid solver
//! for the discrete Poisson problem ∇²u = v on an N³ periodic grid, where v is zero but
//! for +1 at the ten largest and −1 at the ten smallest of N³ `randlc` numbers (`zran3`).
//! A V-cycle (`mg3P`) restricts the residual down to a 2³ grid (`rprj3`), smooths there
//! (`psinv`), and on the way up interpolates (`interp`), forms the residual (`resid`) and
//! smooths at every level; each operator is a 27-point stencil with NPB's coefficients,
//! parallel over planes, and `comm3` refreshes the periodic ghost faces. Grids carry one
//! ghost layer: level k has (2^k + 2)³ points.
//!
//! Verification: the L2 norm of the final residual (`norm2u3`'s `rnm2`) against NPB's
//! value, relative error ≤ 1e-8. Mop/s: NPB's count, 58 · NIT · N³ per second.

use crate::par::{self, Rows};
use crate::rand::{power, randlc, vranlc, A, SEED};
use crate::{relative_error, Class, Kernel, Report};
use alloc::format;
use alloc::vec;
use alloc::vec::Vec;

/// NPB's tolerance.
const EPSILON: f64 = 1e-8;
/// The residual operator's coefficients (NPB's `a`).
const AC: [f64; 4] = [-8.0 / 3.0, 0.0, 1.0 / 6.0, 1.0 / 12.0];
/// The smoother's coefficients for classes S, W, A (NPB's `c`, S(a)).
const CC: [f64; 4] = [-3.0 / 8.0, 1.0 / 32.0, -1.0 / 64.0, 0.0];

/// A class's N, NIT and NPB's `verify_value` (NPB 3.3: class W is 128³, 4 iterations).
fn params(class: Class) -> (usize, usize, f64) {
    match class {
        Class::S => (32, 4, 0.530_770_700_573_4e-4),
        Class::W => (128, 4, 0.646_732_937_533_9e-5),
        Class::A => (256, 4, 0.243_336_530_906_9e-5),
    }
}

/// A cubic grid of side `m` (ghosts included): point (i3, i2, i1) at `(i3·m + i2)·m + i1`.
#[derive(Clone, Copy)]
struct Dim {
    m: usize,
}

impl Dim {
    fn at(self, i3: usize, i2: usize, i1: usize) -> usize {
        (i3 * self.m + i2) * self.m + i1
    }
    fn plane(self) -> usize {
        self.m * self.m
    }
}

/// `comm3`: the periodic ghost faces of `u` from the opposite interior faces (first axes
/// 1 and 2 of every interior plane, in parallel, then whole planes for axis 3).
fn comm3(threads: usize, u: &mut [f64], d: Dim) {
    let n = d.m;
    par::for_rows(threads, n, Rows(u, d.plane()), |planes, Rows(u, _)| {
        for (p, i3) in planes.enumerate() {
            if i3 == 0 || i3 == n - 1 {
                continue;
            }
            let u = &mut u[p * n * n..(p + 1) * n * n];
            for i2 in 1..n - 1 {
                u[i2 * n + n - 1] = u[i2 * n + 1];
                u[i2 * n] = u[i2 * n + n - 2];
            }
            u.copy_within(n..2 * n, (n - 1) * n);
            u.copy_within((n - 2) * n..(n - 1) * n, 0);
        }
    });
    let pl = d.plane();
    u.copy_within(pl..2 * pl, (n - 1) * pl);
    u.copy_within((n - 2) * pl..(n - 1) * pl, 0);
}

/// `resid`: r = v − A u on the interior, then `comm3(r)`. With `v` `None`, v is r itself
/// (NPB's `resid(u, r, r)` in the V-cycle: each point reads only its own old value).
fn resid(threads: usize, u: &[f64], v: Option<&[f64]>, r: &mut [f64], d: Dim) {
    let n = d.m;
    par::for_rows(threads, n, Rows(&mut *r, d.plane()), |planes, Rows(r, _)| {
        let (mut u1, mut u2) = (vec![0.0; n], vec![0.0; n]);
        for (p, i3) in planes.enumerate() {
            if i3 == 0 || i3 == n - 1 {
                continue;
            }
            for i2 in 1..n - 1 {
                for i1 in 0..n {
                    u1[i1] = u[d.at(i3, i2 - 1, i1)]
                        + u[d.at(i3, i2 + 1, i1)]
                        + u[d.at(i3 - 1, i2, i1)]
                        + u[d.at(i3 + 1, i2, i1)];
                    u2[i1] = u[d.at(i3 - 1, i2 - 1, i1)]
                        + u[d.at(i3 - 1, i2 + 1, i1)]
                        + u[d.at(i3 + 1, i2 - 1, i1)]
                        + u[d.at(i3 + 1, i2 + 1, i1)];
                }
                for i1 in 1..n - 1 {
                    let local = (p * n + i2) * n + i1;
                    let vv = match v {
                        Some(v) => v[d.at(i3, i2, i1)],
                        None => r[local],
                    };
                    r[local] = vv
                        - AC[0] * u[d.at(i3, i2, i1)]
                        - AC[2] * (u2[i1] + u1[i1 - 1] + u1[i1 + 1])
                        - AC[3] * (u2[i1 - 1] + u2[i1 + 1]);
                }
            }
        }
    });
    comm3(threads, r, d);
}

/// `psinv`: the smoother u = u + C r on the interior, then `comm3(u)`.
fn psinv(threads: usize, r: &[f64], u: &mut [f64], d: Dim) {
    let n = d.m;
    par::for_rows(threads, n, Rows(&mut *u, d.plane()), |planes, Rows(u, _)| {
        let (mut r1, mut r2) = (vec![0.0; n], vec![0.0; n]);
        for (p, i3) in planes.enumerate() {
            if i3 == 0 || i3 == n - 1 {
                continue;
            }
            for i2 in 1..n - 1 {
                for i1 in 0..n {
                    r1[i1] = r[d.at(i3, i2 - 1, i1)]
                        + r[d.at(i3, i2 + 1, i1)]
                        + r[d.at(i3 - 1, i2, i1)]
                        + r[d.at(i3 + 1, i2, i1)];
                    r2[i1] = r[d.at(i3 - 1, i2 - 1, i1)]
                        + r[d.at(i3 - 1, i2 + 1, i1)]
                        + r[d.at(i3 + 1, i2 - 1, i1)]
                        + r[d.at(i3 + 1, i2 + 1, i1)];
                }
                for i1 in 1..n - 1 {
                    let local = (p * n + i2) * n + i1;
                    u[local] = u[local]
                        + CC[0] * r[d.at(i3, i2, i1)]
                        + CC[1] * (r[d.at(i3, i2, i1 - 1)] + r[d.at(i3, i2, i1 + 1)] + r1[i1])
                        + CC[2] * (r2[i1] + r1[i1 - 1] + r1[i1 + 1]);
                }
            }
        }
    });
    comm3(threads, u, d);
}

/// `rprj3`: the residual `r` (fine, side `df`) projected onto the coarse grid `s` (side
/// `dc`) by trilinear finite-element restriction, then `comm3(s)`.
fn rprj3(threads: usize, r: &[f64], df: Dim, s: &mut [f64], dc: Dim) {
    let (mj, mk) = (dc.m, df.m);
    par::for_rows(threads, mj, Rows(&mut *s, dc.plane()), |planes, Rows(s, _)| {
        let (mut x1, mut y1) = (vec![0.0; mk], vec![0.0; mk]);
        for (p, j3) in planes.enumerate() {
            if j3 == 0 || j3 == mj - 1 {
                continue;
            }
            let i3 = 2 * j3 - 1;
            for j2 in 1..mj - 1 {
                let i2 = 2 * j2 - 1;
                for j1 in 1..mj {
                    let i1 = 2 * j1 - 1;
                    x1[i1] = r[df.at(i3 + 1, i2, i1)]
                        + r[df.at(i3 + 1, i2 + 2, i1)]
                        + r[df.at(i3, i2 + 1, i1)]
                        + r[df.at(i3 + 2, i2 + 1, i1)];
                    y1[i1] = r[df.at(i3, i2, i1)]
                        + r[df.at(i3 + 2, i2, i1)]
                        + r[df.at(i3, i2 + 2, i1)]
                        + r[df.at(i3 + 2, i2 + 2, i1)];
                }
                for j1 in 1..mj - 1 {
                    let i1 = 2 * j1 - 1;
                    let y2 = r[df.at(i3, i2, i1 + 1)]
                        + r[df.at(i3 + 2, i2, i1 + 1)]
                        + r[df.at(i3, i2 + 2, i1 + 1)]
                        + r[df.at(i3 + 2, i2 + 2, i1 + 1)];
                    let x2 = r[df.at(i3 + 1, i2, i1 + 1)]
                        + r[df.at(i3 + 1, i2 + 2, i1 + 1)]
                        + r[df.at(i3, i2 + 1, i1 + 1)]
                        + r[df.at(i3 + 2, i2 + 1, i1 + 1)];
                    s[(p * mj + j2) * mj + j1] = 0.5 * r[df.at(i3 + 1, i2 + 1, i1 + 1)]
                        + 0.25
                            * (r[df.at(i3 + 1, i2 + 1, i1)]
                                + r[df.at(i3 + 1, i2 + 1, i1 + 2)]
                                + x2)
                        + 0.125 * (x1[i1] + x1[i1 + 2] + y2)
                        + 0.0625 * (y1[i1] + y1[i1 + 2]);
                }
            }
        }
    });
    comm3(threads, s, dc);
}

/// `interp`: u (fine, side `df`) += the trilinear interpolation of `z` (coarse, side
/// `dc`); coarse plane i3 feeds fine planes 2·i3 and 2·i3 + 1, so a thread owns pairs.
fn interp(threads: usize, z: &[f64], dc: Dim, u: &mut [f64], df: Dim) {
    let (mm, n) = (dc.m, df.m);
    par::for_rows(threads, mm - 1, Rows(&mut *u, 2 * df.plane()), |pairs, Rows(u, _)| {
        let (mut z1, mut z2, mut z3) = (vec![0.0; mm], vec![0.0; mm], vec![0.0; mm]);
        let first = pairs.start;
        for i3 in pairs {
            // Fine point (2·i3 + a, b, c) of this part.
            let at = |a: usize, b: usize, c: usize| ((2 * (i3 - first) + a) * n + b) * n + c;
            for i2 in 0..mm - 1 {
                for i1 in 0..mm {
                    z1[i1] = z[dc.at(i3, i2 + 1, i1)] + z[dc.at(i3, i2, i1)];
                    z2[i1] = z[dc.at(i3 + 1, i2, i1)] + z[dc.at(i3, i2, i1)];
                    z3[i1] = z[dc.at(i3 + 1, i2 + 1, i1)] + z[dc.at(i3 + 1, i2, i1)] + z1[i1];
                }
                for i1 in 0..mm - 1 {
                    u[at(0, 2 * i2, 2 * i1)] += z[dc.at(i3, i2, i1)];
                    u[at(0, 2 * i2, 2 * i1 + 1)] +=
                        0.5 * (z[dc.at(i3, i2, i1 + 1)] + z[dc.at(i3, i2, i1)]);
                }
                for i1 in 0..mm - 1 {
                    u[at(0, 2 * i2 + 1, 2 * i1)] += 0.5 * z1[i1];
                    u[at(0, 2 * i2 + 1, 2 * i1 + 1)] += 0.25 * (z1[i1] + z1[i1 + 1]);
                }
                for i1 in 0..mm - 1 {
                    u[at(1, 2 * i2, 2 * i1)] += 0.5 * z2[i1];
                    u[at(1, 2 * i2, 2 * i1 + 1)] += 0.25 * (z2[i1] + z2[i1 + 1]);
                }
                for i1 in 0..mm - 1 {
                    u[at(1, 2 * i2 + 1, 2 * i1)] += 0.25 * z3[i1];
                    u[at(1, 2 * i2 + 1, 2 * i1 + 1)] += 0.125 * (z3[i1] + z3[i1 + 1]);
                }
            }
        }
    });
}

/// `norm2u3`: (the L2 norm over the N³ interior points, the largest magnitude).
fn norm2u3(threads: usize, r: &[f64], d: Dim, points: f64) -> (f64, f64) {
    let n = d.m;
    let (s, max) = par::reduce(
        threads,
        n,
        (0.0, 0.0),
        |planes| {
            let (mut s, mut max) = (0.0, 0.0f64);
            for i3 in planes.filter(|&i| i != 0 && i != n - 1) {
                for i2 in 1..n - 1 {
                    for i1 in 1..n - 1 {
                        let x = r[d.at(i3, i2, i1)];
                        s += x * x;
                        max = max.max(libm::fabs(x));
                    }
                }
            }
            (s, max)
        },
        |a: (f64, f64), b: (f64, f64)| (a.0 + b.0, a.1.max(b.1)),
    );
    (libm::sqrt(s / points), max)
}

/// `zran3`: v = 0 but +1 at the ten largest and −1 at the ten smallest of the N³ numbers
/// `randlc` draws into the interior (x fastest, from NPB's seed), then `comm3(v)`.
fn zran3(threads: usize, v: &mut [f64], d: Dim) {
    const MM: usize = 10;
    let n = d.m;
    let nx = n - 2;
    let a1 = power(A, nx as u64);
    let a2 = power(A, (nx * nx) as u64);
    v.iter_mut().for_each(|e| *e = 0.0);
    let mut x0 = SEED;
    for i3 in 1..n - 1 {
        let mut x1 = x0;
        for i2 in 1..n - 1 {
            let mut xx = x1;
            let at = d.at(i3, i2, 1);
            vranlc(&mut xx, A, &mut v[at..at + nx]);
            randlc(&mut x1, a1);
        }
        randlc(&mut x0, a2);
    }
    // The ten largest (ascending: [0] the smallest of them) and ten smallest (descending),
    // kept by NPB's `bubble`.
    let mut hi = [(0.0f64, 0usize); MM];
    let mut lo = [(1.0f64, 0usize); MM];
    for i3 in 1..n - 1 {
        for i2 in 1..n - 1 {
            for i1 in 1..n - 1 {
                let at = d.at(i3, i2, i1);
                let x = v[at];
                if x > hi[0].0 {
                    hi[0] = (x, at);
                    for i in 0..MM - 1 {
                        if hi[i].0 > hi[i + 1].0 {
                            hi.swap(i, i + 1);
                        } else {
                            break;
                        }
                    }
                }
                if x < lo[0].0 {
                    lo[0] = (x, at);
                    for i in 0..MM - 1 {
                        if lo[i].0 < lo[i + 1].0 {
                            lo.swap(i, i + 1);
                        } else {
                            break;
                        }
                    }
                }
            }
        }
    }
    v.iter_mut().for_each(|e| *e = 0.0);
    for &(_, at) in &lo {
        v[at] = -1.0;
    }
    for &(_, at) in &hi {
        v[at] = 1.0;
    }
    comm3(threads, v, d);
}

/// The grids: u and r at every level (index k: side 2^k + 2), v at the finest.
struct Grids {
    lt: usize,
    u: Vec<Vec<f64>>,
    r: Vec<Vec<f64>>,
    v: Vec<f64>,
}

fn dim(k: usize) -> Dim {
    Dim { m: (1 << k) + 2 }
}

/// `mg3P`: one V-cycle.
fn mg3p(threads: usize, g: &mut Grids) {
    let lt = g.lt;
    // Down: restrict the residual to the coarsest level.
    for k in (2..=lt).rev() {
        let (coarse, fine) = g.r.split_at_mut(k);
        rprj3(threads, &fine[0], dim(k), &mut coarse[k - 1], dim(k - 1));
    }
    // The coarsest level: an approximate solution.
    g.u[1].iter_mut().for_each(|e| *e = 0.0);
    psinv(threads, &g.r[1], &mut g.u[1], dim(1));
    // Up: prolongate, residual, smooth.
    for k in 2..lt {
        let (coarse, fine) = g.u.split_at_mut(k);
        let u = &mut fine[0];
        u.iter_mut().for_each(|e| *e = 0.0);
        interp(threads, &coarse[k - 1], dim(k - 1), u, dim(k));
        resid(threads, u, None, &mut g.r[k], dim(k));
        psinv(threads, &g.r[k], u, dim(k));
    }
    let (coarse, fine) = g.u.split_at_mut(lt);
    let u = &mut fine[0];
    interp(threads, &coarse[lt - 1], dim(lt - 1), u, dim(lt));
    resid(threads, u, Some(&g.v), &mut g.r[lt], dim(lt));
    psinv(threads, &g.r[lt], u, dim(lt));
}

/// Runs MG at `class` on `threads` threads (see the module's doc).
pub fn run(class: Class, threads: usize, clock: fn() -> u64) -> Report {
    let (nx, nit, reference) = params(class);
    let lt = nx.trailing_zeros() as usize;
    let d = dim(lt);
    let points = (nx * nx * nx) as f64;
    let mut g = Grids {
        lt,
        u: (0..=lt).map(|k| vec![0.0; if k == 0 { 0 } else { dim(k).m.pow(3) }]).collect(),
        r: (0..=lt).map(|k| vec![0.0; if k == 0 { 0 } else { dim(k).m.pow(3) }]).collect(),
        v: vec![0.0; d.m.pow(3)],
    };
    zran3(threads, &mut g.v, d);
    // One V-cycle untimed, as NPB does, then u and v afresh.
    resid(threads, &g.u[lt], Some(&g.v), &mut g.r[lt], d);
    mg3p(threads, &mut g);
    g.u[lt].iter_mut().for_each(|e| *e = 0.0);
    zran3(threads, &mut g.v, d);
    let start = clock();
    resid(threads, &g.u[lt], Some(&g.v), &mut g.r[lt], d);
    for _ in 0..nit {
        mg3p(threads, &mut g);
        let (u, r) = (&g.u[lt], &mut g.r[lt]);
        resid(threads, u, Some(&g.v), r, d);
    }
    let (rnm2, rnmu) = norm2u3(threads, &g.r[lt], d, points);
    let ticks = clock().wrapping_sub(start);
    let err = relative_error(rnm2, reference);
    Report {
        kernel: Kernel::Mg,
        class,
        threads,
        ticks,
        ops: 58.0 * nit as f64 * points,
        verified: err <= EPSILON,
        detail: format!(
            "L2 norm {rnm2:.13e} (NPB {reference:.13e}, rel. error {err:.1e}); max |r| {rnmu:.6e}"
        ),
    }
}
