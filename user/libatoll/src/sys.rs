//! The system-call instruction and the calls that are not about Corey's objects: the
//! console, the clock, the program's arguments, the machine (docs/syscalls.md).

use abi::{nr, Error, SysResult};
use core::arch::asm;
use core::sync::atomic::{AtomicU64, Ordering};

/// Raw system call with up to three arguments.
#[inline(always)]
pub fn syscall3(number: u64, a: u64, b: u64, c: u64) -> SysResult {
    let ret: u64;
    // SAFETY: `syscall` enters the kernel, which checks every argument; it clobbers rcx
    // and r11 and returns in rax (the Atoll ABI, see `abi`); every other register is
    // preserved (the entry path saves r9 too).
    unsafe {
        asm!("syscall", inlateout("rax") number => ret, in("rdi") a, in("rsi") b, in("rdx") c,
             out("rcx") _, out("r11") _, out("r9") _, options(nostack));
    }
    abi::decode(ret)
}

/// Raw system call with up to five arguments (the fourth in r10, the fifth in r8).
#[inline(always)]
pub fn syscall5(number: u64, a: u64, b: u64, c: u64, d: u64, e: u64) -> SysResult {
    let ret: u64;
    // SAFETY: as `syscall3`; r10 and r8 carry the fourth and fifth arguments.
    unsafe {
        asm!("syscall", inlateout("rax") number => ret, in("rdi") a, in("rsi") b, in("rdx") c,
             in("r10") d, in("r8") e, out("rcx") _, out("r11") _, options(nostack));
    }
    abi::decode(ret)
}

/// A writable byte whose address stands in for an empty buffer's.
static EMPTY: core::sync::atomic::AtomicU8 = core::sync::atomic::AtomicU8::new(0);

/// The address to pass for `buf`. The kernel accepts any pointer with length 0, but an
/// empty slice's dangling pointer is passed as a real writable address all the same, so
/// a call never depends on that.
pub fn buf_addr(buf: &[u8]) -> u64 {
    if buf.is_empty() {
        EMPTY.as_ptr() as u64
    } else {
        buf.as_ptr() as u64
    }
}

/// Does nothing in the kernel: the cost of the system-call path.
pub fn null() -> SysResult {
    syscall3(nr::NULL, 0, 0, 0)
}

/// Writes bytes to the console (the kernel prints whole lines). One call prints at most
/// 4 KiB and returns the count; this loops until all are printed.
pub fn write(bytes: &[u8]) -> SysResult {
    let mut done = 0;
    while done < bytes.len() {
        let rest = &bytes[done..];
        match syscall3(nr::WRITE, buf_addr(rest), rest.len() as u64, 0)? {
            0 => break,
            n => done += n as usize,
        }
    }
    Ok(done as u64)
}

/// Ends the program (or, in a context started by `cfork`, that context).
pub fn exit(code: i32) -> ! {
    let _ = syscall3(nr::EXIT, code as u64, 0, 0);
    // The kernel never returns from exit; if it did, spin rather than run on.
    loop {
        core::hint::spin_loop();
    }
}

/// The core this program runs on (Corey §4.4 `pcore_current`).
pub fn pcore_current() -> usize {
    syscall3(nr::PCORE_CURRENT, 0, 0, 0).unwrap_or(0) as usize
}

/// The time-stamp counter, read by the kernel.
pub fn cycles() -> u64 {
    syscall3(nr::CYCLES, 0, 0, 0).unwrap_or(0)
}

/// The time-stamp counter, read in user mode (RDTSC is not privileged here): no system
/// call in the way of what a benchmark times.
pub fn rdtsc() -> u64 {
    // SAFETY: RDTSC has no side effects.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Copies the program's argument string into `buf`; returns it.
pub fn args(buf: &mut [u8]) -> &str {
    match syscall3(nr::ARGS, buf_addr(buf), buf.len() as u64, 0) {
        Ok(n) => core::str::from_utf8(&buf[..(n as usize).min(buf.len())]).unwrap_or(""),
        Err(_) => "",
    }
}

/// How many cores are running Atoll (cores are numbered `0..cores_online()`).
pub fn cores_online() -> usize {
    syscall3(nr::CORES_ONLINE, 0, 0, 0).map_or(1, |n| n.max(1) as usize)
}

/// Where core `core` sits and what it costs to reach from here (from the kernel's SKB;
/// Corey §4.4 `locality_get`, Multikernel §4.9).
pub fn locality_get(core: usize) -> Result<abi::Locality, Error> {
    let mut words = [0u64; abi::Locality::WORDS];
    syscall3(nr::LOCALITY_GET, core as u64, words.as_mut_ptr() as u64, 0)?;
    Ok(abi::Locality::from_words(words))
}

/// The initrd's file names, one per line, copied into `buf`; returns the bytes the whole
/// list needs (more than `buf.len()` means the copy was cut short).
pub fn file_list(buf: &mut [u8]) -> SysResult {
    syscall3(nr::FILE_LIST, buf_addr(buf), buf.len() as u64, 0)
}

/// The program's start argument (`rdi` of `_start`): the id, in its root share, of the
/// object whoever started it gave it (`program_run`'s `give`; the kernel gives `init` the
/// machine device), or 0.
static START_ARG: AtomicU64 = AtomicU64::new(0);
/// The second start argument (`rsi`): the keyboard device's id, which the kernel gives
/// `init` alone, or 0.
static START_ARG2: AtomicU64 = AtomicU64::new(0);

/// Records the start arguments (called by [`crate::main!`]'s `_start`).
pub fn set_start_args(arg: u64, arg2: u64) {
    START_ARG.store(arg, Ordering::Relaxed);
    START_ARG2.store(arg2, Ordering::Relaxed);
}

/// The start arguments [`set_start_args`] recorded: the given object's id and the
/// keyboard's (0: none).
pub fn start_args() -> (u64, u64) {
    (START_ARG.load(Ordering::Relaxed), START_ARG2.load(Ordering::Relaxed))
}
