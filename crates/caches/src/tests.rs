//! Recorded CPUID registers of an Intel and an AMD CPU and of QEMU's TCG model, and
//! synthetic pointer-chase curves.

use super::*;

extern crate std;
use std::vec::Vec;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * 1024;

type Leaf = (u32, u32, [u32; 4]); // (leaf, sub-leaf, [eax, ebx, ecx, edx])

/// A CPUID reader over a table; leaves it lacks read as zeros (as CPUs do above their
/// maximum leaf, roughly).
fn reader(table: &'static [Leaf]) -> impl CpuIdReader {
    move |leaf: u32, sub: u32| {
        let r = table
            .iter()
            .find(|&&(l, s, _)| l == leaf && (s == sub || !(leaf == 4 || leaf == 0x8000_001d)))
            .map_or([0; 4], |&(_, _, r)| r);
        CpuIdResult { eax: r[0], ebx: r[1], ecx: r[2], edx: r[3] }
    }
}

/// "GenuineIntel", "AuthenticAMD": ebx, edx, ecx.
const INTEL: [u32; 3] = [0x756e_6547, 0x4965_6e69, 0x6c65_746e];
const AMD: [u32; 3] = [0x6874_7541, 0x6974_6e65, 0x444d_4163];

/// Leaf 4 / 0x8000001D registers: type (1 data, 2 instruction, 3 unified), level, ways,
/// line bytes, sets.
const fn cache(kind: u32, level: u32, ways: u32, line: u32, sets: u32) -> [u32; 4] {
    [kind | level << 5 | 1 << 8, (ways - 1) << 22 | (line - 1), sets - 1, 0]
}

/// An Intel CPU: 32 KiB L1d and L1i, 256 KiB L2, 8 MiB L3 (leaf 4); 0x80000006 gives only
/// the L2.
const SKYLAKE: &[Leaf] = &[
    (0, 0, [0x16, INTEL[0], INTEL[2], INTEL[1]]),
    (4, 0, cache(1, 1, 8, 64, 64)),
    (4, 1, cache(2, 1, 8, 64, 64)),
    (4, 2, cache(3, 2, 4, 64, 1024)),
    (4, 3, cache(3, 3, 16, 64, 8192)),
    (0x8000_0000, 0, [0x8000_0008, 0, 0, 0]),
    (0x8000_0006, 0, [0, 0, 256 << 16 | 6 << 12 | 64, 0]),
];

/// An AMD CPU with TOPOEXT: 32 KiB L1s, 512 KiB L2, 16 MiB L3 in 0x8000001D; 0x80000006
/// says the same in its units.
const ZEN2: &[Leaf] = &[
    (0, 0, [0x10, AMD[0], AMD[2], AMD[1]]),
    (0x8000_0000, 0, [0x8000_0020, AMD[0], AMD[2], AMD[1]]),
    (0x8000_0001, 0, [0, 0, 1 << 22, 0]),
    (0x8000_0006, 0, [0, 0, 512 << 16 | 6 << 12 | 64, 32 << 18 | 0x9 << 12 | 64]),
    (0x8000_001d, 0, cache(1, 1, 8, 64, 64)),
    (0x8000_001d, 1, cache(2, 1, 8, 64, 64)),
    (0x8000_001d, 2, cache(3, 2, 8, 64, 1024)),
    (0x8000_001d, 3, cache(3, 3, 16, 64, 16384)),
];

/// QEMU 7.2's TCG `max` model (AMD's vendor string, no TOPOEXT), with `l3-cache=on`: leaf 4
/// is zeros for an AMD vendor; 0x80000006 has a 512 KiB L2 and a 16 MiB L3.
const QEMU_MAX_L3: &[Leaf] = &[
    (0, 0, [0xd, AMD[0], AMD[2], AMD[1]]),
    (0x8000_0000, 0, [0x8000_000a, AMD[0], AMD[2], AMD[1]]),
    (0x8000_0006, 0, [0, 0x4200_4200, 0x0200_4140, 0x0080_8140]),
];

/// The same model with `l3-cache=off` and no L2 either: no leaf says anything.
const NO_CACHES: &[Leaf] = &[
    (0, 0, [0xd, AMD[0], AMD[2], AMD[1]]),
    (0x8000_0000, 0, [0x8000_000a, AMD[0], AMD[2], AMD[1]]),
];

#[test]
fn intel_reads_leaf_4_and_takes_the_highest_level() {
    let llc = from_cpuid(reader(SKYLAKE)).unwrap();
    assert_eq!(llc, LastLevel { level: 3, bytes: 8 * MIB, source: Source::Leaf4 });
}

#[test]
fn amd_with_topoext_reads_0x8000001d() {
    let llc = from_cpuid(reader(ZEN2)).unwrap();
    assert_eq!(llc, LastLevel { level: 3, bytes: 16 * MIB, source: Source::Leaf8000001D });
}

#[test]
fn amd_without_topoext_reads_0x80000006s_l3() {
    let llc = from_cpuid(reader(QEMU_MAX_L3)).unwrap();
    assert_eq!(llc, LastLevel { level: 3, bytes: 16 * MIB, source: Source::Leaf80000006 });
}

