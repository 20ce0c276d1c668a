//! Running one job of `make bench`: the VM it boots (the same machine for both systems),
//! Atoll's command line or the Linux guest's, the bench disk and the host's client when
//! the experiment needs them; or `bench-host`.

use std::time::Duration;

use super::guest::Mitigations;
use super::{benchdisk, netload, registry, runner, Job, Prepared, Settings};
use crate::qemu::{self, Accel, Vm};
use crate::{split_args, Result};

/// Runs one job: boots Atoll or the Linux guest (or runs `bench-host`), serial to `log`.
pub(super) fn launch(
    job: &Job,
    settings: &Settings,
    accel: Accel,
    p: &Prepared,
    log: &std::path::Path,
) -> Result<runner::Outcome> {
    let e = job.experiment;
    let timeout = Duration::from_secs(e.timeout_secs);
    match job.system {
        "atoll" => e
            .atoll_command(job.cores)
            .ok_or_else(|| "no Atoll command".to_string())
            .and_then(|c| {
                let args = job.variant.map_or("", |v| v.atoll_args);
                qemu::cmd_arg(&(c + &registry::with_cores(args, job.cores)))
            })
            .map(|command| atoll_cmdline(command, p.ctx.linux_hz))
            .map(|command| match job.variant.and_then(|v| v.atoll_boot) {
                Some(boot) => format!("{command} {boot}"),
                None => command,
            })
            .and_then(|command| {
                let (kernel, initrd) = (&p.images.kernel, &p.images.initrd);
                let mut vm = vm(settings, accel, job.cores, kernel, initrd, command);
                vm.extra.extend(variant_qemu_args(job));
                if benchdisk::needs_disk(e.name) {
                    benchdisk::attach(&mut vm, log)?;
                }
                match netload::load_of(e.name) {
                    Some(load) => {
                        netload::boot_with_load(&vm, log, timeout, false, &load, measured(job))
                    }
                    None => runner::boot(&vm, log, timeout, false),
                }
            }),
        "linux" => p
            .guest
            .as_ref()
            .ok_or_else(|| "the Linux guest is not prepared".to_string())
            .and_then(|g| {
                let mitigations = job.mitigations.unwrap_or(Mitigations::Off);
                let mut args = e.linux_args(job.cores).unwrap_or_default();
                args.push_str(job.variant.and_then(|v| v.linux_args).unwrap_or(""));
                let cmdline = g.cmdline(&args, mitigations);
                let mut vm = vm(settings, accel, job.cores, &g.kernel, &g.initramfs, cmdline);
                vm.extra.extend(variant_qemu_args(job));
                if benchdisk::needs_disk(e.name) {
                    benchdisk::attach(&mut vm, log)?;
                }
                let load = netload::load_of(e.name);
                match job.variant.map_or(&[][..], |v| v.linux_slow) {
                    [] => match &load {
                        Some(load) => {
                            netload::boot_with_load(&vm, log, timeout, true, load, measured(job))
                        }
                        None => runner::boot(&vm, log, timeout, true),
                    },
                    slow => runner::boot_throttled(&vm, log, timeout, slow),
                }
            }),
        _ => p
            .host_binary
            .as_deref()
            .ok_or_else(|| "bench-host is not built".to_string())
            .and_then(|binary| runner::host(binary, registry::host_args(e.name), log, timeout)),
    }
}

/// Who a host client's result lines are about (`netload::Client::Measures`).
fn measured(job: &Job) -> netload::Measured<'_> {
    netload::Measured {
        system: job.system,
        config: job.variant.map_or("", |v| v.name),
        cores: job.cores,
    }
}

/// Atoll's command line for a job: its command, and the Linux guest's tick rate (`hz=`) so
/// that both systems tick alike.
fn atoll_cmdline(command: String, linux_hz: Option<u64>) -> String {
    match linux_hz {
        Some(hz) => format!("{command} hz={hz}"),
        None => command,
    }
}

/// The VM of one job: the same machine for both systems, only kernel, initrd and command
/// line differ.
fn vm(
    settings: &Settings,
    accel: Accel,
    cores: u32,
    kernel: &std::path::Path,
    initrd: &std::path::Path,
    cmdline: String,
) -> Vm {
    Vm {
        cores,
        sockets: settings.sockets,
        mem: settings.mem.clone(),
        accel,
        kernel: kernel.to_path_buf(),
        initrd: Some(initrd.to_path_buf()),
        cmdline,
        extra: settings.qemu_args.clone(),
    }
}

/// The QEMU arguments a job's configuration adds (the NUMA experiment's nodes).
fn variant_qemu_args(job: &Job) -> Vec<String> {
    job.variant.map_or(Vec::new(), |v| split_args(v.qemu_args))
}
