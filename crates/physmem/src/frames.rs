//! One core's free-frame allocator (Corey §4.1: a per-core free page list, the "memid" a
//! caller names when it allocates). A bitmap over the core's share, one bit per frame
//! (1 = free). Only the owning core touches it, so it needs no atomics and no locks; frames
//! freed on other cores come back through the owner's return stack and are freed here by
//! the owner. The bitmap makes a double free visible, which is how the kernel's tests check
//! that no frame is ever handed out twice.

use core::fmt;

use crate::range::PhysRange;
use crate::{FRAME_SIZE, MAX_RANGES_PER_CORE};

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
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FrameError::Unaligned => "address is not frame-aligned",
            FrameError::NotOwned => "frame is not owned by this core",
            FrameError::DoubleFree => "frame is already free",
            FrameError::NotFree => "frame is already in use",
        })
    }
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

/// One core's free frames: a bitmap over its ranges, with the ranges' frames numbered
/// consecutively (range 0's frames first), one bit each, 1 = free.
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
        None // unreachable while `free` counts the set bits
    }

    /// Returns the frame at `addr` to the free bitmap.
    pub fn free(&mut self, addr: u64) -> Result<(), FrameError> {
        let (w, mask) = self.locate(addr)?;
        if self.bits[w] & mask != 0 {
            return Err(FrameError::DoubleFree);
        }
        self.bits[w] |= mask;
        self.free += 1;
        Ok(())
    }

    /// Takes the free frame at `addr` out of the allocator without allocating it, e.g. for
    /// the frames holding this bitmap.
    pub fn mark_used(&mut self, addr: u64) -> Result<(), FrameError> {
        let (w, mask) = self.locate(addr)?;
        if self.bits[w] & mask == 0 {
            return Err(FrameError::NotFree);
        }
        self.bits[w] &= !mask;
        self.free -= 1;
        Ok(())
    }

    /// Whether the frame holding `addr` is this core's and free.
    pub fn is_free(&self, addr: u64) -> bool {
        match self.bit_of(addr) {
            Some(bit) => self.bits[(bit / 64) as usize] & (1 << (bit % 64)) != 0,
            None => false,
        }
    }

    /// Whether the frame holding `addr` is in this core's share.
    pub fn owns(&self, addr: u64) -> bool {
        self.bit_of(addr).is_some()
    }

    /// Number of free frames.
    pub fn free_count(&self) -> u64 {
        self.free
    }

    /// Number of frames in the share.
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
    fn locate(&self, addr: u64) -> Result<(usize, u64), FrameError> {
        if !addr.is_multiple_of(FRAME_SIZE) {
            return Err(FrameError::Unaligned);
        }
        let bit = self.bit_of(addr).ok_or(FrameError::NotOwned)?;
        Ok(((bit / 64) as usize, 1 << (bit % 64)))
    }
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
mod tests {
    use super::*;
    use std::vec;
    use std::vec::Vec;

    const K: u64 = FRAME_SIZE;

    fn r(a: u64, b: u64) -> PhysRange {
        PhysRange::new(a * K, b * K)
    }

    #[test]
    fn allocates_every_frame_once_then_runs_out() {
        // 70 frames in two ranges given out of order: crosses a word and a range boundary.
        let ranges = [r(200, 210), r(100, 160)];
        let mut storage = vec![0; bitmap_words(&ranges)];
        assert_eq!(storage.len(), 2);
        let mut frames = CoreFrames::new(3, &ranges, &mut storage).unwrap();
        assert_eq!((frames.core(), frames.total(), frames.free_count()), (3, 70, 70));
        let mut got = Vec::new();
        while let Some(a) = frames.alloc() {
            assert!(frames.owns(a) && !frames.is_free(a));
            got.push(a / K);
        }
        let want: Vec<u64> = (100..160).chain(200..210).collect();
        assert_eq!(got, want);
        assert_eq!(frames.free_count(), 0);
        frames.free(150 * K).unwrap();
        assert_eq!(frames.alloc(), Some(150 * K));
    }

    #[test]
    fn free_and_mark_errors() {
        let ranges = [r(1, 3)];
        let mut storage = [0; 1];
        let mut frames = CoreFrames::new(0, &ranges, &mut storage).unwrap();
        assert_eq!(frames.free(K), Err(FrameError::DoubleFree));
        assert_eq!(frames.free(K + 8), Err(FrameError::Unaligned));
        assert_eq!(frames.free(3 * K), Err(FrameError::NotOwned));
        assert_eq!(frames.free(0), Err(FrameError::NotOwned));
        frames.mark_used(2 * K).unwrap();
        assert_eq!(frames.mark_used(2 * K), Err(FrameError::NotFree));
        assert!(!frames.is_free(2 * K + 5) && frames.is_free(K + 5));
        assert_eq!(frames.alloc(), Some(K));
        assert_eq!(frames.alloc(), None);
        frames.free(2 * K).unwrap();
        assert_eq!(frames.free(2 * K), Err(FrameError::DoubleFree));
        assert_eq!(frames.free_count(), 1);
    }

    #[test]
    fn next_fit_moves_on() {
        let ranges = [r(0, 256)];
        let mut storage = [0; 4];
        let mut frames = CoreFrames::new(0, &ranges, &mut storage).unwrap();
        for _ in 0..130 {
            frames.alloc().unwrap();
        }
        frames.free(0).unwrap();
        // The hint is in word 2, so frame 130 comes before the freed frame 0.
        assert_eq!(frames.alloc(), Some(130 * K));
    }

    #[test]
    fn setup_errors() {
        let mut storage = [0; 1];
        assert_eq!(
            CoreFrames::new(0, &[r(0, 65)], &mut storage).err(),
            Some(SetupError::StorageTooSmall { needed: 2, got: 1 })
        );
        let unaligned = [PhysRange::new(1, K)];
        assert_eq!(CoreFrames::new(0, &unaligned, &mut storage).err(), Some(SetupError::Unaligned));
        assert_eq!(
            CoreFrames::new(0, &[r(0, 4), r(3, 5)], &mut storage).err(),
            Some(SetupError::Overlap)
        );
        let many: Vec<_> = (0..=MAX_RANGES_PER_CORE as u64).map(|i| r(2 * i, 2 * i + 1)).collect();
        assert_eq!(CoreFrames::new(0, &many, &mut storage).err(), Some(SetupError::TooManyRanges));
        let mut none = CoreFrames::new(0, &[r(4, 4)], &mut []).unwrap();
        assert_eq!((none.total(), none.alloc()), (0, None));
    }
}
