//! Metis MapReduce (issue 24; Corey §6.1, §8.5.1): `wri` (the inverted index) and `wc`
//! (word count) over `crates/metis` on McRT, written once: Atoll's `run metis` and the
//! Linux guest's `atoll-bench-linux metis_wri|metis_wc` run this code on their own McRT
//! host. Each run reports the TSC cycles and the soft page faults (of the whole program:
//! [`Platform::process_faults`]) of each phase, the keys and the output's checksum.
//!
//! The memory layout is the caller's ([`metis::Layout`], Corey Figure 4): threads on Linux
//! and Atoll's `shared` share one address range; Atoll's `corey` points each worker's
//! allocations at its core's arena (`libatoll::arena`) in the phases whose output other
//! cores read. The checksum does not depend on the layout, the cores or the system, and
//! equals the sequential reference's ([`reference_checksum`], a `BTreeMap`).

use crate::result::{line, Fixed2};
use crate::Platform;
use alloc::format;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};
use metis::apps::{wc::Wc, wri::Wri};
use metis::text::{self, Word};
use metis::{Config, Edge, Layout, Phase};

/// The experiments, by name.
pub const EXPERIMENTS: [&str; 2] = ["metis_wri", "metis_wc"];
/// The default input, MiB of `wrmem` (small: a run takes seconds under TCG).
pub const DEFAULT_MB: usize = 2;
/// The largest input, MiB (64 GiB; memory refuses far less on most machines).
pub const MAX_MB: usize = 65536;

/// Which job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum App {
    /// The inverted index: each word with its positions.
    Wri,
    /// Word count, sorted by count (descending), then word.
    Wc,
}

impl App {
    /// `wri` or `wc` (also as `metis_wri`, `metis_wc`).
    pub fn parse(name: &str) -> Option<App> {
        match name {
            "wri" | "metis_wri" => Some(App::Wri),
            "wc" | "metis_wc" => Some(App::Wc),
            _ => None,
        }
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            App::Wri => "wri",
            App::Wc => "wc",
        }
    }

    /// Its experiment's name in result lines.
    pub fn experiment(self) -> &'static str {
        match self {
            App::Wri => "metis_wri",
            App::Wc => "metis_wc",
        }
    }
}

/// What one run gave.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// The engine's counts and the cycles of each phase (its clock is the TSC).
    pub stats: metis::Stats,
    /// Soft page faults of each phase, in [`Phase::ALL`] order (the whole program's).
    pub faults: [u64; 4],
    /// Words in the input (the counts' sum).
    pub words: u64,
    /// The first five keys of the output, with their counts.
    pub first: Vec<(String, u64)>,
    /// The output's checksum (`metis::apps::wri::checksum`, `metis::apps::wc::checksum`).
    pub checksum: u64,
}

