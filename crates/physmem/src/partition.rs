//! The per-core partition of physical memory (Corey §4.1, "memid"): each core gets its own
//! share of the usable frames and allocates only from it, so no free list is shared; on a
//! NUMA machine a core's share comes from its own memory node. [`FrameOwners`] is the
//! read-only table, built once at boot, that says which core owns a frame, so a frame freed
//! on a foreign core can be returned to its owner.

use core::fmt;

use crate::range::{align_up, CapacityError, PhysRange, RangeSet};
use crate::{FRAME_SIZE, MAX_RANGES_PER_CORE};

/// One memory range of a NUMA node, as the ACPI SRAT reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeMemory {
    /// The proximity domain (node number).
    pub node: u32,
    /// The node's physical memory range.
    pub range: PhysRange,
}

/// One core's share of physical memory: sorted, frame-aligned ranges.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CoreShare {
    ranges: RangeSet<MAX_RANGES_PER_CORE>,
}

impl CoreShare {
    /// An empty share (for `[const { CoreShare::new() }; MAX_CORES]`).
    pub const fn new() -> Self {
        CoreShare { ranges: RangeSet::new() }
    }

    /// The share's ranges, in address order.
    pub fn ranges(&self) -> &[PhysRange] {
        self.ranges.as_slice()
    }

    /// Number of frames in the share.
    pub fn frames(&self) -> u64 {
        self.ranges.total_frames()
    }

    /// Whether the core got no memory at all (possible on tiny VMs; worth a boot message).
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }
}

/// Why [`partition`] failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PartitionError {
    /// `out` has fewer entries than there are cores.
    OutTooShort {
        /// Number of cores (`core_nodes.len()`).
        cores: usize,
        /// Length of `out`.
        out: usize,
    },
    /// There is usable memory but no core to give it to.
    NoCores,
    /// This core's share needs more than [`MAX_RANGES_PER_CORE`] ranges.
    TooManyRanges {
        /// The core whose share overflowed.
        core: usize,
    },
}

impl fmt::Display for PartitionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PartitionError::OutTooShort { cores, out } => {
                write!(f, "{cores} cores but room for {out} shares")
            }
            PartitionError::NoCores => f.write_str("usable memory but no cores"),
            PartitionError::TooManyRanges { core } => {
                write!(f, "core {core} needs more than {MAX_RANGES_PER_CORE} ranges")
            }
        }
    }
}

/// The pool a frame is split from: its node's cores, or every core.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pool {
    /// Frames of this node, shared by the cores on it.
    Node(u32),
    /// Frames of nodes without cores or of no node, shared by all cores.
    Shared,
}

/// The frames of a node range: a frame belongs to the node holding its first byte.
fn node_frames(r: PhysRange) -> PhysRange {
    PhysRange::new(align_up(r.start), align_up(r.end))
}

/// The pool of the frame at `addr`: the node of the first node range holding it, if that
/// node has cores (the first wins, so overlapping SRAT entries cannot give a frame twice).
fn pool_of(addr: u64, nodes: &[NodeMemory], core_nodes: &[u32]) -> Pool {
    for n in nodes {
        if node_frames(n.range).contains(addr) {
            if core_nodes.contains(&n.node) {
                return Pool::Node(n.node);
            }
            return Pool::Shared;
        }
    }
    Pool::Shared
}

/// The first node-range boundary after `addr`, or `end` if none comes before it.
fn next_boundary(addr: u64, end: u64, nodes: &[NodeMemory]) -> u64 {
    let mut next = end;
    for n in nodes {
        let r = node_frames(n.range);
        for b in [r.start, r.end] {
            if b > addr && b < next {
                next = b;
            }
        }
    }
    next
}

