//! `cargo xtask bench` (`make bench`): every registered experiment on Atoll and on a Linux
//! guest in the same QEMU configuration, at each core count, `REPEAT` times; then
//! `target/bench/results.json`, `report.md` and a PNG per experiment. `bench-smoke` runs
//! one tiny experiment on both systems at 1 core into `target/bench-smoke/` and checks that
//! the outputs have both systems. See `docs/bench.md`.

mod benchdisk;
mod elf;
mod guest;
mod guest_servers;
mod hostload;
mod launch;
mod linux_bin;
mod model;
mod netload;
mod output;
mod plot;
mod records;
mod registry;
mod report;
mod runner;
mod smoke;
mod throttle;
mod variants;
mod webload;

use std::fs;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use crate::qemu::{self, Accel};
use crate::{build, env_var, split_args, Result};

use guest::Mitigations;
use records::{Context, Record};
use registry::{Experiment, Variant};
pub use smoke::smoke_test;

/// Core counts when `CORES` is not given.
const DEFAULT_CORES: &[u32] = &[1, 2];
/// Repetitions when `REPEAT` is not given (a full run at CORES=1,2 then takes about
/// 8.5 minutes on a quiet 2-CPU TCG host, two to three times that on a busy one; see
/// docs/bench.md).
const DEFAULT_REPEAT: u32 = 5;
/// Guest memory when `MEM` is not given (the same as `make run`'s).
const DEFAULT_MEM: &str = "512M";

const USAGE: &str = "\
usage: cargo xtask bench|bench-smoke [flags]

flags, or the environment variable after each (a flag wins; empty means unset):
  --cores LIST      CORES      VM core counts, e.g. 1,2,4 (default 1,2)
  --sockets S       SOCKETS    packages the cores are spread over (`-smp N,sockets=S`),
                               on both systems; S must divide every core count (default 1)
  --repeat N        REPEAT     repetitions of every run (default 5)
  --only NAMES      ONLY       experiments, comma-separated (default: all)
  --mem SIZE        MEM        guest memory (default 512M)
  --accel tcg|kvm   ACCEL      accelerator (default as for `run`)
  --qemu-args ARGS  QEMU_ARGS  extra QEMU arguments for both systems
  --render                     only redraw report.md and the plots from results.json
  --dry-run         DRY_RUN=1  check the settings and list the runs, booting nothing";

/// What one `bench` run does.
#[derive(Clone, Debug)]
pub struct Settings {
    /// VM core counts.
    pub cores: Vec<u32>,
    /// Packages every VM's cores are spread over (`None`: QEMU's one).
    pub sockets: Option<u32>,
    /// Repetitions of each run.
    pub repeat: u32,
    /// Selected experiment names (`None`: all).
    pub only: Option<Vec<String>>,
    /// Guest memory.
    pub mem: String,
    /// Accelerator asked for (`None`: choose).
    pub accel: Option<String>,
    /// Extra QEMU arguments.
    pub qemu_args: Vec<String>,
    /// Where the outputs go.
    pub out: PathBuf,
    /// Only redraw the report and plots from an existing results.json.
    pub render_only: bool,
    /// Check the settings and list the runs, building and booting nothing.
    pub dry_run: bool,
}

impl Settings {
    /// Reads the environment, then `args` (which win).
    pub fn parse(args: &[String]) -> Result<Settings> {
        let mut s = Settings {
            cores: env_var("CORES").map(|v| parse_cores(&v)).transpose()?.unwrap_or_default(),
            sockets: env_var("SOCKETS").map(|v| qemu::parse_sockets(&v)).transpose()?,
            repeat: env_var("REPEAT").map(|v| parse_repeat(&v)).transpose()?.unwrap_or(0),
            only: env_var("ONLY").map(|v| parse_list(&v)),
            mem: env_var("MEM").unwrap_or_else(|| DEFAULT_MEM.into()),
            accel: env_var("ACCEL"),
            qemu_args: split_args(&env_var("QEMU_ARGS").unwrap_or_default()),
            out: build::target_dir().join("bench"),
            render_only: false,
            dry_run: env_var("DRY_RUN").is_some_and(|v| v != "0"),
        };
        let mut rest = args.iter();
        while let Some(arg) = rest.next() {
            match arg.as_str() {
                "--render" => {
                    s.render_only = true;
                    continue;
                }
                "--dry-run" => {
                    s.dry_run = true;
                    continue;
                }
                "-h" | "--help" => return Err(USAGE.into()),
                _ => {}
            }
            let (flag, inline) = match arg.split_once('=') {
                Some((flag, value)) => (flag, Some(value.to_string())),
                None => (arg.as_str(), None),
            };
            let value = match inline.or_else(|| rest.next().cloned()) {
                Some(value) => value,
                None => return Err(format!("{flag} needs a value\n\n{USAGE}")),
            };
            match flag {
                "--cores" => s.cores = parse_cores(&value)?,
                "--sockets" => s.sockets = Some(qemu::parse_sockets(&value)?),
                "--repeat" => s.repeat = parse_repeat(&value)?,
                "--only" => s.only = Some(parse_list(&value)),
                "--mem" => s.mem = value,
                "--accel" => s.accel = Some(value),
                "--qemu-args" => s.qemu_args = split_args(&value),
                _ => return Err(format!("unknown argument `{arg}`\n\n{USAGE}")),
            }
        }
        if s.cores.is_empty() {
            s.cores = DEFAULT_CORES.to_vec();
        }
        if s.repeat == 0 {
            s.repeat = DEFAULT_REPEAT;
        }
        Ok(s)
    }

