//! ACPI discovery: cores and APIC ids (MADT), NUMA nodes (SRAT), the power-off register
//! (FADT), PCI Express configuration space (MCFG). Tables are read through the direct map;
//! nothing is allocated.

use super::paging::phys_to_virt;
use acpi::madt::{Madt, MadtEntry};
use acpi::sdt::{SdtHeader, Signature};
use acpi::{AcpiHandler, AcpiTable, AcpiTables, PhysicalMapping};
use core::ptr::NonNull;
use topology::{srat_entries, SratEntry};

/// The most cores Atoll manages (extra cores in the MADT are left offline).
pub const MAX_CORES: usize = physmem::MAX_CORES;
/// The most NUMA memory ranges kept from the SRAT.
pub const MAX_NODE_RANGES: usize = 32;

/// What the firmware tables say about the machine.
pub struct Platform {
    /// APIC ids of usable cores, boot core first.
    pub apic_ids: [u32; MAX_CORES],
    /// Number of valid entries in `apic_ids`.
    pub core_count: usize,
    /// Cores listed but not started because of [`MAX_CORES`].
    pub cores_ignored: usize,
    /// NUMA node of each core (index as in `apic_ids`); all 0 without an SRAT.
    pub core_node: [u32; MAX_CORES],
    /// Memory ranges per NUMA node (empty without an SRAT).
    pub node_memory: [physmem::NodeMemory; MAX_NODE_RANGES],
    /// Number of valid entries in `node_memory`.
    pub node_memory_len: usize,
    /// Number of distinct NUMA nodes (1 without an SRAT).
    pub node_count: u32,
    /// The first MCFG entry: PCI Express configuration space (ECAM), if the machine has it.
    pub ecam: Option<Ecam>,
    /// PM1a control port for ACPI S5 power-off.
    pub pm1a_control: Option<u16>,
}

#[derive(Clone)]
struct DirectMap;

impl AcpiHandler for DirectMap {
    unsafe fn map_physical_region<T>(&self, pa: usize, size: usize) -> PhysicalMapping<Self, T> {
        let virt =
            NonNull::new(phys_to_virt(pa as u64) as *mut T).expect("direct map is never null");
        // SAFETY: the direct map covers all physical memory, including firmware tables.
        unsafe { PhysicalMapping::new(pa, virt, size, size, DirectMap) }
    }

    fn unmap_physical_region<T>(_region: &PhysicalMapping<Self, T>) {}
}

/// The SRAT header; entries follow and are parsed by `topology::srat_entries`.
#[repr(C, packed)]
struct Srat {
    header: SdtHeader,
}

// SAFETY: `Srat` starts with the standard header and has the SRAT signature.
unsafe impl AcpiTable for Srat {
    const SIGNATURE: Signature = Signature::SRAT;
    fn header(&self) -> &SdtHeader {
        &self.header
    }
}

/// A PCI Express ECAM region from the MCFG: configuration space of buses `bus_start..=
/// bus_end` of one segment group, 1 MiB a bus, at physical address `base`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ecam {
    /// Physical address of bus 0's configuration space (even if `bus_start` is later).
    pub base: u64,
    /// The PCI segment group.
    pub segment: u16,
    /// First bus decoded.
    pub bus_start: u8,
    /// Last bus decoded.
    pub bus_end: u8,
}

/// Why discovery failed (printed with `{:?}`).
#[derive(Debug)]
#[allow(dead_code)]
pub enum DiscoveryError {
    /// No RSDP was passed by the loader.
    NoRsdp,
    /// The ACPI tables could not be read.
    Acpi(acpi::AcpiError),
}

/// Reads the MADT, SRAT and FADT. `bsp_apic_id` is the APIC id of the calling core.
pub fn discover(rsdp: u64, bsp_apic_id: u32) -> Result<Platform, DiscoveryError> {
    if rsdp == 0 {
        return Err(DiscoveryError::NoRsdp);
    }
    // SAFETY: the loader's RSDP address; the crate validates its checksum.
    let tables =
        unsafe { AcpiTables::from_rsdp(DirectMap, rsdp as usize) }.map_err(DiscoveryError::Acpi)?;
    let mut p = Platform::with_boot_core(bsp_apic_id);
    p.read_madt(&tables, bsp_apic_id)?;
    p.read_srat(&tables);
    p.read_fadt(&tables);
    p.read_mcfg(&tables);
    NODE_MEMORY.call_once(|| (p.node_memory, p.node_memory_len));
    Ok(p)
}