/// Calls `f` on every piece of usable memory in `pool`, in address order. Pieces are cut at
/// node boundaries, so the pool is the same across a whole piece.
fn for_each_piece<const N: usize>(
    usable: &RangeSet<N>,
    nodes: &[NodeMemory],
    core_nodes: &[u32],
    pool: Pool,
    mut f: impl FnMut(PhysRange) -> Result<(), PartitionError>,
) -> Result<(), PartitionError> {
    for u in usable.iter() {
        let u = u.shrink_to_frames();
        let mut at = u.start;
        while at < u.end {
            let next = next_boundary(at, u.end, nodes);
            if pool_of(at, nodes, core_nodes) == pool {
                f(PhysRange::new(at, next))?;
            }
            at = next;
        }
    }
    Ok(())
}

/// The core of rank `rank` among the cores drawing from `pool`.
fn nth_core(core_nodes: &[u32], pool: Pool, rank: usize) -> usize {
    match pool {
        Pool::Shared => rank,
        Pool::Node(node) => {
            let mut seen = 0;
            for (core, &n) in core_nodes.iter().enumerate() {
                if n == node {
                    if seen == rank {
                        return core;
                    }
                    seen += 1;
                }
            }
            unreachable!("rank below the pool's core count")
        }
    }
}

/// Splits the usable frames of `pool` among its cores: contiguous chunks in address order,
/// chunk sizes differing by at most one frame.
fn split_pool<const N: usize>(
    usable: &RangeSet<N>,
    nodes: &[NodeMemory],
    core_nodes: &[u32],
    pool: Pool,
    out: &mut [CoreShare],
) -> Result<(), PartitionError> {
    let cores = match pool {
        Pool::Shared => core_nodes.len(),
        Pool::Node(node) => core_nodes.iter().filter(|&&n| n == node).count(),
    } as u64;
    let mut total = 0;
    for_each_piece(usable, nodes, core_nodes, pool, |piece| {
        total += piece.frames();
        Ok(())
    })?;
    if total == 0 {
        return Ok(());
    }
    // Core of rank j gets the pool's frames [bound(j), bound(j + 1)), counted in address order.
    let bound = |j: u64| (total as u128 * j as u128 / cores as u128) as u64;
    let mut rank = 0;
    let mut offset = 0; // frames of the pool handed out so far
    for_each_piece(usable, nodes, core_nodes, pool, |piece| {
        let mut start = piece.start;
        while start < piece.end {
            while bound(rank + 1) <= offset {
                rank += 1;
            }
            let frames = ((piece.end - start) / FRAME_SIZE).min(bound(rank + 1) - offset);
            let end = start + frames * FRAME_SIZE;
            let core = nth_core(core_nodes, pool, rank as usize);
            out[core]
                .ranges
                .insert(PhysRange::new(start, end))
                .map_err(|CapacityError| PartitionError::TooManyRanges { core })?;
            offset += frames;
            start = end;
        }
        Ok(())
    })
}

/// Partitions the `usable` frames among the cores; core `i` is on NUMA node `core_nodes[i]`
/// and gets `out[i]` (entries past the last core are cleared).
///
/// With no `nodes`, all usable memory is one pool for all cores. Otherwise each node's
/// usable memory is split among that node's cores, and memory of nodes without cores or of
/// no node is split among all cores. A split gives each core one contiguous chunk (in frame
/// counts as equal as possible, at most one apart) of the pool in address order, so a chunk
/// breaks into several ranges only across holes in the pool. Every usable frame goes to
/// exactly one core. A core may get nothing (check [`CoreShare::is_empty`]); that is not an
/// error.
pub fn partition<const N: usize>(
    usable: &RangeSet<N>,
    nodes: &[NodeMemory],
    core_nodes: &[u32],
    out: &mut [CoreShare],
) -> Result<(), PartitionError> {
    let cores = core_nodes.len();
    if out.len() < cores {
        return Err(PartitionError::OutTooShort { cores, out: out.len() });
    }
    for share in out.iter_mut() {
        *share = CoreShare::new();
    }
    if cores == 0 {
        if usable.total_frames() == 0 {
            return Ok(());
        }
        return Err(PartitionError::NoCores);
    }
    // One pool per node with cores, each split once (at its first core), then the rest.
    for (i, &node) in core_nodes.iter().enumerate() {
        if !core_nodes[..i].contains(&node) {
            split_pool(usable, nodes, core_nodes, Pool::Node(node), out)?;
        }
    }
    split_pool(usable, nodes, core_nodes, Pool::Shared, out)
}

