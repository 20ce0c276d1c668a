//! The last-level cache, which AMPS's RSS policy compares a thread's resident set with
//! (AMPS §2.4.2, condition 3). Two ways to learn it, both pure so they are tested on the
//! host: decoding CPUID from the leaf the vendor fills ([`from_cpuid`]: leaf 4 on Intel;
//! 0x8000001D, else 0x80000006, on AMD), and, where no leaf says, choosing it from a
//! pointer chase's latency curve over growing sizes ([`from_curve`], with the chase's
//! order from [`chase_order`]). The kernel's glue (`kernel/src/knowledge.rs`) runs CPUID and
//! the chase and keeps the answer in the SKB.
#![no_std]
#![forbid(unsafe_code)]

use raw_cpuid::{CacheType, CpuId, CpuIdReader};

pub use raw_cpuid::CpuIdResult;

/// Where a last-level cache size came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// CPUID leaf 4, deterministic cache parameters (Intel).
    Leaf4,
    /// CPUID leaf 0x8000001D, cache topology (AMD, with TOPOEXT).
    Leaf8000001D,
    /// CPUID leaf 0x80000006, L2 and L3 sizes (AMD's older leaf; Intel gives L2 there).
    Leaf80000006,
    /// Measured: a pointer chase over growing sizes ([`from_curve`]).
    PointerChase,
}

impl Source {
    /// A short name for reports (`skb`, `cores`).
    pub fn name(self) -> &'static str {
        match self {
            Source::Leaf4 => "cpuid 4",
            Source::Leaf8000001D => "cpuid 0x8000001d",
            Source::Leaf80000006 => "cpuid 0x80000006",
            Source::PointerChase => "pointer chase",
        }
    }
}

/// The last-level cache: its level (1 = L1; 0 when measured, as a chase cannot tell), its
/// size and where that came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LastLevel {
    /// Cache level, 0 if unknown.
    pub level: u8,
    /// Bytes it holds.
    pub bytes: u64,
    /// How it was learnt.
    pub source: Source,
}

/// More sub-leaves than any CPU describes; a reader that never says "no more" stops here.
const MAX_SUBLEAVES: usize = 16;

/// The last-level data (or unified) cache as CPUID describes it, read through `read`
/// (the `cpuid` instruction in the kernel, recorded registers in tests). The leaf is the
/// vendor's: 4 on Intel (and any CPU that is not AMD's); on AMD, 0x8000001D if the
/// topology extensions are there, else 0x80000006's L3, else its L2. `None` if no leaf
/// describes a cache (QEMU's TCG `max` model with `l3-cache=off`, for one).
pub fn from_cpuid<R: CpuIdReader>(read: R) -> Option<LastLevel> {
    let cpuid = CpuId::with_cpuid_reader(read);
    let amd = cpuid.get_vendor_info().is_some_and(|v| v.as_str() == "AuthenticAMD");
    let topoext = cpuid
        .get_extended_processor_and_feature_identifiers()
        .is_some_and(|f| f.has_topology_extensions());
    // raw-cpuid reads leaf 4 for Intel and 0x8000001D for AMD; AMD's leaf is only
    // defined with TOPOEXT (AMD APM vol. 3, CPUID Fn8000_001D).
    if !amd || topoext {
        let source = if amd { Source::Leaf8000001D } else { Source::Leaf4 };
        let largest = cpuid
            .get_cache_parameters()
            .into_iter()
            .flatten()
            .take(MAX_SUBLEAVES)
            .filter(|c| matches!(c.cache_type(), CacheType::Data | CacheType::Unified))
            .map(|c| {
                let bytes = c.associativity() as u64
                    * c.physical_line_partitions() as u64
                    * c.coherency_line_size() as u64
                    * c.sets() as u64;
                (c.level(), bytes)
            })
            .filter(|&(_, bytes)| bytes > 0)
            .max();
        if let Some((level, bytes)) = largest {
            return Some(LastLevel { level, bytes, source });
        }
    }
    let l2l3 = cpuid.get_l2_l3_cache_and_tlb_info()?;
    // L3Size is in 512 KiB units (0: none); L2Size in KiB.
    let l3 = u64::from(l2l3.l3cache_size()) * 512 * 1024;
    let l2 = u64::from(l2l3.l2cache_size()) * 1024;
    let source = Source::Leaf80000006;
    if amd && l3 > 0 {
        Some(LastLevel { level: 3, bytes: l3, source })
    } else if l2 > 0 {
        Some(LastLevel { level: 2, bytes: l2, source })
    } else {
        None
    }
}

