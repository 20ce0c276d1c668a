//! User page tables. A root address range owns a PML4 ([`RootTables`]) whose kernel half
//! is the kernel's: every context running on that range uses it as its CR3, so a page one
//! of them faults in is mapped for all (one address space, as Linux threads share one).
//! Below it, 1 GiB slots point at slot ranges' page directories (Corey §4.3). Tables
//! change only under their range's lock (`corey.rs`).
//!
//! A running context reads and writes user memory only through its [`AddressSpace`] view,
//! whose `copy_in`/`copy_out` check every page against the tables first: a bad pointer is
//! an error, never a kernel fault.

use crate::arch::paging::{self, phys_to_virt, USER_END};
use crate::mem::frames;
use abi::Error;
use alloc::vec::Vec;
use x86_64::structures::paging::PageTableFlags as F;

const PAGE: u64 = 4096;

/// A root range's page tables: the PML4, the tables below it (from the allocating core's
/// list, freed when the range goes), and the 1 GiB slots spliced in.
pub struct RootTables {
    pml4: u64,
    /// 1 GiB slots pointing at slot ranges' page directories: not ours to free.
    slots: Vec<u64>,
}

impl RootTables {
    /// An empty user half over the kernel's mappings.
    pub fn new() -> Result<Self, Error> {
        let pml4 = frames::alloc().ok_or(Error::NoResources)?;
        paging::new_user_pml4(crate::mem::heap::kernel_pml4(), pml4);
        Ok(RootTables { pml4, slots: Vec::new() })
    }

    /// Physical address of the PML4 (the CR3 of every context on the range).
    pub fn pml4(&self) -> u64 {
        self.pml4
    }

    /// Maps the frame `pa`, owned by a segment, at `va` with `flags` (the caller holds the
    /// range's lock and shoots down TLBs if it replaced a mapping).
    pub fn map(&mut self, va: u64, pa: u64, flags: F) -> Option<()> {
        if !va.is_multiple_of(PAGE) || va >= USER_END {
            return None;
        }
        // SAFETY: the range's own user half, under its lock (see `corey.rs`).
        unsafe { paging::map_page(self.pml4, va, pa, flags, &mut frames::alloc) }
    }

    /// Removes the mapping of the page at `va` (the caller shoots down TLBs).
    pub fn unmap(&mut self, va: u64) {
        paging::unmap_page(self.pml4, va);
    }

    /// The frame and flags `va` maps to, if any.
    pub fn translate(&self, va: u64) -> Option<(u64, F)> {
        paging::translate(self.pml4, va)
    }

    /// Makes the table that will hold the 1 GiB slot `va`, so that [`Self::install_slot`]
    /// there cannot fail for want of memory (it comes after an edit that must not be
    /// half done).
    pub fn reserve_slot(&mut self, va: u64) -> Result<(), Error> {
        if !va.is_multiple_of(1 << 30) || va >= USER_END {
            return Err(Error::InvalidArgument);
        }
        // SAFETY: the range's own user tables, under its lock.
        unsafe { paging::reserve_gigabyte(self.pml4, va, &mut frames::alloc) }
            .ok_or(Error::NoResources)
    }

    /// Splices the page directory `pd` in at the 1 GiB slot `va` (Corey §4.3) with the
    /// splice's `rights` (`WRITABLE`, `NO_EXECUTE`): the slot's own entries are shared by
    /// every root that splices it, so this root's limits go in its own entry. Private
    /// tables there (whose pages the caller unmapped first) are unlinked; their frames are
    /// returned, to be freed after the TLB shootdown. [`Self::reserve_slot`] comes first:
    /// this allocates nothing.
    pub fn install_slot(&mut self, va: u64, pd: u64, rights: F) -> Result<Vec<u64>, Error> {
        if !va.is_multiple_of(1 << 30) || va >= USER_END {
            return Err(Error::InvalidArgument);
        }
        let mut old_tables = Vec::new();
        if !self.slots.contains(&va) {
            if let Some(private) = paging::directory_at(self.pml4, va) {
                paging::directory_tables(private, &mut |t| old_tables.push(t));
                old_tables.push(private);
            }
        }
        // SAFETY: the range's own user tables, under its lock; `pd` is held by the range's
        // `held` map until it is removed again.
        unsafe { paging::set_gigabyte(self.pml4, va, Some((pd, rights)), &mut || None) }
            .ok_or(Error::NoResources)?;
        if !self.slots.contains(&va) {
            self.slots.push(va);
        }
        Ok(old_tables)
    }

    /// Takes the slot at `va` out again (the slot range's directory is not freed here; the
    /// caller shoots down TLBs).
    pub fn remove_slot(&mut self, va: u64) {
        if let Some(i) = self.slots.iter().position(|&v| v == va) {
            self.slots.swap_remove(i);
            // SAFETY: the range's own user tables; clearing needs no new table.
            let _ = unsafe { paging::set_gigabyte(self.pml4, va, None, &mut || None) };
        }
    }
}

