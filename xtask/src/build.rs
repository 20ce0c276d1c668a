//! Building the kernel, the user programs and the initrd, and where things are.

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
    xtask.parent().expect("xtask lives inside the workspace").to_path_buf()
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

/// What QEMU boots: the kernel ELF and the initrd (a cpio archive of the user programs).
pub struct Images {
    /// The kernel ELF (`-kernel`).
    pub kernel: PathBuf,
    /// The initrd (`-initrd`).
    pub initrd: PathBuf,
}

/// The user programs packed into the initrd (binaries of `user/programs`).
const PROGRAMS: &[&str] = &[
    "init",
    "hello",
    "fault",
    "badptr",
    "nullsys",
    "sysfuzz",
    "objtest",
    "spin",
    "exhaust",
    "memclone",
    "mempass",
    "sharebench",
    "fdbench",
    "mcbench",
    "unmapbench",
    "fdtest",
    "cowtest",
    "cowshared",
    "longcall",
    "sharedrange",
    "remaptest",
    "revoketest",
    "pcoretest",
    "threadtest",
    "lifetest",
    "consoletest",
    "mcrttest",
    "mcrtbench",
    "ampsbench",
    "urpcbench",
    "shmbench",
];

/// Code generation for user programs: linked at 4 MiB, so not the kernel's code model.
/// (`RUSTFLAGS` replaces the kernel flags `.cargo/config.toml` sets for this target.)
const USER_RUSTFLAGS: &str =
    "-C code-model=small -C relocation-model=static -C force-frame-pointers=yes";

/// Where [`images`] leaves the kernel and the initrd (for a dry run, which builds nothing).
pub fn image_paths() -> Images {
    Images {
        kernel: target_dir().join(KERNEL_TARGET).join("release").join(KERNEL_PACKAGE),
        initrd: target_dir().join("initrd.cpio"),
    }
}

/// Builds the kernel and the initrd.
pub fn images() -> Result<Images> {
    let kernel = kernel()?;
    let initrd = initrd()?;
    Ok(Images { kernel, initrd })
}

/// Builds the user programs (their own workspace, `user/`) and packs them into
/// `target/initrd.cpio`.
fn initrd() -> Result<PathBuf> {
    let user_target = target_dir().join("user");
    let mut command = cargo();
    command.current_dir(root().join("user"));
    command.env("RUSTFLAGS", USER_RUSTFLAGS);
    command.args(["build", "--release", "--target", KERNEL_TARGET, "--target-dir"]);
    command.arg(&user_target);
    let status = command.status().map_err(|e| format!("cannot start cargo: {e}"))?;
    if !status.success() {
        return Err(format!("building the user programs failed ({status})"));
    }
    let bin_dir = user_target.join(KERNEL_TARGET).join("release");
    let mut files = Vec::new();
    for name in PROGRAMS {
        let path = bin_dir.join(name);
        let data = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        files.push((*name, data));
    }
    let entries: Vec<(&str, u32, &[u8])> =
        files.iter().map(|(n, d)| (*n, 0o100_755, d.as_slice())).collect();
    let archive = cpio::write_archive(&entries);
    let out = target_dir().join("initrd.cpio");
    std::fs::write(&out, archive).map_err(|e| format!("{}: {e}", out.display()))?;
    Ok(out)
}

/// Builds the kernel in release mode and returns the path of its ELF file.
fn kernel() -> Result<PathBuf> {
    let mut command = cargo();
    command.args(["build", "--release", "-p", KERNEL_PACKAGE, "--target", KERNEL_TARGET]);
    let status = command.status().map_err(|e| format!("cannot start cargo: {e}"))?;
    if !status.success() {
        return Err(format!("building the kernel failed ({status})"));
    }
    let elf = target_dir().join(KERNEL_TARGET).join("release").join(KERNEL_PACKAGE);
    if !elf.is_file() {
        return Err(format!("cargo built the kernel but {} is missing", elf.display()));
    }
    Ok(elf)
}
