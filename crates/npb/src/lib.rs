//! The NAS Parallel Benchmarks' kernels EP, IS, CG, MG and FT (NPB 3.x, the OpenMP
//! versions of NAS-99-011, reference [36] of the Multikernel paper), written again in Rust
//! on McRT's OpenMP-like adaptor (`mcrt::omp`, McRT §2.5), `no_std` + `alloc`, so the same
//! code runs hosted on Linux and as an Atoll program: the compute-bound suite of the
//! Multikernel paper's §5.3 and Figure 9 ("NAS OpenMP benchmark suite … compute time in
//! cycles on Barrelfish and Linux").
//!
//! Each kernel follows NPB's algorithm and verification exactly: the problem sizes of
//! classes S, W and A, the random numbers of `randlc` ([`rand`]), NPB's verification
//! constants and tolerances, and NPB's operation counts for Mop/s. See `docs/npb.md`.
//!
//! | kernel | module | verified against |
//! | --- | --- | --- |
//! | EP, embarrassingly parallel Gaussian pairs | [`ep`] | the sums of the pairs, relative 1e-8 |
//! | IS, bucketed integer sort | [`is`] | 5 ranks in each of 10 iterations, and the full sort |
//! | CG, conjugate gradient, inverse power method | [`cg`] | zeta, absolute 1e-10 |
//! | MG, V-cycle multigrid | [`mg`] | the residual's L2 norm, relative 1e-8 |
//! | FT, 3-D FFT of a diffusion equation | [`ft`] | each iteration's checksum, relative 1e-12 |
#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

pub mod cg;
pub mod ep;
pub mod ft;
#[cfg(feature = "std")]
pub mod hosted;
pub mod is;
pub mod mg;
pub mod par;
pub mod rand;

use alloc::string::String;

/// The most threads a run takes (a team's reduction slots are per thread).
pub const MAX_THREADS: usize = 256;

/// One of the five kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// Embarrassingly parallel: Gaussian deviates by the polar method.
    Ep,
    /// Integer sort: bucketed ranking of keys.
    Is,
    /// Conjugate gradient: the smallest eigenvalue of a sparse matrix.
    Cg,
    /// Multigrid: a V-cycle solver of a 3-D Poisson equation.
    Mg,
    /// Fourier transform: a 3-D diffusion equation solved by FFTs.
    Ft,
}

impl Kernel {
    /// Every kernel, in NPB's order of the paper's figure.
    pub const ALL: [Kernel; 5] = [Kernel::Ep, Kernel::Is, Kernel::Cg, Kernel::Mg, Kernel::Ft];

    /// The lower-case name (`ep` … `ft`).
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Ep => "ep",
            Kernel::Is => "is",
            Kernel::Cg => "cg",
            Kernel::Mg => "mg",
            Kernel::Ft => "ft",
        }
    }

    /// The kernel named `s` (either case).
    pub fn parse(s: &str) -> Option<Kernel> {
        Kernel::ALL.into_iter().find(|k| k.name().eq_ignore_ascii_case(s))
    }
}

/// An NPB problem class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Sample: seconds on a workstation.
    S,
    /// Workstation.
    W,
    /// The smallest of the full classes.
    A,
}

impl Class {
    /// Every class this crate has, smallest first.
    pub const ALL: [Class; 3] = [Class::S, Class::W, Class::A];

    /// NPB's letter.
    pub fn letter(self) -> char {
        match self {
            Class::S => 'S',
            Class::W => 'W',
            Class::A => 'A',
        }
    }

    /// The class lettered `s` (either case).
    pub fn parse(s: &str) -> Option<Class> {
        Class::ALL.into_iter().find(|c| {
            let mut b = [0; 4];
            c.letter().encode_utf8(&mut b).eq_ignore_ascii_case(s)
        })
    }
}

/// Why a run did not start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// Called outside a McRT runtime.
    NotInRuntime,
    /// Zero threads asked for.
    NoThreads,
    /// More threads than [`MAX_THREADS`].
    TooManyThreads {
        /// The number asked for.
        asked: usize,
    },
    /// McRT could not start (hosted runs).
    Runtime(mcrt::Error),
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::NotInRuntime => write!(f, "not on a McRT thread"),
            Error::NoThreads => write!(f, "zero threads"),
            Error::TooManyThreads { asked } => {
                write!(f, "{asked} threads (at most {MAX_THREADS})")
            }
            Error::Runtime(e) => write!(f, "McRT: {e:?}"),
        }
    }
}

/// A kernel's run: the timed section's length, NPB's operation count, and verification.
#[derive(Clone, Debug)]
pub struct Report {
    /// The kernel.
    pub kernel: Kernel,
    /// The class.
    pub class: Class,
    /// The team size asked for.
    pub threads: usize,
    /// The timed section (NPB's benchmark timer), in the caller's clock's ticks.
    pub ticks: u64,
    /// NPB's operation count of the timed section: Mop/s = `ops` / seconds / 10^6.
    pub ops: f64,
    /// Whether every verification value matched NPB's within NPB's tolerance.
    pub verified: bool,
    /// What was compared, for people (values and NPB's references).
    pub detail: String,
}

impl Report {
    /// NPB's Mop/s for the timed section taking `seconds`.
    pub fn mops(&self, seconds: f64) -> f64 {
        if seconds > 0.0 {
            self.ops / seconds / 1e6
        } else {
            0.0
        }
    }
}

/// Runs `kernel` at `class` on a team of `threads` McRT threads, timing NPB's benchmark
/// section with `clock` (any monotonic tick counter). Call it on a McRT thread.
pub fn run(
    kernel: Kernel,
    class: Class,
    threads: usize,
    clock: fn() -> u64,
) -> Result<Report, Error> {
    if threads == 0 {
        return Err(Error::NoThreads);
    }
    if threads > MAX_THREADS {
        return Err(Error::TooManyThreads { asked: threads });
    }
    if !mcrt::in_runtime() && par::team().is_none() {
        return Err(Error::NotInRuntime);
    }
    Ok(match kernel {
        Kernel::Ep => ep::run(class, threads, clock),
        Kernel::Is => is::run(class, threads, clock),
        Kernel::Cg => cg::run(class, threads, clock),
        Kernel::Mg => mg::run(class, threads, clock),
        Kernel::Ft => ft::run(class, threads, clock),
    })
}

/// Relative error of `value` against NPB's `reference`.
pub(crate) fn relative_error(value: f64, reference: f64) -> f64 {
    libm::fabs((value - reference) / reference)
}
