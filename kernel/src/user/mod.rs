//! User programs and contexts: loading a program from the initrd into Corey segments
//! mapped by a fresh root address range, running a context in ring 3 on the calling core
//! until it exits, faults or is halted, starting contexts on other cores (`pcore_run`,
//! `program_run`), and the system calls.
//!
//! Every context is a thread (`sched`): a core time-shares its threads, and a thread
//! can move to another core by message. A program may lend its own core to another
//! program (`program_run` on its own pcore): it waits, as `thread_join` does, until that
//! one ends.
//!
//! Where each part is: [`program`] (loading and starting programs), [`syscall`] (the
//! dispatcher and the calls of no other room), [`files`] (the disk's files, `fs_*`), [`trap`] (exceptions and ticks from user
//! mode), [`elf`] (the ELF loader). Corey's objects are `crate::corey`, threads and their
//! scheduler `crate::sched`.

pub mod elf;
pub mod files;
pub mod program;
pub mod syscall;
pub mod trap;

pub use program::*;
pub use syscall::set_kernel_console;
pub use trap::*;
