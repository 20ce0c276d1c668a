//! `cargo xtask deps`: make sure QEMU, e2fsprogs (for `DISK` images), wrk (the HTTP load
//! generator) and the kernel's Rust target are installed.
//!
//! Quiet when everything is there. What is missing is installed when that needs no
//! password (we are root, or `sudo -n` works); otherwise we stop with the exact command.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::build::{self, KERNEL_TARGET};
use crate::{disk, qemu, Result};

/// The Debian package that provides `qemu-system-x86_64`.
const QEMU_PACKAGE: &str = "qemu-system-x86";

/// Installs or names everything `run` and `test` need.
pub fn ensure_all() -> Result {
    ensure_qemu()?;
    ensure_e2fsprogs()?;
    // The HTTP load of the webd test (`netclient::webd_under_wrk`) and of `web_static`.
    ensure_tool("wrk", "wrk")?;
    ensure_rust_target()
}

/// Makes sure the QEMU binary is on `PATH`, installing the Debian package if we may.
fn ensure_qemu() -> Result {
    let binary = qemu::binary();
    if find_program(&binary).is_some() {
        return Ok(());
    }
    if binary != qemu::DEFAULT_BINARY {
        return Err(format!("QEMU={binary} is not an executable file or on PATH"));
    }
    install(QEMU_PACKAGE, &binary, "QEMU's x86-64 system emulator")?;
    match find_program(&binary) {
        Some(_) => Ok(()),
        None => Err(format!("installed {QEMU_PACKAGE} but {binary} is still not on PATH")),
    }
}

/// Makes sure e2fsprogs' `mke2fs`, `e2fsck` and `debugfs` are there (`DISK` images and
/// the disk tests), installing the Debian package if we may.
fn ensure_e2fsprogs() -> Result {
    let missing = || -> Vec<&str> {
        disk::TOOLS.iter().copied().filter(|t| disk::find_tool(t).is_none()).collect()
    };
    let absent = missing();
    if absent.is_empty() {
        return Ok(());
    }
    install(disk::TOOLS_PACKAGE, &absent.join(", "), "e2fsprogs")?;
    match missing()[..] {
        [] => Ok(()),
        ref still => {
            Err(format!("installed {} but {} not found", disk::TOOLS_PACKAGE, still.join(", ")))
        }
    }
}

/// The path of `program`, installing the Debian `package` that provides it first if it is
/// missing and we may (the host's tools of `make bench`: `wrk`).
pub fn ensure_tool(program: &str, package: &str) -> Result<PathBuf> {
    if let Some(path) = find_program(program) {
        return Ok(path);
    }
    install(package, program, package)?;
    find_program(program)
        .ok_or_else(|| format!("installed {package} but {program} is still not on PATH"))
}

/// Installs the Debian `package` with apt-get, as root or through `sudo -n`; otherwise
/// fails with the command to run. `missing` names what was not found, `what` says what
/// to install on a system without apt-get.
fn install(package: &str, missing: &str, what: &str) -> Result {
    let manual = format!("sudo apt-get update && sudo apt-get install -y {package}");
    if find_program("apt-get").is_none() {
        return Err(format!(
            "{missing} not found and this is not a Debian-like system: install {what} with \
             your package manager (on Debian: `{manual}`)"
        ));
    }
    // Root runs apt-get itself; otherwise sudo, but only if it asks for no password.
    let prefix: &[&str] = if is_root() {
        &[]
    } else if sudo_works() {
        &["sudo", "-n"]
    } else {
        return Err(format!("{missing} not found; install with:\n  {manual}"));
    };
    eprintln!("deps: {missing} not found, installing {package} with apt-get");
    run_as(prefix, &["apt-get", "update"])?;
    let install = ["env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y"];
    run_as(prefix, &[&install[..], &[package]].concat())
}

/// Makes sure the toolchain can build for the kernel's target.
pub fn ensure_rust_target() -> Result {
    if find_program("rustup").is_none() {
        // Not a rustup toolchain: look for the target's library in the sysroot.
        if sysroot_has_target() {
            return Ok(());
        }
        return Err(format!(
            "the Rust target {KERNEL_TARGET} is missing and rustup is not installed; \
             install rustup (https://rustup.rs) so rust-toolchain.toml can fetch it"
        ));
    }
    // Run inside the workspace so rustup uses the toolchain pinned in rust-toolchain.toml.
    let output = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .current_dir(build::root())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run rustup: {e}"))?;
    let installed = String::from_utf8_lossy(&output.stdout);
    if output.status.success() && installed.lines().any(|t| t.trim() == KERNEL_TARGET) {
        return Ok(());
    }
    eprintln!("deps: adding the Rust target {KERNEL_TARGET}");
    let status = Command::new("rustup")
        .args(["target", "add", KERNEL_TARGET])
        .current_dir(build::root())
        .status()
        .map_err(|e| format!("cannot run rustup: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`rustup target add {KERNEL_TARGET}` failed ({status})"))
    }
}

/// True when `rustc`'s sysroot holds the kernel target's standard library.
fn sysroot_has_target() -> bool {
    let Ok(output) = Command::new("rustc").args(["--print", "sysroot"]).output() else {
        return false;
    };
    let sysroot = String::from_utf8_lossy(&output.stdout).trim().to_string();
    PathBuf::from(sysroot).join("lib/rustlib").join(KERNEL_TARGET).is_dir()
}

/// Runs `args` (with `prefix`, e.g. `sudo -n`), failing with the command line if it fails.
fn run_as(prefix: &[&str], args: &[&str]) -> Result {
    let line: Vec<&str> = prefix.iter().chain(args).copied().collect();
    let status = Command::new(line[0])
        .args(&line[1..])
        .status()
        .map_err(|e| format!("cannot run `{}`: {e}", line.join(" ")))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{}` failed ({status})", line.join(" ")))
    }
}

/// The path of `program`: itself if it contains a `/`, else the first match on `PATH`.
pub fn find_program(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        let path = PathBuf::from(program);
        return is_executable(&path).then_some(path);
    }
    let path = env::var_os("PATH")?;
    env::split_paths(&path).map(|dir| dir.join(program)).find(|p| is_executable(p))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// True when our effective user id is 0 (read from `/proc/self/status`, Linux only).
fn is_root() -> bool {
    let Ok(status) = fs::read_to_string("/proc/self/status") else {
        return false;
    };
    // `Uid:  real  effective  saved  fs`
    let uid_line = status.lines().find(|l| l.starts_with("Uid:"));
    uid_line.and_then(|l| l.split_whitespace().nth(2)) == Some("0")
}

/// True when `sudo` is installed and runs without asking for a password.
fn sudo_works() -> bool {
    find_program("sudo").is_some()
        && Command::new("sudo")
            .args(["-n", "true"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
}
