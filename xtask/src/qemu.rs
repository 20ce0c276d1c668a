//! The QEMU command line: machine, accelerator, serial port, and waiting with a timeout.

use std::env;
use std::fs::{self, OpenOptions};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crate::Result;

/// The QEMU binary used unless `$QEMU` names another (a fake one, in tests of xtask).
pub const DEFAULT_BINARY: &str = "qemu-system-x86_64";

/// The QEMU binary to run.
pub fn binary() -> String {
    env::var("QEMU").ok().filter(|q| !q.is_empty()).unwrap_or_else(|| DEFAULT_BINARY.into())
}

/// How QEMU executes guest code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accel {
    /// Binary translation: slower per instruction, but available everywhere.
    Tcg,
    /// Hardware virtualization through `/dev/kvm`.
    Kvm,
}

impl Accel {
    /// The accelerator asked for (`tcg` or `kvm`), or the best one this host has, with a
    /// few words on why.
    pub fn choose(requested: Option<&str>) -> Result<(Accel, &'static str)> {
        match requested.map(str::to_ascii_lowercase).as_deref() {
            Some("tcg") => Ok((Accel::Tcg, "ACCEL=tcg")),
            Some("kvm") => Ok((Accel::Kvm, "ACCEL=kvm")),
            Some(other) => Err(format!("ACCEL must be `tcg` or `kvm`, not `{other}`")),
            None if !kvm_opens() => Ok((Accel::Tcg, "/dev/kvm not usable")),
            None => {
                let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
                if has_virtualization_flags(&cpuinfo) {
                    Ok((Accel::Kvm, "/dev/kvm and vmx/svm"))
                } else {
                    // A paravirtual nested /dev/kvm runs guest kernel code far slower than TCG.
                    Ok((Accel::Tcg, "/dev/kvm but no vmx/svm flag"))
                }
            }
        }
    }

    /// Lower-case name, as `ACCEL` spells it.
    pub fn name(self) -> &'static str {
        match self {
            Accel::Tcg => "tcg",
            Accel::Kvm => "kvm",
        }
    }

    /// QEMU arguments selecting this accelerator and a CPU model that suits it.
    fn args(self) -> [&'static str; 4] {
        match self {
            // `max` is every feature TCG emulates; QEMU 7.2 warns about none of them.
            // thread=multi: one host thread per vCPU (MTTCG). QEMU 7.2 does not always pick
            // it by default, and without it cores take turns, so a cross-core round trip
            // costs a scheduling slice (milliseconds) instead of hundreds of cycles.
            // l3-cache=on: the model's L3 (16 MiB) in CPUID 0x80000006, the leaf its AMD
            // vendor string sends the kernel to (its leaf 4 is empty); AMPS's RSS policy
            // compares resident sets with it (§2.4.2). On by default for q35 in 7.2; said
            // here so that no machine-type default takes it away. (topoext, which would
            // fill 0x8000001D, is not emulated by TCG: QEMU warns and drops it.)
            Accel::Tcg => ["-accel", "tcg,thread=multi", "-cpu", "max,l3-cache=on"],
            // `-cpu host` alone can fail on MSR 0x10a (IA32_ARCH_CAPABILITIES).
            // host-cache-info=on: the host's own cache leaves (4, 0x8000001D), not a model's.
            Accel::Kvm => ["-accel", "kvm", "-cpu", "host,-arch-capabilities,host-cache-info=on"],
        }
    }
}

/// True when `/dev/kvm` opens for reading and writing.
fn kvm_opens() -> bool {
    OpenOptions::new().read(true).write(true).open("/dev/kvm").is_ok()
}

/// True when a `flags` line of `/proc/cpuinfo` lists `vmx` (Intel) or `svm` (AMD).
pub fn has_virtualization_flags(cpuinfo: &str) -> bool {
    cpuinfo
        .lines()
        .filter(|line| line.starts_with("flags"))
        .filter_map(|line| line.split_once(':'))
        .any(|(_, flags)| flags.split_whitespace().any(|f| f == "vmx" || f == "svm"))
}

/// Where the guest's COM1 goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Serial {
    /// The terminal, multiplexed with the QEMU monitor (Ctrl-A X quits, Ctrl-A C monitor).
    Interactive,
    /// QEMU's standard output, no monitor (the caller redirects stdout as it likes).
    Stdout,
}

/// One virtual machine to boot.
#[derive(Clone, Debug)]
pub struct Vm {
    /// Number of virtual CPUs (`-smp`).
    pub cores: u32,
    /// Packages (sockets) the CPUs are spread over (`-smp N,sockets=S`); `None` leaves
    /// QEMU's default, one package. Checked by [`check_sockets`].
    pub sockets: Option<u32>,
    /// Memory in QEMU's syntax (`-m`).
    pub mem: String,
    /// The accelerator and CPU model.
    pub accel: Accel,
    /// The kernel ELF (`-kernel`, booted through its PVH note).
    pub kernel: PathBuf,
    /// The initrd (`-initrd`, a PVH boot module holding the user programs).
    pub initrd: Option<PathBuf>,
    /// The kernel command line (`-append`).
    pub cmdline: String,
    /// Extra QEMU arguments, appended last (a test's own, then `QEMU_ARGS`).
    pub extra: Vec<String>,
}

