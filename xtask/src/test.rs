//! `cargo xtask test`: host unit tests, then the kernel's integration tests in QEMU, then
//! the bench harness's smoke test.
//!
//! Each entry of [`RUNS`] boots one virtual machine with `-append test=<selector>`,
//! captures COM1 in `target/test-logs/<label>.log` and lets `verdict::judge` decide. The
//! last line printed is always `N passed, M failed`, followed by `, K skipped` when a
//! host test was ignored (skipped tests never count as passed).

use std::fs::{self, File};
use std::path::Path;
use std::process::{ExitCode, Stdio};
use std::time::Duration;

use verdict::judge::{judge, Verdict};

use crate::qemu::{self, Accel, Serial, Vm};
use crate::{build, host, Options, Result};

/// One QEMU integration run.
struct Run {
    /// Name of the run; test lines read `PASS <label>/<test>`.
    label: &'static str,
    /// `-smp`.
    cores: u32,
    /// `-m`.
    mem: &'static str,
    /// Extra QEMU arguments for this run, split on whitespace.
    qemu_args: &'static str,
    /// `test=` on the kernel command line: `all` or one test's name.
    test: &'static str,
    /// The number the kernel must print in `CORES ONLINE <n>`, if checked.
    expect_online: Option<u32>,
    /// More kernel command-line arguments, after `test=`.
    append: &'static str,
    /// Text the serial log must contain for the run to pass, if any.
    expect_text: Option<&'static str>,
    /// QEMU is killed (and the run failed) after this many seconds.
    timeout_secs: u64,
}

/// Two NUMA nodes of two cores and 256 MiB each.
const NUMA_2X2: &str = "-object memory-backend-ram,size=256M,id=m0 \
     -object memory-backend-ram,size=256M,id=m1 \
     -numa node,nodeid=0,cpus=0-1,memdev=m0 -numa node,nodeid=1,cpus=2-3,memdev=m1";

/// A run of every test with `cores` cores; `expect_online` is the core count.
const fn all(label: &'static str, cores: u32, mem: &'static str) -> Run {
    Run {
        label,
        cores,
        mem,
        qemu_args: "",
        test: "all",
        expect_online: Some(cores),
        append: "",
        expect_text: None,
        timeout_secs: 120,
    }
}

/// The integration runs, in order.
const RUNS: &[Run] = &[
    all("smp1", 1, "256M"),
    all("smp2", 2, "256M"),
    all("smp4", 4, "256M"),
    all("smp8", 8, "256M"),
    all("smp16", 16, "512M"),
    Run { qemu_args: NUMA_2X2, ..all("numa4", 4, "512M") },
    all("mem64m", 2, "64M"),
    all("mem64m-smp16", 16, "64M"),
    all("mem16g", 2, "16G"),
    Run { test: "trap.fault_isolation", ..all("fault4", 4, "256M") },
    Run { test: "trap.stack_overflow", ..all("overflow4", 4, "256M") },
    Run { test: "frames.returns_survive_a_full_channel", ..all("deaf2", 2, "256M") },
    // A million fuzzed system calls (issue 9), in a run of its own: two fuzzers, two cores
    // for what they start.
    Run { test: "user.sysfuzz_million", timeout_secs: 600, ..all("fuzz4", 4, "256M") },
    // The tick rate from the command line (`make bench` boots Atoll at the Linux guest's).
    Run {
        test: "interrupts.tick_rate",
        append: "hz=250",
        expect_text: Some("tick 250 Hz"),
        ..all("hz250", 2, "256M")
    },
];

/// Running count of passed and failed tests (host and QEMU alike).
#[derive(Debug, Default)]
pub struct Tally {
    /// Tests that passed.
    pub passed: u32,
    /// Tests that failed, plus runs that failed as a whole or could not run.
    pub failed: u32,
    /// Tests their harness ignored (e.g. ones that need two CPUs, on a one-CPU host).
    pub skipped: u32,
}

