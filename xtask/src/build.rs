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

/// Code generation for user programs: linked at 4 MiB, so not the kernel's code model.
/// (`RUSTFLAGS` replaces the kernel flags `.cargo/config.toml` sets for this target.)
const USER_RUSTFLAGS: &str =
    "-C code-model=small -C relocation-model=static -C force-frame-pointers=yes";

/// Programs built a second time with hardware floating point (SSE2, x86-64's baseline, as
/// the Linux guest's binaries have): the target `x86_64-unknown-none` is soft-float, and a
/// floating-point benchmark compared with Linux must run the same instructions. The
/// flags are the user flags plus `+sse,+sse2,-soft-float`; every crate of that build has
/// them (one ABI). rustc warns that disabling `soft-float` on this target is being phased
/// out (rust-lang/rust#116344; accepted by the pinned toolchain): that build's warnings
/// are silenced (`-A warnings`), as the same code is built, and warned about, in the
/// soft-float build too. `docs/npb.md`.
const SSE_PROGRAMS: &[&str] = &["npb"];

/// The flags of [`SSE_PROGRAMS`]' build.
const SSE_RUSTFLAGS: &str = "-C code-model=small -C relocation-model=static \
-C force-frame-pointers=yes -C target-feature=+sse,+sse2,-soft-float -A warnings";

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
    let sse_target = target_dir().join("user-sse");
    let mut command = cargo();
    command.current_dir(root().join("user"));
    command.env("RUSTFLAGS", SSE_RUSTFLAGS);
    command.args(["build", "--release", "--target", KERNEL_TARGET, "--target-dir"]);
    command.arg(&sse_target);
    for name in SSE_PROGRAMS {
        command.args(["--bin", name]);
    }
    let status = command.status().map_err(|e| format!("cannot start cargo: {e}"))?;
    if !status.success() {
        return Err(format!("building the SSE user programs failed ({status})"));
    }
    let sse_dir = sse_target.join(KERNEL_TARGET).join("release");
    let mut files = Vec::new();
    for name in programs(&root().join("user/programs/src/bin"))? {
        let dir = if SSE_PROGRAMS.contains(&name.as_str()) { &sse_dir } else { &bin_dir };
        let path = dir.join(&name);
        let data = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        files.push((name, data));
    }
    let entries: Vec<(&str, u32, &[u8])> =
        files.iter().map(|(n, d)| (n.as_str(), 0o100_755, d.as_slice())).collect();
    let archive = cpio::write_archive(&entries);
    let out = target_dir().join("initrd.cpio");
    std::fs::write(&out, archive).map_err(|e| format!("{}: {e}", out.display()))?;
    Ok(out)
}

/// The user programs packed into the initrd, sorted by name: the binaries Cargo finds in
/// `bin` (`user/programs/src/bin`) by its own rule, a `name.rs` file or a `name/main.rs`
/// folder, so adding a program there puts it in the initrd with no list to keep here.
fn programs(bin: &Path) -> Result<Vec<String>> {
    let unreadable = |e: std::io::Error| format!("{}: {e}", bin.display());
    let mut names = Vec::new();
    for entry in std::fs::read_dir(bin).map_err(unreadable)? {
        let path = entry.map_err(unreadable)?.path();
        let name = if path.is_dir() {
            path.join("main.rs").is_file().then(|| path.file_name())
        } else {
            (path.extension() == Some("rs".as_ref())).then(|| path.file_stem())
        };
        if let Some(name) = name.flatten() {
            let name = name.to_str().ok_or(format!("{}: not UTF-8", path.display()))?;
            names.push(name.to_string());
        }
    }
    names.sort();
    Ok(names)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every program of `user/programs` is found, once, in order, and the one the kernel
    /// starts first (`init`) is among them.
    #[test]
    fn programs_come_from_the_programs_folder() {
        let names = programs(&root().join("user/programs/src/bin")).unwrap();
        assert!(names.windows(2).all(|w| w[0] < w[1]), "{names:?}");
        for name in ["init", "hello", "sysfuzz", "consoletest"] {
            assert!(names.iter().any(|n| n == name), "{name} missing from {names:?}");
        }
        // sysfuzz's modules live in its folder, not beside the programs.
        assert!(!names.iter().any(|n| n == "fuzzer" || n == "main"), "{names:?}");
    }

    /// A file that is not Rust, and a folder without `main.rs`, are no programs.
    #[test]
    fn only_binaries_count_as_programs() {
        let dir = target_dir().join("xtask-test-programs");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("multi")).unwrap();
        std::fs::create_dir_all(dir.join("empty")).unwrap();
        for file in ["b.rs", "a.rs", "notes.md", "multi/main.rs", "multi/util.rs"] {
            std::fs::write(dir.join(file), "").unwrap();
        }
        assert_eq!(programs(&dir).unwrap(), ["a", "b", "multi"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
