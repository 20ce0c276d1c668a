//! Histogram (Phoenix): how many pixels of an image have each value in each of the red,
//! green and blue channels. The input is the pixels' bytes, three per pixel (blue, green,
//! red, as a BMP stores them); key `channel × 256 + value`, counts combined in map.

use super::Lcg;
use crate::job::{Emit, Groups, Job};
use alloc::vec::Vec;
use core::ops::Range;

/// The histogram of `pixels` (three bytes each: blue, green, red).
pub struct Hist<'a> {
    /// The pixel bytes; a trailing partial pixel is ignored.
    pub pixels: &'a [u8],
}

impl Job for Hist<'_> {
    type Key = u32;
    type Value = u64;
    type Out = u64;
    const COMBINES: bool = true;

    fn input_len(&self) -> usize {
        self.pixels.len() / 3 * 3
    }

    fn split_at(&self, at: usize) -> usize {
        at.next_multiple_of(3).min(self.input_len())
    }

    fn map(&self, range: Range<usize>, out: &mut impl Emit<u32, u64>) {
        // Count locally first: 768 counters, then one pair per value seen (Phoenix does
        // the same per task).
        let mut counts = [0u64; 768];
        for px in self.pixels[range].chunks_exact(3) {
            for (channel, &v) in px.iter().enumerate() {
                counts[channel * 256 + v as usize] += 1;
            }
        }
        for (k, &n) in counts.iter().enumerate().filter(|(_, &n)| n > 0) {
            out.emit(k as u32, n);
        }
    }

    fn combine(&self, into: &mut u64, value: u64) {
        *into += value;
    }

    fn reduce(&self, _key: &u32, values: Groups<'_, u64>) -> u64 {
        values.iter().sum()
    }
}

/// `n` pseudo-random pixels (3 bytes each), from seed `seed`.
pub fn image(n: usize, seed: u32) -> Vec<u8> {
    let mut r = Lcg(seed);
    (0..n * 3).map(|_| (r.next_u31() >> 8) as u8).collect()
}
