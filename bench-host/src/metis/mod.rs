//! metis_wri, metis_wc (issue 24, Corey §8.5.1), and metis_phoenix ([`phoenix`]): the
//! Metis library (`crates/metis`) on McRT's pinned processors against the rayon peer
//! ([`peer`]), the same input (Metis's `wrmem`, `--mb` MiB) and the same output, checked
//! by checksum, in one run.
//!
//! `bench-host metis_wri|metis_wc [--mb N | --file PATH] [--threads T]
//! [--impl metis|rayon|both] [--cell array|btree] [--trials K]` (`--file`: a file's bytes
//! instead of `wrmem`). Records: each phase's seconds and the total (rayon: the total),
//! words, `keys` (with the output's checksum), the first five keys with their counts, the
//! minor (soft) page faults of each phase (`getrusage`, the whole process), the peak
//! resident set so far, and `speed_vs_rayon` (rayon's seconds over Metis's: the goal is at
//! least 1). A summary with `N keys` goes to stderr.

pub mod peer;
pub mod phoenix;

use metis::apps::{wc::Wc, wri::Wri};
use metis::text::{self, Word};
use metis::{CellKind, Config, Edge, Layout, Phase};
use record::{Cores, Fixed2, Record};
use std::sync::{Arc, Mutex};

/// The experiments, by name.
pub const EXPERIMENTS: [&str; 3] = ["metis_wri", "metis_wc", "metis_phoenix"];

/// Which implementations run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Impls {
    /// Metis only.
    Metis,
    /// The rayon peer only.
    Rayon,
    /// Both, and their ratio (the default).
    Both,
}

/// The command-line options of the metis experiments.
#[derive(Clone, Debug)]
pub struct Options {
    /// A file to read instead of generating the input.
    pub file: Option<String>,
    /// Input size, MiB.
    pub mb: usize,
    /// Workers (Metis: McRT processors and threads; rayon: the pool's threads).
    pub threads: usize,
    /// Who runs.
    pub impls: Impls,
    /// Metis's cell structure.
    pub cell: CellKind,
    /// Runs of each; the median total is reported (with that run's phases).
    pub trials: usize,
}

impl Options {
    /// The defaults: 64 MiB (1 with `--quick`), one thread per CPU, both, sorted arrays,
    /// one trial.
    pub fn new(quick: bool) -> Options {
        Options {
            file: None,
            mb: if quick { 1 } else { 64 },
            threads: super::mcrt::cpus(),
            impls: Impls::Both,
            cell: CellKind::SortedArray,
            trials: 1,
        }
    }

