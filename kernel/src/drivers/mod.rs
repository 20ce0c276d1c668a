//! Device drivers (issue M12): the devices the boot's PCI scan found (`arch::pci`), driven
//! through the `virtio-drivers` crate over Atoll's frames ([`dma`]). Today the virtio
//! network device ([`virtio_net`]) and block device ([`virtio_blk`]), polled.

pub mod dma;
pub mod virtio_blk;
pub mod virtio_net;

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
