//! CG, the conjugate gradient kernel (NPB 3.x OpenMP `cg.c`): the inverse power method
//! finds the smallest eigenvalue of a random sparse symmetric positive definite matrix
//! A. `makea` builds A as NPB does: the sum of n outer products of random sparse vectors
//! (`sprnvc`, `vecset`) with geometrically shrinking weights (condition number `RCOND`),
//! minus `SHIFT` on the diagonal, assembled by `sparse` into compressed rows. Each of the
//! NITER outer iterations solves A z = x by 25 steps of conjugate gradient (`conj_grad`,
//! its sparse matrix-vector product and dot products parallel over rows), then sets
//! zeta = SHIFT + 1/(x·z) and x = z/‖z‖.
//!
//! Verification: zeta after the last iteration against NPB's `zeta_verify_value`,
//! absolute error ≤ 1e-10. Mop/s: NPB's count, 2·NITER·NA·(3 + NZ + 25·(5 + NZ) + 3) with
//! NZ = NONZER·(NONZER + 1), per second.

use crate::par::{self, Rows};
use crate::rand::{randlc, A, SEED};
use crate::{Class, Kernel, Report};
use alloc::format;
use alloc::vec;
use alloc::vec::Vec;

/// NPB's condition number of A.
const RCOND: f64 = 0.1;
/// CG steps per outer iteration (`cgitmax`).
const CG_STEPS: usize = 25;
/// NPB's tolerance on zeta.
const EPSILON: f64 = 1e-10;

/// A class's NA, NONZER, NITER, SHIFT and NPB's zeta.
fn params(class: Class) -> (usize, usize, usize, f64, f64) {
    match class {
        Class::S => (1400, 7, 15, 10.0, 8.597_177_507_864_8),
        Class::W => (7000, 8, 15, 12.0, 10.362_595_087_124),
        Class::A => (14000, 11, 15, 20.0, 17.130_235_054_029),
    }
}

/// A in compressed rows, 0-based: row j's entries are `rowstr[j]..rowstr[j + 1]`.
pub struct Matrix {
    rowstr: Vec<usize>,
    colidx: Vec<usize>,
    a: Vec<f64>,
}

/// NPB's `sprnvc`: a random sparse vector of `nz` nonzeros (distinct positions in 1..=n)
/// into `v[1..]`, `iv[1..]`. `mark` is all zero on entry and on exit.
fn sprnvc(n: usize, nz: usize, v: &mut [f64], iv: &mut [usize], mark: &mut [bool], tran: &mut f64) {
    let mut nn1 = 1usize;
    loop {
        nn1 *= 2;
        if nn1 >= n {
            break;
        }
    }
    let mut nzv = 0;
    while nzv < nz {
        let vecelt = randlc(tran, A);
        let vecloc = randlc(tran, A);
        let i = (nn1 as f64 * vecloc) as usize + 1;
        if i > n || mark[i] {
            continue;
        }
        mark[i] = true;
        nzv += 1;
        v[nzv] = vecelt;
        iv[nzv] = i;
    }
    for &i in &iv[1..=nzv] {
        mark[i] = false;
    }
}

/// NPB's `vecset`: sets element `i` of the sparse vector to `val`, adding it if absent.
fn vecset(v: &mut [f64], iv: &mut [usize], nzv: &mut usize, i: usize, val: f64) {
    let mut set = false;
    for k in 1..=*nzv {
        if iv[k] == i {
            v[k] = val;
            set = true;
        }
    }
    if !set {
        *nzv += 1;
        v[*nzv] = val;
        iv[*nzv] = i;
    }
}

