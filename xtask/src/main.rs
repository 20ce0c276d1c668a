//! `cargo xtask <command>`: Atoll's host tool, the engine behind the Makefile.
//!
//! - `build`: build the kernel ELF.
//! - `deps`:  install or name what is missing (QEMU, e2fsprogs, the `x86_64-unknown-none`
//!   target).
//! - `run`:   build, then boot the kernel in QEMU (interactive, or one `CMD` and power off).
//! - `test`:  host unit tests, then the QEMU integration runs of `test.rs`; ends with the
//!   line `N passed, M failed`.
//! - `bench`, `bench-smoke`: Atoll against a Linux guest (`bench/mod.rs`; own settings).
//!
//! Settings come from the environment (so `make run CORES=4` works) and can be given as
//! flags instead (`cargo xtask run --cores 4`); a flag wins over the environment, and an
//! empty variable counts as unset.

mod bench;
mod build;
mod deps;
mod disk;
mod host;
mod netclient;
mod qemu;
mod run;
mod soak;
mod tally;
mod test;
mod wrk;

use std::env;
use std::process::ExitCode;

/// Errors are messages for the user; `main` prints them and exits 1.
pub type Result<T = ()> = std::result::Result<T, String>;

const USAGE: &str = "\
usage: cargo xtask <command> [flags]

commands:
  build   build the kernel and the initrd of user programs (target/initrd.cpio)
  deps    install what is missing (QEMU, e2fsprogs, wrk, the x86_64-unknown-none target),
          or say how
  run     build, then boot Atoll in QEMU; with CMD, run one shell line and power off
  test    host unit tests, then the QEMU integration runs; ends with `N passed, M failed`
  bench   every experiment on Atoll and on a Linux guest; target/bench/report.md
          (settings: `cargo xtask bench --help`); bench-smoke: one tiny one, both systems
  soak [SECONDS]  webd under wrk for SECONDS (default 600) in a VM of its own; passes if
          every response was 2xx and memory is back to its baseline: docs/net.md
  webfuzz [PORT]  hostile clients and WEBD_FUZZ (default 2000) random requests against
          a webd that `make run` serves on 127.0.0.1:PORT (default 8080): docs/net.md

