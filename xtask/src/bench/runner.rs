//! Running one job: boot a VM (Atoll or the Linux guest) with its serial port in a log file,
//! or run `bench-host`, within a time limit; then pick the `RESULT {json}` lines and any
//! complaint out of the output.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use super::guest::{CONDITION_MARKER, DONE_MARKER};
use crate::qemu::{self, Serial, Vm};
use crate::{build, Result};

/// What one job printed and how it ended.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// The JSON text of each `RESULT {json}` line, in order.
    pub results: Vec<String>,
    /// Lines that say something went wrong.
    pub complaints: Vec<String>,
    /// The conditions the system says it ran under, as (name, value): the Linux guest's
    /// `CONDITION` lines (`thp`, `meltdown`, `spectre_v2`) and Atoll's tick rate from its
    /// boot line (`tick_hz`).
    pub conditions: Vec<(String, String)>,
    /// True when a Linux guest's `/init` reported the end of the benchmark.
    pub done: bool,
    /// True when the Linux guest's end marker is required.
    pub needs_done: bool,
    /// Exit status of QEMU (or bench-host); `None` if killed.
    pub status: Option<i32>,
    /// True if the time limit killed it.
    pub timed_out: bool,
    /// True if it was stopped on purpose, once the host's client had measured (see
    /// [`boot_until`]): then neither its exit status nor the guest's end marker counts.
    pub stopped: bool,
    /// Wall time.
    pub elapsed: Duration,
}

impl Outcome {
    /// Why the job failed, or `None` if it did not.
    pub fn failure(&self) -> Option<String> {
        if self.timed_out {
            Some(format!("timed out after {:.0} s", self.elapsed.as_secs_f64()))
        } else if let Some(line) = self.complaints.first() {
            Some(format!("`{line}`"))
        } else if self.needs_done && !self.done && !self.stopped {
            Some("the guest never reported the end of the benchmark".into())
        } else if self.results.is_empty() {
            Some(format!("no RESULT lines (exit status {:?})", self.status))
        } else if !self.stopped && !matches!(self.status, Some(0) | Some(33)) {
            Some(format!("exit status {:?}", self.status))
        } else {
            None
        }
    }
}

/// Boots `vm` with COM1 going to `log`, waits up to `timeout`, and reads the log.
/// `linux`: the guest must print its end marker with status 0.
pub fn boot(vm: &Vm, log: &Path, timeout: Duration, linux: bool) -> Result<Outcome> {
    boot_then(vm, log, timeout, linux, &AtomicBool::new(false), |_| Ok(()))
}

/// Like [`boot`], but the VM is also stopped (killed) as soon as `stop` is set: for a
/// server that runs until the client on the host has measured it.
pub fn boot_until(
    vm: &Vm,
    log: &Path,
    timeout: Duration,
    linux: bool,
    stop: &AtomicBool,
) -> Result<Outcome> {
    boot_then(vm, log, timeout, linux, stop, |_| Ok(()))
}

