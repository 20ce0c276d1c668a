//! What a fuzzer starts on other cores and on its own range (`launch.rs`): the record of
//! each thing started, and the two entries a context on its own root range may start at.

use core::arch::global_asm;
use libatoll::abi::nr;
use libatoll::Child;

/// Calls after which a context the fuzzer started and that still runs is halted.
pub const HALT_AFTER: u64 = 512;
/// Most started contexts followed at once (past this one is halted and let go at once).
pub const STARTED_MAX: usize = 16;
// The two entries a context on the fuzzer's own root range may start at. They touch no
// stack: `exit(rdi)`; and `pcore_halt(rdi[0], rdi[1])`, which ends the context if that is
// its own pcore (else `exit` with the error word).
global_asm!(
    ".globl sysfuzz_exit_entry",
    "sysfuzz_exit_entry:",
    "mov eax, {exit}",
    "syscall",
    "ud2",
    ".globl sysfuzz_halt_entry",
    "sysfuzz_halt_entry:",
    "mov rsi, [rdi + 8]",
    "mov rdi, [rdi]",
    "mov eax, {halt}",
    "syscall",
    "mov rdi, rax",
    "mov eax, {exit}",
    "syscall",
    "ud2",
    exit = const nr::EXIT,
    halt = const nr::PCORE_HALT,
);

extern "C" {
    fn sysfuzz_exit_entry();
    fn sysfuzz_halt_entry();
}

/// The `exit` entry's address.
pub fn exit_entry() -> u64 {
    sysfuzz_exit_entry as *const () as u64
}

/// The self-halt entry's address.
pub fn halt_entry() -> u64 {
    sysfuzz_halt_entry as *const () as u64
}

/// Whether `entry` is one of the two.
pub fn is_entry(entry: u64) -> bool {
    entry == exit_entry() || entry == halt_entry()
}

/// What was started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum What {
    /// A program (`program_run`) on another core.
    Program = 0,
    /// A context (`pcore_run`) on a fresh range.
    Context = 1,
    /// A context on the fuzzer's own range, at one of the two entries.
    Thread = 2,
    /// A `cfork` child.
    Child = 3,
}

/// Something started on a pcore of the root share and not let go of yet.
pub struct Started {
    /// The pcore, in the root share.
    pub pcore: u64,
    /// The `cfork` handle, for a child.
    pub child: Option<Child>,
    /// The step after which it is halted.
    pub halt_at: u64,
    pub halted: bool,
}
