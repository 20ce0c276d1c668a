//! Benchmark workloads written once (`../shared/DESIGN.md`, principle 2): each experiment is
//! plain code over the small [`Platform`] trait, so the same code runs on Atoll and on a
//! Linux guest in the same virtual machine and the comparison is fair.
//!
//! | module | experiment | paper |
//! | --- | --- | --- |
//! | [`nullsys`] | cycles of the cheapest system call | Multikernel §4.3 ("comparable to Linux") |
//! | [`pingpong`] | URPC one-way latency, the cache-line floor, pipelined throughput | Multikernel Table 2 |
//! | [`shm`] | updating 1–8 shared cache lines directly (SHMn) or by message to a server (MSGn) | Multikernel Figure 3 |
//!
//! The [`linux`] module (feature `linux`, on by default) implements the platform with
//! threads pinned by `sched_setaffinity`, `mmap` and `getpid`, adds the Linux-only peers of
//! the URPC experiment (a pipe and a futex ping-pong), and is what the static guest binary
//! `atoll-bench-linux` runs. Without the feature the crate is `no_std` + `alloc`, so Atoll's
//! library OS can implement [`Platform`] for its user programs (see `docs/bench.md`).
//!
//! Every result is printed as one `RESULT {json}` line ([`result::line`]) in the shape the
//! kernel's `bench` commands print, which `make bench` collects.
#![cfg_attr(not(feature = "std"), no_std)]

extern crate alloc;

use alloc::string::String;

pub mod memory;
pub mod nullsys;
pub mod pingpong;
pub mod result;
pub mod shm;

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

    /// Makes the cheapest system call there is (Atoll: `null`; Linux: `getpid` through a
    /// raw `syscall`, so no C library cache can answer it).
    fn null_call(&self);

    /// Runs `work(core)` on every core in `cores` at the same time, each pinned to its core,
    /// and returns when all have finished. Fails (without running any work) if a core
    /// cannot be used, and if any work panics or faults.
    fn run_on(&self, cores: &[usize], work: &(dyn Fn(usize) + Sync)) -> Result<(), String>;

    /// Allocates `bytes` of zeroed memory, placed and mapped as `placement` asks.
    fn alloc(&self, bytes: usize, placement: Placement) -> Result<Region, String>;
}

/// The median of `samples` (sorted in place); 0 for none.
pub fn median(samples: &mut [u64]) -> u64 {
    if samples.is_empty() {
        return 0;
    }
    samples.sort_unstable();
    samples[samples.len() / 2]
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&mut [5, 1, 3]), 3);
        assert_eq!(median(&mut [4, 1, 3, 2]), 3);
        assert_eq!(median(&mut []), 0);
    }
}
