//! Building `atoll-bench-linux` (crate `workloads`) as a static binary for the Linux guest:
//! for `x86_64-unknown-linux-musl` (the target is added with rustup when missing), or, if
//! that target cannot be had, for `x86_64-unknown-linux-gnu` with `+crt-static`.

use std::fs;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use super::elf;
use crate::deps::find_program;
use crate::{build, Result};

/// The preferred target: musl links statically by default.
pub const MUSL: &str = "x86_64-unknown-linux-musl";
/// The fallback: glibc with a static C runtime.
pub const GNU: &str = "x86_64-unknown-linux-gnu";
/// The package and binary.
const PACKAGE: &str = "workloads";
const BINARY: &str = "atoll-bench-linux";

/// Builds the binary and returns its path, after checking it needs no dynamic loader.
pub fn build() -> Result<PathBuf> {
    let target = if has_target(MUSL) || add_target(MUSL) { MUSL } else { GNU };
    if target == GNU {
        eprintln!("bench: no {MUSL} target; building {BINARY} for {GNU} with +crt-static");
    }
    let mut command = build::cargo();
    command.args(["build", "--release", "--quiet", "-p", PACKAGE, "--bin", BINARY]);
    command.args(["--target", target]);
    // Small initramfs: no debug information in the guest binary.
    command.env("CARGO_PROFILE_RELEASE_STRIP", "debuginfo");
    if target == GNU {
        command.env("RUSTFLAGS", "-C target-feature=+crt-static");
    }
    let status = command.status().map_err(|e| format!("cannot start cargo: {e}"))?;
    if !status.success() {
        return Err(format!("building {BINARY} for {target} failed ({status})"));
    }
    let path = build::target_dir().join(target).join("release").join(BINARY);
    let bytes = fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    if !elf::is_static(&bytes) {
        return Err(format!("{} is not a static program", path.display()));
    }
    Ok(path)
}

/// True if the pinned toolchain already has `target`'s standard library.
fn has_target(target: &str) -> bool {
    if find_program("rustup").is_some() {
        let listed = Command::new("rustup")
            .args(["target", "list", "--installed"])
            .current_dir(build::root())
            .stderr(Stdio::null())
            .output();
        if let Ok(out) = listed {
            return String::from_utf8_lossy(&out.stdout).lines().any(|l| l.trim() == target);
        }
    }
    let sysroot = Command::new("rustc").args(["--print", "sysroot"]).output();
    sysroot.is_ok_and(|out| {
        let root = String::from_utf8_lossy(&out.stdout).trim().to_string();
        PathBuf::from(root).join("lib/rustlib").join(target).is_dir()
    })
}

/// Adds `target` with rustup (for the toolchain pinned in rust-toolchain.toml).
fn add_target(target: &str) -> bool {
    if find_program("rustup").is_none() {
        return false;
    }
    eprintln!("bench: adding the Rust target {target}");
    Command::new("rustup")
        .args(["target", "add", target])
        .current_dir(build::root())
        .status()
        .is_ok_and(|s| s.success())
}
