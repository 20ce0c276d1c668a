//! Copying to and from a program's memory through its root range: pages it never
//! touched are filled first, so a call sees what a load or store of the program would.

use super::object::ProgramObjects;
use super::space::AddressSpace;
use abi::Error;
use abi::ARGS_MAX;
use alloc::string::String;
use alloc::vec::Vec;

/// Reads `N` little-endian words of user memory at `ptr`.
pub fn read_words<const N: usize>(
    p: &mut ProgramObjects,
    space: &mut AddressSpace,
    ptr: u64,
) -> Result<[u64; N], Error> {
    let mut bytes = [0u8; 256];
    super::fault_in(p, space, ptr, N as u64 * 8, false);
    space.copy_in(ptr, &mut bytes[..N * 8])?;
    Ok(le_words(&bytes[..N * 8]))
}

/// Writes little-endian words to user memory at `ptr`.
pub fn write_words(
    p: &mut ProgramObjects,
    space: &mut AddressSpace,
    ptr: u64,
    words: &[u64],
) -> Result<(), Error> {
    let mut bytes = Vec::new();
    for w in words {
        bytes.extend_from_slice(&w.to_le_bytes());
    }
    copy_out(p, space, ptr, &bytes)
}

/// Copies `data` to user memory at `ptr`, filling untouched pages first.
pub fn copy_out(
    p: &mut ProgramObjects,
    space: &mut AddressSpace,
    ptr: u64,
    data: &[u8],
) -> Result<(), Error> {
    super::fault_in(p, space, ptr, data.len() as u64, true);
    space.copy_out(ptr, data)
}

/// Copies a string of at most [`ARGS_MAX`] bytes from user memory.
pub fn read_string(
    p: &mut ProgramObjects,
    space: &mut AddressSpace,
    ptr: u64,
    len: u64,
) -> Result<String, Error> {
    if len > ARGS_MAX as u64 {
        return Err(Error::InvalidArgument);
    }
    let mut buf = [0u8; ARGS_MAX];
    super::fault_in(p, space, ptr, len, false);
    space.copy_in(ptr, &mut buf[..len as usize])?;
    core::str::from_utf8(&buf[..len as usize]).map(String::from).map_err(|_| Error::InvalidArgument)
}

/// Little-endian words from bytes.
pub fn le_words<const N: usize>(bytes: &[u8]) -> [u64; N] {
    let mut words = [0u64; N];
    for (w, chunk) in words.iter_mut().zip(bytes.chunks_exact(8)) {
        *w = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
    }
    words
}
