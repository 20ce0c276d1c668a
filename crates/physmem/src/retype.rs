//! Retype (Multikernel §4.8; Barrelfish retypes a capability to move memory between
//! cores): which core owns a frame changes after boot, a block of frames at a time. The
//! boot partition ([`FrameOwners`](crate::FrameOwners)) stays read-only; what changed
//! since is [`BlockOwners`], a table every core keeps its own replica of and changes only
//! when a two-phase commit among all cores says so, so every replica changes in the same
//! order.

/// Frames in a retype block.
pub const BLOCK_FRAMES: u64 = 64;
/// Bytes in a retype block (256 KiB); blocks are aligned to it.
pub const BLOCK_SIZE: u64 = BLOCK_FRAMES * crate::FRAME_SIZE;
/// Most blocks one core's replica records as retyped (64 MiB of them).
pub const MAX_RETYPED_BLOCKS: usize = 256;

/// One row: a block and the core that owns it now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Row {
    block: u64,
    core: usize,
}

/// One core's replica of the blocks whose owner changed since boot, sorted by address: an
/// owner found here overrides the boot partition's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockOwners<const N: usize> {
    rows: [Row; N],
    len: usize,
}

impl<const N: usize> BlockOwners<N> {
    /// No block retyped (`const`, for a kernel's static per-core replicas).
    pub const fn new() -> Self {
        BlockOwners { rows: [Row { block: 0, core: 0 }; N], len: 0 }
    }

    /// The core owning the frame at `addr` if its block was retyped; `None` means the boot
    /// partition says.
    pub fn owner_of(&self, addr: u64) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        let block = addr & !(BLOCK_SIZE - 1);
        let rows = &self.rows[..self.len];
        let i = rows.partition_point(|r| r.block < block);
        (i < rows.len() && rows[i].block == block).then(|| rows[i].core)
    }

    /// Whether [`set`](Self::set) of `count` blocks from `first` would fit.
    pub fn has_room(&self, first: u64, count: u64) -> bool {
        let new = (0..count).filter(|b| self.row(first + b * BLOCK_SIZE).is_err()).count();
        self.len + new <= N
    }

    /// Records that `count` blocks from `first` (aligned) belong to `core` now; all or
    /// nothing: `false` if they do not fit or `first` is not aligned.
    pub fn set(&mut self, first: u64, count: u64, core: usize) -> bool {
        if !first.is_multiple_of(BLOCK_SIZE) || !self.has_room(first, count) {
            return false;
        }
        for b in 0..count {
            let block = first + b * BLOCK_SIZE;
            match self.row(block) {
                Ok(i) => self.rows[i].core = core,
                Err(i) => {
                    self.rows.copy_within(i..self.len, i + 1);
                    self.rows[i] = Row { block, core };
                    self.len += 1;
                }
            }
        }
        true
    }

    /// Number of blocks recorded.
    pub const fn len(&self) -> usize {
        self.len
    }

    /// Whether no block was retyped.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The rows in address order, as (block, owning core).
    pub fn iter(&self) -> impl Iterator<Item = (u64, usize)> + '_ {
        self.rows[..self.len].iter().map(|r| (r.block, r.core))
    }

    /// `Ok(row)` of `block`, or `Err(where it would go)`.
    fn row(&self, block: u64) -> Result<usize, usize> {
        self.rows[..self.len].binary_search_by_key(&block, |r| r.block)
    }
}

impl<const N: usize> Default for BlockOwners<N> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const B: u64 = BLOCK_SIZE;

    #[test]
    fn records_and_overrides_owners() {
        let mut t = BlockOwners::<4>::new();
        assert!(t.is_empty() && t.owner_of(5 * B).is_none());
        assert!(t.set(4 * B, 2, 3));
        assert_eq!(
            (t.owner_of(4 * B), t.owner_of(5 * B + 4095), t.owner_of(6 * B)),
            (Some(3), Some(3), None)
        );
        // Given on: the row changes, no new row.
        assert!(t.set(5 * B, 1, 1));
        assert_eq!((t.len(), t.owner_of(5 * B + 8)), (2, Some(1)));
        assert_eq!(t.iter().collect::<std::vec::Vec<_>>(), [(4 * B, 3), (5 * B, 1)]);
    }

    #[test]
    fn all_or_nothing_when_full_or_unaligned() {
        let mut t = BlockOwners::<3>::new();
        assert!(t.set(0, 2, 1));
        assert!(!t.has_room(10 * B, 2));
        assert!(!t.set(10 * B, 2, 2), "two new rows do not fit in one");
        assert_eq!(t.len(), 2);
        assert!(t.set(B, 1, 2), "an existing row needs no room");
        assert!(!t.set(B + 4096, 1, 2), "unaligned");
        assert!(t.set(7 * B, 1, 0));
        assert_eq!(t.len(), 3);
    }
}
