//! Kernel page tables and the kernel's virtual address layout.
//!
//! | region            | base                    | what                                     |
//! |-------------------|-------------------------|------------------------------------------|
//! | direct map        | `0xffff_8000_0000_0000` | all physical memory, 2 MiB pages         |
//! | core heaps        | `0xffff_c000_0000_0000` | 1 GiB window per core, 4 KiB pages       |
//! | core stacks       | `0xffff_ff00_0000_0000` | per core: stacks with unmapped guards    |
//! | kernel image      | `0xffff_ffff_8000_0000` | `.text` RX, `.rodata` R, `.data/.bss` RW |
//!
//! One set of kernel tables is shared by all cores. Who may write which entry is fixed so
//! no lock is needed: the boot core builds every shared level before other cores start;
//! afterwards a core only adds entries inside its own heap window (see `map_page`).

use x86_64::structures::paging::page_table::PageTableEntry;
use x86_64::structures::paging::PageTableFlags as F;

/// End of the user half of the address space.
pub const USER_END: u64 = 0x0000_8000_0000_0000;

/// Base of the direct map of physical memory.
pub const DIRECT_MAP_BASE: u64 = 0xffff_8000_0000_0000;
/// Base of the per-core heap windows (core `i` at `HEAP_BASE + i GiB`).
pub const HEAP_BASE: u64 = 0xffff_c000_0000_0000;
/// Size of one core's heap window.
pub const HEAP_WINDOW: u64 = 1 << 30;
/// Base of the per-core stack slots.
pub const STACKS_BASE: u64 = 0xffff_ff00_0000_0000;
/// Size of one core's stack slot.
pub const STACK_SLOT: u64 = 256 * 1024;
/// Where the kernel image is linked.
pub const KERNEL_VMA: u64 = 0xffff_ffff_8000_0000;

const PAGE: u64 = 4096;
const LARGE: u64 = 2 << 20;

/// Virtual address of physical address `pa` in the direct map.
pub fn phys_to_virt(pa: u64) -> u64 {
    DIRECT_MAP_BASE + pa
}

/// Entry `index` of the page table at physical address `table_pa`. Only single entries are
/// ever referenced, since other cores may write other entries of a shared table.
fn entry(table_pa: u64, index: usize) -> *mut PageTableEntry {
    (phys_to_virt(table_pa) as *mut PageTableEntry).wrapping_add(index)
}

/// Returns the next-level table of `entry`, creating it with `alloc` if absent.
///
/// # Safety
/// `parent` must be a live page table reachable through the direct map, and no other core
/// may write the same entry concurrently.
unsafe fn next_table(
    parent: u64,
    index: usize,
    user: bool,
    alloc: &mut dyn FnMut() -> Option<u64>,
) -> Option<u64> {
    // SAFETY: forwarded; one entry of a live table, which only the caller writes.
    let e = unsafe { &mut *entry(parent, index) };
    if e.is_unused() {
        let pa = alloc()?;
        // SAFETY: a fresh frame owned by the caller, mapped by the direct map.
        unsafe { core::ptr::write_bytes(phys_to_virt(pa) as *mut u8, 0, PAGE as usize) };
        e.set_addr(x86_64::PhysAddr::new(pa), F::PRESENT | F::WRITABLE);
    }
    if user {
        // A user page needs the user bit on every level above it too.
        e.set_flags(e.flags() | F::USER_ACCESSIBLE);
    }
    Some(e.addr().as_u64())
}

fn index(va: u64, level: u32) -> usize {
    ((va >> (12 + 9 * (level - 1))) & 0x1ff) as usize
}

/// Walks from the PML4 down to the table at `level` (4 = PML4 ... 1 = page table) on the
/// way to `va`, creating missing tables with `alloc`, and returns `va`'s entry there.
///
/// # Safety
/// `pml4` is the live kernel PML4; the caller owns the part of the address space it maps
/// (see the module comment), so no other core writes the same entries.
unsafe fn walk(
    pml4: u64,
    va: u64,
    level: u32,
    alloc: &mut dyn FnMut() -> Option<u64>,
) -> Option<*mut PageTableEntry> {
    let mut t = pml4;
    for l in (level + 1..=4).rev() {
        // SAFETY: forwarded from the caller.
        t = unsafe { next_table(t, index(va, l), va < USER_END, alloc)? };
    }
    Some(entry(t, index(va, level)))
}