/// The TSC, the engine's clock here: both systems count the same cycles.
fn tsc() -> u64 {
    // SAFETY: reads the time-stamp counter, which user mode may on both systems.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// A layout that counts each phase's soft faults around another (the hook's `phase` calls
/// bracket each phase on the coordinating thread).
struct Counted {
    inner: Arc<dyn Layout + Send>,
    faults: fn() -> u64,
    at_begin: AtomicU64,
    per_phase: [AtomicU64; 4],
}

impl Layout for Counted {
    fn phase(&self, phase: Phase, edge: Edge) {
        self.inner.phase(phase, edge);
        let now = (self.faults)();
        match edge {
            Edge::Begin => self.at_begin.store(now, Ordering::Relaxed),
            Edge::End => {
                let taken = now.saturating_sub(self.at_begin.load(Ordering::Relaxed));
                self.per_phase[phase as usize].store(taken, Ordering::Relaxed);
            }
        }
    }

    fn worker(&self, phase: Phase, worker: usize, edge: Edge) {
        self.inner.worker(phase, worker, edge);
    }
}

/// Longest key shown, in characters (keys may be 1024 bytes; console lines are short).
const SHOWN_KEY: usize = 16;

/// A key as text: letters and digits kept, anything else `?`, at most [`SHOWN_KEY`].
fn printable(key: &[u8]) -> String {
    let shown = key.iter().take(SHOWN_KEY);
    shown.map(|&b| if b.is_ascii_alphanumeric() { b as char } else { '?' }).collect()
}

/// Runs `app` over `input` on a McRT runtime of `threads` processors (stealing) over
/// `host`, one worker each, with `layout`; `faults` reads the program's soft faults.
/// Call it outside a McRT runtime.
pub fn run_job(
    host: &dyn mcrt::Host,
    app: App,
    input: Arc<Vec<u8>>,
    threads: usize,
    layout: Arc<dyn Layout + Send>,
    faults: fn() -> u64,
) -> Result<Report, String> {
    let config = Config { clock: Some(tsc), ..Config::new(threads) };
    config.check().map_err(|e| format!("{e}"))?;
    let runtime = mcrt::Config::new(mcrt::Policy::Stealing, threads);
    let counted = Counted {
        inner: layout,
        faults,
        at_begin: AtomicU64::new(0),
        per_phase: [const { AtomicU64::new(0) }; 4],
    };
    let done = mcrt::run(runtime, host, move || {
        let mut report = Report::default();
        let counts: Vec<(String, u64)>;
        match app {
            App::Wri => {
                let out = metis::run_with(&Wri { input: &input }, &config, &counted)
                    .map_err(|e| format!("{e}"))?;
                report.words = out.pairs.iter().map(|(_, v)| v.len() as u64).sum();
                counts = first_five(out.pairs.iter().map(|(k, v)| (k, v.len() as u64)));
                report.checksum = metis::apps::wri::checksum(&out.pairs);
                report.stats = out.stats;
            }
            App::Wc => {
                let out = metis::run_with(&Wc { input: &input }, &config, &counted)
                    .map_err(|e| format!("{e}"))?;
                report.words = out.pairs.iter().map(|(_, n)| n).sum();
                counts = first_five(out.pairs.iter().map(|(k, n)| (k, *n)));
                report.checksum = metis::apps::wc::checksum(&out.pairs);
                report.stats = out.stats;
            }
        }
        report.first = counts;
        report.faults = counted.per_phase.each_ref().map(|f| f.load(Ordering::Relaxed));
        Ok::<Report, String>(report)
    });
    done.map_err(|e| format!("mcrt: {e:?}"))?
}

/// The first five `(key, count)` pairs, as text.
fn first_five<'a, 'k: 'a>(pairs: impl Iterator<Item = (&'a Word<'k>, u64)>) -> Vec<(String, u64)> {
    pairs.take(5).map(|(k, n)| (printable(k.bytes()), n)).collect()
}

/// The sequential reference (a `BTreeMap` of each word's positions, by the rules of
/// `metis::text`: whitespace bytes, upper-cased keys of at most `MAX_KEY` bytes), and the
/// checksum of `app`'s output from it: what Metis must give on any layout, core count and
/// system.
pub fn reference_checksum(app: App, input: &[u8]) -> u64 {
    let index = metis::reference::index(input);
    match app {
        App::Wri => metis::apps::wri::checksum_of(index.iter().map(|(k, v)| (&k[..], &v[..]))),
        App::Wc => {
            let mut counts: Vec<(&[u8], u64)> =
                index.iter().map(|(k, v)| (&k[..], v.len() as u64)).collect();
            counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
            text::checksum(counts)
        }
    }
}

/// The `RESULT` lines of a run on `p`: the cycles and soft faults of each phase, the
/// total, and the keys (with the checksum), `config` the layout.
pub fn lines<P: Platform + ?Sized>(
    p: &P,
    app: App,
    config: &str,
    mb: usize,
    r: &Report,
) -> Vec<String> {
    let (sys, cores, exp) = (p.system(), r.stats.threads, app.experiment());
    let extra = format!(",\"config\":\"{config}\",\"mb\":{mb}");
    let mut out = Vec::new();
    for phase in Phase::ALL {
        let metric = format!("{}_mcycles", phase.name());
        let mcycles = Fixed2(r.stats.ns(phase) as f64 / 1e6);
        out.push(line(sys, exp, cores, &metric, mcycles, "Mcycles", &extra));
    }
    let total = Fixed2(r.stats.total_ns as f64 / 1e6);
    out.push(line(sys, exp, cores, "total_mcycles", total, "Mcycles", &extra));
    for phase in Phase::ALL {
        let metric = format!("{}_faults", phase.name());
        out.push(line(sys, exp, cores, &metric, r.faults[phase as usize], "faults", &extra));
    }
    let with_sum = format!("{extra},\"checksum\":\"{:016x}\"", r.checksum);
    out.push(line(sys, exp, cores, "keys", r.stats.keys, "keys", &with_sum));
    out
}

