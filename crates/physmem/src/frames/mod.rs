//! One core's free-frame allocator (Corey §4.1: a per-core free page list, the "memid" a
//! caller names when it allocates). A bitmap over the core's share, one bit per frame
//! (1 = free). Only the owning core touches it, so it needs no atomics and no locks; frames
//! freed on other cores come back through the owner's return stack and are freed here by
//! the owner. The bitmap makes a double free visible, which is how the kernel's tests check
//! that no frame is ever handed out twice.

use core::fmt;

use crate::range::PhysRange;
use crate::retype::{BLOCK_FRAMES, BLOCK_SIZE};
use crate::{FRAME_SIZE, MAX_RANGES_PER_CORE};

/// Most blocks from outside its boot share one core can hold at once (retype, Multikernel
/// §4.8): 64 blocks of 256 KiB, 16 MiB. A retype that would exceed it is refused by the
/// receiving core's vote.
pub const MAX_ADOPTED_BLOCKS: usize = 64;

/// Why freeing or marking a frame failed. The bitmap is unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// The address is not at the start of a frame.
    Unaligned,
    /// The frame is not in this core's share.
    NotOwned,
    /// The frame is already free.
    DoubleFree,
    /// `mark_used` on a frame that is already in use.
    NotFree,
    /// A block to adopt is this core's already, or there is no room for another.
    CannotAdopt,
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FrameError::Unaligned => "address is not frame-aligned",
            FrameError::NotOwned => "frame is not owned by this core",
            FrameError::DoubleFree => "frame is already free",
            FrameError::NotFree => "frame is already in use",
            FrameError::CannotAdopt => "block cannot be adopted here",
        })
    }
}

/// Why [`CoreFrames::take_free_blocks_keeping`] took nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TakeError {
    /// Taking the blocks would leave fewer free frames than the reserve.
    Reserve {
        /// Free frames now.
        free: u64,
    },
    /// There is no run of that many contiguous, wholly free blocks.
    NoRun,
}

/// Why [`CoreFrames::new`] refused its ranges or storage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetupError {
    /// More than [`MAX_RANGES_PER_CORE`] non-empty ranges.
    TooManyRanges,
    /// A range does not start and end on frame boundaries.
    Unaligned,
    /// Two ranges overlap.
    Overlap,
    /// The storage is shorter than [`bitmap_words`] says.
    StorageTooSmall {
        /// Words needed.
        needed: usize,
        /// Words given.
        got: usize,
    },
}

impl fmt::Display for SetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SetupError::TooManyRanges => {
                write!(f, "more than {MAX_RANGES_PER_CORE} ranges")
            }
            SetupError::Unaligned => f.write_str("range is not frame-aligned"),
            SetupError::Overlap => f.write_str("ranges overlap"),
            SetupError::StorageTooSmall { needed, got } => {
                write!(f, "bitmap needs {needed} words, got {got}")
            }
        }
    }
}

/// Number of `u64` words of bitmap storage [`CoreFrames::new`] needs for `ranges`.
pub fn bitmap_words(ranges: &[PhysRange]) -> usize {
    let mut frames = 0;
    for r in ranges {
        frames += r.frames();
    }
    frames.div_ceil(64) as usize
}

/// A block of [`BLOCK_FRAMES`] frames from outside the boot share, given to this core by a
/// retype: its address and one word of bitmap (1 = free).
#[derive(Clone, Copy, Debug, Default)]
struct Adopted {
    start: u64,
    bits: u64,
}