/// Maps the 4 KiB page at `va` to `pa`; intermediate tables come from `alloc`.
///
/// # Safety
/// As for [`walk`].
pub unsafe fn map_page(
    pml4: u64,
    va: u64,
    pa: u64,
    flags: F,
    alloc: &mut dyn FnMut() -> Option<u64>,
) -> Option<()> {
    // SAFETY: forwarded from the caller; a 4 KiB leaf entry.
    unsafe { (*walk(pml4, va, 1, alloc)?).set_addr(x86_64::PhysAddr::new(pa), flags | F::PRESENT) };
    Some(())
}

/// Maps the 2 MiB page at `va` to `pa`.
///
/// # Safety
/// As for [`walk`].
unsafe fn map_large(
    pml4: u64,
    va: u64,
    pa: u64,
    flags: F,
    alloc: &mut dyn FnMut() -> Option<u64>,
) -> Option<()> {
    let huge = flags | F::PRESENT | F::HUGE_PAGE;
    // SAFETY: forwarded from the caller; a 2 MiB leaf entry in a page directory.
    unsafe { (*walk(pml4, va, 2, alloc)?).set_addr(x86_64::PhysAddr::new(pa), huge) };
    Some(())
}

extern "C" {
    static __kernel_phys_start: u8;
    static __text_start: u8;
    static __text_end: u8;
    static __rodata_end: u8;
    static __kernel_end: u8;
}

/// Physical range of the whole kernel image (boot code, trampoline copy, higher half).
pub fn kernel_image_phys() -> (u64, u64) {
    ((&raw const __kernel_phys_start) as u64, (&raw const __kernel_end) as u64 - KERNEL_VMA)
}

/// Builds the kernel page tables: a direct map of `[0, map_top)` (uncached where
/// `is_ram` says a 2 MiB page holds no RAM: device memory such as the local APIC) and the
/// kernel image with per-section permissions. Returns the PML4's physical address.
///
/// Runs on the boot tables, whose direct-map alias covers the first GiB, so `alloc` must
/// return frames below 1 GiB.
pub fn build_kernel_tables(
    map_top: u64,
    is_ram: impl Fn(u64, u64) -> bool,
    alloc: &mut dyn FnMut() -> Option<u64>,
) -> Option<u64> {
    let pml4 = alloc()?;
    // SAFETY: a fresh frame, reachable through the boot tables' direct-map alias.
    unsafe { core::ptr::write_bytes(phys_to_virt(pml4) as *mut u8, 0, PAGE as usize) };
    let top = map_top.div_ceil(LARGE) * LARGE;
    let mut pa = 0;
    while pa < top {
        let mut flags = F::WRITABLE | F::GLOBAL | F::NO_EXECUTE;
        if !is_ram(pa, pa + LARGE) {
            flags |= F::NO_CACHE | F::WRITE_THROUGH;
        }
        // SAFETY: building tables no core uses yet.
        unsafe { map_large(pml4, phys_to_virt(pa), pa, flags, alloc)? };
        pa += LARGE;
    }
    let text = ((&raw const __text_start) as u64, (&raw const __text_end) as u64);
    let rodata_end = (&raw const __rodata_end) as u64;
    let end = (&raw const __kernel_end) as u64;
    let mut va = text.0;
    while va < end {
        let flags = if va < text.1 {
            F::GLOBAL
        } else if va < rodata_end {
            F::GLOBAL | F::NO_EXECUTE
        } else {
            F::GLOBAL | F::NO_EXECUTE | F::WRITABLE
        };
        // SAFETY: as above.
        unsafe { map_page(pml4, va, va - KERNEL_VMA, flags, alloc)? };
        va += PAGE;
    }
    // Shared upper levels of the heap and stack regions, created now so that cores never
    // race to create them later.
    // SAFETY: as above.
    unsafe {
        walk(pml4, HEAP_BASE, 3, alloc)?;
        walk(pml4, STACKS_BASE, 3, alloc)?;
    }
    Some(pml4)
}

/// Switches this core to the page tables at `pml4` and enables global pages.
///
/// # Safety
/// The tables must map everything the core is using (code, stack, data).
pub unsafe fn activate(pml4: u64) {
    use x86_64::registers::control::{Cr3, Cr3Flags, Cr4, Cr4Flags};
    use x86_64::structures::paging::PhysFrame;
    // SAFETY: forwarded from the caller.
    unsafe {
        Cr4::update(|f| f.insert(Cr4Flags::PAGE_GLOBAL));
        Cr3::write(PhysFrame::containing_address(x86_64::PhysAddr::new(pml4)), Cr3Flags::empty());
    }
}

