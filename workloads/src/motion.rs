//! Block-based motion estimation over generated frames: the uneven parallel work of McRT's
//! scheduler experiments (§3.2.3, Figures 7–8: XviD's P-frame encoding). Each 16×16 block
//! of the current frame searches a window of the reference frame for the offset with the
//! least sum of absolute differences; the window's radius varies from block to block (as
//! an encoder's early exits make real blocks' costs vary), so blocks cost from 1 to 81
//! units of work and a static split of blocks over processors is unbalanced.

use alloc::vec::Vec;

/// Side of a block, pixels.
pub const BLOCK: usize = 16;

/// Two frames: a textured reference and the current frame, which is the reference moved
/// by a per-region motion.
pub struct Frames {
    /// Width and height in pixels (multiples of [`BLOCK`]).
    pub width: usize,
    /// Height in pixels.
    pub height: usize,
    reference: Vec<u8>,
    current: Vec<u8>,
}

/// A generated texture: cheap, deterministic, with detail at several scales.
fn texture(x: usize, y: usize) -> u8 {
    let h = (x as u32).wrapping_mul(0x9E37_79B1) ^ (y as u32).wrapping_mul(0x85EB_CA77);
    let smooth = ((x / 7 + y / 5) % 64) as u32 * 3;
    ((h >> 27) + smooth) as u8
}

impl Frames {
    /// Frames of `bw` × `bh` blocks.
    pub fn new(bw: usize, bh: usize) -> Frames {
        let (width, height) = (bw * BLOCK, bh * BLOCK);
        let mut reference = Vec::with_capacity(width * height);
        let mut current = Vec::with_capacity(width * height);
        for y in 0..height {
            for x in 0..width {
                reference.push(texture(x, y));
            }
        }
        for y in 0..height {
            for x in 0..width {
                // Each region of 4×4 blocks moves by its own small vector.
                let (rx, ry) = (x / (4 * BLOCK), y / (4 * BLOCK));
                let dx = (rx * 3 + ry) % 5;
                let dy = (rx + ry * 2) % 5;
                current.push(texture(x + dx, y + dy));
            }
        }
        Frames { width, height, reference, current }
    }

    /// Blocks in the frame.
    pub fn blocks(&self) -> usize {
        (self.width / BLOCK) * (self.height / BLOCK)
    }

    /// The search radius of block `b`: 0 to 4 pixels, unevenly spread.
    pub fn radius(&self, b: usize) -> usize {
        let h = (b as u32).wrapping_mul(0x2545_F491) >> 28;
        [0, 1, 1, 2, 2, 2, 3, 3, 4, 4, 4, 4, 1, 0, 2, 3][h as usize]
    }

    fn sad(&self, bx: usize, by: usize, dx: isize, dy: isize) -> Option<u32> {
        let (x0, y0) = ((bx * BLOCK) as isize + dx, (by * BLOCK) as isize + dy);
        if x0 < 0 || y0 < 0 || x0 as usize + BLOCK > self.width || y0 as usize + BLOCK > self.height
        {
            return None;
        }
        let mut sum = 0u32;
        for row in 0..BLOCK {
            let c = (by * BLOCK + row) * self.width + bx * BLOCK;
            let r = (y0 as usize + row) * self.width + x0 as usize;
            for col in 0..BLOCK {
                sum +=
                    (self.current[c + col] as i32 - self.reference[r + col] as i32).unsigned_abs();
            }
        }
        Some(sum)
    }

    /// Block `b`'s motion: the best (dx, dy) in its window and its SAD, folded in one word.
    pub fn estimate(&self, b: usize) -> u64 {
        let per_row = self.width / BLOCK;
        let (bx, by) = (b % per_row, b / per_row);
        let r = self.radius(b) as isize;
        let mut best = (u32::MAX, 0isize, 0isize);
        for dy in -r..=r {
            for dx in -r..=r {
                if let Some(s) = self.sad(bx, by, dx, dy) {
                    if s < best.0 {
                        best = (s, dx, dy);
                    }
                }
            }
        }
        ((best.0 as u64) << 16) | (((best.1 + 8) as u64) << 8) | (best.2 + 8) as u64
    }

    /// Every block's estimate folded into one checksum (the serial answer).
    pub fn checksum_serial(&self) -> u64 {
        (0..self.blocks())
            .fold(0u64, |acc, b| acc.wrapping_add(self.estimate(b).wrapping_mul(b as u64 + 1)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_that_did_not_move_finds_zero_motion() {
        let f = Frames::new(8, 8);
        // Region (0, 0) moves by (0, 0): its blocks match exactly at offset 0.
        assert_eq!(f.estimate(0) >> 16, 0);
        assert_eq!(f.estimate(0) & 0xffff, (8 << 8) | 8);
    }

    #[test]
    fn blocks_cost_unevenly() {
        let f = Frames::new(16, 16);
        let radii: Vec<usize> = (0..f.blocks()).map(|b| f.radius(b)).collect();
        assert!(radii.contains(&0) && radii.contains(&4));
    }
}
