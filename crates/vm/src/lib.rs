//! Corey's memory for Atoll, hardware-neutral and tested on the host (Corey §3.1, §4.3):
//! the pages of segments, filled on first touch and shared copy-on-write; the pages each
//! address range has mapped in its own page tables; and the operations that join the two
//! (a soft page fault, a copy-on-write copy, a resize, an edit of a range), each a short
//! sequence of critical sections on one segment's or one range's lock.
//!
//! The kernel supplies what is not neutral through [`Host`]: frames (counted handles, zeroed
//! and copied outside every lock), a range's page tables ([`PageTables`]: map, unmap,
//! translate), the locks that [`SegmentState`] and [`RangeState`] sit behind, and TLB
//! shootdown. The tests supply a simulated machine instead (`tests/sim`).
//!
//! Read top to bottom:
//! 1. this file: the traits [`PageTables`] and [`Host`], and [`VmError`];
//! 2. [`segment`]: [`SegmentState`], a segment's pages and the ranges that mapped them;
//! 3. [`range`]: [`RangeState`], a range's mappings, the objects it holds, its tables and
//!    the pages mapped in them, and the edit of Figure 5's `ar_set_seg` / `ar_set_ar`;
//! 4. [`ops`]: [`fault`], [`copy_on_write`] and [`set_nbytes`], which take several locks.
//!
//! # What keeps a frame alive
//! A segment page is a counted frame handle ([`Host::Frame`]), and every page-table entry that maps it
//! holds another ([`RangeState`] keeps them by offset), so a frame is freed only after the
//! last entry mapping it is gone, whoever changed the segment. Functions that take entries
//! out return the handles: the kernel drops them only after the TLB shootdown, so no core
//! reaches a freed frame through a stale translation.
//!
//! # What an entry maps
//! An entry at offset `o` of a range maps the page that the range's mapping at `o` names
//! (that segment, that page, those rights), with the frame the page holds. Every change
//! that could make it stale takes it out: an edit unmaps the span it edits; a
//! copy-on-write copy and a shrink unmap the segment's pages in every range that ever
//! mapped the segment (a segment remembers them); a page of a copy-on-write segment is
//! mapped read-only, so the write that copies it faults first, and that fault unmaps the
//! page's other entries, which still map the frame it was copied from. A fault maps a page
//! only if, under the range's lock, the mapping and the page are still what it filled.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

use alloc::sync::Arc;
use core::fmt;

pub mod ops;
pub mod range;
pub mod segment;

pub use addrrange::{Perms, PAGE_SIZE};
pub use ops::{copy_on_write, fault, pin_page, set_nbytes, Fault};
pub use range::{Edited, RangeState};
pub use segment::SegmentState;

/// One address range's page tables (Corey §3.1: a range is a page-table subtree that
/// several cores' tables include). Offsets are from the range's start. The range's lock is
/// held around every call; TLB shootdown is the caller's.
///
/// A nested range's entries carry the rights of its own mappings and serve every root
/// that splices it, so a root's link to it (made by the host for `ar_set_ar`) must carry
/// the splice's rights, as x86 combines the rights of every level: a slot spliced
/// read-only into one root and read-write into another is read-only through the first.
pub trait PageTables {
    /// Maps the page at `offset` to the frame at `addr` for user access with rights
    /// `perms`. `NoMemory` if a table could not be allocated.
    fn map(&mut self, offset: u64, addr: u64, perms: Perms) -> Result<(), VmError>;
    /// Removes the entry for the page at `offset`, if there is one.
    fn unmap(&mut self, offset: u64);
    /// The frame address and rights the page at `offset` is mapped with, if it is.
    fn translate(&self, offset: u64) -> Option<(u64, Perms)>;
    /// Takes out the link to the nested range spliced at `offset` (`ar_set_ar`); only a
    /// root range's tables have links.
    fn unlink(&mut self, offset: u64);
}

/// What the kernel gives this crate: its frames, tables, objects, locks and shootdown.
pub trait Host: Sized {
    /// A counted handle to a physical frame (the kernel's `Arc<Frame>`): the frame is
    /// freed when the last handle goes.
    type Frame: Clone;
    /// A range's page tables.
    type Tables: PageTables;
    /// A kernel object (segment or address range): ranges hold `Arc`s to what they map,
    /// segments remember by `Weak` the ranges that mapped their pages.
    type Object;

    /// The frame's physical address: what a page-table entry holds, and the frame's
    /// identity for as long as any handle to it lives.
    fn addr(frame: &Self::Frame) -> u64;
    /// The object's id (what [`addrrange`] mappings name).
    fn id(object: &Self::Object) -> u64;
    /// Runs `f` on the segment `object` under its lock; `None` if it is not a segment.
    fn with_segment<R>(
        &self,
        object: &Self::Object,
        f: impl FnOnce(&mut SegmentState<Self>) -> R,
    ) -> Option<R>;
    /// Runs `f` on the range `object` under its lock; `None` if it is not a range.
    fn with_range<R>(
        &self,
        object: &Self::Object,
        f: impl FnOnce(&mut RangeState<Self>) -> R,
    ) -> Option<R>;
    /// A fresh zeroed frame (called with no lock held).
    fn zeroed(&self) -> Option<Self::Frame>;
    /// A fresh frame holding a copy of `frame` (called with no lock held).
    fn copy(&self, frame: &Self::Frame) -> Option<Self::Frame>;
    /// Flushes the translations of `range`'s tables from every core that may hold them,
    /// and returns once each has (called with no lock held): true. False if some core
    /// never answered (Multikernel §4.7: the agreement timed out): the caller must then
    /// keep the frames those entries reached, never reuse them.
    fn shootdown(&self, range: &Self::Object) -> bool;
}

/// A counted pointer to one of the host's objects.
pub type ObjectPtr<H> = Arc<<H as Host>::Object>;

/// Why an operation failed. A failed operation changed nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VmError {
    /// Kernel memory for metadata or a page table could not be allocated.
    NoMemory,
    /// A page index past the segment's end.
    OutOfRange,
    /// The object is not a segment (or not a range) where one was needed.
    WrongKind,
}

impl fmt::Display for VmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            VmError::NoMemory => "out of memory",
            VmError::OutOfRange => "page index past the segment's end",
            VmError::WrongKind => "object of the wrong kind",
        })
    }
}
