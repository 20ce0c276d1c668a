//! The Linux host adaptor (McRT §2.5): each logical processor is an OS thread pinned to a
//! CPU (processor i on CPU i mod the CPUs the process may use), and an idle processor
//! parks on a futex.

use crate::host::Host;
use core::sync::atomic::AtomicU32;
use std::vec::Vec;

/// Linux: pinned OS threads, futex parking.
pub struct LinuxHost {
    pin: bool,
}

impl LinuxHost {
    /// Processors pinned to CPUs (what the benchmarks use).
    pub fn pinned() -> LinuxHost {
        LinuxHost { pin: true }
    }

    /// Processors left to Linux's scheduler (more processors than CPUs, tests).
    pub fn unpinned() -> LinuxHost {
        LinuxHost { pin: false }
    }
}

/// The CPUs this process may run on.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is valid; sched_getaffinity writes at most its size.
    unsafe {
        let mut set: libc::cpu_set_t = core::mem::zeroed();
        if libc::sched_getaffinity(0, core::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return std::vec![0];
        }
        (0..libc::CPU_SETSIZE as usize).filter(|&c| libc::CPU_ISSET(c, &set)).collect()
    }
}

fn pin_to(cpu: usize) {
    // SAFETY: as above; pins the calling thread only.
    unsafe {
        let mut set: libc::cpu_set_t = core::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, core::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

impl Host for LinuxHost {
    fn run_processors(
        &self,
        count: usize,
        body: &(dyn Fn(usize) + Sync),
    ) -> Result<(), &'static str> {
        let cpus = allowed_cpus();
        let pin = self.pin;
        let place = |i: usize| {
            if pin && !cpus.is_empty() {
                pin_to(cpus[i % cpus.len()]);
            }
        };
        std::thread::scope(|s| {
            let mut handles = Vec::new();
            for i in 1..count {
                let place = &place;
                let spawned = std::thread::Builder::new()
                    .name(std::format!("mcrt-p{i}"))
                    .stack_size(256 * 1024)
                    .spawn_scoped(s, move || {
                        place(i);
                        body(i)
                    });
                match spawned {
                    Ok(h) => handles.push(h),
                    Err(_) => return Err("mcrt: cannot start a processor thread"),
                }
            }
            // The caller's thread is processor 0 (its affinity is put back afterwards).
            let before = allowed_cpus();
            place(0);
            body(0);
            if pin {
                restore(&before);
            }
            for h in handles {
                h.join().map_err(|_| "mcrt: a processor thread panicked")?;
            }
            Ok(())
        })
    }

    fn wait(&self, word: &AtomicU32, expected: u32, timeout_us: u64) {
        let ts = libc::timespec {
            tv_sec: (timeout_us / 1_000_000) as _,
            tv_nsec: ((timeout_us % 1_000_000) * 1000) as _,
        };
        // SAFETY: FUTEX_WAIT reads the word (alive: borrowed) and the timeout.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr(),
                libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                expected,
                &ts as *const libc::timespec,
            );
        }
    }

    fn wake(&self, word: &AtomicU32, n: u32) {
        // SAFETY: FUTEX_WAKE only uses the word's address.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr(),
                libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                n.min(i32::MAX as u32) as i32,
            );
        }
    }

    fn now(&self) -> u64 {
        // SAFETY: reads the time-stamp counter.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
}

fn restore(cpus: &[usize]) {
    // SAFETY: as in `pin_to`.
    unsafe {
        let mut set: libc::cpu_set_t = core::mem::zeroed();
        for &c in cpus {
            libc::CPU_SET(c, &mut set);
        }
        libc::sched_setaffinity(0, core::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Where a hosted runtime's processors run ([`run_stealing`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// One per CPU, pinned (benchmarks).
    Pinned,
    /// Left to Linux (tests: more processors than CPUs).
    Unpinned,
}

/// Runs `main` as the first thread of a McRT runtime of `processors` processors (the
/// stealing scheduler) on Linux threads placed as `placement` says, and returns its result
/// (what the hosted runs of Metis and NPB share).
pub fn run_stealing<R: Send + 'static>(
    processors: usize,
    placement: Placement,
    main: impl FnOnce() -> R + Send + 'static,
) -> Result<R, crate::Error> {
    let config = crate::Config::new(crate::Policy::Stealing, processors);
    let host = match placement {
        Placement::Pinned => LinuxHost::pinned(),
        Placement::Unpinned => LinuxHost::unpinned(),
    };
    crate::run(config, &host, main)
}

/// Nanoseconds since the first call (a clock for hosted benchmarks).
pub fn clock() -> u64 {
    use std::sync::OnceLock;
    use std::time::Instant;
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}