    /// Refuses a `SOCKETS` that does not divide every core count (checked when a run
    /// starts, so `make test`'s smoke run, always at 1 core, ignores it).
    pub fn check_topology(&self) -> Result {
        self.cores.iter().try_for_each(|&cores| qemu::check_sockets(cores, self.sockets))
    }
}

/// `CORES=1,2,4`: distinct counts, each at least 1, in increasing order.
fn parse_cores(text: &str) -> Result<Vec<u32>> {
    let mut cores = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.parse::<u32>() {
            Ok(n) if n >= 1 => cores.push(n),
            _ => {
                return Err(format!("CORES must be numbers of at least 1 like 1,2,4, not `{text}`"))
            }
        }
    }
    cores.sort_unstable();
    cores.dedup();
    Ok(cores)
}

fn parse_repeat(text: &str) -> Result<u32> {
    match text.trim().parse() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("REPEAT must be a number of at least 1, not `{text}`")),
    }
}

fn parse_list(text: &str) -> Vec<String> {
    text.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect()
}

/// The entry point of both commands.
pub fn main(smoke: bool, args: &[String]) -> ExitCode {
    let outcome = Settings::parse(args).and_then(|settings| {
        if settings.dry_run {
            dry_run(&settings, smoke)
        } else if smoke {
            smoke::run(&settings)
        } else if settings.render_only {
            output::render(&settings).map(|()| true)
        } else {
            run(&settings).map(|summary| summary.failed.is_empty())
        }
    });
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(message) => {
            eprintln!("xtask bench: {message}");
            ExitCode::FAILURE
        }
    }
}

/// `DRY_RUN=1`: checks the settings and lists the runs `bench` (or `bench-smoke`) would
/// make, booting nothing; an error if there are none.
fn dry_run(settings: &Settings, smoke: bool) -> Result<bool> {
    let settings = if smoke { smoke::settings(settings) } else { settings.clone() };
    let (_, accel, why, jobs) = checked_plan(&settings)?;
    println!(
        "bench: dry run ({} ({why})): {} runs into {}",
        accel.name(),
        jobs.len(),
        settings.out.display()
    );
    for job in &jobs {
        println!("  {}", job.label());
    }
    Ok(true)
}

/// One boot (or one `bench-host` run) of the plan.
#[derive(Clone, Debug)]
pub struct Job {
    /// The experiment.
    pub experiment: &'static Experiment,
    /// `atoll`, `linux` or `host`.
    pub system: &'static str,
    /// The Linux guest's mitigations (`None` for Atoll and the host).
    pub mitigations: Option<Mitigations>,
    /// VM cores (for `host`: the two CPUs it pins to).
    pub cores: u32,
    /// Repetition, from 1.
    pub repeat: u32,
    /// The configuration, for an experiment that has them.
    pub variant: Option<&'static Variant>,
}

impl Job {
    /// A name for logs: `urpc-linux-c2-r3` (`urpc-linux-booted-c2-r3` for the guest with
    /// its default mitigations).
    pub fn label(&self) -> String {
        let booted = if self.mitigations == Some(Mitigations::AsBooted) { "-booted" } else { "" };
        let variant = self.variant.map_or(String::new(), |v| format!("-{}", v.name));
        format!(
            "{}-{}{variant}{booted}-c{}-r{}",
            self.experiment.name, self.system, self.cores, self.repeat
        )
    }
}

