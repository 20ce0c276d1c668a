//! The [`Platform`] on Linux: one thread per core, pinned with `sched_setaffinity` (or, for
//! an address space per core, one forked process per core); memory from `mmap`
//! (`MAP_PRIVATE` first touched on its core, or `MAP_SHARED | MAP_POPULATE`), all of it
//! present before any timing starts unless it is reserved as demand-zero memory for the
//! page-fault experiments; the TSC; and `getpid` through a raw `syscall` as the null call.
//! The [`ipc`] module adds the Linux-only peers of the URPC ping-pong (a pipe and a futex),
//! [`fd`] Corey's Figure 1 (`dup` and `close` on a shared or a private descriptor table),
//! [`webd`] Atoll's web server over std sockets and epoll (Multikernel §5.4, `web_static`).
//!
//! Workload core `i` is the `i`-th CPU of the process's affinity mask at start-up, so the
//! platform works in a container limited to some CPUs as well as in the guest.

pub mod fd;
pub mod fileio;
pub mod ipc;
pub mod loopback;
pub mod tcpsvc;
pub mod webd;
pub mod webserver;

use std::hint::spin_loop;
use std::panic::{self, AssertUnwindSafe};
use std::ptr::NonNull;
use std::string::{String, ToString};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::thread;
use std::time::Duration;
use std::vec::Vec;

use crate::memory::{alloc_slice, CacheLine, Placement, Region, REGION_ALIGN};
use crate::Platform;

/// Linux, as seen from one process.
#[derive(Clone, Debug)]
pub struct Linux {
    /// The CPUs workload cores map to, in order.
    cpus: Vec<usize>,
}

impl Linux {
    /// The platform over the CPUs this process may run on.
    pub fn new() -> Linux {
        let cpus = allowed_cpus();
        Linux { cpus: if cpus.is_empty() { vec![0] } else { cpus } }
    }

    /// The real CPU of workload core `core`.
    pub fn cpu(&self, core: usize) -> Option<usize> {
        self.cpus.get(core).copied()
    }

    /// The real CPUs of `cores`, each listed once.
    fn cpus_of(&self, cores: &[usize]) -> Result<Vec<usize>, String> {
        let mut cpus = Vec::with_capacity(cores.len());
        for &core in cores {
            let cpu = self.cpu(core).ok_or_else(|| format!("no core {core}"))?;
            if cpus.contains(&cpu) {
                return Err(format!("core {core} is listed twice"));
            }
            cpus.push(cpu);
        }
        Ok(cpus)
    }
}

impl Default for Linux {
    fn default() -> Self {
        Linux::new()
    }
}

