//! Loading a static ELF64 user program (the `object` crate parses; the caller makes each
//! loadable segment a Corey segment mapped in the program's root address range). Every
//! field is checked: a malformed file is an error, never a kernel fault.

use abi::{map, Error, USER_BASE, USER_END};
use alloc::vec::Vec;
use object::elf::{FileHeader64, PF_W, PF_X, PT_LOAD};
use object::read::elf::{FileHeader, ProgramHeader};
use object::LittleEndian as LE;

const PAGE: u64 = 4096;
/// Largest program image accepted (keeps a bad file from eating a core's memory).
const MAX_IMAGE: u64 = 64 << 20;

/// One run of pages to map: from page-aligned `va`, `pages` pages, holding each
/// `(offset, bytes)` piece at that byte offset (zeroes elsewhere), with `abi::map` flags.
pub struct Load<'a> {
    /// First page.
    pub va: u64,
    /// Number of pages.
    pub pages: u64,
    /// File bytes and where in the run they go.
    pub pieces: Vec<(usize, &'a [u8])>,
    /// Mapping flags (the union of the segments that share these pages).
    pub flags: u64,
}

/// Calls `place` for each run of pages the loadable segments cover. Segments that share a
/// page (`.data` and `.bss` often do) become one run, so no page is mapped twice. Returns
/// the entry point.
pub fn load<'a>(
    image: &'a [u8],
    mut place: impl FnMut(&Load<'a>) -> Result<(), Error>,
) -> Result<u64, Error> {
    let header = FileHeader64::<LE>::parse(image).map_err(|_| Error::InvalidArgument)?;
    let endian = header.endian().map_err(|_| Error::InvalidArgument)?;
    let segments = header.program_headers(endian, image).map_err(|_| Error::InvalidArgument)?;
    let mut total = 0u64;
    let mut runs: Vec<Load<'a>> = Vec::new();
    for ph in segments.iter().filter(|ph| ph.p_type(endian) == PT_LOAD) {
        let (va, mem, file) = (ph.p_vaddr(endian), ph.p_memsz(endian), ph.p_filesz(endian));
        let offset = ph.p_offset(endian);
        let end = va.checked_add(mem).ok_or(Error::InvalidArgument)?;
        total = total.saturating_add(mem);
        if va < USER_BASE || end > USER_END || file > mem || total > MAX_IMAGE {
            return Err(Error::InvalidArgument);
        }
        let bytes = offset
            .checked_add(file)
            .and_then(|e| image.get(offset as usize..e as usize))
            .ok_or(Error::InvalidArgument)?;
        let mut flags = 0;
        if ph.p_flags(endian) & PF_W != 0 {
            flags |= map::WRITE;
        }
        if ph.p_flags(endian) & PF_X != 0 {
            flags |= map::EXEC;
        }
        let first = va & !(PAGE - 1);
        let last = end.div_ceil(PAGE) * PAGE;
        match runs.last_mut() {
            // Shares a page with the previous segment: extend that run.
            Some(run) if first < run.va + run.pages * PAGE && first >= run.va => {
                run.pieces.push(((va - run.va) as usize, bytes));
                run.pages = run.pages.max((last - run.va) / PAGE);
                run.flags |= flags;
            }
            _ => runs.push(Load {
                va: first,
                pages: (last - first) / PAGE,
                pieces: alloc::vec![((va - first) as usize, bytes)],
                flags,
            }),
        }
    }
    for run in &runs {
        place(run)?;
    }
    let entry = header.e_entry(endian);
    if !(USER_BASE..USER_END).contains(&entry) {
        return Err(Error::InvalidArgument);
    }
    Ok(entry)
}
