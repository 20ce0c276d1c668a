//! The share calls (Corey §4.1, Figure 5): shares hold references to objects; a share
//! set is what a context can name.

use super::object::{name, reference, room, to_abi, with_creator, ProgramObjects};
use abi::Error;
use objects::ObjectId;

/// `share_alloc(parent)`.
pub fn share_alloc(p: &mut ProgramObjects, parent: u64) -> Result<u64, Error> {
    room()?;
    with_creator(|c| p.set.share_alloc(c, ObjectId(parent), name())).map(|id| id.0).map_err(to_abi)
}

/// `share_addobj(share, ⟨ref_share, ref_obj⟩)`. The share's table grows on this core's
/// heap: refused at the core's reserve, like a new object (issue M14).
pub fn share_addobj(p: &mut ProgramObjects, share: u64, rs: u64, ro: u64) -> Result<u64, Error> {
    room()?;
    p.set.share_addobj(ObjectId(share), reference(rs, ro)).map(|_| 0).map_err(to_abi)
}

/// `share_dupobj(share, ⟨ref_share, ref_obj⟩)`: another id for the object in `share` (a
/// descriptor), counted against this core's object cap.
pub fn share_dupobj(p: &mut ProgramObjects, share: u64, rs: u64, ro: u64) -> Result<u64, Error> {
    room()?;
    with_creator(|c| p.set.share_dupobj(c, ObjectId(share), reference(rs, ro)))
        .map(|id| id.0)
        .map_err(to_abi)
}

/// `share_delobj(⟨ref_share, ref_obj⟩)`.
pub fn share_delobj(p: &mut ProgramObjects, rs: u64, ro: u64) -> Result<u64, Error> {
    p.set.share_delobj(reference(rs, ro)).map(|_| 0).map_err(to_abi)
}

/// `self_drop(share)`.
pub fn self_drop(p: &mut ProgramObjects, share: u64) -> Result<u64, Error> {
    p.set.self_drop(ObjectId(share)).map(|_| 0).map_err(to_abi)
}

/// `set_add_share(⟨ref_share, ref_obj⟩)`: the set grows, so the core's reserve is checked.
pub fn set_add_share(p: &mut ProgramObjects, rs: u64, ro: u64) -> Result<u64, Error> {
    room()?;
    p.set.add_share(reference(rs, ro)).map(|id| id.0).map_err(to_abi)
}

/// `obj_get_name(⟨ref_share, ref_obj⟩)`: the kind as an `abi::ObjectKind` code.
pub fn obj_get_name(p: &ProgramObjects, rs: u64, ro: u64) -> Result<u64, Error> {
    p.set.obj_get_name(reference(rs, ro)).map(|i| i.kind as u64).map_err(to_abi)
}
