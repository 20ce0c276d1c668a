//! The devices user programs can see (Corey §4.4 `device_list`, `device_stat`): the serial
//! console, the initrd, the machine (its kernel console and power: a capability), the
//! keyboard (the console's input: a capability), each core's timer, and every PCI function
//! the boot found (`arch::pci`). Drivers for PCI devices come with kernel cores (M12).

use crate::arch::{serial, timer};
use crate::percpu;
use abi::{device_kind, DeviceInfo, DeviceStat};
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};

/// Kernel commands run through the machine device (its `device_stat` count).
static MACHINE_COMMANDS: AtomicU64 = AtomicU64::new(0);

/// Counts one kernel command run through the machine device.
pub fn count_machine_command() {
    MACHINE_COMMANDS.fetch_add(1, Ordering::Relaxed);
}

/// Bytes programs read through the keyboard device (its `device_stat` count).
static KEYBOARD_BYTES: AtomicU64 = AtomicU64::new(0);

/// Counts `n` bytes read through the keyboard device.
pub fn count_keyboard_bytes(n: u64) {
    KEYBOARD_BYTES.fetch_add(n, Ordering::Relaxed);
}

/// Hardware id of the serial console.
const SERIAL: u64 = 1;
/// Hardware id of the initrd.
const INITRD: u64 = 2;
/// Hardware id of the machine: a device object of it is the capability for
/// `kernel_command` and `poweroff`.
pub const MACHINE: u64 = 3;
/// Hardware id of the keyboard (the serial console's input): a device object of it is the
/// capability for `console_read`.
pub const KEYBOARD: u64 = 4;
/// Hardware id of the syscall pseudo-device: each `device_alloc` of it makes a new
/// syscall device (`abi::sysdev`).
const SYSCALL: u64 = abi::sysdev::SYSCALL_HWID;
/// Hardware id of core 0's timer; core k's is `TIMER_BASE + k`.
const TIMER_BASE: u64 = 16;

fn short_name(s: &str) -> u64 {
    let mut bytes = [0u8; 8];
    for (b, c) in bytes.iter_mut().zip(s.bytes()) {
        *b = c;
    }
    u64::from_le_bytes(bytes)
}

/// Every device, in hardware-id order.
pub fn list() -> Vec<DeviceInfo> {
    let mut out = alloc::vec![
        DeviceInfo {
            hwid: SERIAL,
            kind: device_kind::SERIAL,
            core: u64::MAX,
            name: short_name("com1"),
        },
        DeviceInfo {
            hwid: INITRD,
            kind: device_kind::INITRD,
            core: u64::MAX,
            name: short_name("initrd"),
        },
        DeviceInfo {
            hwid: MACHINE,
            kind: device_kind::MACHINE,
            core: u64::MAX,
            name: short_name("machine"),
        },
        DeviceInfo {
            hwid: KEYBOARD,
            kind: device_kind::KEYBOARD,
            core: u64::MAX,
            name: short_name("keyboard"),
        },
        DeviceInfo {
            hwid: SYSCALL,
            kind: device_kind::SYSCALL,
            core: u64::MAX,
            name: short_name("syscall"),
        },
    ];
    for core in percpu::all_cores() {
        out.push(DeviceInfo {
            hwid: TIMER_BASE + core.index as u64,
            kind: device_kind::TIMER,
            core: core.index as u64,
            name: short_name("lapic-tm"),
        });
    }
    let nic = crate::drivers::virtio_net::info().map(|n| n.hwid);
    let disk = crate::drivers::virtio_blk::info().map(|d| d.hwid);
    for f in crate::arch::pci::functions() {
        let hwid = device_kind::PCI_HWID_BASE + f.location() as u64;
        let (kind, name) = if nic == Some(hwid) {
            (device_kind::NET, short_name("virtio-n"))
        } else if disk == Some(hwid) {
            (device_kind::BLOCK, short_name("virtio-b"))
        } else {
            (device_kind::PCI, pci_name(f.vendor_id, f.device_id))
        };
        out.push(DeviceInfo { hwid, kind, core: u64::MAX, name });
    }
    out
}

/// A PCI function's name: its vendor and device ids as eight hex digits (`1af41000`).
fn pci_name(vendor: u16, device: u16) -> u64 {
    let ids = (vendor as u32) << 16 | device as u32;
    let mut bytes = [0u8; 8];
    for (i, b) in bytes.iter_mut().enumerate() {
        let nibble = (ids >> (28 - 4 * i)) & 0xf;
        *b = b"0123456789abcdef"[nibble as usize];
    }
    u64::from_le_bytes(bytes)
}

/// Whether `hwid` names a device.
pub fn exists(hwid: u64) -> bool {
    list().iter().any(|d| d.hwid == hwid)
}

/// The counters of device `hwid`.
pub fn stat(hwid: u64) -> Option<DeviceStat> {
    let info = list().into_iter().find(|d| d.hwid == hwid)?;
    let (count, detail) = match info.kind {
        device_kind::SERIAL => serial::counts(),
        device_kind::INITRD => {
            (crate::initrd::bytes().len() as u64, crate::initrd::files().count() as u64)
        }
        device_kind::MACHINE => {
            (MACHINE_COMMANDS.load(Ordering::Relaxed), percpu::core_count() as u64)
        }
        device_kind::KEYBOARD => (KEYBOARD_BYTES.load(Ordering::Relaxed), 0),
        device_kind::SYSCALL => super::sysdev::counts(),
        device_kind::NET => {
            let (nic, stats) =
                (crate::drivers::virtio_net::info()?, crate::drivers::virtio_net::stats());
            let mut mac = [0u8; 8];
            mac[..6].copy_from_slice(&nic.mac);
            (stats.received + stats.sent, u64::from_le_bytes(mac))
        }
        device_kind::BLOCK => {
            let (disk, stats) =
                (crate::drivers::virtio_blk::info()?, crate::drivers::virtio_blk::stats());
            (stats.sectors_read + stats.sectors_written, disk.sectors)
        }
        device_kind::PCI => {
            let at = hwid - device_kind::PCI_HWID_BASE;
            let f = crate::arch::pci::functions().iter().find(|f| f.location() as u64 == at)?;
            (f.class_code as u64, f.first_bar().map_or(0, |b| b.address))
        }
        _ => {
            let core = percpu::core(info.core as usize)?;
            (core.ticks(), timer::tick_hz())
        }
    };
    Some(DeviceStat { hwid, kind: info.kind, count, detail })
}
