//! Corey's address ranges for Atoll, hardware-neutral and tested on the host (Corey §3.1,
//! §4.3; Figure 5 `ar_set_seg`, `ar_set_ar`, `ar_get`). An address range maps a span of
//! virtual addresses to runs of pages of segments and to nested address ranges spliced in
//! at a fixed, aligned granularity (Corey: 1 GiB). The kernel turns each range into a
//! page-table subtree that several cores' page tables can include, so a mapping one core
//! faults in through a shared range is seen by every core sharing it; it resolves page
//! faults with [`resolve()`].
//!
//! Read top to bottom:
//! 1. this file: [`Perms`], [`Target`], [`Mapping`], [`ArError`] and the tunables;
//! 2. [`range`]: [`AddressRange`], the sorted, non-overlapping mappings of one range and
//!    the edits `ar_set_seg`, `ar_set_ar` and unmap;
//! 3. [`resolve`](mod@resolve): [`resolve()`] of an address through a root range and the
//!    ranges nested in it, and [`reaches`] to refuse nesting cycles.
//!
//! Addresses in a range are offsets from its start: for a root range they are virtual
//! addresses, for a range spliced at `va` into another, `va` is its offset 0.
//!
//! # References (see the `objects` crate)
//! An address range holds one reference to each distinct object it maps, segment or
//! nested range, however many mappings name it. The kernel keeps that count in step:
//! before an edit it takes a reference on the new target if [`AddressRange::maps`] says
//! the range does not map it yet; after the edit it drops one for each id that
//! [`AddressRange::released`] returns from the removed mappings; when the range itself is
//! freed it drops one for each of [`AddressRange::targets`]. Removed mappings of a shared
//! range also tell the kernel which TLB entries other cores must invalidate.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

use core::fmt;

pub mod range;
pub mod resolve;

pub use range::AddressRange;
pub use resolve::{reaches, resolve, Path, Resolved};

/// Bytes in a page, the unit of segment mappings.
pub const PAGE_SIZE: u64 = 4096;
/// Granularity at which nested ranges are spliced unless a range is made with another
/// (Corey §4.3: 1 GiB, one page-directory-pointer entry on x86-64).
pub const DEFAULT_GRANULARITY: u64 = 1 << 30;
/// Most ranges [`resolve()`] crosses, the root included; deeper nesting is an error.
pub const MAX_DEPTH: usize = 8;

/// Access rights of a mapping. Reading and user access are always allowed (every mapping
/// is for user code).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Perms {
    /// Stores are allowed.
    pub write: bool,
    /// Instruction fetches are allowed.
    pub exec: bool,
}

impl Perms {
    /// Read only.
    pub const R: Perms = Perms { write: false, exec: false };
    /// Read and write.
    pub const RW: Perms = Perms { write: true, exec: false };
    /// Read and execute.
    pub const RX: Perms = Perms { write: false, exec: true };
    /// Read, write and execute.
    pub const RWX: Perms = Perms { write: true, exec: true };

    /// The rights both allow: what an access through a nested range gets (as x86 page
    /// tables combine the writable and no-execute bits of every level).
    pub const fn intersect(self, other: Perms) -> Perms {
        Perms { write: self.write && other.write, exec: self.exec && other.exec }
    }
}

/// What a mapping maps to. Ids are object ids (the `objects` crate's `ObjectId` values).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// Pages of a segment (Corey §4.3, `ar_set_seg`): the mapping's first page is page
    /// `first_page` of segment `seg`, the next page the next one, and so on.
    Segment {
        /// The segment's object id.
        seg: u64,
        /// Index in the segment of the page mapped at the mapping's start.
        first_page: u64,
        /// Writes must copy the page first (Corey §4.3 `segment_copy`, §5.1 `cfork`).
        cow: bool,
    },
    /// A nested address range (`ar_set_ar`), whose offset 0 is the mapping's start.
    Range {
        /// The nested range's object id.
        ar: u64,
    },
}

impl Target {
    /// The id of the object mapped.
    pub const fn id(&self) -> u64 {
        match *self {
            Target::Segment { seg, .. } => seg,
            Target::Range { ar } => ar,
        }
    }
}

/// One mapping of an address range: `pages` pages from offset `start` (page-aligned) to
/// `target` with rights `perms` (Figure 5 `ar_get` returns these).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Mapping {
    /// Offset in the range of the first byte mapped.
    pub start: u64,
    /// Number of pages mapped (at least 1).
    pub pages: u64,
    /// What they map to.
    pub target: Target,
    /// Rights of accesses through this mapping.
    pub perms: Perms,
}

impl Mapping {
    /// Offset of the first byte after the mapping.
    pub const fn end(&self) -> u64 {
        self.start.saturating_add(self.pages.saturating_mul(PAGE_SIZE))
    }

    /// Whether the mapping covers offset `va`.
    pub const fn contains(&self, va: u64) -> bool {
        self.start <= va && va < self.end()
    }
}

/// Why an address-range operation failed. A failed edit leaves the range as it was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArError {
    /// The granularity is not a power of two of at least [`PAGE_SIZE`].
    BadGranularity,
    /// An address or span is not aligned to a page (or, for `set_ar`, the granularity).
    Unaligned,
    /// Zero pages.
    Empty,
    /// The pages do not fit in the range's span (or wrap around the address space).
    OutOfSpan,
    /// The segment page indices would pass `u64::MAX`.
    SegmentOverflow,
    /// The edit covers part, not all, of a nested range's slot; a nested range is mapped
    /// or unmapped whole.
    SplitsRange,
    /// No mapping covers the address.
    NotMapped,
    /// `resolve` was given (or a mapping names) a range id that `lookup` does not know.
    NoSuchRange,
    /// The nested ranges lead back to a range already crossed.
    Cycle,
    /// More than [`MAX_DEPTH`] ranges deep.
    TooDeep,
}

impl fmt::Display for ArError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ArError::BadGranularity => "granularity is not a power of two of at least a page",
            ArError::Unaligned => "address is not aligned",
            ArError::Empty => "zero pages",
            ArError::OutOfSpan => "pages do not fit in the range",
            ArError::SegmentOverflow => "segment page index overflows",
            ArError::SplitsRange => "edit covers part of a nested range",
            ArError::NotMapped => "address is not mapped",
            ArError::NoSuchRange => "no such address range",
            ArError::Cycle => "nested address ranges form a cycle",
            ArError::TooDeep => "address ranges nested too deep",
        })
    }
}
