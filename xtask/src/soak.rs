//! `cargo xtask soak [SECONDS]` (issue M12's soak, outside `make test`): boots Atoll on two
//! cores with a virtio-net, runs `run webd --count 1; mem; run webd ... --idle 20; mem` in
//! its shell (the first webd answers one request, so what a first run sets up once is in
//! the baseline), and loads the second webd from the host with `wrk` (16 kept-alive connections on `/`, through a forward from
//! a free port of 127.0.0.1 only) for SECONDS (default 600). It passes when wrk saw no
//! non-2xx response and no socket error, webd exited 0, and the machine's free frames and
//! the boot core's kernel heap in use are back to what they were before webd started.
//! The serial log is `target/soak.log`.

use std::fs::File;
use std::net::SocketAddr;
use std::process::{ExitCode, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use crate::netclient::{self, Forward, Proto};
use crate::qemu::{self, Accel, Serial, Vm};
use crate::{build, deps, wrk, Result};

/// Connections wrk keeps open (fewer than webd's 32 listening sockets).
const CONNECTIONS: u32 = 16;

/// Runs the soak.
pub fn soak(seconds: Option<&str>) -> Result<ExitCode> {
    let seconds: u32 = match seconds {
        None => 600,
        Some(s) => s
            .parse()
            .ok()
            .filter(|s| (10..=3600).contains(s))
            .ok_or(format!("soak: SECONDS must be a number from 10 to 3600, not `{s}`"))?,
    };
    let wrk_path = deps::ensure_tool("wrk", "wrk")?;
    let (accel, _) = Accel::choose(None)?;
    let images = build::images()?;
    let port = netclient::free_port(Proto::Tcp)?;
    // A first webd answers one request, so what a first run sets up once (and keeps) is
    // in the baseline; the second is the soak.
    let command = format!(
        "run webd --count 1 --seconds 300; mem; run webd --count 1000000000 --seconds {} --idle 20; mem",
        seconds + 300
    );
    let vm = Vm {
        cores: 2,
        sockets: None,
        mem: "512M".into(),
        accel,
        kernel: images.kernel,
        initrd: Some(images.initrd),
        cmdline: qemu::cmd_arg(&command)?,
        extra: netclient::nic_args(&[Forward::to(Proto::Tcp, port, 80)]).to_vec(),
    };
    let log = build::target_dir().join("soak.log");
    let file = File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
    let mut qemu_command = vm.command(Serial::Stdout);
    qemu_command.stdin(Stdio::null()).stdout(file);
    println!(
        "soak: webd under wrk for {seconds} s ({}); serial in {}",
        accel.name(),
        log.display()
    );
    let mut child = qemu::spawn(&mut qemu_command)?;
    let limit = Duration::from_secs(u64::from(seconds) + 600);
    let deadline = Instant::now() + limit;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let report = std::thread::scope(|scope| {
        let client = scope.spawn(|| -> Result<wrk::Report> {
            // The first webd's one request, then the second's first.
            netclient::wait_for_index(addr, deadline)?;
            netclient::wait_for_index(addr, deadline)?;
            wrk::run(&wrk_path, &format!("http://{addr}/"), seconds, CONNECTIONS, deadline)
        });
        let ending = qemu::wait_or_stop(&mut child, limit, &AtomicBool::new(false));
        (client.join().unwrap_or(Err("the client panicked".into())), ending)
    });
    let (report, ending) = (report.0?, report.1?.0);
    let serial = qemu::read_log(&log);
    println!("soak: wrk {report}");
    let verdict = check(&serial, &report, ending.timed_out);
    match verdict {
        Ok(summary) => {
            println!("soak: passed: {summary}");
            Ok(ExitCode::SUCCESS)
        }
        Err(why) => {
            println!("soak: FAILED: {why}");
            Ok(ExitCode::FAILURE)
        }
    }
}

/// The verdict from the serial log and wrk's report.
fn check(serial: &str, report: &wrk::Report, timed_out: bool) -> Result<String> {
    if timed_out {
        return Err("the VM did not end in time".into());
    }
    if report.requests == 0 || report.non_2xx > 0 || report.socket_errors > 0 {
        return Err(format!("wrk: {report:?}"));
    }
    if serial.matches("run: webd on core 0: Exited(0)").count() != 2 {
        return Err("webd did not exit 0".into());
    }
    let frames = numbers_after(serial, "total ", " free frames");
    let heap = numbers_after(serial, "kernel heap of this core: ", " KiB mapped, ");
    let used = numbers_after(serial, " KiB mapped, ", " KiB in use");
    let (Some(f), Some(m), Some(u)) = (pair(&frames), pair(&heap), pair(&used)) else {
        return Err("the log has not two `mem` reports".into());
    };
    let summary = format!(
        "free frames {} before, {} after; kernel heap {} KiB mapped and {} KiB in use before, {} and {} after",
        f.0, f.1, m.0, u.0, m.1, u.1
    );
    if f.1 < f.0 || u.1 > u.0 {
        return Err(format!("not back to the baseline: {summary}"));
    }
    Ok(summary)
}

/// The first and the last of `values`.
fn pair(values: &[u64]) -> Option<(u64, u64)> {
    match values {
        [first, .., last] => Some((*first, *last)),
        _ => None,
    }
}

/// Every number found between `before` and `after` on one line of `text`.
fn numbers_after(text: &str, before: &str, after: &str) -> Vec<u64> {
    text.lines()
        .filter_map(|line| {
            let rest = &line[line.find(before)? + before.len()..];
            rest[..rest.find(after)?].trim().parse().ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SERIAL: &str = "total 120000 free frames (468 MiB) of 500 MiB usable, 1 NUMA node(s)\n\
        kernel heap of this core: 2048 KiB mapped, 900 KiB in use\n\
        run: webd on core 0: Exited(0)\n\
        run: webd on core 0: Exited(0)\n\
        total 120000 free frames (468 MiB) of 500 MiB usable, 1 NUMA node(s)\n\
        kernel heap of this core: 2048 KiB mapped, 900 KiB in use\n";

    fn clean() -> wrk::Report {
        wrk::Report { requests: 10, per_second: 5.0, ..wrk::Report::default() }
    }

    #[test]
    fn a_clean_run_back_at_its_baseline_passes() {
        assert!(check(SERIAL, &clean(), false).is_ok());
    }

    #[test]
    fn a_leak_an_error_or_a_bad_exit_fails() {
        let leak = SERIAL.replacen("total 120000", "total 130000", 1);
        assert!(check(&leak, &clean(), false).is_err());
        let grown = SERIAL.replacen("900 KiB in use\nrun", "800 KiB in use\nrun", 1);
        assert!(check(&grown, &clean(), false).is_err());
        let errors = wrk::Report { socket_errors: 1, ..clean() };
        assert!(check(SERIAL, &errors, false).is_err());
        assert!(check(&SERIAL.replace("Exited(0)", "Exited(1)"), &clean(), false).is_err());
        assert!(check(SERIAL, &clean(), true).is_err());
        assert!(check("", &clean(), false).is_err());
    }
}
