//! npb (issue 24 item 7; Multikernel §5.3, Figure 9): the NAS Parallel Benchmarks' kernels
//! (`crates/npb`) on McRT's pinned processors, a team of `--threads`, hosted.
//!
//! `bench-host npb [--kernel ep|is|cg|mg|ft|all] [--class S|W|A] [--threads T]
//! [--trials K] [--impl mcrt|rayon|both]`. Records (experiment `npb`, `config` =
//! kernel.class, e.g. `cg.S`, and `impl`): the seconds of NPB's timed section (`seconds`,
//! the median of K runs), NPB's Mop/s for it (`mops`) and NPB's verification
//! (`verified`, 1 or 0; every run must verify); with both, `speed_vs_rayon` (rayon's
//! seconds over McRT's). On stderr, NPB's verdict line for each kernel (`Verification =
//! SUCCESSFUL`) and what was compared.
//!
//! The rayon peer runs the same kernels, their loops split the same way (`npb::par`'s
//! static shares; IS's three phases as three loops), on a rayon pool of T threads
//! (`npb::par::with_team`): the runtime under the same code is the difference.

use npb::hosted::{self, Placement};
use npb::{Class, Kernel};
use record::{Cores, Fixed2, Record};

/// The experiments, by name.
pub const EXPERIMENTS: [&str; 1] = ["npb"];

/// The npb options (threads and trials are the metis experiments' `--threads`, `--trials`).
#[derive(Clone, Debug)]
pub struct Options {
    /// The kernels.
    pub kernels: Vec<Kernel>,
    /// The class.
    pub class: Class,
    /// The runtimes: McRT, rayon, or both (McRT first).
    pub impls: Vec<Impl>,
}

/// Which runtime runs the loops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Impl {
    /// McRT's pinned processors (`mcrt::omp`).
    Mcrt,
    /// A rayon pool (`npb::par::with_team`).
    Rayon,
}

impl Impl {
    fn name(self) -> &'static str {
        match self {
            Impl::Mcrt => "mcrt",
            Impl::Rayon => "rayon",
        }
    }
}

impl Options {
    /// Every kernel, class S, McRT only.
    pub fn new() -> Options {
        Options { kernels: Kernel::ALL.to_vec(), class: Class::S, impls: vec![Impl::Mcrt] }
    }

    /// Takes option `name` with `value`; false if `name` is not one of these options.
    pub fn set(&mut self, name: &str, value: &str) -> Result<bool, String> {
        match name {
            "--kernel" => {
                self.kernels = if value == "all" {
                    Kernel::ALL.to_vec()
                } else {
                    vec![Kernel::parse(value)
                        .ok_or(format!("--kernel: ep, is, cg, mg, ft or all, not {value:?}"))?]
                }
            }
            "--impl" => {
                self.impls = match value {
                    "mcrt" => vec![Impl::Mcrt],
                    "rayon" => vec![Impl::Rayon],
                    "both" => vec![Impl::Mcrt, Impl::Rayon],
                    _ => return Err(format!("--impl: mcrt, rayon or both, not {value:?}")),
                }
            }
            "--class" => {
                self.class =
                    Class::parse(value).ok_or(format!("--class: S, W or A, not {value:?}"))?
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

impl Default for Options {
    fn default() -> Self {
        Options::new()
    }
}

/// Runs the chosen kernels, `trials` times each, on `threads` pinned McRT processors;
/// the RESULT lines, or why they could not run (a run that fails verification is an error
/// after its lines are printed: its `verified` record is 0).
pub fn run(o: &Options, threads: usize, trials: usize) -> Result<Vec<String>, String> {
    if threads == 0 || threads > npb::MAX_THREADS {
        return Err(format!("npb: --threads must be 1..={}", npb::MAX_THREADS));
    }
    let mut lines = Vec::new();
    let mut failed = Vec::new();
    let pool = if o.impls.contains(&Impl::Rayon) {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build();
        Some(&*Box::leak(Box::new(RayonTeam(pool.map_err(|e| format!("npb: rayon: {e}"))?))))
    } else {
        None
    };
    for &kernel in &o.kernels {
        let class = o.class;
        let config = format!("{}.{}", kernel.name(), class.letter());
        let mut seconds_of = Vec::new();
        for &imp in &o.impls {
            let mut runs = Vec::new();
            for _ in 0..trials.max(1) {
                let r = match (imp, pool) {
                    (Impl::Rayon, Some(team)) => npb::par::with_team(team, || {
                        npb::run(kernel, class, threads, hosted::clock)
                    }),
                    _ => hosted::run(threads, Placement::Pinned, move || {
                        npb::run(kernel, class, threads, hosted::clock)
                    })
                    .map_err(|e| format!("npb: {e}"))?,
                }
                .map_err(|e| format!("npb: {e}"))?;
                runs.push(r);
            }
            runs.sort_by_key(|r| r.ticks);
            let verified = runs.iter().all(|r| r.verified);
            let r = &runs[runs.len() / 2];
            let seconds = r.ticks as f64 / 1e9;
            seconds_of.push(seconds);
            let extra = format!(
                ",\"impl\":\"{}\",\"threads\":{threads},\"trials\":{}",
                imp.name(),
                runs.len()
            );
            let rec = |metric: &'static str, unit: &'static str| {
                Record::new("npb", "host", Cores::Active(threads), metric, unit)
                    .config(&config)
                    .extra(&extra)
            };
            lines.push(rec("seconds", "s").line(Fixed2(seconds)).to_string());
            lines.push(rec("mops", "Mop/s").line(Fixed2(r.mops(seconds))).to_string());
            lines.push(rec("verified", "bool").line(u8::from(verified)).to_string());
            eprintln!(
                " {} Benchmark Completed ({}). Class = {}, threads = {threads}, time = {seconds:.3} s, Mop/s = {:.2}",
                kernel.name().to_ascii_uppercase(),
                imp.name(),
                class.letter(),
                r.mops(seconds)
            );
            eprintln!(" Verification = {}", if verified { "SUCCESSFUL" } else { "UNSUCCESSFUL" });
            for part in r.detail.split("; ") {
                eprintln!("   {part}");
            }
            if !verified {
                failed.push(format!("{config} ({})", imp.name()));
            }
        }
        if let [mcrt, rayon] = seconds_of[..] {
            let extra = format!(",\"threads\":{threads}");
            let speed = Record::new("npb", "host", Cores::Active(threads), "speed_vs_rayon", "x")
                .config(&config)
                .extra(&extra);
            lines.push(speed.line(Fixed2(rayon / mcrt.max(1e-9))).to_string());
            eprintln!(" {config}: McRT at {:.2}x rayon's speed", rayon / mcrt.max(1e-9));
        }
    }
    if failed.is_empty() {
        Ok(lines)
    } else {
        lines.iter().for_each(|l| println!("{l}"));
        Err(format!("npb: verification failed: {}", failed.join(", ")))
    }
}

/// A rayon pool as a team for `npb::par`: a loop's parts are rayon tasks.
struct RayonTeam(rayon::ThreadPool);

impl npb::par::Team for RayonTeam {
    fn run(&self, parts: usize, part: &(dyn Fn(usize) + Sync)) {
        use rayon::prelude::*;
        self.0.install(|| (0..parts).into_par_iter().for_each(part));
    }
}