/// Flushes this core's whole TLB, global (kernel) entries included: toggling CR4.PGE
/// does that, which reloading CR3 does not.
pub fn flush_everything() {
    use x86_64::registers::control::{Cr4, Cr4Flags};
    // SAFETY: clearing and setting PGE again changes no mapping; it only empties the TLB.
    unsafe {
        Cr4::update(|f| f.remove(Cr4Flags::PAGE_GLOBAL));
        Cr4::update(|f| f.insert(Cr4Flags::PAGE_GLOBAL));
    }
}

/// The physical address and flags of the 4 KiB page mapping `va` in the tables at `pml4`
/// (`None` if unmapped or mapped by a large page).
pub fn translate(pml4: u64, va: u64) -> Option<(u64, F)> {
    let mut t = pml4;
    for level in [4, 3, 2] {
        // SAFETY: reading one entry of a live table reached through the direct map.
        let e = unsafe { &*entry(t, index(va, level)) };
        if !e.flags().contains(F::PRESENT) || e.flags().contains(F::HUGE_PAGE) {
            return None;
        }
        t = e.addr().as_u64();
    }
    // SAFETY: as above.
    let e = unsafe { &*entry(t, index(va, 1)) };
    e.flags().contains(F::PRESENT).then(|| (e.addr().as_u64() + (va & 0xfff), e.flags()))
}

/// Calls `f` with the physical address of every page table below the user half of `pml4`
/// (not the PML4 itself), deepest first, so an address space can be torn down.
pub fn user_tables(pml4: u64, f: &mut dyn FnMut(u64)) {
    fn walk(table: u64, level: u32, f: &mut dyn FnMut(u64)) {
        for i in 0..512 {
            // SAFETY: reading one entry of a live table reached through the direct map.
            let e = unsafe { &*entry(table, i) };
            if !e.flags().contains(F::PRESENT) || e.flags().contains(F::HUGE_PAGE) {
                continue;
            }
            let next = e.addr().as_u64();
            if level > 2 {
                walk(next, level - 1, f);
            }
            f(next);
        }
    }
    for i in 0..256 {
        // SAFETY: as above; entries 0..256 are the user half.
        let e = unsafe { &*entry(pml4, i) };
        if e.flags().contains(F::PRESENT) {
            walk(e.addr().as_u64(), 3, f);
            f(e.addr().as_u64());
        }
    }
}

/// Makes a fresh PML4 in `frame` for a user address space: the user half empty, the kernel
/// half the same entries (hence the same shared tables) as the kernel's `pml4`.
pub fn new_user_pml4(kernel_pml4: u64, frame: u64) {
    for i in 0..512 {
        let value = if i < 256 {
            0
        } else {
            // SAFETY: reading one word of the kernel PML4 through the direct map.
            unsafe { (entry(kernel_pml4, i) as *const u64).read() }
        };
        // SAFETY: `frame` is a fresh frame owned by the caller.
        unsafe { (entry(frame, i) as *mut u64).write(value) };
    }
}

/// Clears the 4 KiB mapping of `va` in the tables at `pml4`, if there is one (the caller
/// flushes the TLB).
pub fn unmap_page(pml4: u64, va: u64) {
    let mut t = pml4;
    for level in [4, 3, 2] {
        // SAFETY: reading one entry of a live table reached through the direct map.
        let e = unsafe { &*entry(t, index(va, level)) };
        if !e.flags().contains(F::PRESENT) || e.flags().contains(F::HUGE_PAGE) {
            return;
        }
        t = e.addr().as_u64();
    }
    // SAFETY: one leaf entry of a user table owned by the caller's address space.
    unsafe { (*entry(t, index(va, 1))).set_unused() };
}

/// Maps the 4 KiB page at `offset` (below 1 GiB) in the page-directory subtree `pd` to
/// `pa`: how a page is mapped in a shared address range (Corey §4.3), whose subtree the
/// page tables of every core sharing the range include. Page tables come from `alloc`.
///
/// # Safety
/// `pd` is a live page directory owned by an address range, and the caller holds that
/// range's lock, so no other core writes the same entries.
pub unsafe fn map_in_directory(
    pd: u64,
    offset: u64,
    pa: u64,
    flags: F,
    alloc: &mut dyn FnMut() -> Option<u64>,
) -> Option<()> {
    // SAFETY: forwarded from the caller; the PD's entry for `offset`, then the leaf.
    let pt = unsafe { next_table(pd, index(offset, 2), true, alloc)? };
    // SAFETY: as above; one leaf entry of the range's page table.
    unsafe {
        (*entry(pt, index(offset, 1))).set_addr(x86_64::PhysAddr::new(pa), flags | F::PRESENT)
    };
    Some(())
}