impl Drop for RootTables {
    fn drop(&mut self) {
        for va in core::mem::take(&mut self.slots) {
            // SAFETY: our own tables; the shared directory must not be walked and freed.
            let _ = unsafe { paging::set_gigabyte(self.pml4, va, None, &mut || None) };
        }
        let mut tables = Vec::new();
        paging::user_tables(self.pml4, &mut |t| tables.push(t));
        for pa in tables.into_iter().chain([self.pml4]) {
            let _ = frames::free(pa);
        }
    }
}

/// A running context's view of its user memory: the tables at `pml4` (its root range's),
/// read only to check and copy. It never changes them, so it needs no lock: a frame a
/// concurrent unmap takes away is freed only after this core acknowledged the shootdown,
/// which it does only between steps of a system call, never in the middle of a copy.
pub struct AddressSpace {
    pml4: u64,
}

impl AddressSpace {
    /// The view of the tables at `pml4`.
    pub fn view(pml4: u64) -> Self {
        AddressSpace { pml4 }
    }

    /// Physical address of the PML4 (for CR3).
    pub fn pml4(&self) -> u64 {
        self.pml4
    }

    /// Checks `[va, va + len)` and calls `f` with each piece's physical address and length.
    fn each_page(
        &self,
        va: u64,
        len: u64,
        write: bool,
        mut f: impl FnMut(u64, usize, usize),
    ) -> Result<(), Error> {
        if len == 0 {
            return Ok(()); // nothing to copy: any pointer will do
        }
        let end = va.checked_add(len).ok_or(Error::BadAddress)?;
        if end > USER_END {
            return Err(Error::BadAddress);
        }
        // Check every page first, so a partly bad buffer changes nothing.
        let mut page = va & !(PAGE - 1);
        while page < end {
            let (_, flags) = paging::translate(self.pml4, page).ok_or(Error::BadAddress)?;
            if !flags.contains(F::USER_ACCESSIBLE) || (write && !flags.contains(F::WRITABLE)) {
                return Err(Error::BadAddress);
            }
            page += PAGE;
        }
        let mut at = va;
        let mut done = 0usize;
        while at < end {
            let chunk = (PAGE - (at % PAGE)).min(end - at);
            let (pa, _) = paging::translate(self.pml4, at).ok_or(Error::BadAddress)?;
            f(pa, done, chunk as usize);
            at += chunk;
            done += chunk as usize;
        }
        Ok(())
    }

    /// Checks that `[va, va + len)` is mapped for the user (and writable if `write`).
    pub fn check(&self, va: u64, len: u64, write: bool) -> Result<(), Error> {
        self.each_page(va, len, write, |_, _, _| {})
    }

    /// Copies user memory `[va, va + out.len())` into `out`.
    pub fn copy_in(&self, va: u64, out: &mut [u8]) -> Result<(), Error> {
        self.each_page(va, out.len() as u64, false, |pa, offset, n| {
            // SAFETY: `pa` is a checked, mapped user frame reached through the direct map.
            let src = unsafe { core::slice::from_raw_parts(phys_to_virt(pa) as *const u8, n) };
            out[offset..offset + n].copy_from_slice(src);
        })
    }

    /// Calls `f` with the user memory `[va, va + len)` (which must be writable) as the
    /// pieces of it in each page, reached through the direct map, so a caller fills user
    /// memory with no copy of its own (`fs_read`). As for a copy, `f` must not serve the
    /// monitor: the frames stay this program's only until this core acknowledges a
    /// shootdown.
    pub fn fill_user<R>(
        &self,
        va: u64,
        len: u64,
        f: impl FnOnce(&mut [&mut [u8]]) -> R,
    ) -> Result<R, Error> {
        let mut pieces: alloc::vec::Vec<&mut [u8]> = alloc::vec::Vec::new();
        self.each_page(va, len, true, |pa, _, n| {
            // SAFETY: as in `copy_in`; the page is mapped writable for the user, and each
            // piece is a different part of user memory, so the slices do not overlap.
            pieces.push(unsafe { core::slice::from_raw_parts_mut(phys_to_virt(pa) as *mut u8, n) });
        })?;
        Ok(f(&mut pieces))
    }

    /// Copies `data` to user memory at `va` (which must be writable).
    pub fn copy_out(&self, va: u64, data: &[u8]) -> Result<(), Error> {
        self.each_page(va, data.len() as u64, true, |pa, offset, n| {
            // SAFETY: as in `copy_in`; the page is mapped writable for the user.
            let dst = unsafe { core::slice::from_raw_parts_mut(phys_to_virt(pa) as *mut u8, n) };
            dst.copy_from_slice(&data[offset..offset + n]);
        })
    }
}