/// One point of a pointer-chase curve: a buffer of `bytes`, walked in a random cyclic
/// order one line at a time, cost `cycles_x16` per load (sixteenths of a cycle, so the
/// choice needs no floating point).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Point {
    /// The buffer's size.
    pub bytes: u64,
    /// Cycles per dependent load, times 16.
    pub cycles_x16: u64,
}

/// The last-level cache's size read off a pointer-chase curve (`points` by growing size,
/// typically doubling): the size just before the largest relative rise in latency among
/// the rises that end in the upper half of the curve's range (from the smallest buffer's
/// latency to the largest's). The upper half is memory's side: a rise from L1 to L2 ends
/// far below it, while the LLC's edge, even spread over a few sizes by replacement and
/// associativity, rises most in the first doubling past it (a random walk over twice the
/// cache still hits about half the time). `None` if there are fewer than three points or
/// the largest buffer costs less than 1.5 times the smallest: no edge was seen within the
/// sizes measured (the LLC is larger, or nothing caches).
pub fn from_curve(points: &[Point]) -> Option<u64> {
    if points.len() < 3 {
        return None;
    }
    let first = points[0].cycles_x16.max(1);
    let last = points[points.len() - 1].cycles_x16;
    if last * 2 < first * 3 {
        return None;
    }
    let middle = (first + last) / 2;
    let mut best: Option<(u64, u64, u64)> = None; // (rise numerator, denominator, bytes)
    for pair in points.windows(2) {
        let (below, above) = (pair[0], pair[1]);
        if above.cycles_x16 < middle || above.cycles_x16 <= below.cycles_x16 {
            continue;
        }
        let (num, den) = (above.cycles_x16, below.cycles_x16.max(1));
        // Keep the larger ratio num/den; on a tie, the smaller size (the first rise).
        let better = match best {
            None => true,
            Some((bn, bd, _)) => {
                u128::from(num) * u128::from(bd) > u128::from(bn) * u128::from(den)
            }
        };
        if better {
            best = Some((num, den, below.bytes));
        }
    }
    best.map(|(_, _, bytes)| bytes)
}

/// The sizes a chase measures: from `smallest` doubling up to `largest` (both included
/// when `largest` is `smallest` times a power of two).
pub fn chase_sizes(smallest: u64, largest: u64) -> impl Iterator<Item = u64> {
    let smallest = smallest.max(1);
    core::iter::successors(Some(smallest), move |&s| s.checked_mul(2))
        .take_while(move |&s| s <= largest)
}

/// Fills `next` with one random cycle through all its slots (Sattolo's algorithm): slot
/// `i` holds the slot the chase goes to after `i`. A single cycle means a chase from slot
/// 0 touches every slot before it returns; the random order defeats the prefetchers.
/// `seed` makes it repeatable.
pub fn chase_order(next: &mut [usize], seed: u64) {
    for (i, slot) in next.iter_mut().enumerate() {
        *slot = i;
    }
    let mut state = seed | 1;
    for i in (1..next.len()).rev() {
        // xorshift64: plenty for a permutation, and the same on every machine.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let j = (state % i as u64) as usize; // j < i: Sattolo's, one cycle
        next.swap(i, j);
    }
}

#[cfg(test)]
mod tests;
