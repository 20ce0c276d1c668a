//! Device drivers (issue M12): the devices the boot's PCI scan found (`arch::pci`), driven
//! through the `virtio-drivers` crate over Atoll's frames ([`dma`]). Today the virtio
//! network device ([`virtio_net`]) and block device ([`virtio_blk`]), polled.

pub mod dma;
pub mod virtio_blk;
pub mod virtio_net;

use crate::arch::pci::{self, PciFunction};
use alloc::format;
use alloc::string::String;
use virtio_drivers::transport::pci::bus::DeviceFunction;
use virtio_drivers::transport::pci::PciTransport;

/// The virtio PCI vendor id.
const VIRTIO_VENDOR: u16 = 0x1af4;

/// The first virtio function of the PCI scan whose device id is one of `device_ids`, with
/// its transport set up; `None` if the scan found none.
fn virtio_function(
    device_ids: &[u16],
) -> Result<Option<(&'static PciFunction, PciTransport)>, String> {
    let Some(f) = pci::functions()
        .iter()
        .find(|f| f.vendor_id == VIRTIO_VENDOR && device_ids.contains(&f.device_id))
    else {
        return Ok(None);
    };
    let at = DeviceFunction { bus: f.bus, device: f.device, function: f.function };
    let transport = pci::with_root(|root| PciTransport::new::<dma::AtollHal, _>(root, at))
        .ok_or("no PCI configuration access")?
        .map_err(|e| format!("transport: {e}"))?;
    Ok(Some((f, transport)))
}

/// Starts the drivers of the devices the PCI scan found (boot core, after the scan).
pub fn probe() {
    match virtio_net::probe() {
        Ok(Some(nic)) => crate::println!(
            "virtio-net: {} mac {}, {} receive buffers",
            nic.location,
            virtio_net::format_mac(nic.mac),
            virtio_net::QUEUE_SIZE
        ),
        Ok(None) => {}
        Err(e) => crate::println!("virtio-net: not started: {e}"),
    }
    match virtio_blk::probe() {
        Ok(Some(disk)) => crate::println!(
            "virtio-blk: {} {} MiB{}",
            disk.location,
            (disk.sectors * virtio_blk::SECTOR as u64) >> 20,
            if disk.read_only { ", read-only" } else { "" }
        ),
        Ok(None) => {}
        Err(e) => crate::println!("virtio-blk: not started: {e}"),
    }
}
