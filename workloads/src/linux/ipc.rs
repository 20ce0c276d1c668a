//! Linux's own ways for two threads to talk, as peers of the URPC ping-pong (Multikernel
//! Table 3 compares URPC with the system's IPC): a ping-pong over two pipes and one over two
//! futex words. Both block in the kernel while waiting, so each one-way trip includes a
//! wake-up of the other core. Timed as the URPC latency is: median round trip / 2.

use std::format;
use std::os::fd::{FromRawFd, OwnedFd};
use std::string::String;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::vec::Vec;

use crate::memory::{alloc_slice, Placement, Zeroable};
use crate::result::{self, median};
use crate::Platform;

use super::Linux;

/// A pipe's two ends.
fn pipe() -> Result<(OwnedFd, OwnedFd), String> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into `fds`.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!("pipe2: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: both descriptors are new and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Writes the 8 bytes of `value` to `fd`; false on error.
fn put(fd: &OwnedFd, value: u64) -> bool {
    use std::os::fd::AsRawFd;
    let bytes = value.to_ne_bytes();
    // SAFETY: writes from a live 8-byte buffer.
    unsafe { libc::write(fd.as_raw_fd(), bytes.as_ptr().cast(), 8) == 8 }
}

/// Reads 8 bytes from `fd` as a u64 (a pipe write of 8 bytes is atomic); None on error.
fn take(fd: &OwnedFd) -> Option<u64> {
    use std::os::fd::AsRawFd;
    let mut bytes = [0u8; 8];
    // SAFETY: reads into a live 8-byte buffer.
    let n = unsafe { libc::read(fd.as_raw_fd(), bytes.as_mut_ptr().cast(), 8) };
    (n == 8).then(|| u64::from_ne_bytes(bytes))
}

/// Median one-way latency in cycles of an 8-byte message over a pipe each way between
/// cores `a` and `b`.
pub fn pipe_latency(p: &Linux, a: usize, b: usize, iterations: usize) -> Result<u64, String> {
    pipe_ping_pong(p, iterations, &|side| p.run_on(&[a, b], &|core| side(core == a)))
}

/// Median one-way latency in cycles of an 8-byte call and reply over two pipes between two
/// threads on core 0 (Multikernel Table 1's single-core comparison, `lrpc`'s Linux-only
/// peer: each read sleeps in the kernel until the other thread's write wakes it).
pub fn pipe_latency_one_core(p: &Linux, iterations: usize) -> Result<u64, String> {
    pipe_ping_pong(p, iterations, &|side| p.run_threads(2, Some(0), &|i| side(i == 0)))
}

/// One side of a ping-pong: `true` for the caller, `false` for the echo.
type Side<'a> = dyn Fn(bool) + Sync + 'a;

/// Starts both sides of a ping-pong at once, wherever the caller places them.
type StartSides<'a> = dyn Fn(&Side<'_>) -> Result<(), String> + 'a;

/// A pipe ping-pong of `iterations` round trips; `start(side)` runs `side(true)` (the
/// caller, which times each round trip) and `side(false)` (the echo) at once, wherever the
/// caller places them. Median round trip / 2.
fn pipe_ping_pong(p: &Linux, iterations: usize, start: &StartSides<'_>) -> Result<u64, String> {
    let (ping_rx, ping_tx) = pipe()?;
    let (pong_rx, pong_tx) = pipe()?;
    let samples: Vec<AtomicU64> = (0..iterations.max(1)).map(|_| AtomicU64::new(0)).collect();
    let failed = AtomicU64::new(0);
    start(&|caller| {
        for (i, sample) in samples.iter().enumerate() {
            if caller {
                let begin = p.cycles();
                if !put(&ping_tx, i as u64) || take(&pong_rx) != Some(i as u64) {
                    return failed.store(1, Ordering::Relaxed);
                }
                sample.store(p.cycles() - begin, Ordering::Relaxed);
            } else {
                match take(&ping_rx) {
                    Some(v) if put(&pong_tx, v) => {}
                    _ => return failed.store(1, Ordering::Relaxed),
                }
            }
        }
    })?;
    if failed.load(Ordering::Relaxed) != 0 {
        return Err("the pipe ping-pong failed".into());
    }
    let mut rtts: Vec<u64> = samples.iter().map(|s| s.load(Ordering::Relaxed)).collect();
    Ok(median(&mut rtts).unwrap_or(0) / 2)
}

