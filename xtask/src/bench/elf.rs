//! Two questions about ELF64 files: is a program static (no `PT_INTERP`), and can a kernel
//! be booted through PVH (a `Xen` note of type 18, `XEN_ELFNOTE_PHYS32_ENTRY`)?

/// `PT_INTERP`: the program needs a dynamic loader.
const PT_INTERP: u32 = 3;
/// `PT_NOTE`: a segment of notes.
const PT_NOTE: u32 = 4;
/// `XEN_ELFNOTE_PHYS32_ENTRY`: the 32-bit PVH entry point QEMU's `-kernel` looks for.
const XEN_ELFNOTE_PHYS32_ENTRY: u32 = 18;

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<usize> {
    usize::try_from(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?)).ok()
}

/// The program headers of a little-endian ELF64 file: (type, file offset, file size).
fn segments(elf: &[u8]) -> Option<Vec<(u32, usize, usize)>> {
    if elf.get(..4)? != b"\x7fELF" || *elf.get(4)? != 2 || *elf.get(5)? != 1 {
        return None;
    }
    let (phoff, phentsize, phnum) = (u64_at(elf, 32)?, u16_at(elf, 54)?, u16_at(elf, 56)?);
    (0..phnum as usize)
        .map(|i| {
            let at = phoff.checked_add(i.checked_mul(phentsize as usize)?)?;
            Some((u32_at(elf, at)?, u64_at(elf, at + 8)?, u64_at(elf, at + 32)?))
        })
        .collect()
}

/// True for an ELF64 program with no dynamic loader (static or static-pie).
pub fn is_static(elf: &[u8]) -> bool {
    segments(elf).is_some_and(|s| s.iter().all(|&(kind, _, _)| kind != PT_INTERP))
}

/// True for an ELF64 kernel with a PVH entry note, which QEMU's `-kernel` boots directly.
pub fn has_pvh_note(elf: &[u8]) -> bool {
    let Some(segments) = segments(elf) else {
        return false;
    };
    segments.iter().filter(|s| s.0 == PT_NOTE).any(|&(_, offset, size)| {
        let Some(notes) = offset.checked_add(size).and_then(|end| elf.get(offset..end)) else {
            return false;
        };
        let mut at = 0;
        // Each note: namesz, descsz, type, then name and desc, each padded to 4 bytes.
        while let (Some(namesz), Some(descsz), Some(kind)) =
            (u32_at(notes, at), u32_at(notes, at + 4), u32_at(notes, at + 8))
        {
            let name = notes.get(at + 12..at + 12 + namesz as usize);
            if kind == XEN_ELFNOTE_PHYS32_ENTRY && name == Some(b"Xen\0") {
                return true;
            }
            at +=
                12 + (namesz as usize).next_multiple_of(4) + (descsz as usize).next_multiple_of(4);
        }
        false
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ELF64 header with `segments` (type, payload) after it.
    fn elf(segments: &[(u32, &[u8])]) -> Vec<u8> {
        let mut out = vec![0u8; 64 + 56 * segments.len()];
        out[..6].copy_from_slice(b"\x7fELF\x02\x01");
        out[32..40].copy_from_slice(&64u64.to_le_bytes());
        out[54..56].copy_from_slice(&56u16.to_le_bytes());
        out[56..58].copy_from_slice(&(segments.len() as u16).to_le_bytes());
        for (i, (kind, payload)) in segments.iter().enumerate() {
            let header = 64 + 56 * i;
            let offset = out.len() as u64;
            out[header..header + 4].copy_from_slice(&kind.to_le_bytes());
            out[header + 8..header + 16].copy_from_slice(&offset.to_le_bytes());
            out[header + 32..header + 40].copy_from_slice(&(payload.len() as u64).to_le_bytes());
            out.extend_from_slice(payload);
        }
        out
    }

    fn note(name: &[u8], kind: u32, desc: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&(name.len() as u32).to_le_bytes());
        out.extend_from_slice(&(desc.len() as u32).to_le_bytes());
        out.extend_from_slice(&kind.to_le_bytes());
        out.extend_from_slice(name);
        out.resize(out.len().next_multiple_of(4), 0);
        out.extend_from_slice(desc);
        out.resize(out.len().next_multiple_of(4), 0);
        out
    }

    #[test]
    fn interpreters_make_a_program_dynamic() {
        assert!(is_static(&elf(&[(1, b"code")])));
        assert!(!is_static(&elf(&[(1, b"code"), (PT_INTERP, b"/lib/ld.so\0")])));
        assert!(!is_static(b"#!/bin/sh\n"));
    }

    #[test]
    fn the_pvh_note_is_found_among_other_notes() {
        let mut notes = note(b"GNU\0", 3, b"buildid!");
        notes.extend(note(b"Xen\0", 6, b"linux\0"));
        assert!(!has_pvh_note(&elf(&[(PT_NOTE, &notes)])));
        notes.extend(note(b"Xen\0", XEN_ELFNOTE_PHYS32_ENTRY, &[0, 0, 0, 1]));
        assert!(has_pvh_note(&elf(&[(1, b"x"), (PT_NOTE, &notes)])));
        assert!(!has_pvh_note(b"MZ not an elf"));
    }
}
