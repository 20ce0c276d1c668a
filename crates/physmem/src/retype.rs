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
        self.has_room_beside(first, count, 0)
    }

    /// Whether [`set`](Self::set) of `count` blocks from `first` would fit with `kept` rows
    /// kept free besides (for changes voted on and not yet made).
    pub fn has_room_beside(&self, first: u64, count: u64, kept: u64) -> bool {
        let new = (0..count).filter(|b| self.row(first + b * BLOCK_SIZE).is_err()).count();
        (self.len + new) as u64 + kept <= N as u64
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

/// Blocks a retype gave this core whose frames are still on their way from the giver
/// (step 4 of a retype: the giver sends them one by one, the way every frame goes home).
/// It records which have arrived (mark a frame once it is on the free list), so that if the
/// giver faults before it has sent them all, the receiver can free the rest itself without
/// freeing any frame twice: one that arrived may be in use again by then.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InTransit<const N: usize> {
    blocks: [Transit; N],
    len: usize,
}

/// One block on its way: who sends it, and one bit per frame that has arrived.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Transit {
    block: u64,
    from: usize,
    arrived: u64,
}

/// Every frame of a block: [`BLOCK_FRAMES`] bits.
const ALL_ARRIVED: u64 = u64::MAX >> (64 - BLOCK_FRAMES);

/// What a frame handed to [`InTransit::arrive`] was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// Not of a block on its way here: an ordinary frame coming home.
    NotInTransit,
    /// The first time this frame came: free it here.
    Arrived,
    /// It came before (it arrived, was used and was freed again since).
    Again,
}

impl<const N: usize> InTransit<N> {
    /// Nothing on its way (`const`, for a kernel's static per-core tables).
    pub const fn new() -> Self {
        InTransit { blocks: [Transit { block: 0, from: 0, arrived: 0 }; N], len: 0 }
    }

    /// Whether `count` more blocks fit (a receiver votes No on a retype otherwise).
    pub fn has_room(&self, count: u64) -> bool {
        self.len as u64 + count <= N as u64
    }

    /// Core `from` will send the frames of `count` blocks from `first` (aligned): all or
    /// nothing, `false` if they do not fit, `first` is not aligned, or one is already
    /// expected.
    pub fn expect(&mut self, first: u64, count: u64, from: usize) -> bool {
        if !first.is_multiple_of(BLOCK_SIZE) || !self.has_room(count) {
            return false;
        }
        if (0..count).any(|b| self.find(first + b * BLOCK_SIZE).is_some()) {
            return false;
        }
        for b in 0..count {
            self.blocks[self.len] = Transit { block: first + b * BLOCK_SIZE, from, arrived: 0 };
            self.len += 1;
        }
        true
    }

    /// Frame `addr` came: marks it arrived. A block whose frames have all arrived leaves
    /// the table.
    pub fn arrive(&mut self, addr: u64) -> Arrival {
        let Some(i) = self.find(addr & !(BLOCK_SIZE - 1)) else {
            return Arrival::NotInTransit;
        };
        let bit = 1u64 << ((addr % BLOCK_SIZE) / crate::FRAME_SIZE);
        let t = &mut self.blocks[i];
        if t.arrived & bit != 0 {
            return Arrival::Again;
        }
        t.arrived |= bit;
        if t.arrived == ALL_ARRIVED {
            self.remove(i);
        }
        Arrival::Arrived
    }

    /// Core `from` will send nothing more (it faulted, and every message it sent has been
    /// read): each frame of its blocks that never arrived is handed to `lost`, to be freed
    /// here, and its blocks leave the table. Returns how many frames that was.
    pub fn give_up_on(&mut self, from: usize, mut lost: impl FnMut(u64)) -> u64 {
        let mut n = 0;
        let mut i = 0;
        while i < self.len {
            let t = self.blocks[i];
            if t.from != from {
                i += 1;
                continue;
            }
            for f in 0..BLOCK_FRAMES {
                if t.arrived & (1 << f) == 0 {
                    lost(t.block + f * crate::FRAME_SIZE);
                    n += 1;
                }
            }
            self.remove(i);
        }
        n
    }

    /// The cores with blocks on their way here, each once per block (for a check of
    /// whether they still live).
    pub fn senders(&self) -> impl Iterator<Item = usize> + '_ {
        self.blocks[..self.len].iter().map(|t| t.from)
    }

    /// Blocks on their way.
    pub const fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is on its way.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn find(&self, block: u64) -> Option<usize> {
        self.blocks[..self.len].iter().position(|t| t.block == block)
    }

    fn remove(&mut self, i: usize) {
        self.blocks.copy_within(i + 1..self.len, i);
        self.len -= 1;
    }
}

impl<const N: usize> Default for InTransit<N> {
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
        assert!(t.has_room(0, 2) && !t.has_room_beside(0, 2, 2), "two rows kept fill it");
        assert!(t.has_room_beside(0, 2, 1));
        assert!(!t.set(10 * B, 2, 2), "two new rows do not fit in one");
        assert_eq!(t.len(), 2);
        assert!(t.set(B, 1, 2), "an existing row needs no room");
        assert!(!t.set(B + 4096, 1, 2), "unaligned");
        assert!(t.set(7 * B, 1, 0));
        assert_eq!(t.len(), 3);
    }

    #[test]
    fn frames_arrive_once_and_a_full_block_leaves() {
        let mut t = InTransit::<4>::new();
        assert!(t.expect(2 * B, 2, 1));
        assert!(!t.expect(3 * B, 1, 2), "already expected");
        assert!(!t.expect(5 * B + 4096, 1, 2), "unaligned");
        assert_eq!(t.arrive(9 * B), Arrival::NotInTransit);
        assert_eq!(t.arrive(2 * B + 4096), Arrival::Arrived);
        assert_eq!(t.arrive(2 * B + 4096), Arrival::Again);
        for f in 0..BLOCK_FRAMES {
            let _ = t.arrive(3 * B + f * crate::FRAME_SIZE);
        }
        assert_eq!((t.len(), t.senders().collect::<std::vec::Vec<_>>()), (1, std::vec![1]));
        assert_eq!(t.arrive(3 * B), Arrival::NotInTransit, "a whole block left the table");
    }

    #[test]
    fn giving_up_hands_over_exactly_the_frames_that_never_came() {
        let mut t = InTransit::<4>::new();
        assert!(t.expect(0, 1, 1) && t.expect(4 * B, 1, 2));
        for f in (0..BLOCK_FRAMES).step_by(2) {
            assert_eq!(t.arrive(f * crate::FRAME_SIZE), Arrival::Arrived);
        }
        let mut lost = std::vec::Vec::new();
        assert_eq!(t.give_up_on(1, |pa| lost.push(pa)), BLOCK_FRAMES / 2);
        let odd: std::vec::Vec<u64> =
            (0..BLOCK_FRAMES).filter(|f| f % 2 == 1).map(|f| f * crate::FRAME_SIZE).collect();
        assert_eq!(lost, odd);
        assert_eq!(t.len(), 1, "core 2's block stays");
        assert_eq!(t.give_up_on(1, |_| panic!("nothing left from core 1")), 0);
        assert!(!t.has_room(4) && t.has_room(3));
    }
}
