//! PCI devices (issue M12 item 1): every function in the PCI Express configuration space
//! the MCFG names (QEMU q35: segment 0, buses 0-255, at 0xb000_0000), found once at boot by
//! walking bus 0 and each bus behind a bridge, with its BARs as the firmware assigned them.
//! Enumeration and BAR sizing are `virtio-drivers`' `PciRoot` (the crate the virtio drivers
//! of M12 and M13 use), over the direct map, where the ECAM window is uncached (not RAM).

use super::acpi::{node_of, Ecam};
use super::paging::phys_to_virt;
use alloc::vec::Vec;
use virtio_drivers::transport::pci::bus::{
    BarInfo, Cam, DeviceFunction, HeaderType, MmioCam, PciRoot,
};

/// One PCI function.
#[derive(Clone, Debug)]
pub struct PciFunction {
    /// Bus, device and function (segment 0).
    pub bus: u8,
    /// Device number on its bus (0..32).
    pub device: u8,
    /// Function number (0..8).
    pub function: u8,
    /// Vendor id.
    pub vendor_id: u16,
    /// Device id.
    pub device_id: u16,
    /// Class code: class, subclass and programming interface (`0x02_00_00`: Ethernet).
    pub class_code: u32,
    /// Its BARs, as assigned (a 64-bit BAR fills its first slot; the second is `None`).
    pub bars: [Option<Bar>; 6],
    /// The NUMA node of its first memory BAR, if the SRAT places it (else node 0).
    pub node: u32,
}

/// One base address register: where the firmware put the device's registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bar {
    /// Physical (memory) or port (I/O) address.
    pub address: u64,
    /// Bytes decoded.
    pub size: u64,
    /// An I/O-port BAR (else memory).
    pub io: bool,
}

impl PciFunction {
    /// `bb:dd.f`, as `lspci` writes it.
    pub fn location(&self) -> u16 {
        (self.bus as u16) << 8 | (self.device as u16) << 3 | self.function as u16
    }

    /// The class's name, for the boot log and the shell.
    pub fn class_name(&self) -> &'static str {
        match self.class_code >> 16 {
            0x01 => "storage",
            0x02 => "network",
            0x03 => "display",
            0x04 => "multimedia",
            0x05 => "memory",
            0x06 => "bridge",
            0x07 => "comms",
            0x08 => "system",
            0x0c => "serial-bus",
            _ => "other",
        }
    }

    /// The first BAR that decodes something.
    pub fn first_bar(&self) -> Option<Bar> {
        self.bars.iter().flatten().next().copied()
    }
}

/// The functions found at boot ([`scan`]), in bus order.
static FUNCTIONS: spin::Once<Vec<PciFunction>> = spin::Once::new();

/// Configuration-space access after the scan, for drivers (`virtio-drivers`' transports
/// read capabilities and BARs through it).
static ROOT: spin::Mutex<Option<PciRoot<MmioCam<'static>>>> = spin::Mutex::new(None);

/// The end of the direct map, which reaches every BAR below it (`scan` records it).
static MAP_TOP: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

/// Why there is no PCI scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanError {
    /// No MCFG (a machine without PCI Express configuration space, e.g. QEMU's `pc`).
    NoEcam,
    /// A segment other than 0, or an ECAM window the direct map does not reach.
    Unreachable,
}

