//! The Phoenix applications on Metis (issue 24: histogram, linear regression, string
//! match, matrix multiply, k-means; `crates/metis/src/apps`), written once for Atoll's
//! `run metis phoenix` and the guest's `atoll-bench-linux metis_phoenix`: each one's TSC
//! cycles (k-means: all its iterations) and a line about its result, in the shared
//! layout (k-means runs its own jobs).

use crate::result::{line, Fixed2};
use crate::Platform;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use metis::apps::{hist, kmeans, linreg, matmul, strmatch};
use metis::text::{self, Word};
use metis::Config;

/// The applications, in the order they run.
pub const APPS: [&str; 5] = ["hist", "linreg", "strmatch", "matmul", "kmeans"];

/// What one application gave: its name, its cycles and a note on its result.
pub type Outcome = (&'static str, u64, String);

/// The TSC.
fn tsc() -> u64 {
    // SAFETY: reads the time-stamp counter, which user mode may on both systems.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Runs every application on a McRT runtime of `threads` processors over `host`, with
/// inputs `scale` times the smallest (1: 30,000 pixels and points, 1 MiB of text, a 40 ×
/// 40 matrix, 5,000 k-means points; at most 64). Call it outside a McRT runtime.
pub fn run_apps(
    host: &dyn mcrt::Host,
    threads: usize,
    scale: usize,
) -> Result<Vec<Outcome>, String> {
    let s = scale.clamp(1, 64);
    let config = Config { clock: Some(tsc), ..Config::new(threads) };
    config.check().map_err(|e| format!("{e}"))?;
    let runtime = mcrt::Config::new(mcrt::Policy::Stealing, threads);
    let done = mcrt::run(runtime, host, move || {
        let err = |e: metis::Error| format!("{e}");
        let mut out: Vec<Outcome> = Vec::new();

        let px = hist::image(30_000 * s, 1);
        let r = metis::run(&hist::Hist { pixels: &px }, &config).map_err(err)?;
        let sum: u64 = r.pairs.iter().map(|(_, n)| n).sum();
        out.push(("hist", r.stats.total_ns, format!("{} values, {sum} counted", r.pairs.len())));

        let n = 30_000 * s;
        let pts = linreg::points(n, 2);
        let r = metis::run(&linreg::LinReg { points: &pts }, &config).map_err(err)?;
        let mut sums = [0u64; 5];
        for (k, v) in &r.pairs {
            sums[*k as usize] = *v;
        }
        let (a, b) = linreg::fit(&sums, n);
        out.push(("linreg", r.stats.total_ns, format!("y = {a:.3} + {b:.3} x")));

        let input = text::wrmem(s);
        let keys: Vec<Word> =
            [&b"ABC"[..], b"QRS", b"XYZ", b"NOT"].into_iter().map(Word::new).collect();
        let job = strmatch::StrMatch { input: &input, keys };
        let r = metis::run(&job, &config).map_err(err)?;
        let found: Vec<u64> = r.pairs.iter().map(|(_, n)| *n).collect();
        out.push(("strmatch", r.stats.total_ns, format!("{} keys found {found:?}", found.len())));

        let side = 40 * s.min(10);
        let (a, b) = (matmul::matrix(side, 3), matmul::matrix(side, 4));
        let r = metis::run(&matmul::MatMul { n: side, a: &a, b: &b }, &config).map_err(err)?;
        let trace: i64 = r.pairs.iter().map(|(i, row)| row[*i as usize]).sum();
        out.push(("matmul", r.stats.total_ns, format!("{side}x{side}, trace {trace}")));

        let kp = kmeans::points(5_000 * s, 5);
        let start = tsc();
        let (means, iterations) = kmeans::kmeans(&kp, 16, 30, &config).map_err(err)?;
        let note = format!("{} means, {iterations} iterations", means.len());
        out.push(("kmeans", tsc() - start, note));
        Ok::<Vec<Outcome>, String>(out)
    });
    done.map_err(|e| format!("mcrt: {e:?}"))?
}

/// The `RESULT` lines: each application's cycles (`config` the application).
pub fn lines<P: Platform + ?Sized>(p: &P, threads: usize, outcomes: &[Outcome]) -> Vec<String> {
    let sys = p.system();
    let mut out = Vec::new();
    for (app, cycles, _) in outcomes {
        let extra = format!(",\"config\":\"{app}\"");
        let m = Fixed2(*cycles as f64 / 1e6);
        out.push(line(sys, "metis_phoenix", threads, "total_mcycles", m, "Mcycles", &extra));
    }
    out
}
