//! Corey's objects for user programs (Corey §3–§4, Figure 5): shares, segments, address
//! ranges, pcores and devices, named by ⟨share, object⟩ references resolved through the
//! running pcore's share set, and the soft page fault that fills a page of a segment
//! mapped by the pcore's root address range.
//!
//! The object model (ids, shares, share sets, reference counts), the range maps and the
//! memory logic (segment pages, copy-on-write, what each range's tables map, the fault,
//! copy and edit decisions) are the hardware-neutral `objects`, `addrrange` and `vm`
//! crates; this file is the glue: the frames, the x86 page tables behind `vm::PageTables`,
//! the locks, TLB shootdown and the system calls. Objects live in kernel memory any core
//! can reach (Corey §4.1), each guarded by its own lock, so a segment or range one core
//! made can be used on every core its share reaches.
//!
//! Memory safety across cores rests on counted frames: a segment page is an
//! `Arc<Frame>`, and every page-table entry that maps it holds a clone (`vm::RangeState`),
//! so a frame is freed only after the last mapping of it is gone, whoever changed the
//! segment.
//!
//! Address ranges come in two kinds (`abi::ar_kind`), and each owns its page tables. A
//! root range (the user half) owns a PML4: every context running on it uses that as its
//! CR3, so they share one address space. A slot range (1 GiB) owns a page directory,
//! linked into every root that splices it (`ar_set_ar`). A page is mapped in the tables of
//! the range that maps its segment, so a page one core faults in is mapped for every core
//! using that range without a fault of their own (Corey §3.1, §4.3). Removing mappings
//! from a range, or making a segment's pages copy-on-write, unmaps them in every range
//! that mapped them and shoots down the TLBs of the cores that may hold them.
//!
//! Where each part is, bottom up:
//! - [`space`]: a root range's page tables as an address space (copies in and out);
//! - [`frame`]: counted frames, charged to the thread that faulted them in, and the
//!   `vm::Host` glue;
//! - [`object`]: the object kinds (segment, address range, pcore, device, thread), the
//!   per-core object limits and naming objects through a share set;
//! - [`quota`]: each program's kernel-memory quota;
//! - [`revocation`]: each core's log of committed revocations and `obj_revoke`;
//! - [`context`]: a program's or context's objects (share set, root range);
//! - [`share`], [`segment`], [`range`], [`pcore`]: the system calls on each kind;
//! - [`device`]: the device table;
//! - [`sysdev`]: syscall devices and a kernel core's device list (`pcore_add_device`,
//!   `device_buf`, `device_conf`);
//! - [`user_memory`]: copying words and strings in and out of a program's memory.

pub mod context;
pub mod device;
pub mod frame;
pub mod object;
pub mod pcore;
pub mod quota;
pub mod range;
pub mod revocation;
pub mod segment;
pub mod share;
pub mod space;
pub mod sysdev;
pub mod user_memory;

pub use context::*;
pub use frame::*;
pub use object::*;
pub use pcore::*;
pub use quota::*;
pub use range::*;
pub use segment::*;
pub use share::*;
pub use sysdev::{device_buf, device_conf, pcore_add_device, syscall_device};

use crate::mem::frames;
use crate::param::{
    FAULT_RESERVE_FRAMES, LOAD_RESERVE_FRAMES, MAX_MAPPINGS, MAX_OBJECTS_PER_CORE,
    MAX_SEGMENT_PAGES, RESERVE_FRAMES, RESERVE_FRAMES_MIN,
};
use objects::Census;

pub(super) const PAGE: u64 = 4096;
/// Span of a root address range: the user half.
pub(super) const ROOT_SPAN: u64 = crate::arch::paging::USER_END;
/// Span of a slot range and the granularity at which ranges nest (Corey: 1 GiB).
pub(super) const GRANULARITY: u64 = 1 << 30;

/// What this core keeps back from calls that grow kernel memory: [`RESERVE_FRAMES`], or on
/// a core with little memory (a 64 MiB VM of 16 cores has 4 MiB each) a quarter of its
/// frames, at least [`RESERVE_FRAMES_MIN`]. A fixed 2 MiB left such a core half its memory.
pub(super) fn reserve_frames() -> u64 {
    let (_, total) = frames::counts_here();
    (total / 4).clamp(RESERVE_FRAMES_MIN, RESERVE_FRAMES)
}

/// Live objects per creating core, each kept as a row per changing core (a free on core B
/// of what core A made counts -1 in B's row of A's census), added up when read.
pub(super) static CENSUS: [Census; crate::percpu::MAX_CORES] =
    [const { Census::per_core(CENSUS_CORES) }; crate::percpu::MAX_CORES];

/// What a census needs to keep a row per core: the calling core and how many there are.
pub(super) const CENSUS_CORES: objects::Cores =
    objects::Cores { here: this_core_index, count: crate::percpu::core_count };

const _: () = assert!(crate::percpu::MAX_CORES <= objects::CENSUS_ROWS, "a census row per core");

/// The calling core's index (for [`CENSUS_CORES`]).
fn this_core_index() -> usize {
    crate::percpu::this_core().index
}

/// Live objects made by core `core`'s programs (tests check they come back to a baseline).
pub fn live_objects(core: usize) -> usize {
    CENSUS.get(core).map_or(0, |c| c.live())
}
