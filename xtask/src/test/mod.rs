//! `cargo xtask test`: host unit tests, then the kernel's integration tests in QEMU, then
//! the bench harness's smoke test.
//!
//! Each entry of `runs::RUNS` (the table, `runs.rs`) boots one virtual machine with `-append test=<selector>`,
//! captures COM1 in `target/test-logs/<label>.log` and lets `verdict::judge` decide. The
//! last line printed is always `N passed, M failed`, followed by `, K skipped` when a
//! host test was ignored or a kernel test reported `TEST SKIP` (it could check nothing in
//! its run's machine): skipped tests never count as passed.
//!
//! The last runs have a virtio-blk disk (`Run::disk`, `disk_runs.rs`, issue M13): its
//! image (`target/test-logs/<label>.img`) is built from the repository's `disk/` before the
//! run, or is the one an earlier run left, and is checked with e2fsprogs after it, a test
//! of its own. `disk-write` writes files and `disk-read`, on the same image, finds them as
//! after a reboot; `disk-kill` is a crash test: QEMU killed at a random moment while the
//! guest writes and syncs files, then the image repaired by `e2fsck -fy` and every synced
//! file read back with `debugfs`, three times.

use std::fs::{self, File};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use verdict::judge::{judge, Outcome, Verdict};

mod disk_runs;
mod log_checks;
mod runs;

use crate::netclient;
use crate::qemu::{self, Accel, Serial, Vm};
use crate::tally::Tally;
use crate::{build, disk, host, Options, Result};
use disk_runs::{Prepared, TestDisk};
use runs::{Run, RUNS};

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
        if let Err(why) = qemu::check_sockets(vm.cores, vm.sockets) {
            println!("SKIP {}: {why}", run.label);
            tally.skipped += 1;
            continue;
        }
        let log = log_dir.join(format!("{}.log", run.label));
        let smp = qemu::smp_arg(vm.cores, vm.sockets);
        println!("== {}: -smp {smp} -m {} test={}", run.label, run.mem, run.test);
        let timeout = Duration::from_secs(opts.timeout.unwrap_or(run.timeout_secs));
        if let Some(disk @ TestDisk { kill_iterations: Some(n), .. }) = &run.disk {
            disk_runs::crash_test(run, disk, *n, &vm, &log_dir, timeout, tally);
            continue;
        }
        let mut vm = vm;
        let image = match &run.disk {
            None => None,
            Some(disk) => match disk_runs::prepare(run.label, disk, &log_dir) {
                Ok(Prepared::Ready(image)) => {
                    vm.extra.extend(disk::qemu_args(&image));
                    Some(image)
                }
                Ok(Prepared::Skip(why)) => {
                    println!("SKIP {}: {why}", run.label);
                    tally.skipped += 1;
                    continue;
                }
                Err(e) => {
                    println!("FAIL {}: its disk image: {e}", run.label);
                    tally.failed += 1;
                    continue;
                }
            },
        };
        let ports = match forward_ports(run, &mut vm) {
            Ok(ports) => ports,
            Err(e) => {
                println!("FAIL {}: {e}", run.label);
                tally.failed += 1;
                continue;
            }
        };
        let stop = AtomicBool::new(false);
        let deadline = Instant::now() + timeout;
        let (booted, talked) = thread::scope(|scope| {
            let talking: Vec<_> = run
                .clients
                .iter()
                .zip(&ports)
                .map(|(client, &port)| {
                    let addr = SocketAddr::from(([127, 0, 0, 1], port));
                    let stop = &stop;
                    scope.spawn(move || (client.talk)(addr, stop, deadline))
                })
                .collect();
            let booted = boot_and_judge(run, &vm, &log, timeout);
            stop.store(true, Ordering::Relaxed);
            let talked: Vec<Result> = talking
                .into_iter()
                .map(|t| t.join().unwrap_or_else(|_| Err("the client panicked".into())))
                .collect();
            (booted, talked)
        });
        match booted {
            Ok((verdict, seconds)) => report(run, &verdict, seconds, &log, tally),
            Err(e) => {
                println!("FAIL {}: {e}", run.label);
                tally.failed += 1;
            }
        }
        for (client, outcome) in run.clients.iter().zip(talked) {
            match outcome {
                Ok(()) => {
                    println!("PASS {}/host-{}", run.label, client.name);
                    tally.passed += 1;
                }
                Err(why) => {
                    println!("FAIL {}/host-{}: {why}", run.label, client.name);
                    tally.failed += 1;
                }
            }
        }
        if let (Some(disk), Some(image)) = (&run.disk, &image) {
            let (name, check) = disk.check;
            let outcome = check(image, &qemu::read_log(&log));
            disk_runs::count(run.label, name, &outcome, tally);
        }
    }
}

/// For a run with host clients: a free port on 127.0.0.1 for each, and the VM's NIC with
/// a forward from each to its client's guest port. The ports, in the clients' order.
fn forward_ports(run: &Run, vm: &mut Vm) -> Result<Vec<u16>> {
    if run.clients.is_empty() {
        return Ok(Vec::new());
    }
    let mut forwards = Vec::new();
    for client in run.clients {
        forwards.push(netclient::Forward {
            proto: client.proto,
            host: netclient::free_port(client.proto)?,
            guest_address: client.guest_address,
            guest_port: client.guest_port,
        });
    }
    vm.extra.extend(netclient::nic_args(&forwards));
    Ok(forwards.iter().map(|f| f.host).collect())
}

