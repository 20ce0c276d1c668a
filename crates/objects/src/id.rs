//! Object ids, kinds and names (Corey §4, §4.2, Figure 5). An id is 64 bits: the core
//! that created the object in the top 16, that core's serial number in the low 48. Each
//! core counts its own serials, so allocating an id touches no shared cache line.

use crate::ObjError;

/// Bit position of the creating core in an [`ObjectId`]; the serial is the bits below.
pub const CORE_SHIFT: u32 = 48;
/// Mask of the serial bits of an [`ObjectId`].
const SERIAL_MASK: u64 = (1 << CORE_SHIFT) - 1;
/// Longest object name in bytes (Figure 5's `name` argument of the `*_alloc` calls).
pub const NAME_MAX: usize = 32;

/// A 64-bit object id (Corey §4.2, Figure 5: "shareid, segid, arid, pcoreid, and devid
/// represent 64-bit object IDs"). The value is public so the kernel can take one from a
/// system-call argument; an id names nothing until a table finds it. Serial 0 is never
/// issued, so id 0 is never valid. Ids of cores below 0x8000 are non-negative as `i64`,
/// so they never look like an error word of the syscall ABI.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectId(pub u64);

impl ObjectId {
    /// The core that created the object, whose table holds it (Corey §4.2).
    pub const fn core(&self) -> u16 {
        (self.0 >> CORE_SHIFT) as u16
    }

    /// The creating core's serial number of the object (1 for its first object).
    pub const fn serial(&self) -> u64 {
        self.0 & SERIAL_MASK
    }

    /// Whether some core could have issued this id (its serial is not 0).
    pub const fn is_valid(&self) -> bool {
        self.serial() != 0
    }
}

/// One core's id counter (Corey §4.2; STYLE.md: "object ids come from per-core counters
/// with the core number in the high bits").
#[derive(Clone, Debug)]
pub struct IdAllocator {
    core: u16,
    /// The serial the next id gets; past [`SERIAL_MASK`] the ids are used up.
    next: u64,
}

impl IdAllocator {
    /// The counter of `core`, starting at serial 1.
    pub const fn new(core: u16) -> Self {
        IdAllocator { core, next: 1 }
    }

    /// The core whose ids this counter issues.
    pub const fn core(&self) -> u16 {
        self.core
    }

    /// A fresh id, never issued before by this counter. Ids are never reused: after
    /// 2^48 − 1 ids the counter refuses with [`ObjError::IdsExhausted`].
    pub fn next_id(&mut self) -> Result<ObjectId, ObjError> {
        if self.next > SERIAL_MASK {
            return Err(ObjError::IdsExhausted);
        }
        let id = ObjectId(((self.core as u64) << CORE_SHIFT) | self.next);
        self.next += 1;
        Ok(id)
    }
}

/// The five kinds of Corey kernel objects; defined once, in the system-call ABI.
pub use abi::ObjectKind;

/// An object's name, up to [`NAME_MAX`] bytes, given at allocation (Figure 5: the `name`
/// argument of `share_alloc`, `segment_alloc`, ...; `obj_get_name` returns it). For
/// debugging and display only; the kernel never looks objects up by name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ObjName {
    len: u8,
    bytes: [u8; NAME_MAX],
}

impl ObjName {
    /// A name from `bytes`, or [`ObjError::NameTooLong`].
    pub fn new(bytes: &[u8]) -> Result<ObjName, ObjError> {
        if bytes.len() > NAME_MAX {
            return Err(ObjError::NameTooLong);
        }
        let mut name = ObjName::default();
        name.bytes[..bytes.len()].copy_from_slice(bytes);
        name.len = bytes.len() as u8;
        Ok(name)
    }

    /// The name's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_carry_their_core_and_start_at_one() {
        let mut ids = IdAllocator::new(7);
        let a = ids.next_id().unwrap();
        let b = ids.next_id().unwrap();
        assert_eq!((a.core(), a.serial()), (7, 1));
        assert_eq!((b.core(), b.serial()), (7, 2));
        assert!(a.is_valid() && !ObjectId(0).is_valid());
        let mut zero = IdAllocator::new(0);
        assert_ne!(zero.next_id().unwrap(), ObjectId(0));
        let top = IdAllocator::new(u16::MAX).next_id().unwrap();
        assert_eq!(top.core(), u16::MAX);
    }

    #[test]
    fn ids_run_out_instead_of_wrapping() {
        let mut ids = IdAllocator::new(3);
        ids.next = SERIAL_MASK;
        let last = ids.next_id().unwrap();
        assert_eq!((last.core(), last.serial()), (3, SERIAL_MASK));
        assert_eq!(ids.next_id(), Err(ObjError::IdsExhausted));
        assert_eq!(ids.next_id(), Err(ObjError::IdsExhausted));
    }

    #[test]
    fn kinds_round_trip_codes_and_names_are_bounded() {
        for code in 0..=255u8 {
            if let Some(kind) = ObjectKind::from_code(code) {
                assert_eq!(kind as u8, code);
            }
        }
        assert_eq!(ObjectKind::from_code(0), None);
        assert_eq!(ObjName::new(b"fds").unwrap().as_bytes(), b"fds");
        assert_eq!(ObjName::new(&[b'x'; NAME_MAX]).unwrap().as_bytes().len(), NAME_MAX);
        assert_eq!(ObjName::new(&[0; NAME_MAX + 1]), Err(ObjError::NameTooLong));
    }
}

/// A reference to an object as system calls take it (Figure 5: "share, seg, ar, pcore,
/// obj, and dev represent ⟨share ID, object ID⟩ pairs").
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjRef {
    /// The share to look the object up in; must be in the caller's share set.
    pub share: ObjectId,
    /// The object; must be in that share.
    pub object: ObjectId,
}

/// One committed revocation: `object` leaves every share except the entry `keep`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Revocation {
    /// Its number: the `seq`-th revocation committed machine-wide (from 1).
    pub seq: u64,
    /// The object taken back.
    pub object: ObjectId,
    /// The entry it stays in: ⟨share id, entry id⟩ (a root share's id, or a shared
    /// share's; the object's own id or a descriptor's).
    pub keep: ObjRef,
}

impl Revocation {
    /// Whether entry `entry` of share `share`, naming `object`, goes.
    pub fn removes(&self, share: ObjectId, entry: ObjectId, object: ObjectId) -> bool {
        object == self.object && (ObjRef { share, object: entry }) != self.keep
    }
}