/// The two futex words of a ping-pong, each on its own cache line.
#[derive(Debug, Default)]
#[repr(C, align(64))]
struct FutexWords {
    ping: AtomicU32,
    _pad: [AtomicU32; 15],
    pong: AtomicU32,
}

// SAFETY: atomics only, valid when zero.
unsafe impl Zeroable for FutexWords {}

/// Sleeps while `word` holds `value` (FUTEX_WAIT, process-private).
pub(crate) fn futex_wait(word: &AtomicU32, value: u32) {
    // SAFETY: the futex word is a live, aligned u32; a null timeout waits without limit.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            value,
            std::ptr::null::<libc::timespec>(),
        )
    };
}

/// Wakes one thread sleeping on `word` (FUTEX_WAKE, process-private).
fn futex_wake(word: &AtomicU32) {
    futex_wake_n(word, 1);
}

/// Wakes up to `n` threads sleeping on `word` (FUTEX_WAKE, process-private).
pub(crate) fn futex_wake_n(word: &AtomicU32, n: u32) {
    // SAFETY: the futex word is a live, aligned u32.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            n.min(i32::MAX as u32) as i32,
        )
    };
}

/// Stores `value` in `word` and wakes its waiter.
fn signal(word: &AtomicU32, value: u32) {
    word.store(value, Ordering::Release);
    futex_wake(word);
}

/// Waits (sleeping in the kernel) until `word` holds `value`.
fn await_value(word: &AtomicU32, value: u32) {
    loop {
        let seen = word.load(Ordering::Acquire);
        if seen == value {
            return;
        }
        futex_wait(word, seen);
    }
}

/// Median one-way latency in cycles of a futex ping-pong between cores `a` and `b`: each
/// side stores a counter, wakes the other, and sleeps until the answer.
pub fn futex_latency(p: &Linux, a: usize, b: usize, iterations: usize) -> Result<u64, String> {
    let words = alloc_slice::<FutexWords, Linux>(p, 1, Placement::Shared)?;
    let words = &words[0];
    let samples: Vec<AtomicU64> = (0..iterations.max(1)).map(|_| AtomicU64::new(0)).collect();
    p.run_on(&[a, b], &|core| {
        for (i, sample) in samples.iter().enumerate() {
            let n = i as u32 + 1;
            if core == a {
                let start = p.cycles();
                signal(&words.ping, n);
                await_value(&words.pong, n);
                sample.store(p.cycles() - start, Ordering::Relaxed);
            } else {
                await_value(&words.ping, n);
                signal(&words.pong, n);
            }
        }
    })?;
    let mut rtts: Vec<u64> = samples.iter().map(|s| s.load(Ordering::Relaxed)).collect();
    Ok(median(&mut rtts).unwrap_or(0) / 2)
}

/// Both peers on every pair `a < b`, as `experiment":"urpc"` lines with `"impl"` set.
pub fn run(p: &Linux, iterations: usize) -> Result<Vec<String>, String> {
    let n = p.cores();
    if n < 2 {
        return Err("needs 2 cores".into());
    }
    let mut lines = Vec::new();
    for a in 0..n {
        for b in a + 1..n {
            for (name, cycles) in [
                ("pipe", pipe_latency(p, a, b, iterations)?),
                ("futex", futex_latency(p, a, b, iterations)?),
            ] {
                let extra = format!(",\"pair\":[{a},{b}],\"impl\":\"{name}\"");
                lines.push(result::line(
                    "linux",
                    "urpc",
                    n,
                    "latency_cycles",
                    cycles,
                    "cycles",
                    &extra,
                ));
            }
        }
    }
    Ok(lines)
}