#[test]
fn amd_without_an_l3_falls_back_to_the_l2() {
    const L2_ONLY: &[Leaf] = &[
        (0, 0, [0xd, AMD[0], AMD[2], AMD[1]]),
        (0x8000_0000, 0, [0x8000_000a, 0, 0, 0]),
        (0x8000_0006, 0, [0, 0, 512 << 16 | 6 << 12 | 64, 0]),
    ];
    let llc = from_cpuid(reader(L2_ONLY)).unwrap();
    assert_eq!(llc, LastLevel { level: 2, bytes: 512 * KIB, source: Source::Leaf80000006 });
}

#[test]
fn amd_ignores_leaf_4_even_if_it_answers() {
    // The old code summed leaf 4 on any vendor; an AMD CPU's leaf 4 is reserved.
    const AMD_WITH_JUNK_IN_4: &[Leaf] = &[
        (0, 0, [0xd, AMD[0], AMD[2], AMD[1]]),
        (4, 0, cache(3, 3, 16, 64, 65536)),
        (0x8000_0000, 0, [0x8000_000a, 0, 0, 0]),
        (0x8000_0006, 0, [0, 0, 512 << 16 | 6 << 12 | 64, 8 << 18]),
    ];
    let llc = from_cpuid(reader(AMD_WITH_JUNK_IN_4)).unwrap();
    assert_eq!(llc.bytes, 4 * MIB);
}

#[test]
fn no_leaf_means_none_so_the_skb_measures() {
    assert_eq!(from_cpuid(reader(NO_CACHES)), None);
}

#[test]
fn a_reader_that_never_ends_the_list_is_cut_off() {
    let endless = |leaf: u32, _sub: u32| match leaf {
        0 => CpuIdResult { eax: 4, ebx: INTEL[0], ecx: INTEL[2], edx: INTEL[1] },
        4 => {
            let r = cache(3, 2, 4, 64, 1024);
            CpuIdResult { eax: r[0], ebx: r[1], ecx: r[2], edx: r[3] }
        }
        _ => CpuIdResult { eax: 0, ebx: 0, ecx: 0, edx: 0 },
    };
    assert_eq!(from_cpuid(endless).unwrap().bytes, 256 * KIB);
}

/// A chase's curve over 4 KiB .. 256 MiB on a machine with the given cache sizes and
/// latencies (cycles), each cache holding what fits and a share of the rest as a random
/// walk would (a buffer of twice a cache hits it about half the time).
fn model(levels: &[(u64, u64)], memory: u64) -> Vec<Point> {
    chase_sizes(4 * KIB, 256 * MIB)
        .map(|bytes| {
            let mut cost = 0; // x16, per load
            let mut left = 16u64 * 1024; // share of loads (of 16384) not yet served
            for &(size, latency) in levels {
                let hit = if bytes <= size { left } else { left * size / bytes };
                cost += hit * latency * 16;
                left -= hit;
            }
            cost += left * memory * 16;
            Point { bytes, cycles_x16: cost / (16 * 1024) }
        })
        .collect()
}

#[test]
fn the_llc_is_where_the_curve_rises_towards_memory() {
    let skylake = model(&[(32 * KIB, 4), (256 * KIB, 12), (8 * MIB, 40)], 200);
    assert_eq!(from_curve(&skylake), Some(8 * MIB));
    let zen = model(&[(32 * KIB, 4), (512 * KIB, 12), (16 * MIB, 45)], 150);
    assert_eq!(from_curve(&zen), Some(16 * MIB));
    let no_l3 = model(&[(16 * KIB, 3), (MIB, 14)], 120);
    assert_eq!(from_curve(&no_l3), Some(MIB));
}

#[test]
fn sharp_steps_and_noise() {
    let lat = [4u64, 4, 4, 12, 12, 13, 40, 41, 39, 42, 200, 210, 205];
    let points: Vec<Point> = chase_sizes(4 * KIB, 16 * MIB)
        .zip(lat)
        .map(|(bytes, c)| Point { bytes, cycles_x16: c * 16 })
        .collect();
    assert_eq!(points.len(), lat.len());
    assert_eq!(from_curve(&points), Some(2 * MIB));
}

#[test]
fn no_edge_in_the_range_is_none() {
    let flat: Vec<Point> =
        chase_sizes(4 * KIB, 64 * MIB).map(|bytes| Point { bytes, cycles_x16: 320 }).collect();
    assert_eq!(from_curve(&flat), None, "nothing caches (or everything does)");
    let few = [Point { bytes: 4096, cycles_x16: 16 }, Point { bytes: 8192, cycles_x16: 1600 }];
    assert_eq!(from_curve(&few), None, "two points are no curve");
    assert_eq!(from_curve(&[]), None);
}

#[test]
fn sizes_double_within_the_bounds() {
    let sizes: Vec<u64> = chase_sizes(4 * KIB, 40 * KIB).collect();
    assert_eq!(sizes, [4 * KIB, 8 * KIB, 16 * KIB, 32 * KIB]);
    assert_eq!(chase_sizes(u64::MAX / 2 + 1, u64::MAX).count(), 1);
}

#[test]
fn the_chase_order_is_one_cycle_through_every_slot() {
    for n in [1usize, 2, 3, 64, 1000] {
        for seed in [0, 1, 0xdead_beef] {
            let mut next = std::vec![0; n];
            chase_order(&mut next, seed);
            let (mut at, mut steps) = (0, 0);
            let mut seen = std::vec![false; n];
            loop {
                assert!(!seen[at], "slot {at} twice before the cycle closed (n {n})");
                seen[at] = true;
                at = next[at];
                steps += 1;
                if at == 0 {
                    break;
                }
            }
            assert_eq!(steps, n, "one cycle through all {n} slots");
        }
    }
}
