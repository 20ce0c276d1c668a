//! The disk's files (issue M13) through `fstest`: the calls and their bad arguments, two
//! cores writing one file, files that survive a reboot, and a write loop the harness
//! kills part way. Runs without a disk skip (`fstest` exits 77); `make test`'s `disk-*`
//! runs give them one.

use super::skip;
use super::user::{expect, expect_or_skip};
use crate::kernel_test;
use crate::thread::ExitStatus;
use crate::user;
use alloc::format;
use alloc::string::String;

kernel_test!(FILES_API, "user.files_api", 1, Shared, files_api);
kernel_test!(FILES_RACE, "user.files_two_cores_write_one_file", 2, Shared, files_race);
kernel_test!(FILES_KCORE, "user.files_through_a_kernel_core", 2, Shared, files_kcore);
kernel_test!(FILES_PRIVATE, "user.files_private_to_a_core", 2, Shared, files_private);
kernel_test!(NO_FS, "user.files_refused_without_a_file_system", 1, Shared, without_fs);
kernel_test!(FS_FUZZ, "user.sysfuzz_with_a_disk", 1, Shared, sysfuzz_with_a_disk);
kernel_test!(FILESUM_ARGS, "user.filesum_refuses_bad_arguments", 1, Shared, filesum_args);
kernel_test!(REBOOT_WRITE, "user.files_survive_reboot_write", 1, Shared, reboot_write);
kernel_test!(REBOOT_READ, "user.files_survive_reboot_read", 1, Shared, reboot_read);
kernel_test!(WRITE_LOOP, "user.files_write_loop", 1, Shared, write_loop);

/// Every call, and every bad argument's error (`fstest api`).
fn files_api() -> Result<(), String> {
    expect_or_skip("fstest", "api")
}

/// Two threads on two cores write the same 64 KiB; no read sees a mix (`fstest race`).
fn files_race() -> Result<(), String> {
    expect_or_skip("fstest", "race")
}

/// The disk driven by a kernel core on another core, then by the caller again (`fstest
/// kcore`).
fn files_kcore() -> Result<(), String> {
    expect_or_skip("fstest", "kcore")
}

/// `filesum` refuses what it cannot sum: bad arguments with its usage (exit 2), a missing
/// file and a directory with the reason (exit 1; a directory was once read as a file and
/// then refused by its private open, `InvalidArgument`); a real file gets its sum.
fn filesum_args() -> Result<(), String> {
    if crate::storage::statfs().is_err() {
        return skip("no disk with a file system");
    }
    for bad in ["", "x", "/README --rounds 0", "/README --rounds 99999999999999999999", "/a b c"] {
        expect("filesum", bad, ExitStatus::Exited(2))?;
    }
    for (path, why) in [("/nope", "NotFound"), ("/www", "is not a file")] {
        let (status, text) = user::run_capturing("filesum", path, 60_000_000)
            .map_err(|e| format!("filesum: could not run: {e:?}"))?;
        if status != ExitStatus::Exited(1) || !text.contains(why) {
            return Err(format!("filesum {path} ended {status:?}: {text}"));
        }
    }
    expect("filesum", "/README --rounds 2", ExitStatus::Exited(0))
}

/// Calls each core's fuzzer makes in `user.sysfuzz_with_a_disk`.
const DISK_FUZZ_CALLS: u64 = 10_000;

/// `sysfuzz` on every core at once with the disk there: its file calls (paths under `/fz`
/// with `.`, `..`, empty and overlong parts, every flag, wrong references, wild buffers)
/// reach a real file system. Every fuzzer exits 0, the file system then syncs, and the
/// run's `e2fsck -fn` must find the image clean. Not `balanced`: the buffer cache keeps
/// what the calls read.
fn sysfuzz_with_a_disk() -> Result<(), String> {
    if crate::storage::statfs().is_err() {
        return skip("no disk with a file system");
    }
    let cores = crate::smp::online_cores();
    let work = |core: usize| -> Result<(), String> {
        let args = format!("--seed {} --calls {DISK_FUZZ_CALLS}", 7000 + core);
        match user::run_with_limit("sysfuzz", &args, 200_000_000) {
            Ok(ExitStatus::Exited(0)) => Ok(()),
            other => Err(format!("sysfuzz {args} on core {core} ended {other:?}")),
        }
    };
    let outcomes = crate::smp::run_on(&cores, 250_000_000, &work);
    crate::smp::all_ok(&cores, &outcomes)?;
    crate::storage::sync().map_err(|e| format!("sync after the fuzzers: {e:?}"))
}

/// A file private to a core (after Corey §9; `fstest private`).
fn files_private() -> Result<(), String> {
    expect_or_skip("fstest", "private")
}

/// (`disk-damaged`) The image was refused at mount: every call is `NoFileSystem`
/// (`fstest nofs`; skipped where a file system is mounted).
fn without_fs() -> Result<(), String> {
    expect_or_skip("fstest", "nofs")
}

/// Files, a rename and a removal, synced (`fstest persist-write`); the next boot's
/// `user.files_survive_reboot_read` finds them.
fn reboot_write() -> Result<(), String> {
    expect_or_skip("fstest", "persist-write")
}

/// What the previous boot's `persist-write` left, byte for byte.
fn reboot_read() -> Result<(), String> {
    expect_or_skip("fstest", "persist-read")
}

/// `fstest loop 2000`, its `FSTEST SYNCED n` lines straight to the console, where the
/// harness reads them while it decides when to kill the machine.
fn write_loop() -> Result<(), String> {
    match user::run_with_limit("fstest", "loop 2000", 300_000_000) {
        Ok(ExitStatus::Exited(0)) => Ok(()),
        Ok(ExitStatus::Exited(abi::EXIT_SKIPPED)) => skip("no disk with a file system"),
        other => Err(format!("fstest loop ended {other:?}")),
    }
}
