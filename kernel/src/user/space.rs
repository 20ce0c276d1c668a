//! A context's page tables: a PML4 of its own whose kernel half is the kernel's, the
//! private tables below it (from the running core's own list, freed when it is dropped),
//! and the 1 GiB slots that point at shared address ranges' page directories. User
//! memory is read and written only through `copy_in`/`copy_out`, which check every page
//! against these tables: a bad pointer is an error, never a kernel fault.

use crate::arch::paging::{self, phys_to_virt, USER_END};
use crate::mem::frames;
use abi::Error;
use alloc::vec::Vec;
use x86_64::structures::paging::PageTableFlags as F;

const PAGE: u64 = 4096;

/// One context's page tables and frames.
pub struct AddressSpace {
    pml4: u64,
    /// 1 GiB slots pointing at shared address ranges' page directories: not ours to free.
    slots: Vec<u64>,
}

impl AddressSpace {
    /// An empty user half over the kernel's mappings.
    pub fn new(kernel_pml4: u64) -> Result<Self, Error> {
        let pml4 = frames::alloc().ok_or(Error::NoResources)?;
        paging::new_user_pml4(kernel_pml4, pml4);
        Ok(AddressSpace { pml4, slots: Vec::new() })
    }

    /// Physical address of the PML4 (for CR3).
    pub fn pml4(&self) -> u64 {
        self.pml4
    }

    /// Maps the frame `pa`, owned by someone else (a segment), at `va`. Replaces nothing:
    /// the page must be unmapped.
    pub fn map_frame(&mut self, va: u64, pa: u64, write: bool, exec: bool) -> Result<(), Error> {
        if !va.is_multiple_of(PAGE) || va >= USER_END || paging::translate(self.pml4, va).is_some()
        {
            return Err(Error::InvalidArgument);
        }
        let mut flags = F::USER_ACCESSIBLE;
        if write {
            flags |= F::WRITABLE;
        }
        if !exec {
            flags |= F::NO_EXECUTE;
        }
        // SAFETY: this address space's own user half, on the core that owns it.
        unsafe { paging::map_page(self.pml4, va, pa, flags, &mut frames::alloc) }
            .ok_or(Error::NoResources)
    }

    /// Removes the mappings of the pages at `vas` (mapped with [`map_frame`]) and flushes
    /// them from this core's TLB. The frames are not freed (their segments own them).
    pub fn unmap_frames(&mut self, vas: &[u64]) {
        for &va in vas {
            paging::unmap_page(self.pml4, va);
            x86_64::instructions::tlb::flush(x86_64::VirtAddr::new(va));
        }
    }

    /// Splices the shared page directory `pd` in at the 1 GiB slot `va` (Corey §4.3). Any
    /// private tables there (unmapped by the caller first) are freed.
    pub fn install_slot(&mut self, va: u64, pd: u64) -> Result<(), Error> {
        if !va.is_multiple_of(1 << 30) || va >= USER_END {
            return Err(Error::InvalidArgument);
        }
        if !self.slots.contains(&va) {
            self.free_private_directory(va);
        }
        // SAFETY: this core's own user tables; `pd` is held by the caller's installed list
        // until `remove_slot`.
        unsafe { paging::set_gigabyte(self.pml4, va, Some(pd), &mut frames::alloc) }
            .ok_or(Error::NoResources)?;
        if !self.slots.contains(&va) {
            self.slots.push(va);
        }
        x86_64::instructions::tlb::flush_all();
        Ok(())
    }

    /// Takes the slot at `va` out again (the range's directory is not freed here).
    pub fn remove_slot(&mut self, va: u64) {
        if let Some(i) = self.slots.iter().position(|&v| v == va) {
            self.slots.swap_remove(i);
            // SAFETY: this core's own user tables; clearing needs no new table.
            let _ = unsafe { paging::set_gigabyte(self.pml4, va, None, &mut || None) };
            x86_64::instructions::tlb::flush_all();
        }
    }

    /// Frees the private page directory (and its page tables) at 1 GiB slot `va`, if any.
    fn free_private_directory(&mut self, va: u64) {
        let Some(pd) = paging::directory_at(self.pml4, va) else { return };
        let mut tables = Vec::new();
        paging::directory_tables(pd, &mut |t| tables.push(t));
        // SAFETY: as in `remove_slot`.
        let _ = unsafe { paging::set_gigabyte(self.pml4, va, None, &mut || None) };
        x86_64::instructions::tlb::flush_all();
        for pa in tables.into_iter().chain([pd]) {
            let _ = frames::free(pa);
        }
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

    /// Copies `data` to user memory at `va` (which must be writable).
    pub fn copy_out(&self, va: u64, data: &[u8]) -> Result<(), Error> {
        self.each_page(va, data.len() as u64, true, |pa, offset, n| {
            // SAFETY: as in `copy_in`; the page is mapped writable for the user.
            let dst = unsafe { core::slice::from_raw_parts_mut(phys_to_virt(pa) as *mut u8, n) };
            dst.copy_from_slice(&data[offset..offset + n]);
        })
    }
}

impl Drop for AddressSpace {
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
