//! Kernel cores (Corey §3.2, §4.4): a core a program dedicates to kernel work. Started by
//! `pcore_run` with `PcoreRun::KERNEL_CORE`, it runs no user context; its idle loop polls,
//! round after round, each device on its pcore's list by that device's poll function:
//! - the network device: frames it received are steered to the syscall devices
//!   ([`steer`]: by IPv4 address, and software RSS among devices of one address), each
//!   into a queue of its own; and its send buffers the device is done with are taken back
//!   (so in Corey §8.3's Polling configuration, where programs post their sends by trap,
//!   the kernel core still polls for the completions);
//! - each syscall device ([`ring`]): requests a program posted in its ring are served
//!   and answered there.
//!
//! Between rounds the core serves its monitor as any idle core does (the scheduler's idle
//! loop calls [`poll`]), so it still answers other cores. It stops when its pcore is
//! halted (`pcore_halt`) or when it holds the last reference to its pcore object (the
//! program that made it dropped it or ended); the status word then says `HALTED`.

mod ring;
mod steer;

use crate::corey::{self, Ptr};
use crate::drivers::virtio_net;
use crate::percpu::{self, PerCoreState};
use crate::storage;
use abi::{pcore_status, Error};
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};
use ring::Ring;

/// This core's kernel-core job, if it is one.
static KERNEL_CORE: PerCoreState<Option<KernelCore>> = crate::per_core_state!(None);

/// A running kernel core.
struct KernelCore {
    /// Its syscall devices.
    rings: Vec<Ring>,
    /// Whether the network device is on its list.
    nic: bool,
    /// Whether the disk is on its list: every core's disk transfers come here.
    disk: bool,
    /// Its status word (the pcore's).
    status: Arc<AtomicU64>,
    /// Its pcore object: the kernel core ends when this is the last reference.
    pcore: Ptr,
}

/// What [`poll`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Polled {
    /// This core is no kernel core.
    NotKernelCore,
    /// One round over its devices.
    Round,
    /// The kernel core ended this round (halted, or its pcore object was dropped): the
    /// core is free for threads again.
    Ended,
}

/// Makes this core the kernel core of `pcore` (on the core, from its monitor): takes the
/// devices on its list. A syscall device another kernel core polls, or one without a ring
/// (`device_buf`), or the disk when another kernel core drives it, is `InvalidArgument`;
/// nothing is taken then.
pub fn start(pcore: Ptr) -> Result<(), Error> {
    let pc = corey::pcore(&pcore).ok_or(Error::InvalidArgument)?;
    let devices = pc.devices.with(|d| d.clone());
    let nic_hwid = virtio_net::info().map(|n| n.hwid);
    let disk_hwid = crate::drivers::virtio_blk::info().map(|d| d.hwid);
    let mut rings = Vec::new();
    let (mut nic, mut disk) = (false, false);
    for dev in devices {
        if corey::syscall_device(&dev).is_some() {
            match Ring::take(dev) {
                Ok(r) => rings.push(r),
                Err(e) => {
                    drop(rings); // gives back the ones taken so far
                    return Err(e);
                }
            }
        } else if corey::device(&dev).map(|d| d.hwid) == nic_hwid {
            nic = true;
        } else if corey::device(&dev).map(|d| d.hwid) == disk_hwid {
            disk = true;
        }
    }
    // Every core's disk transfers come here from now on, by remote call (`storage::disk`).
    if disk && !storage::claim_disk(percpu::this_core().index) {
        drop(rings); // gives back the syscall devices taken
        return Err(Error::InvalidArgument);
    }
    let status = pc.status.clone();
    status.store(pcore_status::RUNNING | pcore_status::POLLING, Ordering::Release);
    KERNEL_CORE.with(|k| *k = Some(KernelCore { rings, nic, disk, status, pcore }));
    Ok(())
}

/// One round of this core's kernel-core work, if it is one (the scheduler's idle loop,
/// instead of sleeping).
pub fn poll() -> Polled {
    KERNEL_CORE.with(|slot| {
        let Some(k) = slot.as_mut() else { return Polled::NotKernelCore };
        let halted = corey::pcore(&k.pcore).is_none_or(|p| p.halt.load(Ordering::Acquire));
        if halted || Arc::strong_count(&k.pcore) == 1 {
            let KernelCore { rings, status, pcore, disk, .. } = slot.take().expect("checked above");
            // Its devices and pcore go first: whoever sees the status may take them at once.
            drop(rings);
            if disk {
                storage::release_disk(percpu::this_core().index);
            }
            drop(pcore);
            status.store(pcore_status::HALTED, Ordering::Release);
            return Polled::Ended;
        }
        if k.nic {
            // Corey §8.3: the kernel core polls for received frames and for transmit
            // completions, whoever posted the sends.
            steer::receive_all(&mut k.rings);
            virtio_net::reclaim();
        }
        for r in k.rings.iter_mut() {
            r.serve(k.nic);
        }
        Polled::Round
    })
}