/// Like [`boot`] for the Linux guest, with the vCPUs in `slow` throttled from the host
/// (`(vCPU, eighths)`, see [`super::throttle`]) from just after QEMU starts until it ends.
pub fn boot_throttled(
    vm: &Vm,
    log: &Path,
    timeout: Duration,
    slow: &[(u32, u8)],
) -> Result<Outcome> {
    let socket = std::env::temp_dir().join(format!("atoll-qmp-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&socket);
    let mut with_qmp = vm.clone();
    with_qmp.extra.extend(["-qmp".to_string(), format!("unix:{},server,nowait", socket.display())]);
    let outcome = boot_then(&with_qmp, log, timeout, true, &AtomicBool::new(false), |_| {
        super::throttle::vcpu_threads(&socket, Duration::from_secs(10))
            .and_then(|threads| super::throttle::slow_down(&threads, slow))
    });
    let _ = std::fs::remove_file(&socket);
    outcome
}

/// [`boot_until`], running `started` once QEMU runs; what it returns lives until QEMU ends
/// (a failure kills QEMU and fails the job).
fn boot_then<T>(
    vm: &Vm,
    log: &Path,
    timeout: Duration,
    linux: bool,
    stop: &AtomicBool,
    started: impl FnOnce(&std::process::Child) -> Result<T>,
) -> Result<Outcome> {
    let file = File::create(log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
    let copy = file.try_clone().map_err(|e| format!("cannot share {}: {e}", log.display()))?;
    let mut command = vm.command(Serial::Stdout);
    command.stdin(Stdio::null()).stdout(file).stderr(copy);
    let mut child = qemu::spawn(&mut command)?;
    let held = match started(&child) {
        Ok(held) => held,
        Err(why) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(why);
        }
    };
    let (ending, stopped) = qemu::wait_or_stop(&mut child, timeout, stop)?;
    drop(held);
    let mut outcome = scan(&qemu::read_log(log));
    outcome.needs_done = linux;
    outcome.stopped = stopped;
    outcome.status = ending.status;
    outcome.timed_out = ending.timed_out;
    outcome.elapsed = ending.elapsed;
    Ok(outcome)
}

/// Builds `bench-host` (release) and returns the binary.
pub fn build_bench_host() -> Result<PathBuf> {
    let mut command = build::cargo();
    command.args(["build", "--release", "--quiet", "-p", "bench-host"]);
    let status = command.status().map_err(|e| format!("cannot start cargo: {e}"))?;
    if !status.success() {
        return Err(format!("building bench-host failed ({status})"));
    }
    Ok(build::target_dir().join("release").join("bench-host"))
}

/// Runs `bench-host` with its output in `log`.
pub fn host(binary: &Path, args: &[&str], log: &Path, timeout: Duration) -> Result<Outcome> {
    let file = File::create(log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
    let copy = file.try_clone().map_err(|e| format!("cannot share {}: {e}", log.display()))?;
    let mut command = Command::new(binary);
    command.args(args).stdin(Stdio::null()).stdout(file).stderr(copy);
    let mut child = command.spawn().map_err(|e| format!("cannot run {}: {e}", binary.display()))?;
    let ending = qemu::wait(&mut child, timeout)?;
    let mut outcome = scan(&qemu::read_log(log));
    outcome.status = ending.status;
    outcome.timed_out = ending.timed_out;
    outcome.elapsed = ending.elapsed;
    Ok(outcome)
}

/// Reads a serial log: `RESULT {json}` anywhere in a line (kernel messages may come first),
/// and the lines that mean failure: a benchmark's `bench: <error>`, a user program that did
/// not exit 0, a trap or panic, a Linux panic, or a non-zero status from the guest's
/// `/init`.
pub fn scan(serial: &str) -> Outcome {
    let mut outcome = Outcome::default();
    for line in serial.lines().map(|l| l.trim_end_matches('\r')) {
        if let Some(at) = line.find("RESULT {") {
            outcome.results.push(line[at + "RESULT ".len()..].trim().to_string());
        } else if let Some(rest) = line.trim().strip_prefix(CONDITION_MARKER) {
            let (name, value) = rest.split_once(' ').unwrap_or((rest, ""));
            outcome.conditions.push((name.to_string(), value.trim().to_string()));
        } else if let Some(hz) = atoll_tick_hz(line) {
            outcome.conditions.push(("tick_hz".into(), hz.to_string()));
        } else if let Some(status) = line.trim().strip_prefix(DONE_MARKER) {
            outcome.done = true;
            if status.trim() != "0" {
                outcome.complaints.push(line.trim().to_string());
            }
        } else if is_complaint(line.trim()) {
            outcome.complaints.push(line.trim().to_string());
        }
    }
    outcome
}

/// The tick rate in Atoll's boot line `timer: TSC 2105 MHz, APIC timer 62498 kHz, tick 100 Hz`.
fn atoll_tick_hz(line: &str) -> Option<u64> {
    let rest = line.strip_prefix("timer: ")?;
    let (_, tick) = rest.rsplit_once(", tick ")?;
    tick.strip_suffix(" Hz")?.trim().parse().ok()
}

fn is_complaint(line: &str) -> bool {
    line.starts_with("bench:")
        || (line.starts_with("run: ") && !line.ends_with("Exited(0)"))
        || line.starts_with(verdict::TRAP_MARKER)
        || line.starts_with(verdict::PANIC_MARKER)
        || line.starts_with("USER FAULT")
        || line.contains("Kernel panic")
}

/// Prints the last `count` lines of a log, indented.
pub fn print_tail(log: &Path, count: usize) {
    let text = qemu::read_log(log);
    let lines: Vec<&str> = text.lines().collect();
    for line in &lines[lines.len().saturating_sub(count)..] {
        println!("    {}", line.trim_end_matches('\r'));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_are_found_after_other_output() {
        let log = "boot\r\nRESULT {\"a\":1}\r\n[ 1.0] x RESULT {\"b\":2}\nrun: nullsys on core 0: Exited(0)\n";
        let o = scan(log);
        assert_eq!(o.results, ["{\"a\":1}", "{\"b\":2}"]);
        assert!(o.complaints.is_empty());
    }

    #[test]
    fn conditions_are_read_from_both_systems() {
        let linux = "LINUX READY cpus=2\nCONDITION thp always madvise [never]\nCONDITION spectre_v2 Vulnerable\n";
        let o = scan(linux);
        assert_eq!(
            o.conditions,
            [
                ("thp".to_string(), "always madvise [never]".to_string()),
                ("spectre_v2".to_string(), "Vulnerable".to_string())
            ]
        );
        let atoll = "timer: TSC 2105 MHz, APIC timer 62498 kHz, tick 250 Hz\r\n";
        assert_eq!(scan(atoll).conditions, [("tick_hz".to_string(), "250".to_string())]);
        assert!(scan("timer: ignoring hz=: 'x' is not a number from 10 to 1000\n")
            .conditions
            .is_empty());
    }

    #[test]
    fn failures_are_complaints() {
        let o =
            scan("bench: needs 2 cores\nrun: nullsys on core 0: Faulted(14)\nPANIC core=0: x\n");
        assert_eq!(o.complaints.len(), 3);
        let o = scan("RESULT {}\nBENCH DONE status=1\n");
        assert!(o.done);
        assert_eq!(o.complaints, ["BENCH DONE status=1"]);
    }

    #[test]
    fn an_outcome_fails_for_each_reason() {
        let ok = Outcome {
            results: vec!["{}".into()],
            status: Some(0),
            done: true,
            needs_done: true,
            ..Outcome::default()
        };
        assert_eq!(ok.failure(), None);
        assert!(Outcome { timed_out: true, ..ok.clone() }.failure().is_some());
        assert!(Outcome { done: false, ..ok.clone() }.failure().is_some());
        assert!(Outcome { results: vec![], ..ok.clone() }.failure().is_some());
        assert!(Outcome { status: Some(1), ..ok.clone() }.failure().is_some());
        // Stopped on purpose once the client had measured: killed, no end marker, fine.
        let stopped = Outcome { status: None, done: false, stopped: true, ..ok.clone() };
        assert_eq!(stopped.failure(), None);
        assert!(Outcome { results: vec![], ..stopped }.failure().is_some());
        assert!(Outcome { complaints: vec!["bench: x".into()], ..ok }.failure().is_some());
    }
}
