//! Corey's object model for Atoll, hardware-neutral and tested on the host: object ids,
//! the per-core object table with reference counts, shares, share sets (access control),
//! and the share system calls of Corey Figure 5. The kernel keeps one [`Objects`] per core
//! and maps its results onto frames, page tables and error codes.
//!
//! Read top to bottom:
//! 1. [`id`]: [`ObjectId`]s from per-core counters, the creating core in the high bits
//!    (Corey §4.2; no shared counter), [`ObjectKind`]s (Corey §4: shares, segments,
//!    address ranges, pcores, devices) and short [`ObjName`]s (Figure 5's `name`).
//! 2. [`table`]: [`ObjectTable`], one core's objects with their reference counts
//!    (Corey §4.1 "object metadata", §4.2 "the kernel counts references to each object,
//!    freeing the object's memory when the count is zero").
//! 3. [`share`]: [`Share`] (a lookup table of object ids, Corey §3.3), [`ShareSet`] (the
//!    shares a pcore may name objects through, Corey §4.2, §4.4 `pcore_run`) and the access
//!    check [`ShareSet::resolve`] of a reference [`ObjRef`] = ⟨share id, object id⟩.
//! 4. [`objects`]: [`Objects`], the operations of Figure 5 on one core's table.
//!
//! # Who holds a reference
//! An object's reference count is exactly the number of its holders, and these are all the
//! holders there are:
//! 1. every [`Share`] that contains the object's id (an id is in a share at most once);
//! 2. every [`ShareSet`] that contains the id of a share (only shares go in share sets);
//! 3. every reference the kernel took with [`Objects::add_ref`] for a pointer it keeps
//!    outside shares, given back with [`Objects::drop_ref`]. The kernel's rules: an address
//!    range holds one reference to each distinct segment and nested range it maps (see the
//!    `addrrange` crate); a running pcore holds one on its root address range; a device
//!    holds one on each segment it was fed (`device_buf`).
//!
//! Creating an object hands its first reference to the share named at creation (or, for
//! [`Objects::root_share`], to the share set), so no object is ever seen with count 0.
//! When a count reaches 0 the object leaves the table and its payload is returned to the
//! caller (who frees the frames); a share that goes releases the reference of every entry,
//! and so on down, with a worklist rather than recursion. A share may not be put into a
//! share reachable from itself ([`ObjError::ShareCycle`]), so shares form no cycles and
//! every object is freed exactly once, exactly when its last holder lets go.
//!
//! Ids made on another core never enter this core's table; the kernel sees the owner in
//! [`ObjectId::core`] and asks that core's monitor (Multikernel: no hidden shared state).
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

use core::fmt;

pub mod id;
pub mod objects;
pub mod share;
pub mod table;

pub use id::{IdAllocator, ObjName, ObjectId, ObjectKind, CORE_SHIFT, NAME_MAX};
pub use objects::{Freed, ObjInfo, Objects};
pub use share::{ObjRef, Share, ShareSet};
pub use table::{ObjectEntry, ObjectTable};

/// Why an object operation failed. Every operation checks everything before it changes
/// anything, so on an error the table, the shares and the share set are as they were.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObjError {
    /// No live object has this id in this core's table.
    NoSuchObject,
    /// The share named is not in the caller's share set (Corey §4.2: the caller can name
    /// only objects through its shares).
    NotInShareSet,
    /// The object is not in the share named.
    NotInShare,
    /// The object is of another kind than the call needs (e.g. a segment where a share
    /// was expected).
    WrongKind,
    /// The id is already in the share or share set.
    AlreadyPresent,
    /// The object's reference count is at its maximum (`u32::MAX`).
    RefcountOverflow,
    /// Putting this share there would make a share reachable from itself.
    ShareCycle,
    /// This core has used all 2^48 − 1 of its ids.
    IdsExhausted,
    /// A name longer than [`NAME_MAX`] bytes.
    NameTooLong,
}

impl fmt::Display for ObjError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ObjError::NoSuchObject => "no such object",
            ObjError::NotInShareSet => "share is not in the share set",
            ObjError::NotInShare => "object is not in the share",
            ObjError::WrongKind => "object is of the wrong kind",
            ObjError::AlreadyPresent => "id is already present",
            ObjError::RefcountOverflow => "reference count overflow",
            ObjError::ShareCycle => "share would become reachable from itself",
            ObjError::IdsExhausted => "this core has no object ids left",
            ObjError::NameTooLong => "object name is too long",
        })
    }
}
