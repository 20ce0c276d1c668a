//! Building the kernel, and where things are in the workspace.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::Result;

/// The kernel's package name and its only target.
const KERNEL_PACKAGE: &str = "atoll-kernel";
/// The bare-metal target the kernel is built for.
pub const KERNEL_TARGET: &str = "x86_64-unknown-none";

/// The workspace root (the parent of the `xtask` folder).
pub fn root() -> PathBuf {
    let xtask = Path::new(env!("CARGO_MANIFEST_DIR"));
    xtask
        .parent()
        .expect("xtask lives inside the workspace")
        .to_path_buf()
}

/// Cargo's target directory: `$CARGO_TARGET_DIR` if set, else `<root>/target`.
pub fn target_dir() -> PathBuf {
    match env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => root().join(dir),
        _ => root().join("target"),
    }
}

/// A `cargo` command run from the workspace root, with the same cargo that runs us.
pub fn cargo() -> Command {
    let program = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(program);
    command.current_dir(root());
    command
}

/// Builds the kernel in release mode and returns the path of its ELF file.
pub fn kernel() -> Result<PathBuf> {
    let mut command = cargo();
    command.args([
        "build",
        "--release",
        "-p",
        KERNEL_PACKAGE,
        "--target",
        KERNEL_TARGET,
    ]);
    let status = command
        .status()
        .map_err(|e| format!("cannot start cargo: {e}"))?;
    if !status.success() {
        return Err(format!("building the kernel failed ({status})"));
    }
    let elf = target_dir()
        .join(KERNEL_TARGET)
        .join("release")
        .join(KERNEL_PACKAGE);
    if !elf.is_file() {
        return Err(format!(
            "cargo built the kernel but {} is missing",
            elf.display()
        ));
    }
    Ok(elf)
}