flags, or the environment variable after each (a flag wins; empty means unset):
  --cores N         CORES        run: virtual CPUs (default: host CPUs)
  --sockets S       SOCKETS      run, test: packages the CPUs are spread over (QEMU
                                 `-smp N,sockets=S`; S must divide the cores; default 1)
  --mem SIZE        MEM          run: memory in QEMU syntax (default: 512M)
  --cmd COMMAND     CMD          run: one shell line, then power off
  --asym GROUPS     ASYM         run: emulated slow cores, CORES:PERCENT groups (duty in
                                 12.5 % steps), e.g. \"1:50\" or \"1:50 2-3:75\"
  --sched POLICY    SCHED        run: the scheduler, amps (default) or symmetric
  --numa POLICY     NUMA_POLICY  run: when a running thread may move between nodes:
                                 always (default), same-node or rss (AMPS §3.3)
  --kquota Q        KQUOTA       run: each program's kernel-memory quota, a percent of its
                                 core's memory (1-100) or `off` (default: 25, at most 64 MiB)
                    CONSOLE      run: `kernel` for the kernel console instead of init
  --net 0|1         NET          run: a virtio-net device on QEMU's user network with
                                 restrict=on (default 1; 0 leaves it out)
  --disk D          DISK         run: the virtio-blk disk: a directory (an ext2 image of
                                 it in target/disks, built again only when something in
                                 it is newer, so what Atoll writes is kept), a raw image
                                 file, or none (default: target/disks/default.img, from
                                 the repository's disk/)
  --accel tcg|kvm   ACCEL        run, test: accelerator (default: kvm if /dev/kvm opens
                                 and the CPU flags show vmx or svm, else tcg)
  --qemu-args ARGS  QEMU_ARGS    run, test: extra QEMU arguments, split on whitespace
  --only TEXT       TEST_FILTER  test: only QEMU runs whose label contains TEXT
  --skip-host       SKIP_HOST=1  test: skip the host unit tests
  --timeout SECS    TEST_TIMEOUT test: time limit of each QEMU run (default: per run)
  --dry-run         DRY_RUN=1    run, test: check the settings and say what would run,
                                 building and booting nothing
                    QEMU         the QEMU binary (default: qemu-system-x86_64)";

/// Everything a command can be told, from flags and the environment.
#[derive(Debug, Default)]
pub struct Options {
    /// `CORES`: number of virtual CPUs for `run`.
    pub cores: Option<u32>,
    /// `SOCKETS`: packages the VM's cores are spread over (`-smp N,sockets=S`).
    pub sockets: Option<u32>,
    /// `MEM`: guest memory for `run`, in QEMU's syntax (`512M`, `16G`).
    pub mem: Option<String>,
    /// `ACCEL`: `tcg` or `kvm`; `None` picks one (see `qemu::Accel::choose`).
    pub accel: Option<String>,
    /// `QEMU_ARGS`: appended to every QEMU command line.
    pub qemu_args: Vec<String>,
    /// `CMD`: one console command for `run`.
    pub cmd: Option<String>,
    /// `ASYM`: emulated slow cores (`asym=` for the kernel), e.g. `1:50`.
    pub asym: Option<String>,
    /// `SCHED`: `amps` or `symmetric` (`sched=` for the kernel).
    pub sched: Option<String>,
    /// `NUMA_POLICY`: `always`, `same-node` or `rss` (`numa=` for the kernel).
    pub numa: Option<String>,
    /// `KQUOTA`: each program's kernel-memory quota, `1`-`100` (percent of its core's
    /// memory) or `off` (`kquota=` for the kernel).
    pub kquota: Option<String>,
    /// `CONSOLE`: `kernel` keeps the kernel's own console instead of the `init` shell.
    pub console: Option<String>,
    /// `NET`: `run` gives the VM a virtio-net device on restricted user networking
    /// (`qemu::USER_NET`) unless this is `0`.
    pub net: Option<String>,
    /// `DISK`: what backs `run`'s virtio-blk disk: a directory, an image file or `none`;
    /// `None` is the repository's `disk/` (see `disk::Disk::choose`).
    pub disk: Option<String>,
    /// `TEST_FILTER`: substring selecting QEMU test runs by label.
    pub only: Option<String>,
    /// `SKIP_HOST`: skip the host unit tests.
    pub skip_host: bool,
    /// `TEST_TIMEOUT`: seconds before a QEMU test run is killed, instead of the table's.
    pub timeout: Option<u64>,
    /// `DRY_RUN`: check the settings and print what would run, without building or booting.
    pub dry_run: bool,
}

impl Options {
    /// Reads the environment, then the flags in `args` (which win).
    fn parse(args: &[String]) -> Result<Options> {
        let mut opts = Options {
            cores: env_var("CORES").map(|v| parse_cores(&v)).transpose()?,
            sockets: env_var("SOCKETS").map(|v| qemu::parse_sockets(&v)).transpose()?,
            mem: env_var("MEM"),
            accel: env_var("ACCEL"),
            qemu_args: split_args(&env_var("QEMU_ARGS").unwrap_or_default()),
            cmd: env_var("CMD"),
            asym: env_var("ASYM"),
            sched: env_var("SCHED"),
            numa: env_var("NUMA_POLICY"),
            kquota: env_var("KQUOTA"),
            console: env_var("CONSOLE"),
            net: env_var("NET"),
            disk: env_var("DISK"),
            only: env_var("TEST_FILTER"),
            skip_host: env_var("SKIP_HOST").is_some_and(|v| v != "0"),
            timeout: env_var("TEST_TIMEOUT").map(|v| parse_secs(&v)).transpose()?,
            dry_run: env_var("DRY_RUN").is_some_and(|v| v != "0"),
        };
        let mut rest = args.iter();
        while let Some(arg) = rest.next() {
            // Accept both `--flag value` and `--flag=value`.
            let (flag, inline) = match arg.split_once('=') {
                Some((flag, value)) => (flag, Some(value.to_string())),
                None => (arg.as_str(), None),
            };
            if flag == "--skip-host" {
                opts.skip_host = true;
                continue;
            }
            if flag == "--dry-run" {
                opts.dry_run = true;
                continue;
            }
            let mut value = || match inline.clone().or_else(|| rest.next().cloned()) {
                Some(value) => Ok(value),
                None => Err(format!("{flag} needs a value\n\n{USAGE}")),
            };
            match flag {
                "--cores" => opts.cores = Some(parse_cores(&value()?)?),
                "--sockets" => opts.sockets = Some(qemu::parse_sockets(&value()?)?),
                "--mem" => opts.mem = Some(value()?),
                "--accel" => opts.accel = Some(value()?),
                "--qemu-args" => opts.qemu_args = split_args(&value()?),
                "--cmd" => opts.cmd = Some(value()?),
                "--asym" => opts.asym = Some(value()?),
                "--sched" => opts.sched = Some(value()?),
                "--numa" => opts.numa = Some(value()?),
                "--kquota" => opts.kquota = Some(value()?),
                "--net" => opts.net = Some(value()?),
                "--disk" => opts.disk = Some(value()?),
                "--only" => opts.only = Some(value()?),
                "--timeout" => opts.timeout = Some(parse_secs(&value()?)?),
                _ => return Err(format!("unknown argument `{arg}`\n\n{USAGE}")),
            }
        }
        Ok(opts)
    }
}

/// An environment variable, treating unset, empty and non-UTF-8 alike as absent.
fn env_var(name: &str) -> Option<String> {
    env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Splits `QEMU_ARGS` on whitespace (no quoting: it is appended word by word).
fn split_args(text: &str) -> Vec<String> {
    text.split_whitespace().map(str::to_string).collect()
}

fn parse_cores(text: &str) -> Result<u32> {
    match text.trim().parse() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("CORES must be a number of at least 1, not `{text}`")),
    }
}