impl Tally {
    /// The closing line: `N passed, M failed`, and `, K skipped` if any were.
    pub fn summary(&self) -> String {
        let mut line = format!("{} passed, {} failed", self.passed, self.failed);
        if self.skipped > 0 {
            line += &format!(", {} skipped", self.skipped);
        }
        line
    }
}

/// Runs everything selected; the exit code is failure if anything failed or could not run.
pub fn test(opts: &Options) -> Result<ExitCode> {
    let (accel, why) = Accel::choose(opts.accel.as_deref())?;
    if opts.dry_run {
        return dry_run(opts, accel, why);
    }
    let mut tally = Tally::default();
    if !opts.skip_host {
        host::run_all(&mut tally);
    }
    // Last, the bench harness end to end: nullsys on Atoll and the Linux guest (docs/bench.md).
    let filter = opts.only.as_deref().unwrap_or("");
    let smoke = "bench-smoke".contains(filter);
    if !smoke || RUNS.iter().any(|r| r.label.contains(filter)) {
        run_qemu_tests(opts, accel, why, &mut tally);
    }
    if smoke {
        crate::bench::smoke_test(opts, &mut tally);
    }
    println!("{}", tally.summary());
    Ok(if tally.failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// `DRY_RUN=1`: what `test` would do with these settings, building and booting nothing; an
/// error if the filter selects nothing.
fn dry_run(opts: &Options, accel: Accel, why: &str) -> Result<ExitCode> {
    let filter = opts.only.as_deref().unwrap_or("");
    let runs: Vec<&str> =
        RUNS.iter().filter(|r| r.label.contains(filter)).map(|r| r.label).collect();
    let smoke = "bench-smoke".contains(filter);
    if runs.is_empty() && !smoke {
        return Err(format!("no QEMU run's label contains `{filter}`"));
    }
    println!(
        "test: dry run ({} ({why})): host tests {}, {} QEMU runs: {}{}",
        accel.name(),
        if opts.skip_host { "skipped" } else { "run" },
        runs.len(),
        runs.join(" "),
        if smoke { ", then bench-smoke" } else { "" }
    );
    Ok(ExitCode::SUCCESS)
}

/// Builds the kernel and does the selected runs of [`RUNS`].
fn run_qemu_tests(opts: &Options, accel: Accel, why: &str, tally: &mut Tally) {
    let filter = opts.only.as_deref().unwrap_or("");
    let runs: Vec<&Run> = RUNS.iter().filter(|r| r.label.contains(filter)).collect();
    if runs.is_empty() {
        println!("FAIL qemu: no run's label contains `{filter}`");
        tally.failed += 1;
        return;
    }
    println!("== qemu: building the kernel");
    let images = match build::images() {
        Ok(images) => images,
        Err(e) => {
            println!("FAIL build: {e}");
            tally.failed += 1;
            return;
        }
    };
    let log_dir = build::target_dir().join("test-logs");
    if let Err(e) = fs::create_dir_all(&log_dir) {
        println!("FAIL qemu: cannot create {}: {e}", log_dir.display());
        tally.failed += 1;
        return;
    }
    println!("== qemu: accelerator {} ({why})", accel.name());
    for run in runs {
        let vm = machine(run, &images, accel, opts);
        let log = log_dir.join(format!("{}.log", run.label));
        println!("== {}: -smp {} -m {} test={}", run.label, run.cores, run.mem, run.test);
        let timeout = Duration::from_secs(opts.timeout.unwrap_or(run.timeout_secs));
        match boot_and_judge(run, &vm, &log, timeout) {
            Ok((verdict, seconds)) => report(run, &verdict, seconds, &log, tally),
            Err(e) => {
                println!("FAIL {}: {e}", run.label);
                tally.failed += 1;
            }
        }
    }
}

/// The virtual machine of `run`: its own QEMU arguments, then `QEMU_ARGS`.
fn machine(run: &Run, images: &build::Images, accel: Accel, opts: &Options) -> Vm {
    let mut extra: Vec<String> = run.qemu_args.split_whitespace().map(String::from).collect();
    extra.extend(opts.qemu_args.iter().cloned());
    Vm {
        cores: run.cores,
        mem: run.mem.into(),
        accel,
        kernel: images.kernel.clone(),
        initrd: Some(images.initrd.clone()),
        cmdline: format!("{}={} {}", verdict::cmdline_keys::TEST, run.test, run.append)
            .trim_end()
            .to_string(),
        extra,
    }
}

/// Boots `vm` with COM1 (and QEMU's own messages) going to `log`; judges the run.
fn boot_and_judge(run: &Run, vm: &Vm, log: &Path, timeout: Duration) -> Result<(Verdict, f64)> {
    let file = File::create(log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
    let copy = file.try_clone().map_err(|e| format!("cannot share {}: {e}", log.display()))?;
    let mut command = vm.command(Serial::Stdout);
    command.stdin(Stdio::null()).stdout(file).stderr(copy);
    let mut child = qemu::spawn(&mut command)?;
    let ending = qemu::wait(&mut child, timeout)?;
    let serial = qemu::read_log(log);
    let verdict = judge(&serial, ending.status, ending.timed_out, run.expect_online);
    if let Some(text) = run.expect_text.filter(|t| !serial.contains(t)) {
        return Err(format!("the log lacks `{text}` (see {})", log.display()));
    }
    Ok((verdict, ending.elapsed.as_secs_f64()))
}

/// Prints a line per test, a line for a failed run, and the log's tail on failure.
fn report(run: &Run, verdict: &Verdict, seconds: f64, log: &Path, tally: &mut Tally) {
    for test in &verdict.tests {
        if test.passed {
            println!("PASS {}/{}", run.label, test.name);
            tally.passed += 1;
        } else {
            println!("FAIL {}/{}: {}", run.label, test.name, test.detail);
            tally.failed += 1;
        }
    }
    if verdict.run_failed() {
        println!("FAIL {}: {} ({seconds:.1} s)", run.label, verdict.why_run());
        tally.failed += 1;
    }
    if !verdict.passed() {
        print_tail(log, 40);
    }
}

/// Prints the last `count` lines of a log file.
fn print_tail(log: &Path, count: usize) {
    let text = qemu::read_log(log);
    let lines: Vec<&str> = text.lines().collect();
    let tail = &lines[lines.len().saturating_sub(count)..];
    println!("--- last {} lines of {} ---", tail.len(), log.display());
    for line in tail {
        println!("    {}", line.trim_end_matches('\r'));
    }
    println!("---");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_names_skipped_tests_only_when_there_are_some() {
        let mut tally = Tally { passed: 5, failed: 1, skipped: 0 };
        assert_eq!(tally.summary(), "5 passed, 1 failed");
        tally.skipped = 3;
        assert_eq!(tally.summary(), "5 passed, 1 failed, 3 skipped");
    }

    #[test]
    fn labels_are_unique() {
        for (i, a) in RUNS.iter().enumerate() {
            assert!(RUNS[i + 1..].iter().all(|b| b.label != a.label), "{}", a.label);
        }
    }

    #[test]
    fn the_required_core_counts_are_all_there() {
        for cores in [1, 2, 4, 8, 16] {
            let run = RUNS.iter().find(|r| r.cores == cores && r.test == "all").unwrap();
            assert_eq!(run.expect_online, Some(cores), "{}", run.label);
        }
    }

    #[test]
    fn numa_nodes_cover_the_cores_and_memory() {
        let numa = RUNS.iter().find(|r| r.label == "numa4").unwrap();
        assert_eq!(numa.cores, 4);
        assert_eq!(numa.mem, "512M");
        assert!(numa.qemu_args.contains("cpus=0-1") && numa.qemu_args.contains("cpus=2-3"));
    }
}
