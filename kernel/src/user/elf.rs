//! Loading a static ELF64 user program (the `object` crate parses; the caller makes each
//! loadable segment a Corey segment mapped in the program's root address range). Every
//! field is checked: a malformed file is an error, never a kernel fault.

use abi::{map, Error, USER_BASE, USER_END};
use object::elf::{FileHeader64, PF_W, PF_X, PT_LOAD};
use object::read::elf::{FileHeader, ProgramHeader};
use object::LittleEndian as LE;

const PAGE: u64 = 4096;
/// Largest program image accepted (keeps a bad file from eating a core's memory).
const MAX_IMAGE: u64 = 64 << 20;

/// Calls `place(va, pages, offset, bytes, flags)` for each loadable segment: `pages`
/// pages from page-aligned `va`, with the file's `bytes` at byte `offset` of the first
/// page and zeroes elsewhere, mapped with `abi::map` `flags`. Returns the entry point.
pub fn load(
    image: &[u8],
    mut place: impl FnMut(u64, u64, usize, &[u8], u64) -> Result<(), Error>,
) -> Result<u64, Error> {
    let header = FileHeader64::<LE>::parse(image).map_err(|_| Error::InvalidArgument)?;
    let endian = header.endian().map_err(|_| Error::InvalidArgument)?;
    let segments = header.program_headers(endian, image).map_err(|_| Error::InvalidArgument)?;
    let mut total = 0u64;
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
        let pages = (end - first).div_ceil(PAGE);
        place(first, pages, (va - first) as usize, bytes, flags)?;
    }
    let entry = header.e_entry(endian);
    if !(USER_BASE..USER_END).contains(&entry) {
        return Err(Error::InvalidArgument);
    }
    Ok(entry)
}
