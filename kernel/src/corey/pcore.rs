//! Pcore and device objects (Corey §4.4): making them, and the capability checks on
//! devices (the machine, the keyboard).

use super::object::{
    alloc, lookup, name, pcore, room, to_abi, with_creator, Device, Payload, Pcore, ProgramObjects,
    Ptr,
};
use crate::percpu;
use abi::Error;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use locks::McsLock;
use objects::ObjectKind;

/// `pcore_alloc(share, core)`: the pcore object of `core`; one live per core.
pub fn pcore_alloc(p: &mut ProgramObjects, share: u64, core: u64) -> Result<u64, Error> {
    let index = usize::try_from(core).map_err(|_| Error::InvalidArgument)?;
    let c = percpu::core(index).ok_or(Error::InvalidArgument)?;
    if c.pcore_claimed.swap(true, Ordering::AcqRel) {
        return Err(Error::NotPermitted);
    }
    let pcore = Pcore {
        core: index,
        status: Arc::new(AtomicU64::new(abi::pcore_status::IDLE)),
        halt: AtomicBool::new(false),
        hz: AtomicU64::new(crate::arch::timer::tick_hz()),
        devices: McsLock::new(Vec::new()),
    };
    // On failure the payload is dropped, and its Drop releases the claim.
    alloc(p, share, ObjectKind::Pcore, Payload::Pcore(pcore))
}
/// The device objects `device_alloc` makes. The machine device is a capability only the
/// kernel makes ([`capability_device`]): allocating it is `NotPermitted`.
pub fn device_alloc(p: &mut ProgramObjects, share: u64, hwid: u64) -> Result<u64, Error> {
    if !super::device::exists(hwid) {
        return Err(Error::InvalidArgument);
    }
    // Capabilities only the kernel makes.
    if hwid == super::device::MACHINE || hwid == super::device::KEYBOARD {
        return Err(Error::NotPermitted);
    }
    alloc(p, share, ObjectKind::Device, Payload::Device(Device::new(hwid)))
}

/// A new device object of `hwid` that only the kernel makes: the machine device (the
/// capability for `kernel_command` and `poweroff`) or the keyboard (for `console_read`),
/// for the kernel to give the program it starts on the console (`init`).
pub fn capability_device(hwid: u64) -> Result<Ptr, Error> {
    room()?;
    let payload = Payload::Device(Device::new(hwid));
    with_creator(|c| c.make(ObjectKind::Device, name(), objects::Body::Kernel(payload), None))
        .map_err(to_abi)
}

/// Whether ⟨rs, ro⟩ names a device object of `hwid` in `p`'s share set (a capability).
pub fn holds_device(p: &ProgramObjects, rs: u64, ro: u64, hwid: u64) -> bool {
    device_hwid(p, rs, ro) == Ok(hwid)
}

/// The hardware id of the device object ⟨rs, ro⟩.
pub fn device_hwid(p: &ProgramObjects, rs: u64, ro: u64) -> Result<u64, Error> {
    match lookup(p, rs, ro, ObjectKind::Device)?.payload() {
        Some(Payload::Device(d)) => Ok(d.hwid),
        _ => Err(Error::InvalidArgument),
    }
}

/// `pcore_status(pcore)`: its status word (`abi::pcore_status`).
pub fn pcore_status(p: &ProgramObjects, rs: u64, ro: u64) -> Result<u64, Error> {
    let ptr = lookup(p, rs, ro, ObjectKind::Pcore)?;
    Ok(pcore(&ptr).ok_or(Error::InvalidArgument)?.status.load(Ordering::Acquire))
}

/// `pcore_set_interval(pcore, hz)`: its context's tick rate, 10 to 1000 Hz (Corey §4.4).
pub fn pcore_set_interval(p: &ProgramObjects, rs: u64, ro: u64, hz: u64) -> Result<u64, Error> {
    let ptr = lookup(p, rs, ro, ObjectKind::Pcore)?;
    if !(10..=1000).contains(&hz) {
        return Err(Error::InvalidArgument);
    }
    pcore(&ptr).ok_or(Error::InvalidArgument)?.hz.store(hz, Ordering::Relaxed);
    Ok(0)
}
