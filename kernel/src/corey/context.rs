//! A context's objects: a new program's share set and root range, a `pcore_run` or
//! `thread_create` context's view of a root range and shares, and taking them apart.

use super::object::{
    name, new_range, room_above, to_abi, with_creator, Payload, ProgramObjects, Ptr,
};
use super::quota::new_quota;
use super::range::leave_root;
use super::LOAD_RESERVE_FRAMES;
use crate::percpu::this_core;
use abi::Error;
use alloc::sync::Arc;
use alloc::vec;
use alloc::vec::Vec;
use objects::{ObjRef, ObjectId, ObjectKind, Quota, ShareSet};

/// A context's objects: a fresh root share plus `shares`, running on `root_ar`.
/// What it makes is charged to `quota`: a new program's ([`new_quota`]) for a `pcore_run`
/// context, its program's for a thread.
pub fn new_context(
    root_ar: Ptr,
    shares: Vec<Ptr>,
    quota: Arc<Quota>,
) -> Result<ProgramObjects, Error> {
    let core = this_core().index;
    let mut set = with_creator(|c| ShareSet::new(core, c, quota)).map_err(to_abi)?;
    set.start_at(super::revocation::revocations_committed());
    for share in shares {
        set.add_share_ptr(share).map_err(to_abi)?;
    }
    Ok(ProgramObjects { set, root_ar, fault_count: 0 })
}

/// A new program's objects: a root share holding a fresh root address range.
pub fn new_program() -> Result<ProgramObjects, Error> {
    let core = this_core().index;
    let quota = new_quota();
    let mut set: ShareSet<Payload> =
        with_creator(|c| ShareSet::new(core, c, quota.clone())).map_err(to_abi)?;
    set.start_at(super::revocation::revocations_committed());
    let root = set.root_id();
    room_above(LOAD_RESERVE_FRAMES)?;
    let id = with_creator(|c| {
        let range = new_range(true, &quota)?;
        set.alloc(c, root, ObjectKind::AddressRange, name(), Payload::Range(range)).map_err(to_abi)
    })?;
    let root_ar = set.resolve(ObjRef { share: root, object: id }).map_err(to_abi)?;
    Ok(ProgramObjects { set, root_ar, fault_count: 0 })
}

/// Puts `ptr` into the program's root share (an object handed to it at start); its id.
pub fn give(p: &mut ProgramObjects, ptr: Ptr) -> Result<u64, Error> {
    p.set.give(ptr).map(|id| id.0).map_err(to_abi)
}

/// Takes a context's objects apart when it ends (its core has switched to other tables
/// already): the core leaves the root's cores, then the share set and range go.
pub fn end_context(p: ProgramObjects) {
    leave_root(&p);
    drop(p);
}

/// The shares of `ids`, which must be shared shares of `p`'s set (for `pcore_run`).
/// A share named twice is refused here, at the call: the new context's share set could
/// not hold it twice.
pub fn shares_for_child(p: &ProgramObjects, ids: &[u64]) -> Result<Vec<Ptr>, Error> {
    let mut out = vec![];
    for (i, &id) in ids.iter().enumerate() {
        if ids[..i].contains(&id) {
            return Err(Error::InvalidArgument);
        }
        out.push(p.set.shared_share(ObjectId(id)).map_err(to_abi)?);
    }
    Ok(out)
}