/// Why [`FrameOwners::from_shares`] failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OwnersError {
    /// More ranges than the table holds.
    Full,
    /// Two shares overlap, so a frame would have two owners.
    Overlap,
}

impl fmt::Display for OwnersError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OwnersError::Full => f.write_str("frame owner table full"),
            OwnersError::Overlap => f.write_str("two cores' shares overlap"),
        }
    }
}

/// One row of the owner table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Owned {
    range: PhysRange,
    core: usize,
}

/// Which core owns each frame: up to `N` (range, core) rows sorted by address. Built once
/// at boot from the partition and read-only afterwards, so every core may read it without
/// synchronisation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameOwners<const N: usize> {
    rows: [Owned; N],
    len: usize,
}

impl<const N: usize> FrameOwners<N> {
    /// An empty table.
    pub const fn new() -> Self {
        FrameOwners { rows: [Owned { range: PhysRange::new(0, 0), core: 0 }; N], len: 0 }
    }

    /// The table for `shares`, where `shares[i]` is core `i`'s share.
    pub fn from_shares(shares: &[CoreShare]) -> Result<Self, OwnersError> {
        let mut table = Self::new();
        for (core, share) in shares.iter().enumerate() {
            for &range in share.ranges() {
                table.insert(range, core)?;
            }
        }
        Ok(table)
    }

    /// Adds `range` as owned by `core`, keeping the rows sorted (insertion sort: boot only).
    fn insert(&mut self, range: PhysRange, core: usize) -> Result<(), OwnersError> {
        if range.is_empty() {
            return Ok(());
        }
        let i = self.rows[..self.len].partition_point(|o| o.range.start < range.start);
        let overlaps_prev = i > 0 && self.rows[i - 1].range.end > range.start;
        let overlaps_next = i < self.len && self.rows[i].range.start < range.end;
        if overlaps_prev || overlaps_next {
            return Err(OwnersError::Overlap);
        }
        if self.len == N {
            return Err(OwnersError::Full);
        }
        let mut k = self.len;
        while k > i {
            self.rows[k] = self.rows[k - 1];
            k -= 1;
        }
        self.rows[i] = Owned { range, core };
        self.len += 1;
        Ok(())
    }

    /// The core owning the frame at `addr`, or `None` if no core owns it (binary search).
    pub fn owner_of(&self, addr: u64) -> Option<usize> {
        let rows = &self.rows[..self.len];
        let i = rows.partition_point(|o| o.range.end <= addr);
        if i < rows.len() && rows[i].range.contains(addr) {
            Some(rows[i].core)
        } else {
            None
        }
    }

    /// Number of rows.
    pub const fn len(&self) -> usize {
        self.len
    }

    /// Whether the table is empty.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The rows in address order, as (range, owning core).
    pub fn iter(&self) -> impl Iterator<Item = (PhysRange, usize)> + '_ {
        self.rows[..self.len].iter().map(|o| (o.range, o.core))
    }
}

