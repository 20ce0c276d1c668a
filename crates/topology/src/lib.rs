//! Where each core sits: package / core / SMT thread from its APIC id (CPUID topology), and
//! NUMA node affinities from the ACPI SRAT. Pure decoding of register values and table
//! bytes, so it is tested on the host with synthetic machines.
#![no_std]
#![forbid(unsafe_code)]

/// How an APIC id splits into SMT, core and package fields (low bits first).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApicIdLayout {
    /// Width of the SMT (thread) field.
    pub smt_bits: u32,
    /// Width of the core field.
    pub core_bits: u32,
}

/// A core's position in the machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuLocation {
    /// Package (socket).
    pub package: u32,
    /// Core within the package.
    pub core: u32,
    /// Hardware thread within the core.
    pub smt: u32,
}

/// CPUID leaf 0xB level types.
const LEVEL_SMT: u32 = 1;
const LEVEL_CORE: u32 = 2;

fn ceil_log2(n: u32) -> u32 {
    if n <= 1 {
        0
    } else {
        32 - (n - 1).leading_zeros()
    }
}

impl ApicIdLayout {
    /// From CPUID leaf 0xB: `levels` yields `(eax, ecx)` for sub-leaf 0, 1, ... The caller
    /// stops at the first level whose type (ECX[15:8]) is 0. Returns `None` if no level
    /// is described (leaf 0xB not supported).
    pub fn from_extended_leaf(levels: impl IntoIterator<Item = (u32, u32)>) -> Option<Self> {
        let mut smt_shift = None;
        let mut core_shift = None;
        for (eax, ecx) in levels {
            let shift = eax & 0x1f;
            match (ecx >> 8) & 0xff {
                0 => break,
                LEVEL_SMT => smt_shift = Some(shift),
                LEVEL_CORE => core_shift = Some(shift),
                _ => {}
            }
        }
        let core_shift = core_shift?;
        let smt_bits = smt_shift.unwrap_or(0).min(core_shift);
        Some(ApicIdLayout { smt_bits, core_bits: core_shift - smt_bits })
    }

    /// From the legacy leaves: leaf 1 EBX[23:16] (logical processors per package, valid
    /// when `htt` is set) and leaf 4 EAX[31:26] + 1 (cores per package; 0 if leaf 4 absent).
    pub fn from_legacy(htt: bool, logical_per_package: u32, cores_per_package: u32) -> Self {
        let logical = if htt { logical_per_package.max(1) } else { 1 };
        let cores = cores_per_package.clamp(1, logical);
        let threads = logical.div_ceil(cores);
        ApicIdLayout { smt_bits: ceil_log2(threads), core_bits: ceil_log2(cores) }
    }

    /// Splits an APIC id into its fields.
    pub fn locate(&self, apic_id: u32) -> CpuLocation {
        let smt_mask = (1u32 << self.smt_bits) - 1;
        let core_mask = (1u32 << self.core_bits) - 1;
        CpuLocation {
            smt: apic_id & smt_mask,
            core: (apic_id >> self.smt_bits) & core_mask,
            package: apic_id.checked_shr(self.smt_bits + self.core_bits).unwrap_or(0),
        }
    }
}

/// One affinity entry of the ACPI System Resource Affinity Table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SratEntry {
    /// A processor (by local APIC or x2APIC id) belongs to a proximity domain.
    Processor {
        /// APIC id (8-bit for type 0, 32-bit for type 2).
        apic_id: u32,
        /// Proximity domain (the NUMA node).
        domain: u32,
        /// Whether the entry is enabled.
        enabled: bool,
    },
    /// A physical memory range belongs to a proximity domain.
    Memory {
        /// First byte.
        base: u64,
        /// Length in bytes.
        length: u64,
        /// Proximity domain (the NUMA node).
        domain: u32,
        /// Whether the entry is enabled.
        enabled: bool,
        /// Hot-pluggable memory (not present at boot unless also in the memory map).
        hotplug: bool,
    },
}

/// Iterator over the affinity entries of an SRAT; yields nothing past a malformed entry.
pub struct SratEntries<'a> {
    bytes: &'a [u8],
    offset: usize,
}

/// Size of the SRAT header: the 36-byte ACPI header and 12 reserved bytes.
const SRAT_HEADER: usize = 48;

