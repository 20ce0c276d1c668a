//! `cargo xtask run`: build the kernel and boot it in QEMU.
//!
//! Without `CMD` the serial console is the terminal (interactive). With `CMD` the shell
//! runs that one line and powers off; the serial output goes to stdout so
//! scripts can read it, and the exit status says whether QEMU ended well. The VM has a
//! virtio-net device (`NET`) and a virtio-blk disk (`DISK`, `disk.rs`) unless told not to.

use std::process::{ExitCode, Stdio};
use std::thread;
use std::time::Instant;

use verdict::ExitCode as KernelExit;

use crate::disk::Disk;
use crate::netclient;
use crate::qemu::{self, Accel, Serial, Vm};
use crate::{build, Options, Result};

/// Guest memory when `MEM` is not given.
const DEFAULT_MEM: &str = "512M";

/// The host port forwarded to the guest's port 80 (webd's) when it is free.
const WEB_PORT: u16 = 8080;

/// Builds, boots, waits; prints the wall time of the whole run to stderr at the end.
pub fn run(opts: &Options) -> Result<ExitCode> {
    let start = Instant::now();
    let (accel, why) = Accel::choose(opts.accel.as_deref())?;
    let cores = opts.cores.unwrap_or_else(host_cpus);
    qemu::check_sockets(cores, opts.sockets)?;
    // `DISK` is checked before the kernel is built, so a wrong path is said at once.
    let disks = build::target_dir().join("disks");
    let disk = Disk::choose(opts.disk.as_deref(), &build::root().join("disk"), &disks)?;
    let images = if opts.dry_run { build::image_paths() } else { build::images()? };
    let mem = opts.mem.clone().unwrap_or_else(|| DEFAULT_MEM.into());
    let mut cmdline = match &opts.cmd {
        Some(cmd) => qemu::cmd_arg(cmd)?,
        None => String::new(),
    };
    if let Some(console) = &opts.console {
        if console.contains(char::is_whitespace) || console.contains('"') {
            return Err(format!("CONSOLE must be one word: {console}"));
        }
        cmdline = format!("{cmdline} console={console}").trim().to_string();
    }
    if let Some(asym) = &opts.asym {
        cmdline = format!("{cmdline} {}", qemu::asym_arg(asym, cores)?).trim().to_string();
    }
    if let Some(sched) = &opts.sched {
        if sched != "amps" && sched != "symmetric" {
            return Err(format!("SCHED must be amps or symmetric, not `{sched}`"));
        }
        cmdline = format!("{cmdline} sched={sched}").trim().to_string();
    }
    if let Some(numa) = &opts.numa {
        if !["always", "same-node", "rss"].contains(&numa.as_str()) {
            return Err(format!("NUMA_POLICY must be always, same-node or rss, not `{numa}`"));
        }
        cmdline = format!("{cmdline} numa={numa}").trim().to_string();
    }
    if let Some(kquota) = &opts.kquota {
        let percent = kquota.parse::<u32>().ok().filter(|p| (1..=100).contains(p));
        if kquota != "off" && percent.is_none() {
            return Err(format!("KQUOTA must be a percent from 1 to 100, or off, not `{kquota}`"));
        }
        cmdline = format!("{cmdline} kquota={kquota}").trim().to_string();
    }
    let mut extra = Vec::new();
    match opts.net.as_deref() {
        None | Some("1") => {
            // The web port: 8080 if free, else one the OS picks (bound to 127.0.0.1 only).
            let free = std::net::TcpListener::bind(("127.0.0.1", WEB_PORT)).is_ok();
            let port = if free { WEB_PORT } else { netclient::free_port(netclient::Proto::Tcp)? };
            extra.extend(netclient::nic_args(&[netclient::Forward::to(
                netclient::Proto::Tcp,
                port,
                80,
            )]));
            eprintln!(
                "run: virtio-net on QEMU user networking (restrict=on); 127.0.0.1:{port} forwards \
                 to the guest's port 80: `run webd` in the shell serves http://127.0.0.1:{port}/"
            );
        }
        Some("0") => {}
        Some(other) => return Err(format!("NET must be 0 or 1, not `{other}`")),
    }
    // Its image is built (if it must be) once the kernel is, and said next to the network.
    let (disk_args, disk_line) = disk.attach(opts.dry_run)?;
    eprintln!("run: {disk_line}");
    extra.extend(disk_args);
    extra.extend(opts.qemu_args.iter().cloned());
    let vm = Vm {
        cores,
        sockets: opts.sockets,
        mem,
        accel,
        kernel: images.kernel,
        initrd: Some(images.initrd),
        cmdline,
        extra,
    };

    if opts.dry_run {
        let command = vm.command(Serial::Stdout);
        println!("run: dry run ({} ({why})): would boot {command:?}", accel.name());
        return Ok(ExitCode::SUCCESS);
    }
    let mut command = if opts.cmd.is_some() {
        let mut command = vm.command(Serial::Stdout);
        command.stdin(Stdio::null());
        command
    } else {
        let (smp, mem, accel) = (qemu::smp_arg(vm.cores, vm.sockets), &vm.mem, accel.name());
        eprintln!("run: -smp {smp}, {mem}, {accel} ({why}); press Ctrl-A X to quit QEMU");
        vm.command(Serial::Interactive)
    };
    let status = qemu::spawn(&mut command)?.wait().map_err(|e| format!("waiting for QEMU: {e}"))?;
    eprintln!("run: {} ms wall", start.elapsed().as_millis());

    // 0: powered off (or quit from the monitor); 33: the kernel's success exit.
    match status.code() {
        Some(0) => Ok(ExitCode::SUCCESS),
        Some(code) if code == KernelExit::Success.qemu_status() => Ok(ExitCode::SUCCESS),
        _ => {
            eprintln!("run: QEMU ended with {status}");
            Ok(ExitCode::FAILURE)
        }
    }
}

/// The number of CPUs this host offers us (1 if that cannot be found out).
fn host_cpus() -> u32 {
    thread::available_parallelism().map_or(1, |n| n.get() as u32)
}