    /// Takes option `name` with `value`; false if `name` is not one of these options.
    pub fn set(&mut self, name: &str, value: &str) -> Result<bool, String> {
        let number =
            |v: &str| v.parse::<usize>().map_err(|_| format!("{name}: not a number: {v:?}"));
        match name {
            "--mb" => self.mb = number(value)?,
            "--file" => self.file = Some(value.to_string()),
            "--threads" => self.threads = number(value)?,
            "--trials" => self.trials = number(value)?.max(1),
            "--cell" => {
                self.cell = CellKind::parse(value)
                    .ok_or(format!("--cell: array or btree, not {value:?}"))?
            }
            "--impl" => {
                self.impls = match value {
                    "metis" => Impls::Metis,
                    "rayon" => Impls::Rayon,
                    "both" => Impls::Both,
                    _ => return Err(format!("--impl: metis, rayon or both, not {value:?}")),
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// What one run of one implementation gave.
#[derive(Clone, Debug, Default)]
struct Run {
    /// Seconds per phase (Metis) and total.
    phases: [f64; 4],
    total: f64,
    words: u64,
    keys: usize,
    first: Vec<(String, u64)>,
    checksum: u64,
    faults: [u64; 4],
    stats: Option<metis::Stats>,
}

/// The minor page faults of the whole process so far (`getrusage`).
fn minor_faults() -> u64 {
    // SAFETY: a zeroed rusage is valid; getrusage writes only into it.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_SELF.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    u.ru_minflt as u64
}

/// The machine's memory, bytes (`sysconf`; unbounded if unknown).
fn physical_memory() -> usize {
    // SAFETY: sysconf reads system constants; no memory is passed.
    let (pages, size) =
        unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
    if pages <= 0 || size <= 0 {
        return usize::MAX;
    }
    (pages as usize).saturating_mul(size as usize)
}

/// The peak resident set of the process so far, MiB.
fn peak_rss_mb() -> f64 {
    // SAFETY: as in `minor_faults`.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    u.ru_maxrss as f64 / 1024.0
}

/// The hosted `shared` layout (Corey Figure 4(a)), counting each phase's soft faults.
#[derive(Default)]
struct FaultCount {
    at_begin: Mutex<u64>,
    per_phase: Mutex<[u64; 4]>,
}

impl Layout for FaultCount {
    fn phase(&self, phase: Phase, edge: Edge) {
        let now = minor_faults();
        match edge {
            Edge::Begin => *self.at_begin.lock().unwrap_or_else(|e| e.into_inner()) = now,
            Edge::End => {
                let begin = *self.at_begin.lock().unwrap_or_else(|e| e.into_inner());
                self.per_phase.lock().unwrap_or_else(|e| e.into_inner())[phase as usize] =
                    now - begin;
            }
        }
    }
}

/// A key as record text: letters and digits kept, anything else `?` (records are not
/// escaped).
fn printable(key: &[u8]) -> String {
    key.iter().map(|&b| if b.is_ascii_alphanumeric() { b as char } else { '?' }).collect()
}

/// Words (the counts' sum), the first five keys with their counts, and the checksum of
/// `(key, count)` pairs.
fn summarise<'k>(
    pairs: impl Iterator<Item = (&'k [u8], u64)> + Clone,
) -> (u64, Vec<(String, u64)>, u64) {
    let words = pairs.clone().map(|p| p.1).sum();
    let first = pairs.clone().take(5).map(|(k, n)| (printable(k), n)).collect();
    (words, first, text::checksum(pairs))
}

/// One Metis run of `app` on McRT's pinned processors.
fn run_metis(app: &str, input: &Arc<Vec<u8>>, o: &Options) -> Result<Run, String> {
    let (input, app, o) = (input.clone(), app.to_string(), o.clone());
    let run = metis::hosted::run(o.threads, metis::hosted::Placement::Pinned, move || {
        let config =
            Config { cell: o.cell, clock: Some(metis::hosted::clock), ..Config::new(o.threads) };
        let layout = FaultCount::default();
        let (stats, words, first, checksum) = if app == "metis_wri" {
            let out = metis::run_with(&Wri { input: &input }, &config, &layout)
                .map_err(|e| e.to_string())?;
            let counts =
                out.pairs.iter().map(|(k, v): &(Word, Vec<usize>)| (k.bytes(), v.len() as u64));
            let (w, f, _) = summarise(counts);
            (out.stats, w, f, metis::apps::wri::checksum(&out.pairs))
        } else {
            let out = metis::run_with(&Wc { input: &input }, &config, &layout)
                .map_err(|e| e.to_string())?;
            let (w, f, c) = summarise(out.pairs.iter().map(|(k, n)| (k.bytes(), *n)));
            (out.stats, w, f, c)
        };
        let faults = *layout.per_phase.lock().unwrap_or_else(|e| e.into_inner());
        Ok::<Run, String>(Run {
            phases: Phase::ALL.map(|p| stats.ns(p) as f64 / 1e9),
            total: stats.total_ns as f64 / 1e9,
            words,
            keys: stats.keys,
            first,
            checksum,
            faults,
            stats: Some(stats),
        })
    });
    run.map_err(|e| e.to_string())?
}

/// One rayon run of `app` on a pool of `threads`.
fn run_rayon(app: &str, input: &[u8], threads: usize) -> Result<Run, String> {
    let pool =
        rayon::ThreadPoolBuilder::new().num_threads(threads).build().map_err(|e| e.to_string())?;
    let start = std::time::Instant::now();
    if app == "metis_wri" {
        let out = pool.install(|| peer::wri(input, threads));
        let total = start.elapsed().as_secs_f64();
        let (words, first, _) = summarise(out.iter().map(|(k, v)| (&k[..], v.len() as u64)));
        let checksum = metis::apps::wri::checksum_of(out.iter().map(|(k, v)| (&k[..], &v[..])));
        Ok(Run { total, words, keys: out.len(), first, checksum, ..Run::default() })
    } else {
        let out = pool.install(|| peer::wc(input, threads));
        let total = start.elapsed().as_secs_f64();
        let (words, first, checksum) = summarise(out.iter().map(|(k, n)| (&k[..], *n)));
        Ok(Run { total, words, keys: out.len(), first, checksum, ..Run::default() })
    }
}

/// The median run by total time.
fn median_run(mut runs: Vec<Run>) -> Run {
    runs.sort_by(|a, b| a.total.total_cmp(&b.total));
    let mid = runs.len() / 2;
    runs.swap_remove(mid)
}

/// Runs experiment `app` (one of [`EXPERIMENTS`]) with `o`; its RESULT lines, or why
/// it could not run.
pub fn run(app: &str, o: &Options) -> Result<Vec<String>, String> {
    if app == "metis_phoenix" {
        return phoenix::run(o.threads, o.mb <= 1);
    }
    let input = match &o.file {
        None => {
            // An input larger than memory is refused before anything is allocated (`wri`
            // needs about three times the input besides).
            let bytes =
                o.mb.checked_mul(1 << 20).ok_or(format!("{app}: --mb {} is too large", o.mb))?;
            let memory = physical_memory();
            if bytes > memory {
                return Err(format!(
                    "{app}: an input of {} MiB is larger than memory ({} MiB)",
                    o.mb,
                    memory >> 20
                ));
            }
            text::wrmem(o.mb)
        }
        Some(path) => match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) => return Err(format!("{app}: cannot read {path}: {e}")),
        },
    };
    let mb = input.len() >> 20;
    let input = Arc::new(input);
    let mut lines = Vec::new();
    let mut totals = [f64::NAN; 2];
    let source = if o.file.is_some() { "file" } else { "wrmem" };
    let extra_of = |imp: &str| {
        let cell = o.cell.name();
        format!(",\"impl\":\"{imp}\",\"mb\":{mb},\"input\":\"{source}\",\"cell\":\"{cell}\"")
    };
    for (k, imp) in ["metis", "rayon"].into_iter().enumerate() {
        let wanted = match o.impls {
            Impls::Both => true,
            Impls::Metis => imp == "metis",
            Impls::Rayon => imp == "rayon",
        };
        if !wanted {
            continue;
        }
        let runs = (0..o.trials)
            .map(|_| {
                if imp == "metis" {
                    run_metis(app, &input, o)
                } else {
                    run_rayon(app, &input, o.threads)
                }
            })
            .collect::<Result<Vec<Run>, String>>()
            .map_err(|e| format!("{app} {imp}: {e}"))?;
        let r = median_run(runs);
        let rss = peak_rss_mb();
        totals[k] = r.total;
        let extra = extra_of(imp);
        let config = (imp == "metis").then_some("shared");
        let rec = |metric: &'static str, unit: &'static str| {
            let mut rec = Record::new(app, "host", Cores::Active(o.threads), metric, unit);
            rec.config = config;
            rec
        };
        let mut push = |metric: &'static str, value: f64, unit: &'static str, more: &str| {
            let extra = format!("{extra}{more}");
            lines.push(rec(metric, unit).extra(&extra).line(Fixed2(value)).to_string());
        };
        if imp == "metis" {
            for (p, s) in Phase::ALL.iter().zip(r.phases) {
                push(["sample_s", "map_s", "reduce_s", "merge_s"][*p as usize], s, "s", "");
            }
            for (p, f) in Phase::ALL.iter().zip(r.faults) {
                push(
                    ["sample_faults", "map_faults", "reduce_faults", "merge_faults"][*p as usize],
                    f as f64,
                    "faults",
                    "",
                );
            }
            if let Some(s) = r.stats {
                push("reduce_tasks", s.reduce_tasks as f64, "tasks", "");
                push("predicted_keys", s.predicted_keys as f64, "keys", "");
            }
        }
        push("total_s", r.total, "s", "");
        push("words", r.words as f64, "words", "");
        push("keys", r.keys as f64, "keys", &format!(",\"checksum\":\"{:016x}\"", r.checksum));
        for (rank, (key, n)) in r.first.iter().enumerate() {
            push(
                "first_key_count",
                *n as f64,
                "values",
                &format!(",\"rank\":{},\"key\":\"{key}\"", rank + 1),
            );
        }
        push("peak_rss_mb", rss, "MiB", "");
        let phases = if imp == "metis" {
            let [s, m, red, mer] = r.phases;
            format!("sample {s:.3} s, map {m:.3} s, reduce {red:.3} s, merge {mer:.3} s, ")
        } else {
            String::new()
        };
        let first: Vec<String> = r.first.iter().map(|(k, n)| format!("{k} {n}")).collect();
        let (words, keys, first, sum) = (r.words, r.keys, first.join(", "), r.checksum);
        eprintln!(
            "{app} {imp} ({mb} MiB, {} threads): {phases}total {:.3} s; \
             {words} words, {keys} keys; first: {first}; checksum {sum:016x}",
            o.threads, r.total
        );
    }
    if o.impls == Impls::Both {
        let ratio = totals[1] / totals[0];
        let extra = extra_of("metis");
        let rec = Record::new(app, "host", Cores::Active(o.threads), "speed_vs_rayon", "x")
            .config("shared");
        lines.push(rec.extra(&extra).line(Fixed2(ratio)).to_string());
        eprintln!("{app}: metis at {ratio:.2}x rayon's speed ({} threads)", o.threads);
    }
    Ok(lines)
}
