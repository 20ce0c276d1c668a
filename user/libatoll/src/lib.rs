//! The library OS user programs link with (Corey §5, DESIGN layer 5): the entry point,
//! typed system calls, console input and output, a heap, memory shared between cores,
//! `cfork`, threads, spreading over cores, and file descriptors kept in shares.
//!
//! Modules, one job each:
//! - [`sys`]: the `syscall` instruction; calls about the console, clock and machine.
//! - [`obj`]: Corey's object calls (Figure 5): shares, segments, ranges, pcores, devices.
//! - [`console`]: `print!`/`println!` and reading typed lines.
//! - [`heap`]: the global allocator, on segments mapped in the root range.
//! - [`arena`]: heap arenas per core in slot ranges of their own (Corey Figure 4(c)).
//! - [`shared`]: SLOT ranges spliced into the root range: memory shared between cores.
//! - [`cfork`]: Corey §5.1 `cfork`.
//! - [`cores`]: `--cores LIST` and [`cores::spread`].
//! - [`fd`]: file-descriptor tables as shares (Corey §3.3), for the initrd's files.
//! - [`fs`]: the disk's files and directories (`File`, `read_dir`, `sync`, ...).
//! - [`kcore`]: kernel cores and syscall devices (Corey §3.2, §4.4).
//! - [`net`]: the network device (by trap or through a kernel core) under smoltcp.
//! - [`private`]: segments mapped at fresh addresses of the root range.
//! - [`threads`]: one address space on several cores (contexts on one root range).
//! - [`thread`]: kernel threads, time-shared and moved between cores by the schedulers,
//!   and `yield`, `sleep`, `wait`/`wake`.
//! - [`tls`]: thread-local storage for kernel threads ([`thread_local!`]), through each
//!   thread's FS base.
//! - [`platform`] (feature `workloads`): the benchmarks written once (`workloads/`) on
//!   Atoll.
//! - [`args`], [`bench`]: what programs and benchmarks share.
#![no_std]
#![warn(missing_docs)]

extern crate alloc;

pub mod arena;
pub mod args;
pub mod bench;
pub mod cfork;
pub mod console;
pub mod cores;
pub mod devices;
pub mod fd;
pub mod fs;
pub mod heap;
pub mod kcore;
pub mod mcrt_host;
pub mod net;
pub mod obj;
pub mod opsbench;
#[cfg(feature = "workloads")]
pub mod platform;
pub mod private;
pub mod shared;
pub mod sys;
pub mod thread;
pub mod threads;
pub mod tls;

pub use abi;
pub use cfork::{cfork, CforkOptions, Child};
pub use console::{Console, LineReader};
pub use devices::*;
pub use obj::{ObjRef, Status};
pub use sys::*;

#[global_allocator]
static HEAP: heap::Heap = heap::Heap::new();

/// Defines the program's entry point: `libatoll::main!(main);` with `fn main() -> i32`.
/// The main thread gets its thread block ([`tls::run_thread`]) and McRT-Malloc its
/// per-thread heaps ([`mcrt_host::name_thread_heaps`]) before `main` runs.
#[macro_export]
macro_rules! main {
    ($main:path) => {
        #[no_mangle]
        pub extern "C" fn _start(start_arg: u64, start_arg2: u64) -> ! {
            $crate::sys::set_start_args(start_arg, start_arg2);
            $crate::mcrt_host::name_thread_heaps();
            $crate::tls::run_thread($main, |code| {
                $crate::cfork::halt_children();
                $crate::exit(code)
            })
        }
    };
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    println!("user panic on core {}: {}", pcore_current(), info);
    cfork::halt_children();
    exit(101)
}
