//! Reading a cpio "newc" archive, the format of Atoll's initrd (`-initrd`). Each entry is
//! a 110-byte ASCII header (magic `070701`, 13 eight-digit hex fields), the name padded to
//! 4 bytes, then the data padded to 4 bytes; `TRAILER!!!` ends the archive. Malformed
//! input ends the walk; it never panics.
#![no_std]
#![forbid(unsafe_code)]

#[cfg(feature = "alloc")]
extern crate alloc;

/// Writes a newc archive of `files` (name, mode, contents), ending with the trailer. Used
/// by `xtask` to build the initrd.
#[cfg(feature = "alloc")]
pub fn write_archive(files: &[(&str, u32, &[u8])]) -> alloc::vec::Vec<u8> {
    use alloc::vec::Vec;
    fn put(out: &mut Vec<u8>, ino: usize, name: &str, mode: u32, data: &[u8]) {
        let fields = [ino, mode as usize, 0, 0, 1, 0, data.len(), 0, 0, 0, 0, name.len() + 1, 0];
        out.extend_from_slice(MAGIC);
        for f in fields {
            out.extend_from_slice(alloc::format!("{f:08x}").as_bytes());
        }
        out.extend_from_slice(name.as_bytes());
        out.push(0);
        out.resize(pad4(out.len()), 0);
        out.extend_from_slice(data);
        out.resize(pad4(out.len()), 0);
    }
    let mut out = Vec::new();
    for (i, (name, mode, data)) in files.iter().enumerate() {
        put(&mut out, i + 1, name, *mode, data);
    }
    put(&mut out, 0, TRAILER, 0, &[]);
    out
}

const HEADER: usize = 110;
const MAGIC: &[u8] = b"070701";
const TRAILER: &str = "TRAILER!!!";

/// One file of the archive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry<'a> {
    /// Path inside the archive (no leading `./`).
    pub name: &'a str,
    /// File mode bits (type and permissions).
    pub mode: u32,
    /// Contents.
    pub data: &'a [u8],
}

/// Iterator over the entries of an archive.
pub struct Entries<'a> {
    rest: &'a [u8],
}

/// Walks the archive in `bytes`.
pub fn entries(bytes: &[u8]) -> Entries<'_> {
    Entries { rest: bytes }
}

/// Finds the file called `name`.
pub fn find<'a>(bytes: &'a [u8], name: &str) -> Option<Entry<'a>> {
    entries(bytes).find(|e| e.name == name)
}

fn hex_field(header: &[u8], index: usize) -> Option<usize> {
    let field = header.get(6 + 8 * index..6 + 8 * (index + 1))?;
    let text = core::str::from_utf8(field).ok()?;
    usize::from_str_radix(text, 16).ok()
}

fn pad4(n: usize) -> usize {
    n.div_ceil(4) * 4
}

impl<'a> Iterator for Entries<'a> {
    type Item = Entry<'a>;

    fn next(&mut self) -> Option<Entry<'a>> {
        let bytes = self.rest;
        self.rest = &[];
        if bytes.len() < HEADER || &bytes[..6] != MAGIC {
            return None;
        }
        let mode = hex_field(bytes, 1)? as u32;
        let file_size = hex_field(bytes, 6)?;
        let name_size = hex_field(bytes, 11)?;
        let name_end = HEADER.checked_add(name_size)?;
        let name_bytes = bytes.get(HEADER..name_end)?;
        // The name size counts the terminating NUL.
        let name =
            core::str::from_utf8(name_bytes.strip_suffix(&[0]).unwrap_or(name_bytes)).ok()?;
        if name == TRAILER {
            return None;
        }
        let data_start = pad4(name_end);
        let data_end = data_start.checked_add(file_size)?;
        let data = bytes.get(data_start..data_end)?;
        self.rest = bytes.get(pad4(data_end).min(bytes.len())..)?;
        Some(Entry { name: name.strip_prefix("./").unwrap_or(name), mode, data })
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    fn archive(files: &[(&str, &[u8])]) -> Vec<u8> {
        let with_mode: Vec<(&str, u32, &[u8])> =
            files.iter().map(|(n, d)| (*n, 0o100755, *d)).collect();
        write_archive(&with_mode)
    }

    #[test]
    fn finds_files() {
        let a = archive(&[("hello", b"ELF..."), ("./init", b""), ("dir/x", &[1, 2, 3, 4, 5])]);
        let names: Vec<&str> = entries(&a).map(|e| e.name).collect();
        assert_eq!(names, ["hello", "init", "dir/x"]);
        assert_eq!(find(&a, "dir/x").unwrap().data, &[1, 2, 3, 4, 5]);
        assert_eq!(find(&a, "hello").unwrap().mode, 0o100755);
        assert!(find(&a, "nope").is_none());
    }

    #[test]
    fn truncated_or_garbage_ends_the_walk() {
        let a = archive(&[("hello", b"0123456789")]);
        for cut in 0..a.len() {
            let _ = entries(&a[..cut]).count();
        }
        assert_eq!(entries(b"not an archive at all, definitely not").count(), 0);
    }

    proptest::proptest! {
        #[test]
        fn round_trip(files in proptest::collection::vec(("[a-z]{1,12}", proptest::collection::vec(proptest::num::u8::ANY, 0..300)), 0..8)) {
            let refs: Vec<(&str, &[u8])> = files.iter().map(|(n, d)| (n.as_str(), d.as_slice())).collect();
            let a = archive(&refs);
            let got: Vec<(&str, &[u8])> = entries(&a).map(|e| (e.name, e.data)).collect();
            proptest::prop_assert_eq!(got, refs);
        }

        #[test]
        fn never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..400)) {
            let _ = entries(&bytes).count();
        }
    }
}