impl<const N: usize> Default for FrameOwners<N> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MAX_CORES;
    use std::vec;
    use std::vec::Vec;

    const K: u64 = FRAME_SIZE;

    fn set(ranges: &[(u64, u64)]) -> RangeSet<8> {
        let mut s = RangeSet::new();
        for &(a, b) in ranges {
            s.insert(PhysRange::new(a * K, b * K)).unwrap();
        }
        s
    }

    /// Each core's ranges in frame numbers.
    fn frames_of(out: &[CoreShare]) -> Vec<Vec<(u64, u64)>> {
        out.iter().map(|s| s.ranges().iter().map(|r| (r.start / K, r.end / K)).collect()).collect()
    }

    #[test]
    fn no_nodes_splits_evenly_in_address_order() {
        let usable = set(&[(0, 5), (10, 15)]);
        let mut out = [CoreShare::new(); 3];
        partition(&usable, &[], &[0, 0, 0], &mut out).unwrap();
        // 10 frames over 3 cores: 3, 3, 4.
        assert_eq!(frames_of(&out), [vec![(0, 3)], vec![(3, 5), (10, 11)], vec![(11, 15)]]);
    }

    #[test]
    fn numa_nodes_keep_frames_local() {
        let usable = set(&[(0, 100)]);
        let nodes = [
            NodeMemory { node: 0, range: PhysRange::new(0, 40 * K) },
            NodeMemory { node: 1, range: PhysRange::new(40 * K, 80 * K) },
            // Node 2 has no cores: its memory is shared by all, like frames 90..100 (no node).
            NodeMemory { node: 2, range: PhysRange::new(80 * K, 90 * K) },
        ];
        let mut out = [CoreShare::new(); 4];
        partition(&usable, &nodes, &[0, 1, 0, 1], &mut out).unwrap();
        assert_eq!(
            frames_of(&out),
            [
                vec![(0, 20), (80, 85)],
                vec![(40, 60), (85, 90)],
                vec![(20, 40), (90, 95)],
                vec![(60, 80), (95, 100)],
            ]
        );
    }

    #[test]
    fn tiny_machine_leaves_cores_empty() {
        let usable = set(&[(0, 2)]);
        let mut out = [CoreShare::new(); 4];
        partition(&usable, &[], &[0; 4], &mut out).unwrap();
        assert_eq!(out.iter().map(CoreShare::frames).sum::<u64>(), 2);
        assert_eq!(out.iter().filter(|s| s.is_empty()).count(), 2);
    }

    #[test]
    fn errors() {
        let usable = set(&[(0, 2)]);
        let mut out = [CoreShare::new(); 1];
        assert_eq!(
            partition(&usable, &[], &[0, 0], &mut out),
            Err(PartitionError::OutTooShort { cores: 2, out: 1 })
        );
        assert_eq!(partition(&usable, &[], &[], &mut out), Err(PartitionError::NoCores));
        partition(&RangeSet::<1>::new(), &[], &[], &mut out).unwrap();
        // One core, 17 holes apart ranges: more than MAX_RANGES_PER_CORE.
        let mut many = RangeSet::<32>::new();
        for i in 0..=MAX_RANGES_PER_CORE as u64 {
            many.insert(PhysRange::new(2 * i * K, (2 * i + 1) * K)).unwrap();
        }
        assert_eq!(
            partition(&many, &[], &[0], &mut out),
            Err(PartitionError::TooManyRanges { core: 0 })
        );
    }

    #[test]
    fn owners_table() {
        let usable = set(&[(0, 10), (20, 30)]);
        let mut out = [CoreShare::new(); MAX_CORES];
        partition(&usable, &[], &[0; 3], &mut out).unwrap();
        let owners = FrameOwners::<16>::from_shares(&out).unwrap();
        assert_eq!(owners.owner_of(0), Some(0));
        assert_eq!(owners.owner_of(7 * K - 1), Some(1));
        assert_eq!(owners.owner_of(10 * K), None);
        assert_eq!(owners.owner_of(29 * K), Some(2));
        assert_eq!(owners.owner_of(30 * K), None);
        assert_eq!(owners.len(), 4);
        assert!(FrameOwners::<3>::from_shares(&out) == Err(OwnersError::Full));
        let overlapping = [out[0], out[0]];
        assert!(FrameOwners::<16>::from_shares(&overlapping) == Err(OwnersError::Overlap));
    }
}