/// Finds every function behind `ecam` (once, on the boot core, before other cores touch
/// PCI: sizing a BAR writes it). `map_top` is the end of the direct map.
pub fn scan(ecam: Option<Ecam>, map_top: u64) -> Result<&'static [PciFunction], ScanError> {
    let ecam = ecam.ok_or(ScanError::NoEcam)?;
    let window_end = ecam.base + Cam::Ecam.size() as u64;
    if ecam.segment != 0 || window_end > map_top {
        return Err(ScanError::Unreachable);
    }
    // SAFETY: the ECAM window of 256 MiB (buses 0-255) lies in the direct map, uncached (it
    // is not RAM), and nothing else in the kernel reaches it while the boot core scans;
    // later only `FUNCTIONS` is read.
    let cam = unsafe { MmioCam::new(phys_to_virt(ecam.base) as *mut u8, Cam::Ecam) };
    let mut root = PciRoot::new(cam);
    let mut found = Vec::new();
    // Bus 0, then each bus a bridge opens (a work list, not recursion: a bad bridge's loop
    // ends when its bus was seen).
    let mut buses = alloc::vec![ecam.bus_start];
    let mut seen = [false; 256];
    while let Some(bus) = buses.pop() {
        if seen[bus as usize] || bus > ecam.bus_end {
            continue;
        }
        seen[bus as usize] = true;
        let on_bus: Vec<_> = root.enumerate_bus(bus).collect();
        for (at, info) in on_bus {
            if info.header_type == HeaderType::PciPciBridge {
                buses.push(secondary_bus(ecam, at));
            }
            let bars = read_bars(&mut root, at, &info.header_type);
            let node =
                bars.iter().flatten().find(|b| !b.io).and_then(|b| node_of(b.address)).unwrap_or(0);
            found.push(PciFunction {
                bus: at.bus,
                device: at.device,
                function: at.function,
                vendor_id: info.vendor_id,
                device_id: info.device_id,
                class_code: (info.class as u32) << 16
                    | (info.subclass as u32) << 8
                    | info.prog_if as u32,
                bars,
                node,
            });
        }
    }
    found.sort_by_key(PciFunction::location);
    *ROOT.lock() = Some(root);
    MAP_TOP.store(map_top, core::sync::atomic::Ordering::Relaxed);
    Ok(FUNCTIONS.call_once(|| found))
}

/// The functions [`scan`] found (none before it ran or if it failed).
pub fn functions() -> &'static [PciFunction] {
    FUNCTIONS.get().map(Vec::as_slice).unwrap_or(&[])
}

/// Runs `f` with configuration-space access (a driver starting its device); `None` if the
/// scan found no ECAM.
pub fn with_root<R>(f: impl FnOnce(&mut PciRoot<MmioCam<'static>>) -> R) -> Option<R> {
    ROOT.lock().as_mut().map(f)
}

/// The direct-map address of device registers at `pa` (`size` bytes), if the direct map
/// reaches them (it does for every BAR below 4 GiB).
pub fn registers(pa: u64, size: u64) -> Option<u64> {
    let top = MAP_TOP.load(core::sync::atomic::Ordering::Relaxed);
    (pa.checked_add(size)? <= top).then(|| phys_to_virt(pa))
}

/// A standard function's BARs (a bridge has two, which its own bus's devices use through
/// it; it is listed without them).
fn read_bars(
    root: &mut PciRoot<MmioCam>,
    at: DeviceFunction,
    header: &HeaderType,
) -> [Option<Bar>; 6] {
    let mut bars = [None; 6];
    if *header != HeaderType::Standard {
        return bars;
    }
    let Ok(infos) = root.bars(at) else { return bars };
    for (slot, info) in bars.iter_mut().zip(infos.iter()) {
        *slot = match info {
            Some(BarInfo::Memory { address, size, .. }) if *size > 0 => {
                Some(Bar { address: *address, size: *size, io: false })
            }
            Some(BarInfo::IO { address, size }) if *size > 0 => {
                Some(Bar { address: *address as u64, size: *size as u64, io: true })
            }
            _ => None,
        };
    }
    bars
}

/// A bridge's secondary bus number (byte 1 of the dword at 0x18 of a type-1 header).
fn secondary_bus(ecam: Ecam, at: DeviceFunction) -> u8 {
    let offset = (at.bus as u64) << 20 | (at.device as u64) << 15 | (at.function as u64) << 12;
    let word = phys_to_virt(ecam.base + offset + 0x18) as *const u32;
    // SAFETY: inside the ECAM window `scan` checked is mapped; a 32-bit aligned register read.
    let value = unsafe { word.read_volatile() };
    (value >> 8) as u8
}