/// One core's free frames: a bitmap over its ranges, with the ranges' frames numbered
/// consecutively (range 0's frames first), one bit each, 1 = free; plus the blocks other
/// cores gave it since boot (retype), one bitmap word each.
///
/// Retype moves whole blocks ([`BLOCK_SIZE`], aligned): the giver takes a run of wholly
/// free blocks out of its bitmap ([`take_free_blocks`](Self::take_free_blocks)) and, once
/// every core has agreed, forgets them ([`disown_block`](Self::disown_block)); the
/// receiver adopts them with every frame in use ([`adopt_block`](Self::adopt_block)) and
/// its frames arrive one by one through [`free`](Self::free), the path every frame takes
/// home. A block given back to a core whose boot share holds it needs no adoption entry.
pub struct CoreFrames<'a> {
    core: usize,
    /// The ranges, sorted by address, non-empty and frame-aligned.
    ranges: [PhysRange; MAX_RANGES_PER_CORE],
    /// Bit number of each range's first frame.
    first_bit: [u64; MAX_RANGES_PER_CORE],
    nranges: usize,
    /// Exactly `bitmap_words` long; bits past the last frame stay 0 (never free).
    bits: &'a mut [u64],
    total: u64,
    free: u64,
    /// Word where the next search starts (next-fit): just-freed frames are not reused at
    /// once, and a scan does not restart from the densely used beginning each time.
    hint: usize,
    /// Blocks from outside the boot share, sorted by address.
    adopted: [Adopted; MAX_ADOPTED_BLOCKS],
    nadopted: usize,
    /// Frames of the boot share given away (retype): counted out of `total`.
    given: u64,
}

impl<'a> CoreFrames<'a> {
    /// The allocator of `core` over `ranges` (any order), every frame free, with its
    /// bitmap in `storage` (at least [`bitmap_words`]`(ranges)` words). Mark the frames
    /// already in use (e.g. those holding `storage` itself) with
    /// [`mark_used`](Self::mark_used).
    pub fn new(
        core: usize,
        ranges: &[PhysRange],
        storage: &'a mut [u64],
    ) -> Result<Self, SetupError> {
        let mut sorted = [PhysRange::default(); MAX_RANGES_PER_CORE];
        let mut n = 0;
        for &r in ranges {
            if r.is_empty() {
                continue;
            }
            if !r.start.is_multiple_of(FRAME_SIZE) || !r.end.is_multiple_of(FRAME_SIZE) {
                return Err(SetupError::Unaligned);
            }
            if n == MAX_RANGES_PER_CORE {
                return Err(SetupError::TooManyRanges);
            }
            // Insertion sort: at most MAX_RANGES_PER_CORE ranges, once per boot.
            let mut k = n;
            while k > 0 && sorted[k - 1].start > r.start {
                sorted[k] = sorted[k - 1];
                k -= 1;
            }
            sorted[k] = r;
            n += 1;
        }
        let mut first_bit = [0; MAX_RANGES_PER_CORE];
        let mut total = 0;
        for k in 0..n {
            if k > 0 && sorted[k - 1].end > sorted[k].start {
                return Err(SetupError::Overlap);
            }
            first_bit[k] = total;
            total += sorted[k].frames();
        }
        let needed = bitmap_words(&sorted[..n]);
        if storage.len() < needed {
            return Err(SetupError::StorageTooSmall { needed, got: storage.len() });
        }
        let bits = &mut storage[..needed];
        bits.fill(u64::MAX);
        if total % 64 != 0 {
            bits[needed - 1] = (1 << (total % 64)) - 1;
        }
        Ok(CoreFrames {
            core,
            ranges: sorted,
            first_bit,
            nranges: n,
            bits,
            total,
            free: total,
            hint: 0,
            adopted: [Adopted::default(); MAX_ADOPTED_BLOCKS],
            nadopted: 0,
            given: 0,
        })
    }

    /// Takes a free frame and returns its address, or `None` if the core has none left.
    /// Next-fit: scans a word (64 frames) at a time from where the last search stopped.
    pub fn alloc(&mut self) -> Option<u64> {
        if self.free == 0 {
            return None;
        }
        let words = self.bits.len();
        let mut w = self.hint;
        for _ in 0..words {
            let word = self.bits[w];
            if word != 0 {
                let b = word.trailing_zeros() as u64;
                self.bits[w] = word & !(1 << b);
                self.free -= 1;
                self.hint = w;
                return Some(self.addr_of(w as u64 * 64 + b));
            }
            w += 1;
            if w == words {
                w = 0;
            }
        }
        for a in &mut self.adopted[..self.nadopted] {
            if a.bits != 0 {
                let b = a.bits.trailing_zeros() as u64;
                a.bits &= !(1 << b);
                self.free -= 1;
                return Some(a.start + b * FRAME_SIZE);
            }
        }
        None // unreachable while `free` counts the set bits
    }

