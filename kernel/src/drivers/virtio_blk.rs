//! The virtio block device (`virtio-blk-pci`), through `virtio-drivers`' `VirtIOBlk`: one
//! disk, started at boot on the boot core ([`probe`]), read and written in 512-byte
//! sectors by whichever core calls [`read`] or [`write`] (issue M13: the caller's own core
//! drives it, under an MCS lock, as Corey §8.3's Polling configuration does for the NIC).
//! A transfer waits for the device (polling its used ring); the data goes through the DMA
//! layer's bounce buffers (`dma`), so callers pass any kernel buffer.

use super::dma::{AtollHal, BOUNCE_BYTES};
use alloc::format;
use alloc::string::String;
use locks::McsLock;
use virtio_drivers::device::blk::{VirtIOBlk, SECTOR_SIZE};
use virtio_drivers::transport::pci::PciTransport;

/// The block device's virtio ids: transitional (QEMU's default `virtio-blk-pci`) and
/// modern (virtio 1.0 §4.1.2: 0x1040 + device type 2).
const BLOCK_DEVICE_IDS: [u16; 2] = [0x1001, 0x1042];

/// Bytes of a sector, the device's unit.
pub const SECTOR: usize = SECTOR_SIZE;

/// What a started disk is.
#[derive(Clone, Debug)]
pub struct DiskInfo {
    /// Its PCI location (`00:03.0`).
    pub location: String,
    /// Its hardware id (`device_list`).
    pub hwid: u64,
    /// Its size in sectors.
    pub sectors: u64,
    /// Whether the device refuses writes.
    pub read_only: bool,
}

/// Transfers since boot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskStats {
    /// Read requests completed.
    pub reads: u64,
    /// Write requests completed.
    pub writes: u64,
    /// Sectors read.
    pub sectors_read: u64,
    /// Sectors written.
    pub sectors_written: u64,
}

/// Why a transfer failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiskError {
    /// No virtio block device was started.
    NoDevice,
    /// The buffer is empty or not a whole number of sectors, or the sectors pass the end.
    OutOfRange,
    /// The device is read-only.
    ReadOnly,
    /// The device reported an error.
    Device,
}

/// The started disk and its counters, under an MCS lock.
struct Disk {
    blk: VirtIOBlk<AtollHal, PciTransport>,
    stats: DiskStats,
}

static DISK: McsLock<Option<Disk>> = McsLock::new(None);
static INFO: spin::Once<DiskInfo> = spin::Once::new();

/// Starts the first virtio block device of the PCI scan, if there is one. Once (the boot
/// core).
pub fn probe() -> Result<Option<&'static DiskInfo>, String> {
    let Some((f, transport)) = super::virtio_function(&BLOCK_DEVICE_IDS)? else {
        return Ok(None);
    };
    let blk = VirtIOBlk::new(transport).map_err(|e| format!("device: {e}"))?;
    let info = DiskInfo {
        location: format!("{:02x}:{:02x}.{}", f.bus, f.device, f.function),
        hwid: abi::device_kind::PCI_HWID_BASE + f.location() as u64,
        sectors: blk.capacity(),
        read_only: blk.readonly(),
    };
    DISK.with(|d| *d = Some(Disk { blk, stats: DiskStats::default() }));
    Ok(Some(INFO.call_once(|| info)))
}

/// The started disk, if any.
pub fn info() -> Option<&'static DiskInfo> {
    INFO.get()
}

/// Its counters (zero without a disk).
pub fn stats() -> DiskStats {
    DISK.with(|d| d.as_ref().map(|d| d.stats).unwrap_or_default())
}

/// Checks that `len` bytes from `sector` are whole sectors on the disk.
fn check_range(disk: &Disk, sector: u64, len: usize) -> Result<(), DiskError> {
    let sectors = (len / SECTOR) as u64;
    if len == 0
        || !len.is_multiple_of(SECTOR)
        || sector.saturating_add(sectors) > disk.blk.capacity()
    {
        return Err(DiskError::OutOfRange);
    }
    Ok(())
}

/// Reads `buf.len()` bytes (whole sectors) from sector `sector` on.
pub fn read(sector: u64, buf: &mut [u8]) -> Result<(), DiskError> {
    DISK.with(|disk| {
        let disk = disk.as_mut().ok_or(DiskError::NoDevice)?;
        check_range(disk, sector, buf.len())?;
        for (i, piece) in buf.chunks_mut(BOUNCE_BYTES).enumerate() {
            let at = sector + (i * BOUNCE_BYTES / SECTOR) as u64;
            disk.blk.read_blocks(at as usize, piece).map_err(|_| DiskError::Device)?;
            disk.stats.reads += 1;
            disk.stats.sectors_read += (piece.len() / SECTOR) as u64;
        }
        Ok(())
    })
}

/// Writes `buf` (whole sectors) from sector `sector` on. The data is with the device when
/// this returns; [`flush`] makes the device keep it across its own power loss.
pub fn write(sector: u64, buf: &[u8]) -> Result<(), DiskError> {
    DISK.with(|disk| {
        let disk = disk.as_mut().ok_or(DiskError::NoDevice)?;
        check_range(disk, sector, buf.len())?;
        if disk.blk.readonly() {
            return Err(DiskError::ReadOnly);
        }
        for (i, piece) in buf.chunks(BOUNCE_BYTES).enumerate() {
            let at = sector + (i * BOUNCE_BYTES / SECTOR) as u64;
            disk.blk.write_blocks(at as usize, piece).map_err(|_| DiskError::Device)?;
            disk.stats.writes += 1;
            disk.stats.sectors_written += (piece.len() / SECTOR) as u64;
        }
        Ok(())
    })
}

/// Asks the device to make every completed write durable (virtio's FLUSH; a no-op on a
/// device without a write cache).
pub fn flush() -> Result<(), DiskError> {
    DISK.with(|disk| {
        let disk = disk.as_mut().ok_or(DiskError::NoDevice)?;
        disk.blk.flush().map_err(|_| DiskError::Device)
    })
}