impl Platform for Linux {
    fn system(&self) -> &'static str {
        "linux"
    }

    fn cores(&self) -> usize {
        self.cpus.len()
    }

    fn cycles(&self) -> u64 {
        tsc()
    }

    fn package(&self, core: usize) -> Option<u32> {
        let cpu = self.cpu(core)?;
        let path = format!("/sys/devices/system/cpu/cpu{cpu}/topology/physical_package_id");
        package_id(&std::fs::read_to_string(path).ok()?)
    }

    fn null_call(&self) {
        // SAFETY: getpid takes no arguments and cannot fail.
        unsafe { libc::syscall(libc::SYS_getpid) };
    }

    fn soft_faults(&self) -> Option<u64> {
        // SAFETY: an all-zero rusage is valid, and getrusage only writes it.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `usage` is a valid, writable rusage.
        let ok = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) } == 0;
        ok.then_some(usage.ru_minflt as u64)
    }

    fn process_faults(&self) -> Option<u64> {
        Some(process_minor_faults())
    }

    fn run_on(&self, cores: &[usize], work: &(dyn Fn(usize) + Sync)) -> Result<(), String> {
        let cpus = self.cpus_of(cores)?;
        // Every thread pins itself, then all meet; work starts only if every pin held, so a
        // core that cannot be used never leaves its partner spinning for ever.
        let (ready, refused) = (Barrier::new(cores.len()), AtomicBool::new(false));
        let outcomes: Vec<Result<(), String>> = thread::scope(|s| {
            let handles: Vec<_> = cores
                .iter()
                .zip(&cpus)
                .map(|(&core, &cpu)| {
                    let (ready, refused) = (&ready, &refused);
                    s.spawn(move || {
                        let pinned = pin(cpu);
                        if pinned.is_err() {
                            refused.store(true, Ordering::SeqCst);
                        }
                        ready.wait();
                        if !refused.load(Ordering::SeqCst) {
                            work(core);
                        }
                        pinned
                    })
                })
                .collect();
            let joined = handles.into_iter().zip(cores).map(|(h, core)| {
                h.join().unwrap_or_else(|_| Err(format!("the work on core {core} panicked")))
            });
            joined.collect()
        });
        outcomes.into_iter().collect()
    }

    fn run_threads(
        &self,
        n: usize,
        pin_to: Option<usize>,
        work: &(dyn Fn(usize) + Sync),
    ) -> Result<(), String> {
        let pinned_cpu = match pin_to {
            Some(core) => Some(self.cpu(core).ok_or_else(|| format!("no core {core}"))?),
            None => None,
        };
        let all = &self.cpus;
        let outcomes: Vec<Result<(), String>> = thread::scope(|s| {
            let handles: Vec<_> = (0..n)
                .map(|i| {
                    s.spawn(move || {
                        // Pinned, or free on every CPU of the process (a thread inherits its
                        // creator's mask, which may be one CPU).
                        match pinned_cpu {
                            Some(cpu) => pin(cpu)?,
                            None => unpin(all)?,
                        }
                        work(i);
                        Ok(())
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err("a thread panicked".to_string())))
                .collect()
        });
        outcomes.into_iter().collect()
    }

    fn move_to(&self, core: usize) -> Result<(), String> {
        pin(self.cpu(core).ok_or_else(|| format!("no core {core}"))?)
    }

    fn yield_now(&self) {
        // SAFETY: sched_yield has no arguments.
        unsafe { libc::sched_yield() };
    }

    fn wait_word(&self, word: &std::sync::atomic::AtomicU32, expected: u32) {
        ipc::futex_wait(word, expected);
    }

    fn wake_word(&self, word: &std::sync::atomic::AtomicU32, n: u32) {
        ipc::futex_wake_n(word, n);
    }

    fn alloc(&self, bytes: usize, placement: Placement) -> Result<Region, String> {
        // Pages are made present now, never inside a timed loop: shared ones by
        // MAP_POPULATE, a core's private ones by a first touch on that core (below).
        let region = map(bytes, placement, Populate::Now)?;
        if let Placement::Local(core) = placement {
            // First touch on the owning core, so the pages come from its NUMA node.
            let (base, len) = (region.addr(), region.len());
            self.run_on(&[core], &|_| {
                for page in (0..len).step_by(REGION_ALIGN) {
                    // SAFETY: inside the mapping made above, which lives until `region`
                    // drops; nothing else uses it yet. Writing 0 keeps it zeroed.
                    unsafe { std::ptr::write_volatile((base + page) as *mut u8, 0) };
                }
            })?;
        }
        Ok(region)
    }

    fn reserve(&self, bytes: usize, placement: Placement) -> Result<Region, String> {
        map(bytes, placement, Populate::OnFirstTouch)
    }

    fn set_writable(&self, region: &Region, writable: bool) -> Result<(), String> {
        // Multikernel §5.1, Figure 7 measures Linux with `mprotect`: it changes the
        // entries, then IPIs every other CPU that runs the process and waits for each to
        // flush before it returns.
        let prot = if writable { libc::PROT_READ | libc::PROT_WRITE } else { libc::PROT_READ };
        // SAFETY: `region` is one whole mapping made by `map` and alive while borrowed;
        // only its rights change, and the caller's contract says nothing writes it while
        // it is read-only.
        let status =
            unsafe { libc::mprotect(region.addr() as *mut libc::c_void, region.len(), prot) };
        if status == 0 {
            Ok(())
        } else {
            Err(format!("mprotect: {}", std::io::Error::last_os_error()))
        }
    }

    fn run_separate(&self, cores: &[usize], work: &(dyn Fn(usize) + Sync)) -> Result<(), String> {
        let cpus = self.cpus_of(cores)?;
        // Each child pins itself and counts itself in at `arrived` (plus 1 << 32 if it could
        // not pin), then waits for the parent's word at `go`: 1 to work, 2 to leave at once
        // (a core could not be pinned, or a fork failed), so no child spins for ever and
        // work starts only when every core is in place.
        let gate = alloc_slice::<CacheLine, Linux>(self, 2, Placement::Shared)?;
        let (arrived, go) = (&gate[0].0, &gate[1].0);
        let mut children: Vec<(usize, libc::pid_t)> = Vec::with_capacity(cores.len());
        let mut forked = Ok(());
        for (&core, &cpu) in cores.iter().zip(&cpus) {
            // SAFETY: the child runs only `work` (which by the trait's contract neither
            // allocates nor takes locks, so no lock another thread held at the fork matters)
            // and atomics on shared memory, and leaves with _exit, running no destructor.
            let pid = unsafe { libc::fork() };
            if pid < 0 {
                forked = Err(format!("fork: {}", std::io::Error::last_os_error()));
                break;
            }
            if pid == 0 {
                let pinned = set_affinity(cpu);
                arrived.fetch_add(if pinned { 1 } else { 1 << 32 }, Ordering::AcqRel);
                let status = loop {
                    match go.load(Ordering::Acquire) {
                        0 => spin_loop(),
                        1 => {
                            break i32::from(
                                panic::catch_unwind(AssertUnwindSafe(|| work(core))).is_err(),
                            )
                        }
                        _ => break 3,
                    }
                };
                // SAFETY: ends the child without unwinding into the parent's code or
                // running its atexit handlers and destructors.
                unsafe { libc::_exit(status) };
            }
            children.push((core, pid));
        }
        // The parent sleeps rather than spins: it must not take a CPU from a child.
        let count = |word: u64| (word & 0xffff_ffff) + (word >> 32);
        while count(arrived.load(Ordering::Acquire)) < children.len() as u64 {
            thread::sleep(Duration::from_micros(100));
        }
        let unpinned = arrived.load(Ordering::Acquire) >> 32;
        go.store(if forked.is_ok() && unpinned == 0 { 1 } else { 2 }, Ordering::Release);
        let mut failed = Vec::new();
        for (core, pid) in children {
            let mut status = 0;
            // SAFETY: waits for our own child; `status` is a live int.
            let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
            if waited != pid || !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
                failed.push(core);
            }
        }
        forked?;
        if unpinned > 0 {
            return Err(format!("{unpinned} of the cores {cores:?} could not be pinned"));
        }
        match failed.first() {
            Some(core) => Err(format!("the work on core {core} failed in its own process")),
            None => Ok(()),
        }
    }
}