/// Every job of a run: repetitions outermost, and within one experiment and core count
/// Atoll then Linux, so drift in the host touches both alike. Linux runs with
/// `mitigations=off` (the headline: Atoll has none), then, for experiments whose cost is
/// kernel entry, again as booted.
pub fn plan(experiments: &[&'static Experiment], cores: &[u32], repeat: u32) -> Vec<Job> {
    let mut jobs = Vec::new();
    for r in 1..=repeat {
        for &e in experiments {
            let job = |system, mitigations, cores| Job {
                experiment: e,
                system,
                mitigations,
                cores,
                repeat: r,
                variant: None,
            };
            if !e.variants.is_empty() {
                for &c in cores.iter().filter(|&&c| c >= e.min_cores) {
                    for v in e.variants.iter().filter(|v| (v.min_cores..=v.max_cores).contains(&c))
                    {
                        if e.atoll.is_some() && v.atoll_boot.is_some() {
                            jobs.push(Job { variant: Some(v), ..job("atoll", None, c) });
                        }
                        if e.linux.is_some() && v.linux_args.is_some() {
                            let linux = job("linux", Some(Mitigations::Off), c);
                            jobs.push(Job { variant: Some(v), ..linux });
                        }
                    }
                }
                continue;
            }
            if e.host {
                jobs.push(job("host", None, 2));
                continue;
            }
            for &c in cores.iter().filter(|&&c| c >= e.min_cores) {
                if e.atoll.is_some() {
                    jobs.push(job("atoll", None, c));
                }
                if e.linux.is_some() {
                    jobs.push(job("linux", Some(Mitigations::Off), c));
                    if e.kernel_entry {
                        jobs.push(job("linux", Some(Mitigations::AsBooted), c));
                    }
                }
            }
        }
    }
    jobs
}

/// What a run produced.
#[derive(Debug, Default)]
pub struct Summary {
    /// Every record.
    pub records: Vec<Record>,
    /// `label: why` of each job that failed.
    pub failed: Vec<String>,
    /// Wall time of the whole run.
    pub wall: Duration,
    /// The share of the host's CPU time other processes used during the runs.
    pub others: Option<f64>,
}

/// The selected experiments, the accelerator (and why), and the jobs.
type Checked = (Vec<&'static Experiment>, Accel, &'static str, Vec<Job>);

/// The checks a run makes before it starts (the topology, the experiments, the
/// accelerator) and its plan, for [`run`] and [`dry_run`] alike.
fn checked_plan(settings: &Settings) -> Result<Checked> {
    settings.check_topology()?;
    let experiments = registry::select(settings.only.as_deref())?;
    let (accel, why) = Accel::choose(settings.accel.as_deref())?;
    let jobs = plan(&experiments, &settings.cores, settings.repeat);
    if jobs.is_empty() {
        return Err("nothing to run: no selected experiment fits these core counts".into());
    }
    Ok((experiments, accel, why, jobs))
}

/// Prepares everything, runs the plan with progress lines, writes the outputs.
pub fn run(settings: &Settings) -> Result<Summary> {
    let start = Instant::now();
    let (experiments, accel, why, jobs) = checked_plan(settings)?;
    let host_cpus = records::host_cpus();
    println!(
        "bench: {} runs: {} at CORES={} SOCKETS={} REPEAT={} MEM={}, {} ({why}), host has {host_cpus} CPUs",
        jobs.len(),
        experiments.iter().map(|e| e.name).collect::<Vec<_>>().join(","),
        settings.cores.iter().map(u32::to_string).collect::<Vec<_>>().join(","),
        settings.sockets.unwrap_or(1),
        settings.repeat,
        settings.mem,
        accel.name()
    );
    let prepared = prepare(settings, accel, &jobs, host_cpus)?;
    println!("bench: preparation took {:.1} s", start.elapsed().as_secs_f64());
    let mut summary = Summary::default();
    let first = hostload::sample();
    let run_start = Instant::now();
    for (i, job) in jobs.iter().enumerate() {
        print_job_start(i, jobs.len(), job, host_cpus, settings.repeat);
        let log = prepared.logs.join(format!("{}.log", job.label()));
        let before = hostload::sample();
        // Whatever goes wrong in one job (even building its command line) fails that job
        // only: the others, on both systems, still run.
        let verdict = launch::launch(job, settings, accel, &prepared, &log)
            .and_then(|o| records_of(o, job, settings, &prepared.ctx));
        let elapsed = run_start.elapsed();
        let eta = elapsed.mul_f64((jobs.len() - i - 1) as f64 / (i + 1) as f64);
        let others = hostload::others_share(before, hostload::sample()).unwrap_or(0.0);
        let progress = format!(
            "others {:.0}% | elapsed {} eta {}",
            others * 100.0,
            clock(elapsed),
            clock(eta)
        );
        tally(verdict, job, &log, &progress, &mut summary);
    }
    summary.wall = start.elapsed();
    summary.others = hostload::others_share(first, hostload::sample());
    let guest = prepared.guest.as_ref().map(|g| g.describe.as_str());
    output::write(settings, &experiments, &summary, &prepared.ctx, guest)?;
    println!(
        "bench: {} records, {} failed runs, {} wall; see {}",
        summary.records.len(),
        summary.failed.len(),
        clock(summary.wall),
        settings.out.join("report.md").display()
    );
    Ok(summary)
}

/// What every job of a run uses: the images Atoll boots, the Linux guest and `bench-host`
/// when a job needs them, where the logs go, and what every record shares.
struct Prepared {
    images: build::Images,
    guest: Option<guest::Guest>,
    host_binary: Option<PathBuf>,
    logs: PathBuf,
    ctx: Context,
}

/// Builds what `jobs` need and makes a fresh log folder.
fn prepare(settings: &Settings, accel: Accel, jobs: &[Job], host_cpus: u32) -> Result<Prepared> {
    let images = build::images()?;
    if jobs.iter().any(|j| j.experiment.name == "web_static") {
        crate::deps::ensure_tool("wrk", "wrk")?;
    }
    let guest = if jobs.iter().any(|j| j.system == "linux") {
        let binary = linux_bin::build()?;
        let web = jobs.iter().any(|j| j.system == "linux" && j.experiment.name == "web_static");
        Some(guest::prepare(&binary, web)?)
    } else {
        None
    };
    let host_binary = if jobs.iter().any(|j| j.system == "host") {
        Some(runner::build_bench_host()?)
    } else {
        None
    };
    // Fresh logs: a stale log of an earlier, longer run would mislead.
    let logs = settings.out.join("logs");
    let _ = fs::remove_dir_all(&logs);
    fs::create_dir_all(&logs).map_err(|e| format!("{}: {e}", logs.display()))?;
    let ctx = Context {
        accel: accel.name().into(),
        git: records::git_describe(),
        host_cpus,
        linux_hz: guest.as_ref().and_then(|g| g.hz),
    };
    Ok(Prepared { images, guest, host_binary, logs, ctx })
}

/// The start of job `i`'s progress line (its end follows when it is done).
fn print_job_start(i: usize, jobs: usize, job: &Job, host_cpus: u32, repeat: u32) {
    let system = match job.mitigations {
        Some(Mitigations::AsBooted) => "linux (as booted)",
        _ => job.system,
    };
    print!(
        "bench: [{:>2}/{}] {:<10} {:<5} cores={}{} rep {}/{} ",
        i + 1,
        jobs,
        job.experiment.name,
        system,
        job.cores,
        if job.cores > host_cpus { " (oversubscribed)" } else { "" },
        job.repeat,
        repeat
    );
    let _ = std::io::Write::flush(&mut std::io::stdout());
}

/// A job's records from what it printed, with how long it took and why it failed (if
/// it did).
fn records_of(
    o: runner::Outcome,
    job: &Job,
    settings: &Settings,
    ctx: &Context,
) -> Result<(Duration, Vec<Record>, Option<String>)> {
    let why = o.failure();
    let mut got = Vec::new();
    for text in &o.results {
        let mut r = records::record(text, job, ctx, &o.conditions)?;
        if job.system != "host" {
            // The VM's topology, so the report can state it (one package unless SOCKETS
            // says otherwise).
            r.insert("sockets".into(), settings.sockets.unwrap_or(1).into());
        }
        got.push(r);
    }
    Ok((o.elapsed, got, why))
}

/// Ends a job's progress line with its verdict and adds its records (and failure) to
/// `summary`.
fn tally(
    verdict: Result<(Duration, Vec<Record>, Option<String>)>,
    job: &Job,
    log: &std::path::Path,
    progress: &str,
    summary: &mut Summary,
) {
    match verdict {
        Ok((took, got, None)) => {
            println!("ok {:.1} s, {} results, {progress}", took.as_secs_f64(), got.len());
            summary.records.extend(got);
        }
        Ok((_, got, Some(why))) => {
            println!("FAILED: {why} (log {})", log.display());
            runner::print_tail(log, 15);
            summary.records.extend(got);
            summary.failed.push(format!("{}: {why}", job.label()));
        }
        Err(why) => {
            println!("FAILED: {why}");
            summary.failed.push(format!("{}: {why}", job.label()));
        }
    }
}

/// `1m05s`.
fn clock(d: Duration) -> String {
    let s = d.as_secs();
    format!("{}m{:02}s", s / 60, s % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_lists_are_sorted_and_checked() {
        assert_eq!(parse_cores("4, 1,2,2").unwrap(), [1, 2, 4]);
        assert!(parse_cores("0").is_err());
        assert!(parse_cores("two").is_err());
        assert!(parse_repeat("0").is_err());
        assert_eq!(parse_list("a, b,,c"), ["a", "b", "c"]);
    }

    #[test]
    fn sockets_must_divide_every_core_count() {
        let parse = |args: &[&str]| {
            Settings::parse(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>())
        };
        let s = parse(&["--cores", "2,4", "--sockets", "2"]).unwrap();
        assert_eq!((s.cores, s.sockets), (vec![2, 4], Some(2)));
        let err = parse(&["--cores", "1,2", "--sockets=2"]).unwrap().check_topology().unwrap_err();
        assert!(err.contains("SOCKETS=2") && err.contains("CORES=1"), "{err}");
        assert!(parse(&["--cores", "4", "--sockets", "0"]).is_err());
    }

    #[test]
    fn scheduler_experiments_run_each_configuration_as_a_job() {
        let amps = [registry::find("amps_jobs").unwrap()];
        let jobs = plan(&amps, &[1, 2], 1);
        let labels: Vec<String> = jobs.iter().map(Job::label).collect();
        // One core: no slowed core 1, so no `asym` configuration.
        assert_eq!(
            labels,
            [
                "amps_jobs-atoll-amps-c1-r1",
                "amps_jobs-linux-cfs-c1-r1",
                "amps_jobs-atoll-symmetric-c1-r1",
                "amps_jobs-atoll-amps-asym-c2-r1",
                "amps_jobs-atoll-symmetric-asym-c2-r1",
                "amps_jobs-linux-cfs-asym-c2-r1",
                "amps_jobs-atoll-amps-c2-r1",
                "amps_jobs-linux-cfs-c2-r1",
                "amps_jobs-atoll-symmetric-c2-r1",
            ]
        );
        let throttled = jobs.iter().find(|j| j.label() == "amps_jobs-linux-cfs-asym-c2-r1");
        assert_eq!(throttled.and_then(|j| j.variant).map(|v| v.linux_slow), Some(&[(1, 4)][..]));
        let switch = [registry::find("thread_switch").unwrap()];
        assert_eq!(plan(&switch, &[2], 1).len(), 2, "thread costs: Atoll and Linux, full speed");
    }

    #[test]
    fn the_plan_skips_core_counts_below_the_minimum_and_runs_host_once() {
        let all = registry::select(None).unwrap();
        let jobs = plan(&all, &[1, 2], 2);
        let count = |name: &str, system: &str, cores: u32| {
            jobs.iter()
                .filter(|j| j.experiment.name == name && j.system == system && j.cores == cores)
                .count()
        };
        assert_eq!(count("nullsys", "atoll", 1), 2);
        // Kernel entry is what nullsys measures: Linux runs with and without mitigations.
        assert_eq!(count("nullsys", "linux", 2), 4);
        assert_eq!(count("shm_vs_msg", "linux", 2), 2);
        assert_eq!(count("urpc", "atoll", 1), 0);
        assert_eq!(count("urpc", "linux", 2), 4);
        assert_eq!(count("multicast", "linux", 1), 0);
        assert_eq!(count("multicast", "linux", 2), 2);
        assert_eq!(count("memclone", "atoll", 1), 2);
        assert_eq!(count("memclone", "linux", 2), 4);
        // Figure 7 runs at 1 core too (the local floor), Linux with and without mitigations.
        assert_eq!(count("unmap", "atoll", 1), 2);
        assert_eq!(count("unmap", "linux", 2), 4);
        assert_eq!(count("sharebench", "atoll", 2), 2);
        assert_eq!(count("sharebench", "linux", 2), 0);
        assert_eq!(jobs.iter().filter(|j| j.system == "host").count(), 4);
        // Within a repetition, Atoll runs right before Linux (mitigations off, then as booted).
        let first: Vec<_> = jobs[..3].iter().map(|j| (j.system, j.mitigations)).collect();
        assert_eq!(
            first,
            [
                ("atoll", None),
                ("linux", Some(Mitigations::Off)),
                ("linux", Some(Mitigations::AsBooted))
            ]
        );
        assert_eq!(jobs[2].label(), "nullsys-linux-booted-c1-r1");
    }

    #[test]
    fn clock_shows_minutes_and_seconds() {
        assert_eq!(clock(Duration::from_secs(65)), "1m05s");
    }
}