/// Parses an SRAT given as the whole table's bytes (header included). Unknown entry types
/// are skipped; the walk stops at an entry whose length is zero or runs past the table.
pub fn srat_entries(table: &[u8]) -> SratEntries<'_> {
    SratEntries { bytes: table, offset: SRAT_HEADER }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

impl Iterator for SratEntries<'_> {
    type Item = SratEntry;

    fn next(&mut self) -> Option<SratEntry> {
        loop {
            let rest = self.bytes.get(self.offset..)?;
            if rest.len() < 2 {
                return None;
            }
            let (kind, len) = (rest[0], rest[1] as usize);
            if len < 2 || len > rest.len() {
                self.offset = self.bytes.len();
                return None;
            }
            self.offset += len;
            let e = &rest[..len];
            match (kind, len) {
                (0, 16..) => {
                    let domain = u32::from_le_bytes([e[2], e[9], e[10], e[11]]);
                    return Some(SratEntry::Processor {
                        apic_id: e[3] as u32,
                        domain,
                        enabled: u32_at(e, 4) & 1 != 0,
                    });
                }
                (1, 40..) => {
                    let base = u32_at(e, 8) as u64 | (u32_at(e, 12) as u64) << 32;
                    let length = u32_at(e, 16) as u64 | (u32_at(e, 20) as u64) << 32;
                    let flags = u32_at(e, 28);
                    return Some(SratEntry::Memory {
                        base,
                        length,
                        domain: u32_at(e, 2),
                        enabled: flags & 1 != 0,
                        hotplug: flags & 2 != 0,
                    });
                }
                (2, 24..) => {
                    return Some(SratEntry::Processor {
                        apic_id: u32_at(e, 8),
                        domain: u32_at(e, 4),
                        enabled: u32_at(e, 12) & 1 != 0,
                    });
                }
                _ => continue,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    #[test]
    fn extended_leaf_two_threads_four_cores() {
        // Sub-leaf 0: SMT, shift 1; sub-leaf 1: core, shift 3; sub-leaf 2: invalid.
        let l = ApicIdLayout::from_extended_leaf([(1, 1 << 8), (3, 2 << 8 | 1), (0, 0)]).unwrap();
        assert_eq!(l, ApicIdLayout { smt_bits: 1, core_bits: 2 });
        assert_eq!(
            l.locate(0b1101), // package 1, core 0b10, thread 1
            CpuLocation { package: 1, core: 2, smt: 1 }
        );
    }

    #[test]
    fn qemu_sockets_split_the_apic_ids_into_packages() {
        // `-smp 6,sockets=2` (3 cores a package): leaf 0xB says SMT shift 0, core shift 2,
        // and QEMU numbers the APIC ids 0,1,2 and 4,5,6 (the boot prints core_bits=2).
        let l = ApicIdLayout::from_extended_leaf([(0, 1 << 8), (2, 2 << 8 | 1), (0, 0)]).unwrap();
        let packages: Vec<u32> =
            [0, 1, 2, 4, 5, 6].iter().map(|&id| l.locate(id).package).collect();
        assert_eq!(packages, [0, 0, 0, 1, 1, 1]);
        // `-smp 8,sockets=4`: core shift 1, ids 0..8, two cores a package.
        let l = ApicIdLayout::from_extended_leaf([(0, 1 << 8), (1, 2 << 8 | 1), (0, 0)]).unwrap();
        assert_eq!(l.locate(7), CpuLocation { package: 3, core: 1, smt: 0 });
        // `-smp 8,sockets=2,dies=2`: leaf 0xB's core level shifts past the die bits too
        // (QEMU gives it the package offset), so dies fold into `core`, not `package`.
        let l = ApicIdLayout::from_extended_leaf([(0, 1 << 8), (2, 2 << 8 | 1), (0, 0)]).unwrap();
        assert_eq!(l.locate(2), CpuLocation { package: 0, core: 2, smt: 0 });
        assert_eq!(l.locate(4).package, 1);
    }

    #[test]
    fn extended_leaf_absent() {
        assert_eq!(ApicIdLayout::from_extended_leaf([(0, 0)]), None);
    }

    #[test]
    fn legacy_leaves() {
        assert_eq!(
            ApicIdLayout::from_legacy(false, 0, 0),
            ApicIdLayout { smt_bits: 0, core_bits: 0 }
        );
        assert_eq!(
            ApicIdLayout::from_legacy(true, 8, 4),
            ApicIdLayout { smt_bits: 1, core_bits: 2 }
        );
        // QEMU -smp 6 (one thread per core, 6 cores): fields are rounded up to powers of two.
        assert_eq!(
            ApicIdLayout::from_legacy(true, 6, 6),
            ApicIdLayout { smt_bits: 0, core_bits: 3 }
        );
        let l = ApicIdLayout::from_legacy(false, 0, 0);
        assert_eq!(l.locate(3), CpuLocation { package: 3, core: 0, smt: 0 });
    }

    fn srat(entries: &[&[u8]]) -> Vec<u8> {
        let mut t = std::vec![0u8; SRAT_HEADER];
        t[..4].copy_from_slice(b"SRAT");
        for e in entries {
            t.extend_from_slice(e);
        }
        t
    }

    fn processor(apic: u8, domain: u32, enabled: bool) -> Vec<u8> {
        let d = domain.to_le_bytes();
        let mut e = std::vec![0u8; 16];
        e[0] = 0;
        e[1] = 16;
        e[2] = d[0];
        e[3] = apic;
        e[4] = enabled as u8;
        e[9..12].copy_from_slice(&d[1..4]);
        e
    }

    fn memory(base: u64, length: u64, domain: u32, flags: u32) -> Vec<u8> {
        let mut e = std::vec![0u8; 40];
        e[0] = 1;
        e[1] = 40;
        e[2..6].copy_from_slice(&domain.to_le_bytes());
        e[8..16].copy_from_slice(&base.to_le_bytes());
        e[16..24].copy_from_slice(&length.to_le_bytes());
        e[28..32].copy_from_slice(&flags.to_le_bytes());
        e
    }

    #[test]
    fn srat_two_nodes() {
        let x2 = {
            let mut e = std::vec![0u8; 24];
            e[0] = 2;
            e[1] = 24;
            e[4..8].copy_from_slice(&1u32.to_le_bytes());
            e[8..12].copy_from_slice(&300u32.to_le_bytes());
            e[12] = 1;
            e
        };
        let unknown = [9u8, 4, 0, 0];
        let t = srat(&[
            &processor(0, 0, true),
            &processor(1, 0x0102_0304, false),
            &unknown,
            &memory(0, 0xa_0000, 0, 1),
            &memory(0x1_0000_0000, 1 << 30, 1, 3),
            &x2,
        ]);
        let got: Vec<SratEntry> = srat_entries(&t).collect();
        assert_eq!(
            got,
            std::vec![
                SratEntry::Processor { apic_id: 0, domain: 0, enabled: true },
                SratEntry::Processor { apic_id: 1, domain: 0x0102_0304, enabled: false },
                SratEntry::Memory {
                    base: 0,
                    length: 0xa_0000,
                    domain: 0,
                    enabled: true,
                    hotplug: false
                },
                SratEntry::Memory {
                    base: 1 << 32,
                    length: 1 << 30,
                    domain: 1,
                    enabled: true,
                    hotplug: true
                },
                SratEntry::Processor { apic_id: 300, domain: 1, enabled: true },
            ]
        );
    }

    #[test]
    fn srat_malformed_entries_stop_the_walk() {
        let t = srat(&[&processor(0, 0, true), &[0u8, 0], &processor(1, 0, true)]);
        assert_eq!(srat_entries(&t).count(), 1);
        let mut t = srat(&[&processor(0, 0, true)]);
        t.extend_from_slice(&[1u8, 40, 0, 0]); // claims 40 bytes, has 4
        assert_eq!(srat_entries(&t).count(), 1);
        assert_eq!(srat_entries(&[0u8; 10]).count(), 0);
    }

    proptest::proptest! {
        #[test]
        fn locate_inverts_compose(smt_bits in 0u32..4, core_bits in 0u32..6,
                                   package in 0u32..64, core in 0u32..64, smt in 0u32..16) {
            let l = ApicIdLayout { smt_bits, core_bits };
            let core = core & ((1 << core_bits) - 1);
            let smt = smt & ((1 << smt_bits) - 1);
            let id = (package << (smt_bits + core_bits)) | (core << smt_bits) | smt;
            proptest::prop_assert_eq!(l.locate(id), CpuLocation { package, core, smt });
        }

        #[test]
        fn srat_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            let _ = srat_entries(&bytes).count();
        }
    }
}