/// NPB's `makea` and `sparse` (1-based inside, as NPB's arrays; the result 0-based).
pub fn makea(n: usize, nonzer: usize, shift: f64, tran: &mut f64) -> Matrix {
    let nz = n * (nonzer + 1) * (nonzer + 1) + n * (nonzer + 2);
    let mut arow = vec![0usize; nz + 1];
    let mut acol = vec![0usize; nz + 1];
    let mut aelt = vec![0.0f64; nz + 1];
    let mut v = vec![0.0f64; n + 2];
    let mut iv = vec![0usize; n + 2];
    let mut mark = vec![false; n + 1];
    let mut size = 1.0;
    let ratio = libm::pow(RCOND, 1.0 / n as f64);
    let mut nnza = 0;
    for iouter in 1..=n {
        let mut nzv = nonzer;
        sprnvc(n, nzv, &mut v, &mut iv, &mut mark, tran);
        vecset(&mut v, &mut iv, &mut nzv, iouter, 0.5);
        for ivelt in 1..=nzv {
            let jcol = iv[ivelt];
            let scale = size * v[ivelt];
            for ivelt1 in 1..=nzv {
                nnza += 1;
                acol[nnza] = jcol;
                arow[nnza] = iv[ivelt1];
                aelt[nnza] = v[ivelt1] * scale;
            }
        }
        size *= ratio;
    }
    // The identity times RCOND, less SHIFT, bounds the smallest eigenvalue from below.
    for i in 1..=n {
        nnza += 1;
        acol[nnza] = i;
        arow[nnza] = i;
        aelt[nnza] = RCOND - shift;
    }
    // `sparse`: bucket the triples by row, then add duplicates within each row.
    let mut rowstr = vec![0usize; n + 2];
    for &r in &arow[1..=nnza] {
        rowstr[r + 1] += 1;
    }
    rowstr[1] = 1;
    for j in 2..=n + 1 {
        rowstr[j] += rowstr[j - 1];
    }
    let mut a = vec![0.0f64; nz + 1];
    let mut colidx = vec![0usize; nz + 1];
    for nza in 1..=nnza {
        let j = arow[nza];
        let k = rowstr[j];
        a[k] = aelt[nza];
        colidx[k] = acol[nza];
        rowstr[j] += 1;
    }
    for j in (1..=n).rev() {
        rowstr[j + 1] = rowstr[j];
    }
    rowstr[1] = 1;
    let x = &mut v;
    x.iter_mut().for_each(|e| *e = 0.0);
    let nzloc = &mut iv;
    let mut nza = 0;
    let mut jajp1 = rowstr[1];
    for j in 1..=n {
        let mut nzrow = 0;
        for k in jajp1..rowstr[j + 1] {
            let i = colidx[k];
            x[i] += a[k];
            if !mark[i] && x[i] != 0.0 {
                mark[i] = true;
                nzrow += 1;
                nzloc[nzrow] = i;
            }
        }
        for &i in &nzloc[1..=nzrow] {
            mark[i] = false;
            let xi = x[i];
            x[i] = 0.0;
            if xi != 0.0 {
                nza += 1;
                a[nza] = xi;
                colidx[nza] = i;
            }
        }
        jajp1 = rowstr[j + 1];
        rowstr[j + 1] = nza + rowstr[1];
    }
    Matrix {
        rowstr: rowstr[1..=n + 1].iter().map(|&s| s - 1).collect(),
        colidx: colidx[1..=nza].iter().map(|&c| c - 1).collect(),
        a: a[1..=nza].to_vec(),
    }
}

/// Row j of A times `p`.
fn row_times(m: &Matrix, j: usize, p: &[f64]) -> f64 {
    let mut sum = 0.0;
    for k in m.rowstr[j]..m.rowstr[j + 1] {
        sum += m.a[k] * p[m.colidx[k]];
    }
    sum
}

fn plus(a: f64, b: f64) -> f64 {
    a + b
}

/// The CG work vectors.
struct Vectors {
    x: Vec<f64>,
    z: Vec<f64>,
    p: Vec<f64>,
    q: Vec<f64>,
    r: Vec<f64>,
}

