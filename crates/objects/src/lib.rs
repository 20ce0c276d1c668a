//! Corey's object model for Atoll, hardware-neutral and tested on the host: object ids,
//! kernel objects with reference counts, shares, share sets (access control) and the share
//! system calls of Corey Figure 5. The kernel keeps one [`Creator`] per core and one
//! [`ShareSet`] per running pcore, and supplies each kind's [`Payload`] (a segment's
//! pages, an address range's page-table subtree, ...).
//!
//! Read top to bottom:
//! 1. [`id`]: [`ObjectId`]s from per-core counters, the creating core in the high bits
//!    (Corey §4.2; no shared counter), [`ObjectKind`]s and short [`ObjName`]s.
//! 2. [`idmap`]: [`IdMap`], the hash table from ids to entries every share keeps.
//! 3. [`object`]: [`Object`] and its counted pointer [`ObjPtr`], the [`Payload`] trait,
//!    a shared share's [`ShareTable`] behind a scalable reader-writer lock (Corey §4.1),
//!    and [`release`], which frees with a worklist.
//! 4. [`share`]: [`ShareSet`], the private root share plus shared shares, its access
//!    check [`ShareSet::resolve`] of an [`ObjRef`] = ⟨share id, object id⟩, and the calls
//!    `share_alloc`, `share_addobj`, `share_dupobj`, `share_delobj`, `self_drop`,
//!    `obj_get_name`.
//! 5. [`quota`]: a program's kernel-memory [`Quota`], and the [`Charge`] each object and
//!    entry keeps of it until it goes.
//! 6. [`revoke`]: `obj_revoke`, a core's [`RevokeLog`] replica and how share sets and
//!    shares catch up with it (Multikernel §4.8).
//!
//! # Who holds a reference
//! Objects live in kernel memory every core can reach (Corey §4.1 "kernels on all cores
//! can address all object metadata"). An object's reference count is the number of its
//! [`ObjPtr`]s, and these are all the holders there are:
//! 1. every entry of a share that names the object: its own id, or a descriptor id
//!    `share_dupobj` made for it (an id is in a share at most once);
//! 2. every share set that contains a shared share;
//! 3. every pointer the kernel keeps outside shares: an address range holds each segment
//!    and nested range it maps, a running pcore its root address range and share set.
//!
//! When the last pointer goes the object is freed, on whichever core let go, and its
//! payload's `Drop` frees its frames; a freed share or range releases what it held in
//! turn. A share may not be put into a share reachable from itself
//! ([`ObjError::ShareCycle`]), so shares form no cycles and every object is freed exactly
//! once, exactly when its last holder lets go.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

use core::fmt;

pub mod id;
pub mod idmap;
pub mod object;
pub mod quota;
pub mod revoke;
pub mod share;

pub use id::{
    IdAllocator, ObjName, ObjRef, ObjectId, ObjectKind, Revocation, CORE_SHIFT, NAME_MAX,
};
pub use idmap::IdMap;
pub use object::{
    release, release_one, Body, Census, CensusToken, Cores, Creator, Entry, ObjPtr, Object,
    Payload, ShareMap, ShareTable, CENSUS_ROWS,
};
pub use quota::{Charge, Quota};
pub use revoke::{RevokeLog, MAX_REVOCATIONS};
pub use share::{ObjInfo, ShareSet};

/// Why an object operation failed. Every operation checks everything before it changes
/// anything, so on an error the table, the shares and the share set are as they were.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObjError {
    /// No live object has this id.
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
    /// Putting this share there would make a share reachable from itself.
    ShareCycle,
    /// This core has used all 2^48 − 1 of its ids.
    IdsExhausted,
    /// A name longer than [`NAME_MAX`] bytes.
    NameTooLong,
    /// The private root share cannot be dropped, put into a share or given away.
    RootShare,
    /// The share holds [`object::SHARE_MAX`] entries.
    ShareFull,
    /// The share's table had to grow and the memory for it could not be had (the kernel
    /// answers `NoResources`, never panics).
    OutOfMemory,
    /// The program's kernel-memory quota is spent ([`Quota`]; the kernel answers
    /// `NoResources`).
    QuotaExceeded,
}

impl fmt::Display for ObjError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ObjError::NoSuchObject => "no such object",
            ObjError::NotInShareSet => "share is not in the share set",
            ObjError::NotInShare => "object is not in the share",
            ObjError::WrongKind => "object is of the wrong kind",
            ObjError::AlreadyPresent => "id is already present",
            ObjError::ShareCycle => "share would become reachable from itself",
            ObjError::IdsExhausted => "this core has no object ids left",
            ObjError::NameTooLong => "object name is too long",
            ObjError::RootShare => "the root share is private to its pcore",
            ObjError::ShareFull => "the share is full",
            ObjError::OutOfMemory => "no memory for the share's table",
            ObjError::QuotaExceeded => "the program's kernel-memory quota is spent",
        })
    }
}

#[cfg(test)]
mod tests;