/// The virtual machine of `run`: its own QEMU arguments, then `QEMU_ARGS`.
fn machine(run: &Run, images: &build::Images, accel: Accel, opts: &Options) -> Vm {
    let mut extra: Vec<String> = run.qemu_args.split_whitespace().map(String::from).collect();
    extra.extend(opts.qemu_args.iter().cloned());
    Vm {
        cores: run.cores,
        sockets: run.sockets.or(opts.sockets),
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
    Ok((verdict, ending.elapsed.as_secs_f64()))
}

/// Prints a line per test, a line for a failed run, and the log's tail on failure.
fn report(run: &Run, verdict: &Verdict, seconds: f64, log: &Path, tally: &mut Tally) {
    for line in count_tests(run.label, verdict, tally) {
        println!("{line}");
    }
    if verdict.run_failed() {
        println!("FAIL {}: {} ({seconds:.1} s)", run.label, verdict.why_run());
        tally.failed += 1;
    }
    let checked = run.check.map(|check| check(&qemu::read_log(log)));
    match &checked {
        Some(Ok(())) => {
            println!("PASS {}/log", run.label);
            tally.passed += 1;
        }
        Some(Err(why)) => {
            println!("FAIL {}/log: {why}", run.label);
            tally.failed += 1;
        }
        None => {}
    }
    if !verdict.passed() || checked.is_some_and(|c| c.is_err()) {
        print_tail(log, 40);
    }
}

/// Adds a run's tests to `tally`, each by its outcome; the line to print for each.
fn count_tests(label: &str, verdict: &Verdict, tally: &mut Tally) -> Vec<String> {
    let mut lines = Vec::new();
    for test in &verdict.tests {
        lines.push(match test.outcome {
            Outcome::Passed => {
                tally.passed += 1;
                format!("PASS {label}/{}", test.name)
            }
            Outcome::Failed => {
                tally.failed += 1;
                format!("FAIL {label}/{}: {}", test.name, test.detail)
            }
            Outcome::Skipped => {
                tally.skipped += 1;
                format!("SKIP {label}/{}: {}", test.name, test.detail)
            }
        });
    }
    lines
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
    use super::disk_runs::Image;
    use super::*;

    #[test]
    fn the_summary_names_skipped_tests_only_when_there_are_some() {
        let mut tally = Tally { passed: 5, failed: 1, skipped: 0 };
        assert_eq!(tally.summary(), "5 passed, 1 failed");
        tally.skipped = 3;
        assert_eq!(tally.summary(), "5 passed, 1 failed, 3 skipped");
    }

    #[test]
    fn kernel_skips_count_as_skipped_never_as_passed() {
        let log = "CORES ONLINE 1\nTEST PASS a.one cores=1 us=5\n\
                   TEST SKIP a.two: under 16 MiB free\nTEST FAIL a.three: wrong\n\
                   TESTS DONE passed=1 failed=1 skipped=1\n";
        let verdict = judge(log, Some(verdict::ExitCode::Failure.qemu_status()), false, Some(1));
        let mut tally = Tally::default();
        let lines = count_tests("smp1", &verdict, &mut tally);
        assert_eq!((tally.passed, tally.failed, tally.skipped), (1, 1, 1));
        assert_eq!(lines[1], "SKIP smp1/a.two: under 16 MiB free");
        assert_eq!(tally.summary(), "1 passed, 1 failed, 1 skipped");
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
    fn package_runs_spread_their_cores_evenly() {
        let runs: Vec<&Run> = RUNS.iter().filter(|r| r.sockets.is_some()).collect();
        assert!(runs.iter().any(|r| r.sockets == Some(2) && r.test.contains("user.multicast")));
        assert!(runs.iter().any(|r| r.sockets == Some(4)));
        for run in runs {
            assert!(qemu::check_sockets(run.cores, run.sockets).is_ok(), "{}", run.label);
            assert!(run.check.is_some(), "{}", run.label);
        }
    }

    #[test]
    fn a_reused_disk_image_comes_from_an_earlier_judged_run() {
        for (i, run) in RUNS.iter().enumerate() {
            let Some(TestDisk { image: Image::After(earlier), .. }) = run.disk else { continue };
            let before = RUNS[..i].iter().find(|r| r.label == earlier);
            let Some(before) = before else { panic!("{}: no earlier run {earlier}", run.label) };
            let disk = before.disk.expect("the earlier run has a disk");
            assert_eq!(disk.image, Image::Fresh, "{}", run.label);
            assert!(disk.kill_iterations.is_none(), "{}: its image is killed", run.label);
        }
    }

    #[test]
    fn the_disk_runs_come_last_with_their_checks() {
        let labels: Vec<&str> = RUNS.iter().rev().take(4).map(|r| r.label).collect();
        assert_eq!(labels, ["disk-kill", "disk-damaged", "disk-read", "disk-write"]);
        for run in RUNS.iter().rev().take(4) {
            assert_eq!((run.cores, run.mem), (2, "256M"), "{}", run.label);
            assert!(run.clients.is_empty(), "{}", run.label);
        }
        let kill = RUNS.iter().find(|r| r.label == "disk-kill").unwrap().disk.unwrap();
        assert_eq!(
            (kill.image, kill.kill_iterations, kill.check.0),
            (Image::Fresh, Some(3), "iteration")
        );
        let read = RUNS.iter().find(|r| r.label == "disk-read").unwrap();
        assert_eq!(read.disk.unwrap().check.0, "fsck");
        assert_eq!(read.test, "user.files_survive_reboot_read");
        assert_eq!(RUNS.iter().filter(|r| r.disk.is_some()).count(), 6);
    }

    #[test]
    fn numa_nodes_cover_the_cores_and_memory() {
        let numa = RUNS.iter().find(|r| r.label == "numa4").unwrap();
        assert_eq!(numa.cores, 4);
        assert_eq!(numa.mem, "512M");
        assert!(numa.qemu_args.contains("cpus=0-1") && numa.qemu_args.contains("cpus=2-3"));
    }
}