impl Vm {
    /// The QEMU command for this machine with its serial port on `serial`.
    pub fn command(&self, serial: Serial) -> Command {
        let mut command = Command::new(binary());
        command.args(["-machine", "q35"]);
        command.args(self.accel.args());
        command.arg("-m").arg(&self.mem);
        command.arg("-smp").arg(smp_arg(self.cores, self.sockets));
        command.arg("-kernel").arg(&self.kernel);
        if let Some(initrd) = &self.initrd {
            command.arg("-initrd").arg(initrd);
        }
        command.arg("-append").arg(&self.cmdline);
        command.args(["-no-reboot", "-display", "none"]);
        // No default NIC (q35 would add an e1000e on unrestricted user networking): a VM
        // that has one gets `netclient::nic_args` among its extra arguments.
        command.args(["-nic", "none"]);
        command.args(["-device", "isa-debug-exit,iobase=0xf4,iosize=0x04"]);
        match serial {
            Serial::Interactive => command.args(["-serial", "mon:stdio"]),
            Serial::Stdout => command.args(["-serial", "stdio", "-monitor", "none"]),
        };
        command.args(&self.extra);
        command
    }
}

/// The value of `-smp`: `4`, or `4,sockets=2` (QEMU then gives each package
/// `cores / sockets` cores, one thread each).
pub fn smp_arg(cores: u32, sockets: Option<u32>) -> String {
    match sockets {
        Some(s) => format!("{cores},sockets={s}"),
        None => cores.to_string(),
    }
}

/// The kernel's `asym=` argument for `ASYM` (groups `CORES:PERCENT`, by spaces or `/`),
/// checked here so a bad setting is refused before anything boots.
pub fn asym_arg(text: &str, cores: u32) -> Result<String> {
    cmdline::asym_groups(text, cores as usize).map_err(|why| format!("ASYM={text}: {why}"))?;
    let groups: Vec<&str> = text.split([' ', '/']).filter(|g| !g.is_empty()).collect();
    Ok(format!("asym={}", groups.join("/")))
}

/// Parses `SOCKETS`: a number of at least 1.
pub fn parse_sockets(text: &str) -> Result<u32> {
    match text.trim().parse() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("SOCKETS must be a number of at least 1, not `{text}`")),
    }
}

/// Refuses `SOCKETS=sockets` for a VM of `cores` cores unless it divides them (every
/// package gets the same number of cores, as QEMU requires).
pub fn check_sockets(cores: u32, sockets: Option<u32>) -> Result {
    match sockets {
        Some(s) if s == 0 || !cores.is_multiple_of(s) => {
            Err(format!("SOCKETS={s} does not divide CORES={cores}: each package needs the same number of cores"))
        }
        _ => Ok(()),
    }
}

/// The kernel command line item that runs one console command: `cmd="<command>"`.
pub fn cmd_arg(command: &str) -> Result<String> {
    // The kernel's parser knows no escapes, so a `"` would end the value early.
    if command.contains('"') {
        return Err(format!("CMD cannot contain a double quote: {command}"));
    }
    if command.len() > abi::ARGS_MAX {
        return Err(format!(
            "CMD is {} bytes; the shell takes at most {} (split it over several runs)",
            command.len(),
            abi::ARGS_MAX
        ));
    }
    Ok(format!("{}=\"{command}\"", verdict::cmdline_keys::CMD))
}

/// Starts `command`, explaining a missing QEMU better than "No such file or directory".
pub fn spawn(command: &mut Command) -> Result<Child> {
    command.spawn().map_err(|e| {
        let program = command.get_program().to_string_lossy().into_owned();
        if e.kind() == ErrorKind::NotFound {
            format!("{program} not found: run `make deps` (or `cargo xtask deps`) first")
        } else {
            format!("cannot start {program}: {e}")
        }
    })
}

/// How a QEMU process ended.
#[derive(Clone, Copy, Debug)]
pub struct Ending {
    /// Exit status; `None` if it died by a signal (or we killed it).
    pub status: Option<i32>,
    /// True if we killed it because the time was up.
    pub timed_out: bool,
    /// How long it ran.
    pub elapsed: Duration,
}

/// Waits for `child` to exit, killing it (and reaping it) once `timeout` has passed.
pub fn wait(child: &mut Child, timeout: Duration) -> Result<Ending> {
    wait_or_stop(child, timeout, &AtomicBool::new(false)).map(|(ending, _)| ending)
}

/// [`wait`], also killing `child` as soon as `stop` is set; the second value is true when
/// that is how it ended (a job whose client measures ends the VM when it is done).
pub fn wait_or_stop(
    child: &mut Child,
    timeout: Duration,
    stop: &AtomicBool,
) -> Result<(Ending, bool)> {
    let start = Instant::now();
    loop {
        let waited = child.try_wait().map_err(|e| format!("waiting for QEMU: {e}"))?;
        if let Some(status) = waited {
            let ending =
                Ending { status: status.code(), timed_out: false, elapsed: start.elapsed() };
            return Ok((ending, false));
        }
        let stopped = stop.load(Ordering::Relaxed);
        if stopped || start.elapsed() >= timeout {
            // SIGKILL, then wait() so no zombie is left behind.
            let _ = child.kill();
            let _ = child.wait();
            let ending = Ending { status: None, timed_out: !stopped, elapsed: start.elapsed() };
            return Ok((ending, stopped));
        }
        thread::sleep(Duration::from_millis(5));
    }
}