/// The frame and flags `offset` maps to in the page-directory subtree `pd`, if any.
pub fn translate_in_directory(pd: u64, offset: u64) -> Option<(u64, F)> {
    // SAFETY: reading one entry of a live table reached through the direct map.
    let e = unsafe { &*entry(pd, index(offset, 2)) };
    if !e.flags().contains(F::PRESENT) {
        return None;
    }
    // SAFETY: as above.
    let leaf = unsafe { &*entry(e.addr().as_u64(), index(offset, 1)) };
    leaf.flags().contains(F::PRESENT).then(|| (leaf.addr().as_u64(), leaf.flags()))
}

/// Clears the mapping of `offset` in the page-directory subtree `pd` (the caller shoots
/// down the TLBs of every core sharing it).
pub fn unmap_in_directory(pd: u64, offset: u64) {
    // SAFETY: reading one entry of a live table reached through the direct map.
    let e = unsafe { &*entry(pd, index(offset, 2)) };
    if e.flags().contains(F::PRESENT) {
        // SAFETY: one leaf entry of a table owned by the range, under its lock.
        unsafe { (*entry(e.addr().as_u64(), index(offset, 1))).set_unused() };
    }
}

/// Calls `f` with every page table below the page directory `pd` (to free them).
pub fn directory_tables(pd: u64, f: &mut dyn FnMut(u64)) {
    for i in 0..512 {
        // SAFETY: reading one entry of a live table reached through the direct map.
        let e = unsafe { &*entry(pd, i) };
        if e.flags().contains(F::PRESENT) {
            f(e.addr().as_u64());
        }
    }
}

/// Points the 1 GiB slot at `va` of the user tables at `pml4` to the page directory `pd`
/// with `rights` (`WRITABLE`, `NO_EXECUTE`), or clears it with `None`: splices a shared
/// address range's subtree into these tables. The CPU combines the rights of every level,
/// so `rights` bound every page of the subtree reached through this entry, whatever the
/// subtree's own entries allow. The PDPT comes from `alloc` if missing.
///
/// # Safety
/// `pml4` is a user address space the calling core owns; `pd` stays live while spliced.
pub unsafe fn set_gigabyte(
    pml4: u64,
    va: u64,
    link: Option<(u64, F)>,
    alloc: &mut dyn FnMut() -> Option<u64>,
) -> Option<()> {
    // SAFETY: forwarded; the PML4 entry (creating the PDPT), then the PDPT entry.
    let pdpt = unsafe { next_table(pml4, index(va, 4), true, alloc)? };
    // SAFETY: as above.
    let e = unsafe { &mut *entry(pdpt, index(va, 3)) };
    match link {
        Some((pa, rights)) => {
            let rights = rights & (F::WRITABLE | F::NO_EXECUTE);
            e.set_addr(x86_64::PhysAddr::new(pa), F::PRESENT | F::USER_ACCESSIBLE | rights)
        }
        None => e.set_unused(),
    }
    Some(())
}

/// Makes sure the page-directory-pointer table that holds the 1 GiB slot at `va` of the
/// user tables at `pml4` exists (from `alloc`), so [`set_gigabyte`] there needs no
/// allocation.
///
/// # Safety
/// As for [`set_gigabyte`].
pub unsafe fn reserve_gigabyte(
    pml4: u64,
    va: u64,
    alloc: &mut dyn FnMut() -> Option<u64>,
) -> Option<()> {
    // SAFETY: forwarded; the PML4 entry, creating the PDPT.
    unsafe { next_table(pml4, index(va, 4), true, alloc) }.map(|_| ())
}

/// The page directory the 1 GiB slot at `va` of the user tables at `pml4` points to.
pub fn directory_at(pml4: u64, va: u64) -> Option<u64> {
    // SAFETY: reading one entry of a live table reached through the direct map.
    let e = unsafe { &*entry(pml4, index(va, 4)) };
    if !e.flags().contains(F::PRESENT) {
        return None;
    }
    // SAFETY: as above.
    let e = unsafe { &*entry(e.addr().as_u64(), index(va, 3)) };
    (e.flags().contains(F::PRESENT) && !e.flags().contains(F::HUGE_PAGE)).then(|| e.addr().as_u64())
}