fn parse_secs(text: &str) -> Result<u64> {
    match text.trim().parse() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("TEST_TIMEOUT must be a number of seconds, not `{text}`")),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let Some(command) = args.first() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    if command == "bench" || command == "bench-smoke" {
        return bench::main(command == "bench-smoke", &args[1..]);
    }
    // Commands that take no settings do not read them: `make bench CORES=1,2` runs `deps`
    // first with CORES as `bench` takes it (a list), which `run` and `test` would refuse.
    let settled = match command.as_str() {
        "build" => Some(build::images().map(|_| ExitCode::SUCCESS)),
        "deps" => Some(deps::ensure_all().map(|_| ExitCode::SUCCESS)),
        "webfuzz" => Some(webfuzz(args.get(1).map(String::as_str))),
        "soak" => Some(soak::soak(args.get(1).map(String::as_str))),
        "help" | "-h" | "--help" => {
            println!("{USAGE}");
            Some(Ok(ExitCode::SUCCESS))
        }
        _ => None,
    };
    if let Some(result) = settled {
        return finish(result);
    }
    let opts = match Options::parse(&args[1..]) {
        Ok(opts) => opts,
        Err(message) => {
            eprintln!("xtask: {message}");
            return ExitCode::from(2);
        }
    };
    let result = match command.as_str() {
        "run" => run::run(&opts),
        "test" => test::test(&opts),
        _ => Err(format!("unknown command `{command}`\n\n{USAGE}")),
    };
    finish(result)
}

/// `webfuzz [PORT]`: `netclient::webd_hostile` against 127.0.0.1:PORT (only the loopback
/// address: `make run` forwards it to the guest), for at most two hours.
fn webfuzz(port: Option<&str>) -> Result<ExitCode> {
    let port: u16 = match port {
        None => 8080,
        Some(p) => p.parse().ok().filter(|&p| p != 0).ok_or(format!("webfuzz: bad port `{p}`"))?,
    };
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(7200);
    let stop = std::sync::atomic::AtomicBool::new(false);
    netclient::webd_hostile(addr, &stop, deadline)?;
    println!("webfuzz: webd on {addr} survived");
    Ok(ExitCode::SUCCESS)
}

/// The exit code of a command's result, with its error printed.
fn finish(result: Result<ExitCode>) -> ExitCode {
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn flags_are_parsed_in_both_forms() {
        let args = strings(&[
            "--cores",
            "4",
            "--sockets=2",
            "--mem=1G",
            "--disk",
            "disk/www",
            "--qemu-args",
            "-a  b",
            "--skip-host",
        ]);
        let opts = Options::parse(&args).unwrap();
        assert_eq!(opts.cores, Some(4));
        assert_eq!(opts.sockets, Some(2));
        assert_eq!(opts.mem.as_deref(), Some("1G"));
        assert_eq!(opts.disk.as_deref(), Some("disk/www"));
        assert_eq!(opts.qemu_args, strings(&["-a", "b"]));
        assert!(opts.skip_host);
    }

    #[test]
    fn bad_flags_are_refused() {
        assert!(Options::parse(&strings(&["--cores", "0"])).is_err());
        assert!(Options::parse(&strings(&["--cores", "four"])).is_err());
        assert!(Options::parse(&strings(&["--mem"])).is_err());
        assert!(Options::parse(&strings(&["--sockets", "0"])).is_err());
        assert!(Options::parse(&strings(&["--bogus"])).is_err());
    }
}
