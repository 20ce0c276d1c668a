//! Syscall devices and a kernel core's device list (Corey §3.2, §4.4): `pcore_add_device`,
//! `device_buf` and `device_conf`. A syscall device is a ring in a page of a segment the
//! program shares with a kernel core, and a packet area beside it; `device_buf` pins those
//! pages (the kernel core reaches them by their frames, whatever the program's mappings
//! do later). The kernel core that polls them is `crate::kcore`.

use super::object::{device, lookup, pcore, segment, Kernel, ProgramObjects, Ptr, SyscallDevice};
use super::{reserve_frames, PAGE};
use crate::arch::paging::phys_to_virt;
use crate::percpu::this_core;
use abi::sysdev::{buf_type, conf, PACKET_AREA_MAX, PCORE_DEVICES_MAX};
use abi::{pcore_status, Error};
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};
use objects::ObjectKind;

/// Calls kernel cores served through syscall devices since boot (`device_stat`'s count).
pub static CALLS_SERVED: AtomicU64 = AtomicU64::new(0);
/// The counters of the syscall pseudo-device: calls served, live syscall devices.
pub fn counts() -> (u64, u64) {
    (CALLS_SERVED.load(Ordering::Relaxed), super::object::live_syscall_devices())
}

/// The syscall device `p` is, if it is one.
pub fn syscall_device(p: &Ptr) -> Option<&SyscallDevice> {
    device(p)?.syscall.as_ref()
}

/// Whether a kernel core can drive device object `p`: the network device or the disk the
/// kernel drives, or a syscall device.
fn pollable(p: &Ptr) -> bool {
    let Some(d) = device(p) else { return false };
    d.syscall.is_some()
        || crate::drivers::virtio_net::info().is_some_and(|n| n.hwid == d.hwid)
        || crate::drivers::virtio_blk::info().is_some_and(|b| b.hwid == d.hwid)
}

/// `pcore_add_device(pcore, dev)` (Corey §4.4): `dev` joins the list the pcore polls
/// when it runs as a kernel core.
pub fn pcore_add_device(
    p: &ProgramObjects,
    prs: u64,
    pro: u64,
    drs: u64,
    dro: u64,
) -> Result<u64, Error> {
    let pcore_ptr = lookup(p, prs, pro, ObjectKind::Pcore)?;
    let dev = lookup(p, drs, dro, ObjectKind::Device)?;
    let pc = pcore(&pcore_ptr).ok_or(Error::InvalidArgument)?;
    if pcore_status::state(pc.status.load(Ordering::Acquire)) == pcore_status::RUNNING {
        return Err(Error::Busy);
    }
    if !pollable(&dev) {
        return Err(Error::InvalidArgument);
    }
    pc.devices.with(|list| {
        if list.iter().any(|d| Arc::ptr_eq(d, &dev)) {
            return Err(Error::InvalidArgument);
        }
        if list.len() >= PCORE_DEVICES_MAX {
            return Err(Error::NoResources);
        }
        list.try_reserve(1).map_err(|_| Error::NoResources)?;
        list.push(dev);
        Ok(list.len() as u64)
    })
}

/// `device_buf(dev, seg, offset | type << 56)` (Corey §4.4): pins pages of the segment as
/// the syscall device's ring (one page, cleared: two empty channels) or its packet area
/// (from `offset` to the segment's end).
pub fn device_buf(
    p: &ProgramObjects,
    drs: u64,
    dro: u64,
    srs: u64,
    sro: u64,
    arg: u64,
) -> Result<u64, Error> {
    let dev = lookup(p, drs, dro, ObjectKind::Device)?;
    let sys = syscall_device(&dev).ok_or(Error::InvalidArgument)?;
    let seg_ptr = lookup(p, srs, sro, ObjectKind::Segment)?;
    let nbytes = segment(&seg_ptr).ok_or(Error::InvalidArgument)?.state.with(|s| s.nbytes());
    let (offset, kind) = (arg & ((1 << 56) - 1), arg >> 56);
    if offset % PAGE != 0 || offset >= nbytes {
        return Err(Error::InvalidArgument);
    }
    let pages = match kind {
        buf_type::RING => 1,
        buf_type::PACKETS if nbytes - offset <= PACKET_AREA_MAX => (nbytes - offset) / PAGE,
        _ => return Err(Error::InvalidArgument),
    };
    if offset / PAGE + pages > nbytes.div_ceil(PAGE) || pages == 0 {
        return Err(Error::InvalidArgument);
    }
    if pages + reserve_frames() > this_core().free_frames() {
        return Err(Error::NoResources);
    }
    if sys.polled.load(Ordering::Acquire) {
        return Err(Error::Busy);
    }
    let mut frames = Vec::new();
    frames.try_reserve_exact(pages as usize).map_err(|_| Error::NoResources)?;
    for i in 0..pages {
        crate::monitor::step();
        let frame =
            vm::pin_page(&Kernel, &seg_ptr, offset / PAGE + i).map_err(super::segment::vm_error)?;
        frames.push(frame);
    }
    sys.buffers.with(|b| {
        if kind == buf_type::RING {
            let ring = frames.pop().ok_or(Error::InvalidArgument)?;
            // SAFETY: a frame we hold (pinned above), reached through the direct map; the
            // write stays inside its page. The program may be writing it too: a ring it
            // uses while handing it over is its own to lose.
            unsafe {
                core::ptr::write_bytes(phys_to_virt(ring.phys()) as *mut u8, 0, PAGE as usize)
            };
            b.ring = Some(ring);
        } else {
            b.packets = frames;
        }
        Ok(0)
    })
}

/// `device_conf(dev, conf, value)` (Corey §4.4): a syscall device's received-frame filter.
pub fn device_conf(
    p: &ProgramObjects,
    drs: u64,
    dro: u64,
    what: u64,
    value: u64,
) -> Result<u64, Error> {
    let dev = lookup(p, drs, dro, ObjectKind::Device)?;
    let sys = syscall_device(&dev).ok_or(Error::InvalidArgument)?;
    match what {
        conf::NET_ADDRESS if value <= u32::MAX as u64 => {
            sys.net_address.store(value, Ordering::Release);
            Ok(0)
        }
        _ => Err(Error::InvalidArgument),
    }
}
