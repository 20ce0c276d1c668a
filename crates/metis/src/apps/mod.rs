//! The applications: each one small file implementing [`crate::Job`].
//!
//! | app | job | from |
//! | --- | --- | --- |
//! | [`wri`] | inverted index: word → its positions | Corey §8.5.1 |
//! | [`wc`] | word count, combined in map, by count descending | Metis |
//! | [`hist`] | histogram of a bitmap's red, green and blue bytes | Phoenix |
//! | [`linreg`] | linear regression of (x, y) byte pairs | Phoenix |
//! | [`strmatch`] | string match: how often each of some keys occurs | Phoenix |
//! | [`matmul`] | matrix multiply, a row of the product per key | Phoenix |
//! | [`kmeans`] | k-means clustering, one job per iteration | Phoenix |

pub mod hist;
pub mod kmeans;
pub mod linreg;
pub mod matmul;
pub mod strmatch;
pub mod wc;
pub mod wri;

/// Deterministic test and benchmark data: the C library's LCG (as [`crate::text::wrmem`]),
/// 31 bits per step.
pub struct Lcg(pub u32);

impl Lcg {
    /// The next 31-bit number.
    pub fn next_u31(&mut self) -> u32 {
        self.0 = self.0.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        self.0 & 0x7fff_ffff
    }
}