/// Three lines for people (each under the console's 200 bytes): each phase's cycles, each
/// phase's soft faults, and the words, keys, the first five and the checksum.
pub fn summary(app: App, config: &str, input: &str, r: &Report) -> [String; 3] {
    let mut times = format!("metis {} ({input}, {} cores, {config}):", app.name(), r.stats.threads);
    let mut faults = String::from("  soft faults:");
    for phase in Phase::ALL {
        let m = r.stats.ns(phase) as f64 / 1e6;
        times += &format!(" {} {m:.2},", phase.name());
        faults += &format!(" {} {},", phase.name(), r.faults[phase as usize]);
    }
    times += &format!(" total {:.2} Mcycles", r.stats.total_ns as f64 / 1e6);
    faults.pop();
    let mut keys = format!("  {} words, {} keys; first:", r.words, r.stats.keys);
    for (i, (k, n)) in r.first.iter().enumerate() {
        keys += &format!("{} {k} {n}", if i == 0 { "" } else { "," });
    }
    keys += &format!("; checksum {:016x}", r.checksum);
    [times, faults, keys]
}

/// The guest's run of experiment `name` (`metis_wri`, `metis_wc`) over `mb` MiB of
/// `wrmem` on every core of `p`, shared layout (threads: Corey Figure 4(a)); its lines.
pub fn run<P: Platform + ?Sized>(
    p: &P,
    host: &dyn mcrt::Host,
    name: &str,
    mb: usize,
    faults: fn() -> u64,
) -> Result<Vec<String>, String> {
    let app = App::parse(name).ok_or_else(|| format!("no Metis experiment {name:?}"))?;
    if mb == 0 || mb > MAX_MB {
        return Err(format!("--mb must be 1..={MAX_MB}"));
    }
    let input = Arc::new(text::wrmem(mb));
    let layout: Arc<dyn Layout + Send> = Arc::new(metis::SharedLayout);
    let report = run_job(host, app, input, p.cores(), layout, faults)?;
    Ok(lines(p, app, "shared", mb, &report))
}

#[cfg(all(test, feature = "linux"))]
mod tests {
    use super::*;
    use alloc::vec;

    /// No faults counted (the hosted tests need no counter).
    fn no_faults() -> u64 {
        0
    }

    /// Metis's checksum of `input` at `threads` workers, shared layout, on unpinned threads.
    fn checksum(app: App, input: Vec<u8>, threads: usize) -> Report {
        let host = mcrt::hosted::LinuxHost::unpinned();
        let layout: Arc<dyn Layout + Send> = Arc::new(metis::SharedLayout);
        run_job(&host, app, Arc::new(input), threads, layout, no_faults).expect("runs")
    }

    #[test]
    fn both_jobs_match_the_sequential_reference() {
        let mixed = b"the The tHe\0a\tb\nc\r d \xff\xfe \xff\xfe A".repeat(500);
        for input in [text::wrmem(1), mixed, vec![], b"   \n\t".to_vec()] {
            for app in [App::Wri, App::Wc] {
                for threads in [1, 3] {
                    let r = checksum(app, input.clone(), threads);
                    assert_eq!(r.checksum, reference_checksum(app, &input), "{app:?} {threads}");
                    assert_eq!(r.stats.threads, threads);
                }
            }
        }
    }

    #[test]
    fn wc_counts_every_word_and_reports_the_first_five() {
        let r = checksum(App::Wc, text::wrmem(1), 2);
        assert_eq!((r.words, r.stats.keys, r.first.len()), (1 << 18, 4394, 5));
        assert!(r.first.windows(2).all(|w| w[0].1 >= w[1].1), "{:?}", r.first);
        let lines = lines(&crate::linux::Linux::new(), App::Wc, "shared", 1, &r);
        assert_eq!(lines.len(), 10);
        assert!(lines[9].contains(&format!("\"checksum\":\"{:016x}\"", r.checksum)));
        assert!(summary(App::Wc, "shared", "wrmem 1 MiB", &r).iter().all(|l| l.len() < 200));
    }

    #[test]
    fn names_parse() {
        assert_eq!(App::parse("metis_wri"), Some(App::Wri));
        assert_eq!(App::parse("wc"), Some(App::Wc));
        assert_eq!(App::parse("hist"), None);
    }
}
