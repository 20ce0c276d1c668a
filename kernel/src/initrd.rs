//! The initrd: a cpio newc archive QEMU loads with `-initrd` (a PVH boot module). Read-only
//! after boot; its files are the user programs.

use crate::arch::paging::phys_to_virt;

static INITRD: spin::Once<&'static [u8]> = spin::Once::new();

/// Records the initrd at physical `[addr, addr + size)` (boot core, once).
pub fn set(addr: u64, size: u64) {
    // SAFETY: the boot module lies in RAM the frame allocator never hands out (reserved at
    // boot), mapped by the direct map, and nothing writes it.
    let bytes =
        unsafe { core::slice::from_raw_parts(phys_to_virt(addr) as *const u8, size as usize) };
    INITRD.call_once(|| bytes);
}

/// The archive's bytes (empty without an initrd).
pub fn bytes() -> &'static [u8] {
    INITRD.get().copied().unwrap_or(&[])
}

/// The file called `name`.
pub fn find(name: &str) -> Option<&'static [u8]> {
    cpio::find(bytes(), name).map(|e| e.data)
}

/// Every file: (name, size).
pub fn files() -> impl Iterator<Item = (&'static str, usize)> {
    cpio::entries(bytes()).map(|e| (e.name, e.data.len()))
}