impl Platform {
    /// One core (the boot core), one node, no memory ranges, no power-off port.
    fn with_boot_core(bsp_apic_id: u32) -> Self {
        let mut p = Platform {
            apic_ids: [0; MAX_CORES],
            core_count: 1,
            cores_ignored: 0,
            core_node: [0; MAX_CORES],
            node_memory: [physmem::NodeMemory {
                node: 0,
                range: physmem::PhysRange { start: 0, end: 0 },
            }; MAX_NODE_RANGES],
            node_memory_len: 0,
            node_count: 1,
            pm1a_control: None,
            ecam: None,
        };
        p.apic_ids[0] = bsp_apic_id;
        p
    }

    /// MADT: enabled (or online-capable) processors; the boot core stays first.
    fn read_madt(
        &mut self,
        tables: &AcpiTables<DirectMap>,
        bsp_apic_id: u32,
    ) -> Result<(), DiscoveryError> {
        let madt = tables.find_table::<Madt>().map_err(DiscoveryError::Acpi)?;
        for entry in madt.get().entries() {
            let (apic_id, flags) = match entry {
                MadtEntry::LocalApic(e) => (e.apic_id as u32, e.flags),
                MadtEntry::LocalX2Apic(e) => (e.x2apic_id, e.flags),
                _ => continue,
            };
            let usable = flags & 0b11 != 0; // enabled, or online-capable
            let known = self.apic_ids[..self.core_count].contains(&apic_id);
            if !usable || apic_id == bsp_apic_id || known {
                continue;
            }
            if self.core_count == MAX_CORES {
                self.cores_ignored += 1;
                continue;
            }
            self.apic_ids[self.core_count] = apic_id;
            self.core_count += 1;
        }
        Ok(())
    }

    /// SRAT: NUMA nodes, when the VM has them.
    fn read_srat(&mut self, tables: &AcpiTables<DirectMap>) {
        let Ok(srat) = tables.find_table::<Srat>() else { return };
        let len = { srat.get().header.length } as usize;
        // SAFETY: the mapping covers the table's full length (the crate maps `length` bytes).
        let bytes =
            unsafe { core::slice::from_raw_parts(srat.virtual_start().as_ptr().cast::<u8>(), len) };
        let mut max_node = 0;
        for e in srat_entries(bytes) {
            match e {
                SratEntry::Processor { apic_id, domain, enabled: true } => {
                    let cores = &self.apic_ids[..self.core_count];
                    if let Some(i) = cores.iter().position(|&a| a == apic_id) {
                        self.core_node[i] = domain;
                        max_node = max_node.max(domain);
                    }
                }
                SratEntry::Memory { base, length, domain, enabled: true, .. }
                    if length > 0 && self.node_memory_len < MAX_NODE_RANGES =>
                {
                    let range = physmem::PhysRange { start: base, end: base + length };
                    self.node_memory[self.node_memory_len] =
                        physmem::NodeMemory { node: domain, range };
                    self.node_memory_len += 1;
                    max_node = max_node.max(domain);
                }
                _ => {}
            }
        }
        self.node_count = max_node + 1;
    }

    /// FADT: the PM1a control block (I/O port) for S5 power-off.
    fn read_fadt(&mut self, tables: &AcpiTables<DirectMap>) {
        if let Ok(fadt) = tables.find_table::<acpi::fadt::Fadt>() {
            if let Ok(block) = fadt.get().pm1a_control_block() {
                if block.address_space == acpi::address::AddressSpace::SystemIo {
                    self.pm1a_control = Some(block.address as u16);
                }
            }
        }
    }
}

impl Platform {
    /// MCFG: the first ECAM region (QEMU's q35 has one: segment 0, buses 0-255).
    fn read_mcfg(&mut self, tables: &AcpiTables<DirectMap>) {
        let Ok(mcfg) = tables.find_table::<acpi::mcfg::Mcfg>() else { return };
        if let Some(e) = mcfg.get().entries().first() {
            self.ecam = Some(Ecam {
                base: e.base_address,
                segment: e.pci_segment_group,
                bus_start: e.bus_number_start,
                bus_end: e.bus_number_end,
            });
        }
    }
}

/// The SRAT's memory ranges, kept for [`node_of`].
static NODE_MEMORY: spin::Once<([physmem::NodeMemory; MAX_NODE_RANGES], usize)> = spin::Once::new();

/// The NUMA node holding physical address `pa`, if the SRAT says.
pub fn node_of(pa: u64) -> Option<u32> {
    let (ranges, len) = NODE_MEMORY.get()?;
    ranges[..*len].iter().find(|m| m.range.contains(pa)).map(|m| m.node)
}

impl Platform {
    /// The memory ranges of each NUMA node.
    pub fn node_memory(&self) -> &[physmem::NodeMemory] {
        &self.node_memory[..self.node_memory_len]
    }
}