    /// Returns the frame at `addr` to the free bitmap.
    pub fn free(&mut self, addr: u64) -> Result<(), FrameError> {
        let (word, mask) = self.locate(addr)?;
        let word = self.word_mut(word);
        if *word & mask != 0 {
            return Err(FrameError::DoubleFree);
        }
        *word |= mask;
        self.free += 1;
        Ok(())
    }

    /// Takes the free frame at `addr` out of the allocator without allocating it, e.g. for
    /// the frames holding this bitmap.
    pub fn mark_used(&mut self, addr: u64) -> Result<(), FrameError> {
        let (word, mask) = self.locate(addr)?;
        let word = self.word_mut(word);
        if *word & mask == 0 {
            return Err(FrameError::NotFree);
        }
        *word &= !mask;
        self.free -= 1;
        Ok(())
    }

    /// Whether the frame holding `addr` is this core's and free.
    pub fn is_free(&self, addr: u64) -> bool {
        match self.locate(addr & !(FRAME_SIZE - 1)) {
            Ok((Word::Boot(w), mask)) => self.bits[w] & mask != 0,
            Ok((Word::Adopted(i), mask)) => self.adopted[i].bits & mask != 0,
            Err(_) => false,
        }
    }

    /// Whether the frame holding `addr` is in this core's share (its boot share, given
    /// away or not, or a block it adopted).
    pub fn owns(&self, addr: u64) -> bool {
        self.locate(addr & !(FRAME_SIZE - 1)).is_ok()
    }

    /// Retype, the giver's first step: takes a run of `count` contiguous, aligned blocks
    /// whose frames are all free out of the allocator (as if allocated) and returns the
    /// first block's address; `None` if there is no such run. Searched from the top of
    /// memory down, away from where allocation starts.
    pub fn take_free_blocks(&mut self, count: u64) -> Option<u64> {
        if count == 0 || count * BLOCK_FRAMES > self.free {
            return None;
        }
        let start = self.find_free_run(count)?;
        for f in 0..count * BLOCK_FRAMES {
            // Cannot fail: every frame of the run was just seen free.
            let _ = self.mark_used(start + f * FRAME_SIZE);
        }
        Some(start)
    }

    /// [`take_free_blocks`](Self::take_free_blocks), unless fewer than `reserve` frames would
    /// stay free (a giver keeps enough to go on working: the kernel decides how many).
    pub fn take_free_blocks_keeping(&mut self, count: u64, reserve: u64) -> Result<u64, TakeError> {
        let left = self.free.checked_sub(count.saturating_mul(BLOCK_FRAMES));
        if left.is_none_or(|left| left < reserve) {
            return Err(TakeError::Reserve { free: self.free });
        }
        self.take_free_blocks(count).ok_or(TakeError::NoRun)
    }

    /// [`take_free_blocks`](Self::take_free_blocks) of the run at `start` (aligned): all or
    /// nothing, `NotFree` if a frame of it is in use, `NotOwned` if it is not all this
    /// core's.
    pub fn take_blocks_at(&mut self, start: u64, count: u64) -> Result<(), FrameError> {
        if !start.is_multiple_of(BLOCK_SIZE) {
            return Err(FrameError::Unaligned);
        }
        let frames = count.checked_mul(BLOCK_FRAMES).ok_or(FrameError::NotOwned)?;
        for f in 0..frames {
            let addr = start.checked_add(f * FRAME_SIZE).ok_or(FrameError::NotOwned)?;
            self.locate(addr)?;
            if !self.is_free(addr) {
                return Err(FrameError::NotFree);
            }
        }
        for f in 0..frames {
            self.mark_used(start + f * FRAME_SIZE)?;
        }
        Ok(())
    }

    /// Undoes [`take_free_blocks`](Self::take_free_blocks) (the retype aborted).
    pub fn return_blocks(&mut self, start: u64, count: u64) -> Result<(), FrameError> {
        for f in 0..count * BLOCK_FRAMES {
            self.free(start + f * FRAME_SIZE)?;
        }
        Ok(())
    }