/// Whether a mapping's pages are made present when it is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Populate {
    /// `MAP_POPULATE` for shared memory; the caller touches private memory on its core.
    Now,
    /// Demand-zero: each page's first touch takes a soft page fault.
    OnFirstTouch,
}

/// An anonymous mapping of at least `bytes`: `MAP_SHARED` (shared with processes forked
/// later) for `Placement::Shared`, `MAP_PRIVATE` for `Local`.
fn map(bytes: usize, placement: Placement, populate: Populate) -> Result<Region, String> {
    let len = bytes.max(1).next_multiple_of(REGION_ALIGN);
    let sharing = match (placement, populate) {
        (Placement::Local(_), _) => libc::MAP_PRIVATE,
        (Placement::Shared, Populate::Now) => libc::MAP_SHARED | libc::MAP_POPULATE,
        (Placement::Shared, Populate::OnFirstTouch) => libc::MAP_SHARED,
    };
    let prot = libc::PROT_READ | libc::PROT_WRITE;
    // SAFETY: an anonymous mapping at an address of the kernel's choice touches no
    // existing memory.
    let ptr = unsafe {
        libc::mmap(std::ptr::null_mut(), len, prot, sharing | libc::MAP_ANONYMOUS, -1, 0)
    };
    if ptr == libc::MAP_FAILED {
        return Err(format!("mmap of {len} bytes: {}", std::io::Error::last_os_error()));
    }
    let ptr = NonNull::new(ptr.cast::<u8>()).ok_or("mmap returned null")?;
    // SAFETY: a fresh anonymous mapping is page-aligned, zeroed, readable and writable by
    // every thread of the process, and only this Region unmaps it.
    Ok(unsafe { Region::from_raw(ptr, len, unmap) })
}