/// Reads a log file that may hold invalid UTF-8 (a crashing kernel prints anything).
pub fn read_log(path: &Path) -> String {
    String::from_utf8_lossy(&fs::read(path).unwrap_or_default()).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vm(extra: &[&str]) -> Vm {
        Vm {
            cores: 4,
            sockets: None,
            mem: "256M".into(),
            accel: Accel::Tcg,
            kernel: PathBuf::from("/k"),
            initrd: None,
            cmdline: "test=all".into(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn args(command: &Command) -> Vec<String> {
        command.get_args().map(|a| a.to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn command_line_has_the_machine_and_extra_args_last() {
        let line = args(&vm(&["-numa", "node"]).command(Serial::Stdout)).join(" ");
        assert!(line.starts_with(
            "-machine q35 -accel tcg,thread=multi -cpu max,l3-cache=on -m 256M -smp 4 -kernel /k"
        ));
        assert!(line.contains("-append test=all -no-reboot -display none -nic none"));
        assert!(line.contains("-device isa-debug-exit,iobase=0xf4,iosize=0x04"));
        assert!(line.contains("-serial stdio -monitor none"));
        assert!(line.ends_with("-numa node"));
    }

    #[test]
    fn sockets_go_into_smp() {
        let two = Vm { sockets: Some(2), ..vm(&[]) };
        let line = args(&two.command(Serial::Stdout)).join(" ");
        assert!(line.contains("-m 256M -smp 4,sockets=2 -kernel /k"), "{line}");
        assert_eq!(smp_arg(8, None), "8");
    }

    #[test]
    fn sockets_must_divide_the_cores() {
        assert!(check_sockets(4, Some(2)).is_ok());
        assert!(check_sockets(8, Some(4)).is_ok());
        assert!(check_sockets(4, None).is_ok());
        assert!(check_sockets(1, Some(1)).is_ok());
        let err = check_sockets(6, Some(4)).unwrap_err();
        assert!(err.contains("SOCKETS=4") && err.contains("CORES=6"), "{err}");
        assert_eq!(asym_arg("1:50 2-3:75", 4).unwrap(), "asym=1:50/2-3:75");
        assert!(asym_arg("2:50", 2).unwrap_err().contains("ASYM=2:50"));
        assert!(asym_arg("1:40", 2).is_err());
        assert!(check_sockets(1, Some(2)).is_err());
        assert!(check_sockets(4, Some(0)).is_err());
        assert_eq!(parse_sockets(" 2 ").unwrap(), 2);
        for bad in ["0", "two", "-1", "1.5"] {
            assert!(parse_sockets(bad).unwrap_err().contains("SOCKETS"), "{bad}");
        }
    }

    #[test]
    fn interactive_serial_shares_the_terminal_with_the_monitor() {
        let line = args(&vm(&[]).command(Serial::Interactive)).join(" ");
        assert!(line.ends_with("-serial mon:stdio"));
    }

    #[test]
    fn kvm_uses_the_host_cpu_without_arch_capabilities() {
        assert_eq!(
            Accel::Kvm.args(),
            ["-accel", "kvm", "-cpu", "host,-arch-capabilities,host-cache-info=on"]
        );
    }

    #[test]
    fn explicit_accelerator_wins_and_nonsense_is_refused() {
        assert_eq!(Accel::choose(Some("KVM")).unwrap().0, Accel::Kvm);
        assert_eq!(Accel::choose(Some("tcg")).unwrap().0, Accel::Tcg);
        assert!(Accel::choose(Some("hvf")).is_err());
    }

    #[test]
    fn virtualization_flags_are_whole_words_on_flags_lines() {
        assert!(has_virtualization_flags("flags\t\t: fpu vme vmx sse\n"));
        assert!(has_virtualization_flags("model name : x\nflags : fpu svm\n"));
        assert!(!has_virtualization_flags("flags\t\t: fpu vme vmxx hypervisor\n"));
        assert!(!has_virtualization_flags("model name : vmx svm\nflags : fpu\n"));
    }

    #[test]
    fn cmd_is_quoted_for_the_kernel() {
        assert_eq!(cmd_arg("cores").unwrap(), "cmd=\"cores\"");
        assert_eq!(cmd_arg("mem 3").unwrap(), "cmd=\"mem 3\"");
        assert!(cmd_arg("say \"hi\"").is_err());
        // Longer than a program's argument string: refused, not cut (the kernel would
        // have run a truncated last command).
        assert!(cmd_arg(&"x".repeat(abi::ARGS_MAX)).is_ok());
        assert!(cmd_arg(&"x".repeat(abi::ARGS_MAX + 1)).unwrap_err().contains("at most 256"));
    }
}
