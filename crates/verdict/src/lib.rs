//! The test verdict protocol, one table shared by the kernel and the host runner (the NrOS
//! habit): the exit codes the kernel writes to QEMU's `isa-debug-exit` port and the markers
//! it prints on the serial line. A test run passes only when QEMU exits with
//! [`ExitCode::Success`] *and* the summary line was seen; [`judge`] decides that as a pure
//! function of the recorded serial log, so old runs can be re-judged.
#![no_std]
#![forbid(unsafe_code)]

#[cfg(feature = "alloc")]
extern crate alloc;

#[cfg(feature = "alloc")]
pub mod judge;

/// I/O port of QEMU's `isa-debug-exit` device (`-device isa-debug-exit,iobase=0xf4,iosize=4`).
pub const DEBUG_EXIT_PORT: u16 = 0xf4;

/// Values the kernel writes to [`DEBUG_EXIT_PORT`]. QEMU exits with `(value << 1) | 1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum ExitCode {
    /// Every selected test passed (or a `cmd=` command finished).
    Success = 0x10,
    /// At least one test failed, or the kernel could not run the tests.
    Failure = 0x11,
}

impl ExitCode {
    /// The process exit status QEMU reports for this code.
    pub const fn qemu_status(self) -> i32 {
        ((self as i32) << 1) | 1
    }
}

/// `TEST PASS <name> cores=<n> us=<t>`: one line per passed test.
pub const PASS_MARKER: &str = "TEST PASS ";
/// `TEST FAIL <name>: <reason>`: one line per failed test.
pub const FAIL_MARKER: &str = "TEST FAIL ";
/// `TEST SKIP <name>: <reason>`: one line per test that could check nothing in this
/// machine (too little memory, one core); it counts neither as passed nor as failed.
pub const SKIP_MARKER: &str = "TEST SKIP ";
/// `TESTS DONE passed=<p> failed=<f> skipped=<s>`: the summary, printed once after the
/// last test (`skipped=` may be missing in logs from before skips: then 0).
pub const SUMMARY_MARKER: &str = "TESTS DONE ";
/// Printed when the kernel has booted and its console is ready for commands.
pub const READY_MARKER: &str = "ATOLL READY";
/// Printed at the start of every trap report (`TRAP core=<c> vector=<v> ...`).
pub const TRAP_MARKER: &str = "TRAP ";
/// Printed by a kernel panic (`PANIC core=<c>: <message>`).
pub const PANIC_MARKER: &str = "PANIC ";

/// Kernel command-line keys (`-append "test=NAME"`).
pub mod cmdline_keys {
    /// `test=NAME` runs one test, `test=all` every non-isolated test, `test=list` lists them.
    pub const TEST: &str = "test";
    /// `cmd="..."` runs one console command, then powers off.
    pub const CMD: &str = "cmd";
}

/// `CORES ONLINE <n>`: printed once in the boot log when every core that will come up is up.
pub const ONLINE_MARKER: &str = "CORES ONLINE ";