/// Gives a mapping made by [`map`] back to the kernel.
///
/// # Safety
/// `ptr` and `len` must be exactly one mapping from [`map`], no longer in use.
unsafe fn unmap(ptr: NonNull<u8>, len: usize) {
    // SAFETY: the caller's contract.
    unsafe { libc::munmap(ptr.as_ptr().cast(), len) };
}

/// Reads the time-stamp counter.
#[cfg(target_arch = "x86_64")]
pub fn tsc() -> u64 {
    // SAFETY: RDTSC has no preconditions on x86-64 and touches no memory.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Elsewhere nanoseconds stand in for cycles.
#[cfg(not(target_arch = "x86_64"))]
pub fn tsc() -> u64 {
    use std::sync::OnceLock;
    use std::time::Instant;
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// Pins the calling thread to `cpu`.
pub fn pin(cpu: usize) -> Result<(), String> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(format!("CPU {cpu} is beyond the affinity mask"));
    }
    if set_affinity(cpu) {
        Ok(())
    } else {
        Err(format!("cannot pin to CPU {cpu}: {}", std::io::Error::last_os_error()))
    }
}

/// Lets the calling thread run on every CPU in `cpus` (the scheduler chooses).
pub fn unpin(cpus: &[usize]) -> Result<(), String> {
    // SAFETY: a zeroed cpu_set_t is the empty set; the calls only read and write it.
    let ok = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &cpu in cpus.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
            libc::CPU_SET(cpu, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    };
    if ok {
        Ok(())
    } else {
        Err(format!("cannot set the affinity: {}", std::io::Error::last_os_error()))
    }
}

/// Pins the calling thread to `cpu`; false if it cannot. Allocates nothing, so a forked
/// child may call it.
fn set_affinity(cpu: usize) -> bool {
    if cpu >= libc::CPU_SETSIZE as usize {
        return false;
    }
    // SAFETY: a zeroed cpu_set_t is the empty set; the calls only read and write it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// The CPU the calling thread runs on now, if the kernel says.
pub fn current_cpu() -> Option<usize> {
    // SAFETY: sched_getcpu has no arguments.
    let cpu = unsafe { libc::sched_getcpu() };
    usize::try_from(cpu).ok()
}

/// The CPUs in this thread's affinity mask, in increasing order.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is valid; sched_getaffinity fills it.
    let (status, set) = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        let status = libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set);
        (status, set)
    };
    if status != 0 {
        return Vec::new();
    }
    // SAFETY: CPU_ISSET only reads the set.
    (0..libc::CPU_SETSIZE as usize).filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) }).collect()
}

/// A CPU's package from sysfs `topology/physical_package_id`: a number, or `None` for
/// `-1` (the kernel does not know) or anything else.
pub fn package_id(text: &str) -> Option<u32> {
    text.trim().parse().ok()
}

/// Reads `bench=NAME[,ARG...]` from a kernel command line (the guest's `/proc/cmdline`):
/// the benchmark and its arguments, or `None` if the line has no `bench=`.
pub fn bench_from_cmdline(cmdline: &str) -> Option<Vec<String>> {
    let value = cmdline.split_whitespace().find_map(|word| word.strip_prefix("bench="))?;
    Some(value.split(',').filter(|s| !s.is_empty()).map(ToString::to_string).collect())
}

/// The minor (soft) page faults of the whole process so far (`getrusage(RUSAGE_SELF)`; 0
/// if it fails).
pub fn process_minor_faults() -> u64 {
    // SAFETY: an all-zero rusage is valid, and getrusage only writes it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage.
    let ok = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } == 0;
    if ok {
        usage.ru_minflt as u64
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_ids_are_numbers_and_minus_one_is_unknown() {
        assert_eq!(package_id("1\n"), Some(1));
        assert_eq!(package_id("0"), Some(0));
        assert_eq!(package_id("-1\n"), None);
        assert_eq!(package_id(""), None);
    }

    #[test]
    fn this_hosts_cores_have_packages_where_sysfs_says() {
        let linux = Linux::new();
        let sysfs = std::path::Path::new("/sys/devices/system/cpu/cpu0/topology").exists();
        if sysfs && linux.cpu(0) == Some(0) {
            assert!(linux.package(0).is_some());
        }
        assert_eq!(linux.package(linux.cores()), None);
    }
}