    /// Whether `count` more blocks from outside the boot share would fit.
    pub fn can_adopt(&self, count: u64) -> bool {
        count <= self.adoption_room()
    }

    /// How many more blocks from outside the boot share fit.
    pub fn adoption_room(&self) -> u64 {
        (MAX_ADOPTED_BLOCKS - self.nadopted) as u64
    }

    /// Whether [`adopt_block`](Self::adopt_block) of `start` would succeed now (what it
    /// would fail with): a retype's receiver votes by this, so a retype it could not apply
    /// aborts instead of committing. Room for the block is [`can_adopt`](Self::can_adopt)'s
    /// to say, counting the retypes already prepared.
    pub fn check_adopt(&self, start: u64) -> Result<(), FrameError> {
        if !start.is_multiple_of(BLOCK_SIZE) {
            return Err(FrameError::Unaligned);
        }
        if let Some(first) = self.bit_of(start) {
            if (0..BLOCK_FRAMES).any(|f| self.bit(first + f)) {
                return Err(FrameError::CannotAdopt); // ours and not given away
            }
            return Ok(());
        }
        let i = self.adopted[..self.nadopted].partition_point(|a| a.start < start);
        if self.nadopted == MAX_ADOPTED_BLOCKS
            || (i < self.nadopted && self.adopted[i].start == start)
        {
            return Err(FrameError::CannotAdopt);
        }
        Ok(())
    }

    /// Retype, the receiver's step once every core agreed: block `start` is this core's
    /// from now on, every frame in use until it is freed here. A block of the boot share
    /// (given away before, now given back) needs no entry.
    pub fn adopt_block(&mut self, start: u64) -> Result<(), FrameError> {
        self.check_adopt(start)?;
        if self.bit_of(start).is_some() {
            self.given -= BLOCK_FRAMES.min(self.given);
            self.total += BLOCK_FRAMES;
            return Ok(());
        }
        let i = self.adopted[..self.nadopted].partition_point(|a| a.start < start);
        self.adopted.copy_within(i..self.nadopted, i + 1);
        self.adopted[i] = Adopted { start, bits: 0 };
        self.nadopted += 1;
        self.total += BLOCK_FRAMES;
        Ok(())
    }

    /// Whether [`disown_block`](Self::disown_block) of `start` would succeed now (what it
    /// would fail with): the block is this core's, aligned, and no frame of it is free
    /// (the giver took them all). A retype's giver votes by this.
    pub fn check_disown(&self, start: u64) -> Result<(), FrameError> {
        if !start.is_multiple_of(BLOCK_SIZE) {
            return Err(FrameError::Unaligned);
        }
        match self.locate(start)?.0 {
            Word::Boot(_) => {
                let first = self.bit_of(start).ok_or(FrameError::NotOwned)?;
                if (0..BLOCK_FRAMES).any(|f| self.bit(first + f)) {
                    return Err(FrameError::NotFree);
                }
            }
            Word::Adopted(i) if self.adopted[i].bits != 0 => return Err(FrameError::NotFree),
            Word::Adopted(_) => {}
        }
        Ok(())
    }

    /// Retype, the giver's step once every core agreed: block `start` (taken with
    /// [`take_free_blocks`](Self::take_free_blocks)) is no longer this core's.
    pub fn disown_block(&mut self, start: u64) -> Result<(), FrameError> {
        self.check_disown(start)?;
        match self.locate(start)?.0 {
            Word::Boot(_) => self.given += BLOCK_FRAMES,
            Word::Adopted(i) => {
                self.adopted.copy_within(i + 1..self.nadopted, i);
                self.nadopted -= 1;
            }
        }
        self.total -= BLOCK_FRAMES;
        Ok(())
    }

