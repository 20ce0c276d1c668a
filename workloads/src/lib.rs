//! Benchmark workloads written once (`../shared/DESIGN.md`, principle 2): each experiment is
//! plain code over the small [`Platform`] trait, so the same code runs on Atoll and on a
//! Linux guest in the same virtual machine and the comparison is fair.
//!
//! | module | experiment | paper |
//! | --- | --- | --- |
//! | [`nullsys`] | cycles of the cheapest system call | Multikernel §4.3 ("comparable to Linux") |
//! | [`pingpong`] | URPC one-way latency, the cache-line floor, pipelined throughput | Multikernel Table 2 |
//! | [`shm`] | updating 1–8 shared cache lines directly (SHMn) or by message to a server (MSGn) | Multikernel Figure 3 |
//! | [`multicast`] | reaching every core and collecting the acks: broadcast line, unicast, per-package tree | Multikernel Figure 6 |
//! | [`memclone`] | soft page faults on private memory, one address space or one per core | Corey §8.2, Figure 7(a) |
//! | [`mempass`] | one buffer touched by each core in turn, one address space or one per core | Corey §8.2, Figure 7(b) |
//! | [`unmap`] | taking write access to a page away from the N cores that map it (the TLB shootdown), and giving it back | Multikernel §5.1, Figure 7 |
//! | [`locks`] | a contended lock as cores are added: spin (TTS), ticket and MCS | Corey §2, Figure 3 |
//! | [`metis`] | MapReduce (`wri`, `wc`) on McRT per phase: cycles and soft faults, Figure 4's layouts | Corey §3.1, §6.1, §8.5.1, Figure 10 |
//! | [`phoenix`] | the Phoenix applications on Metis: histogram, linear regression, string match, matrix multiply, k-means | Corey §8.5.1 (Metis ships them) |
//! | [`npb`] | the NAS Parallel Benchmarks EP, IS, CG, MG, FT on McRT's OpenMP adaptor, verified | Multikernel §5.3, Figure 9 |
//! | [`http`] | `webd`'s requests and responses (HTTP/1.1 keep-alive, HTTP/1.0; GET, HEAD) | Corey §6.2 |
//! | [`amps`] | thread switch and create; jobs, data-parallel steps and fairness under the scheduler | AMPS (SC'07) Table 2, Figures 5–6 |
//!
//! The [`linux`] module (feature `linux`, on by default) implements the platform with
//! threads pinned by `sched_setaffinity` (or a forked process per core), `mmap` and
//! `getpid`, adds the Linux-only peers of the URPC experiment (a pipe and a futex
//! ping-pong) and Figure 1's `dup`/`close` benchmark ([`linux::fd`]), and is what the static
//! guest binary `atoll-bench-linux` runs. Without the feature the crate is `no_std` + `alloc`:
//! Atoll's library OS implements [`Platform`] (`user/libatoll/src/platform.rs`) and its
//! user programs `nullsys`, `urpcbench`, `shmbench`, `memclone`, `mempass`, `mcbench` and
//! `unmapbench` run these workloads (see `docs/bench.md`).
//!
//! Every result is printed as one `RESULT {json}` line ([`result::line`], from the `record` crate) in the shape the
//! kernel's `bench` commands print, which `make bench` collects.
#![cfg_attr(not(feature = "std"), no_std)]

extern crate alloc;

use alloc::string::String;
use core::sync::atomic::AtomicU32;

pub mod amps;
pub mod avl;
pub mod fileio;
pub mod filesum;
pub mod http;
pub mod larson;
pub mod locks;
pub mod loopback;
pub mod mcrt;
pub mod memclone;
pub mod memory;
pub mod mempass;
pub mod metis;
pub mod motion;
pub mod multicast;
pub mod npb;
pub mod nullsys;
pub mod phoenix;
pub mod pingpong;
pub mod result;
pub mod shm;
pub mod tcpsvc;
pub mod unmap;

#[cfg(feature = "linux")]
pub mod linux;

pub use memory::{alloc_slice, CacheLine, Placement, Region, Shared, SpinBarrier, Zeroable};

/// What a workload needs from the system under test. Cores are numbered `0..cores()`; the
/// platform maps them to real CPUs.
///
/// The mapping of each call on each system is in `docs/bench.md`.
pub trait Platform: Sync {
    /// The system's name in result lines: `"atoll"` or `"linux"`.
    fn system(&self) -> &'static str;

    /// How many cores the workload may use.
    fn cores(&self) -> usize;

    /// Reads the cycle counter (the TSC: constant rate, synchronised across cores).
    fn cycles(&self) -> u64;

    /// Soft page faults the calling thread has taken so far (Linux: the minor faults of
    /// `getrusage(RUSAGE_THREAD)`; Atoll: the calling context's count, `page_faults`), or
    /// `None` where the platform cannot tell. `memclone` and `mempass` check with it that
    /// each first touch of a 4 KiB page costs one fault on both systems.
    fn soft_faults(&self) -> Option<u64> {
        None
    }

    /// Soft page faults the whole program has taken so far, every thread of it (Linux:
    /// `getrusage(RUSAGE_SELF)`'s minor faults; Atoll: every context of the address space,
    /// `page_faults(ADDRESS_SPACE)`), or `None` where the platform cannot tell. Metis counts
    /// each phase's faults with it.
    fn process_faults(&self) -> Option<u64> {
        None
    }

    /// The package (socket) core `core` sits in, as the system reports it: cores of one
    /// package share a last-level cache, which the multicast tree exploits (Multikernel
    /// §5.1). `None` when the system does not say (the workloads then count one package).
    fn package(&self, core: usize) -> Option<u32> {
        let _ = core;
        None
    }