/// NPB's `conj_grad`: 25 CG steps toward A z = x; returns ‖x − A z‖.
fn conj_grad(threads: usize, m: &Matrix, w: &mut Vectors) -> f64 {
    let n = w.x.len();
    let x = &w.x;
    let mut rho = par::for_rows_reduce(
        threads,
        n,
        (Rows(&mut w.q, 1), Rows(&mut w.z, 1), Rows(&mut w.r, 1), Rows(&mut w.p, 1)),
        0.0,
        |rows, (Rows(q, _), Rows(z, _), Rows(r, _), Rows(p, _))| {
            let mut rho = 0.0;
            for (i, j) in rows.enumerate() {
                q[i] = 0.0;
                z[i] = 0.0;
                r[i] = x[j];
                p[i] = x[j];
                rho += x[j] * x[j];
            }
            rho
        },
        plus,
    );
    for _ in 0..CG_STEPS {
        let rho0 = rho;
        // q = A p, and d = p·q.
        let p = &w.p;
        let d = par::for_rows_reduce(
            threads,
            n,
            Rows(&mut w.q, 1),
            0.0,
            |rows, Rows(q, _)| {
                let mut d = 0.0;
                for (i, j) in rows.enumerate() {
                    q[i] = row_times(m, j, p);
                    d += p[j] * q[i];
                }
                d
            },
            plus,
        );
        let alpha = rho0 / d;
        // z = z + alpha p, r = r − alpha q, and rho = r·r.
        let q = &w.q;
        rho = par::for_rows_reduce(
            threads,
            n,
            (Rows(&mut w.z, 1), Rows(&mut w.r, 1)),
            0.0,
            |rows, (Rows(z, _), Rows(r, _))| {
                let mut rho = 0.0;
                for (i, j) in rows.enumerate() {
                    z[i] += alpha * p[j];
                    r[i] -= alpha * q[j];
                    rho += r[i] * r[i];
                }
                rho
            },
            plus,
        );
        let beta = rho / rho0;
        // p = r + beta p.
        let r = &w.r;
        par::for_rows(threads, n, Rows(&mut w.p, 1), |rows, Rows(p, _)| {
            for (i, j) in rows.enumerate() {
                p[i] = r[j] + beta * p[i];
            }
        });
    }
    // ‖x − A z‖, with A z into r.
    let z = &w.z;
    let sum = par::for_rows_reduce(
        threads,
        n,
        Rows(&mut w.r, 1),
        0.0,
        |rows, Rows(r, _)| {
            let mut sum = 0.0;
            for (i, j) in rows.enumerate() {
                r[i] = row_times(m, j, z);
                let d = x[j] - r[i];
                sum += d * d;
            }
            sum
        },
        plus,
    );
    libm::sqrt(sum)
}

/// One outer iteration: CG, then zeta = shift + 1/(x·z) and x = z/‖z‖. Returns (zeta, ‖r‖).
fn power_step(threads: usize, m: &Matrix, w: &mut Vectors, shift: f64) -> (f64, f64) {
    let rnorm = conj_grad(threads, m, w);
    let (x, z) = (&w.x, &w.z);
    let (xz, zz) = par::reduce(
        threads,
        z.len(),
        (0.0, 0.0),
        |rows| {
            let (mut xz, mut zz) = (0.0, 0.0);
            for j in rows {
                xz += x[j] * z[j];
                zz += z[j] * z[j];
            }
            (xz, zz)
        },
        |a, b| (a.0 + b.0, a.1 + b.1),
    );
    let scale = 1.0 / libm::sqrt(zz);
    par::for_rows(threads, z.len(), Rows(&mut w.x, 1), |rows, Rows(x, _)| {
        for (i, j) in rows.enumerate() {
            x[i] = scale * z[j];
        }
    });
    (shift + 1.0 / xz, rnorm)
}

/// Runs CG at `class` on `threads` threads (see the module's doc).
pub fn run(class: Class, threads: usize, clock: fn() -> u64) -> Report {
    let (na, nonzer, niter, shift, zeta_ref) = params(class);
    let mut tran = SEED;
    randlc(&mut tran, A);
    let m = makea(na, nonzer, shift, &mut tran);
    let mut w = Vectors {
        x: vec![1.0; na],
        z: vec![0.0; na],
        p: vec![0.0; na],
        q: vec![0.0; na],
        r: vec![0.0; na],
    };
    // One iteration untimed, as NPB does, then x back to ones.
    power_step(threads, &m, &mut w, shift);
    w.x.iter_mut().for_each(|e| *e = 1.0);
    let start = clock();
    let (mut zeta, mut rnorm) = (0.0, 0.0);
    for _ in 0..niter {
        (zeta, rnorm) = power_step(threads, &m, &mut w, shift);
    }
    let ticks = clock().wrapping_sub(start);
    let err = libm::fabs(zeta - zeta_ref);
    let nz = (nonzer * (nonzer + 1)) as f64;
    Report {
        kernel: Kernel::Cg,
        class,
        threads,
        ticks,
        ops: (2 * niter * na) as f64 * (3.0 + nz + 25.0 * (5.0 + nz) + 3.0),
        verified: err <= EPSILON,
        detail: format!(
            "zeta {zeta:.13} (NPB {zeta_ref:.13}, error {err:.1e}); last ||r|| {rnorm:.14e}; {} nonzeros",
            m.a.len()
        ),
    }
}
