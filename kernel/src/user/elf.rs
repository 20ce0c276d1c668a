//! Loading a static ELF64 user program (the `object` crate parses; we map and copy).
//! Every field is checked: a malformed file is an error, never a kernel fault.

use super::space::{Access, AddressSpace};
use abi::{Error, USER_BASE, USER_END};
use object::elf::{FileHeader64, PF_W, PT_LOAD};
use object::read::elf::{FileHeader, ProgramHeader};
use object::LittleEndian as LE;

const PAGE: u64 = 4096;
/// Largest program image accepted (keeps a bad file from eating a core's memory).
const MAX_IMAGE: u64 = 64 << 20;

/// Maps and fills the program's loadable segments; returns the entry point.
pub fn load(space: &mut AddressSpace, image: &[u8]) -> Result<u64, Error> {
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
        let access =
            if ph.p_flags(endian) & PF_W != 0 { Access::ReadWrite } else { Access::ReadExecute };
        let mut page = va & !(PAGE - 1);
        while page < end {
            // Segments share no page in Atoll's user linker script; a page mapped twice is an error.
            space.map_zeroed(page, access)?;
            page += PAGE;
        }
        space.fill(va, bytes)?;
    }
    let entry = header.e_entry(endian);
    if !(USER_BASE..USER_END).contains(&entry) {
        return Err(Error::InvalidArgument);
    }
    Ok(entry)
}