    /// Makes the cheapest system call there is (Atoll: `null`; Linux: `getpid` through a
    /// raw `syscall`, so no C library cache can answer it).
    fn null_call(&self);

    /// Runs `work(core)` on every core in `cores` at the same time, each pinned to its core,
    /// and returns when all have finished. Fails (without running any work) if a core
    /// cannot be used, and if any work panics or faults.
    fn run_on(&self, cores: &[usize], work: &(dyn Fn(usize) + Sync)) -> Result<(), String>;

    /// Allocates `bytes` of zeroed memory, placed and mapped as `placement` asks, every page
    /// present before it returns.
    fn alloc(&self, bytes: usize, placement: Placement) -> Result<Region, String>;

    /// Reserves `bytes` of demand-zero memory: no page is present until its first touch,
    /// which takes a soft page fault (what `memclone` and `mempass` time). `Shared` memory
    /// stays shared with the address spaces [`Platform::run_separate`] creates later;
    /// `Local` memory is private to the address space that reserves it.
    fn reserve(&self, bytes: usize, placement: Placement) -> Result<Region, String> {
        let _ = (bytes, placement);
        Err(alloc::format!("{} cannot reserve demand-zero memory", self.system()))
    }

    /// Takes the right to write `region` away (`writable: false`) or gives it back (`true`),
    /// and returns once no core can still write it through a stale translation: the rights
    /// reduction [`unmap`] times (Multikernel §5.1, Figure 7). Linux: `mprotect`, which
    /// shoots down the TLBs of the process's other CPUs by IPI; Atoll: `ar_set_seg` mapping
    /// the same segment pages at the same address with the new rights, which the kernel
    /// shoots down by message before it returns. `region` must come from this platform's
    /// [`Platform::alloc`] or [`Platform::reserve`] in this address space (threads of
    /// [`Platform::run_on`] may call it; address spaces of [`Platform::run_separate`] may
    /// not), and on Atoll be `Shared`. A write to the region while it is read-only is a
    /// fault that stops the program.
    fn set_writable(&self, region: &Region, writable: bool) -> Result<(), String> {
        let _ = (region, writable);
        Err(alloc::format!("{} cannot change the rights of a mapping", self.system()))
    }

    /// Runs `work(core)` on every core in `cores` at the same time, like
    /// [`Platform::run_on`], but each core in an address space of its own (Linux: a forked
    /// process per core; Atoll: `cfork`). The cores see each other's writes only in
    /// `Shared` memory allocated before the call, so results go there. `work` must not
    /// allocate, take locks or panic (a panic prints under locks): on Linux it runs in a
    /// child forked from a process that may have other threads. Fails (without running any
    /// work) if a core cannot be used, and if the work on any core fails.
    fn run_separate(&self, cores: &[usize], work: &(dyn Fn(usize) + Sync)) -> Result<(), String> {
        let _ = (cores, work);
        Err(alloc::format!("{} cannot give each core its own address space", self.system()))
    }

    /// Runs `work(i)` for every `i` in `0..n`, each in a thread of its own in this address
    /// space, and returns when all have finished. `pin: None` leaves the threads to the
    /// system's scheduler (placed and moved as it likes: what the [`amps`] experiments
    /// measure); `Some(core)` keeps them all on that core. Fails if a thread cannot start.
    fn run_threads(
        &self,
        n: usize,
        pin: Option<usize>,
        work: &(dyn Fn(usize) + Sync),
    ) -> Result<(), String> {
        let _ = (n, pin, work);
        Err(alloc::format!("{} has no threads", self.system()))
    }

    /// Gives the calling thread's core to another ready thread, if there is one.
    fn yield_now(&self) {}

    /// Moves the calling thread to core `core` and keeps it there (Atoll: its affinity;
    /// Linux: `sched_setaffinity`); returns once it runs there.
    fn move_to(&self, core: usize) -> Result<(), String> {
        let _ = core;
        Err(alloc::format!("{} cannot move threads", self.system()))
    }

    /// How many times the threads of the last [`Platform::run_threads`] moved between
    /// cores, if the system counts it (Atoll: each thread's `thread_stat`).
    fn migrations(&self) -> Option<u64> {
        None
    }

    /// Sleeps while `word` holds `expected`, until a [`Platform::wake_word`] on it (it may
    /// also return early: callers check the word again). Default: returns at once.
    fn wait_word(&self, word: &AtomicU32, expected: u32) {
        let _ = (word, expected);
    }

    /// Wakes up to `n` threads sleeping in [`Platform::wait_word`] on `word`.
    fn wake_word(&self, word: &AtomicU32, n: u32) {
        let _ = (word, n);
    }
}

/// Corey's two classic address-space arrangements (§8.2), as `memclone` and `mempass`
/// run them: the `config` of their result lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spaces {
    /// One address space shared by all cores (Linux: threads of one process).
    Shared,
    /// An address space per core (Linux: a process per core).
    Separate,
}

impl Spaces {
    /// Both, in the order they run.
    pub const ALL: [Spaces; 2] = [Spaces::Shared, Spaces::Separate];

    /// The `config` of the result lines: `shared-as` or `separate-as` (Atoll's programs
    /// print the same names, plus `shared-ranges`).
    pub fn name(self) -> &'static str {
        match self {
            Spaces::Shared => "shared-as",
            Spaces::Separate => "separate-as",
        }
    }

    /// Runs `work(core)` on every core in `cores` at once in these address spaces.
    pub fn run<P: Platform + ?Sized>(
        self,
        p: &P,
        cores: &[usize],
        work: &(dyn Fn(usize) + Sync),
    ) -> Result<(), String> {
        match self {
            Spaces::Shared => p.run_on(cores, work),
            Spaces::Separate => p.run_separate(cores, work),
        }
    }
}