    /// The blocks adopted from outside the boot share, in address order.
    pub fn adopted_blocks(&self) -> impl Iterator<Item = u64> + '_ {
        self.adopted[..self.nadopted].iter().map(|a| a.start)
    }

    /// Number of free frames.
    pub fn free_count(&self) -> u64 {
        self.free
    }

    /// Number of frames in the share (the boot share less what was given away, plus the
    /// blocks adopted).
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The core this allocator belongs to.
    pub fn core(&self) -> usize {
        self.core
    }

    /// The share's ranges, in address order.
    pub fn ranges(&self) -> &[PhysRange] {
        &self.ranges[..self.nranges]
    }

    /// The bit of the frame holding `addr`, if this core owns it (binary search).
    fn bit_of(&self, addr: u64) -> Option<u64> {
        let ranges = self.ranges();
        let k = ranges.partition_point(|r| r.end <= addr);
        if k < ranges.len() && ranges[k].contains(addr) {
            Some(self.first_bit[k] + (addr - ranges[k].start) / FRAME_SIZE)
        } else {
            None
        }
    }

    /// The address of the frame with bit number `bit`.
    fn addr_of(&self, bit: u64) -> u64 {
        let k = self.first_bit[..self.nranges].partition_point(|&b| b <= bit) - 1;
        self.ranges[k].start + (bit - self.first_bit[k]) * FRAME_SIZE
    }

    /// The bitmap word and mask of the frame starting at `addr`.
    fn locate(&self, addr: u64) -> Result<(Word, u64), FrameError> {
        if !addr.is_multiple_of(FRAME_SIZE) {
            return Err(FrameError::Unaligned);
        }
        if let Some(bit) = self.bit_of(addr) {
            return Ok((Word::Boot((bit / 64) as usize), 1 << (bit % 64)));
        }
        let block = addr & !(BLOCK_SIZE - 1);
        let adopted = &self.adopted[..self.nadopted];
        let i = adopted.partition_point(|a| a.start < block);
        if i < adopted.len() && adopted[i].start == block {
            return Ok((Word::Adopted(i), 1 << ((addr - block) / FRAME_SIZE)));
        }
        Err(FrameError::NotOwned)
    }

    fn word_mut(&mut self, word: Word) -> &mut u64 {
        match word {
            Word::Boot(w) => &mut self.bits[w],
            Word::Adopted(i) => &mut self.adopted[i].bits,
        }
    }

    /// Whether boot bit `bit` is set (the frame is free).
    fn bit(&self, bit: u64) -> bool {
        self.bits[(bit / 64) as usize] & (1 << (bit % 64)) != 0
    }

    /// The highest run of `count` contiguous, aligned blocks whose frames are all free:
    /// inside one boot range, or among the adopted blocks.
    fn find_free_run(&self, count: u64) -> Option<u64> {
        for k in (0..self.nranges).rev() {
            let r = self.ranges[k];
            let lowest = r.start.next_multiple_of(BLOCK_SIZE);
            let mut block = r.end & !(BLOCK_SIZE - 1);
            let mut run = 0;
            while block >= lowest + BLOCK_SIZE {
                block -= BLOCK_SIZE;
                let first = self.first_bit[k] + (block - r.start) / FRAME_SIZE;
                run = if (0..BLOCK_FRAMES).all(|f| self.bit(first + f)) { run + 1 } else { 0 };
                if run == count {
                    return Some(block);
                }
            }
        }
        let adopted = &self.adopted[..self.nadopted];
        let mut run = 0;
        for i in (0..adopted.len()).rev() {
            let contiguous =
                i + 1 < adopted.len() && adopted[i].start + BLOCK_SIZE == adopted[i + 1].start;
            if adopted[i].bits != u64::MAX {
                run = 0;
                continue;
            }
            run = if run > 0 && contiguous { run + 1 } else { 1 };
            if run == count {
                return Some(adopted[i].start);
            }
        }
        None
    }
}

/// Where a frame's bit is: a word of the boot bitmap, or an adopted block's word.
#[derive(Clone, Copy)]
enum Word {
    Boot(usize),
    Adopted(usize),
}

impl fmt::Debug for CoreFrames<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CoreFrames")
            .field("core", &self.core)
            .field("ranges", &self.ranges())
            .field("free", &self.free)
            .field("total", &self.total)
            .finish()
    }
}

#[cfg(test)]
mod tests;
