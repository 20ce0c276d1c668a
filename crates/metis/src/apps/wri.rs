//! `wri`, the inverted index of Corey §8.5.1: each word (key) with the positions of all
//! its occurrences, ascending. Map emits `(word, position)`; values are grouped per key
//! ("for pairs with the same word, the indices are grouped as an array"); reduce merges a
//! word's groups (each ascending: `Groups`) into one fresh buffer.

use crate::job::{Emit, Groups, Job};
use crate::text::{self, Word};
use alloc::vec::Vec;
use core::ops::Range;

/// The inverted index of `input`.
pub struct Wri<'a> {
    /// The text.
    pub input: &'a [u8],
}

impl<'a> Job for Wri<'a> {
    type Key = Word<'a>;
    type Value = usize;
    type Out = Vec<usize>;

    fn input_len(&self) -> usize {
        self.input.len()
    }

    fn split_at(&self, at: usize) -> usize {
        text::split_at(self.input, at)
    }

    fn map(&self, range: Range<usize>, out: &mut impl Emit<Word<'a>, usize>) {
        text::words(self.input, range, |pos, w| out.emit(Word::new(w), pos));
    }

    fn reduce(&self, _key: &Word<'a>, values: Groups<'_, usize>) -> Vec<usize> {
        values.merge_sorted()
    }
}

/// The output's checksum: each key with its number of positions and their sum.
pub fn checksum(pairs: &[(Word<'_>, Vec<usize>)]) -> u64 {
    checksum_of(pairs.iter().map(|(k, v)| (k.bytes(), &v[..])))
}

/// The same checksum of `(key bytes, positions)` pairs in output order (for peers).
pub fn checksum_of<'k>(pairs: impl Iterator<Item = (&'k [u8], &'k [usize])>) -> u64 {
    text::checksum(pairs.map(|(k, v)| {
        let sum = v.iter().fold(0u64, |s, &p| s.wrapping_mul(31).wrapping_add(p as u64));
        (k, sum ^ ((v.len() as u64) << 40))
    }))
}
