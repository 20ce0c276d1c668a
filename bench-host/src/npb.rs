//! npb (issue 24 item 7; Multikernel §5.3, Figure 9): the NAS Parallel Benchmarks' kernels
//! (`crates/npb`) on McRT's pinned processors, a team of `--threads`, hosted.
//!
//! `bench-host npb [--kernel ep|is|cg|mg|ft|all] [--class S|W|A] [--threads T]
//! [--trials K]`. Records (experiment `npb`, `config` = kernel.class, e.g. `cg.S`): the
//! seconds of NPB's timed section (`seconds`, the median of K runs), NPB's Mop/s for it
//! (`mops`) and NPB's verification (`verified`, 1 or 0; every run must verify). On stderr,
//! NPB's verdict line for each kernel (`Verification = SUCCESSFUL`) and what was compared.

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
}

impl Options {
    /// Every kernel, class S.
    pub fn new() -> Options {
        Options { kernels: Kernel::ALL.to_vec(), class: Class::S }
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
    for &kernel in &o.kernels {
        let class = o.class;
        let mut runs = Vec::new();
        for _ in 0..trials.max(1) {
            let r = hosted::run(threads, Placement::Pinned, move || {
                npb::run(kernel, class, threads, hosted::clock)
            })
            .map_err(|e| format!("npb: {e}"))?
            .map_err(|e| format!("npb: {e}"))?;
            runs.push(r);
        }
        runs.sort_by_key(|r| r.ticks);
        let verified = runs.iter().all(|r| r.verified);
        let r = &runs[runs.len() / 2];
        let seconds = r.ticks as f64 / 1e9;
        let config = format!("{}.{}", kernel.name(), class.letter());
        let extra = format!(",\"threads\":{threads},\"trials\":{}", runs.len());
        let rec = |metric: &'static str, unit: &'static str| {
            Record::new("npb", "host", Cores::Active(threads), metric, unit)
                .config(&config)
                .extra(&extra)
        };
        lines.push(rec("seconds", "s").line(Fixed2(seconds)).to_string());
        lines.push(rec("mops", "Mop/s").line(Fixed2(r.mops(seconds))).to_string());
        lines.push(rec("verified", "bool").line(u8::from(verified)).to_string());
        eprintln!(
            " {} Benchmark Completed. Class = {}, threads = {threads}, time = {seconds:.3} s, Mop/s = {:.2}",
            kernel.name().to_ascii_uppercase(),
            class.letter(),
            r.mops(seconds)
        );
        eprintln!(" Verification = {}", if verified { "SUCCESSFUL" } else { "UNSUCCESSFUL" });
        for part in r.detail.split("; ") {
            eprintln!("   {part}");
        }
        if !verified {
            failed.push(config.clone());
        }
    }
    if failed.is_empty() {
        Ok(lines)
    } else {
        lines.iter().for_each(|l| println!("{l}"));
        Err(format!("npb: verification failed: {}", failed.join(", ")))
    }
}
