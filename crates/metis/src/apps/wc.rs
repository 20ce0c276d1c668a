//! `wc`, word count (Metis): map emits `(word, 1)` and the combiner adds counts in the
//! intermediate table as they arrive, so a cell holds one count per word; reduce adds the
//! rows' counts. The output is sorted by count, descending, then by word.

use crate::job::{Emit, Groups, Job};
use crate::text::{self, Word};
use core::cmp::Ordering;
use core::ops::Range;

/// Word count of `input`.
pub struct Wc<'a> {
    /// The text.
    pub input: &'a [u8],
}

impl<'a> Job for Wc<'a> {
    type Key = Word<'a>;
    type Value = u64;
    type Out = u64;
    const COMBINES: bool = true;

    fn input_len(&self) -> usize {
        self.input.len()
    }

    fn split_at(&self, at: usize) -> usize {
        text::split_at(self.input, at)
    }

    fn map(&self, range: Range<usize>, out: &mut impl Emit<Word<'a>, u64>) {
        text::words(self.input, range, |_, w| out.emit(Word::new(w), 1));
    }

    fn combine(&self, into: &mut u64, value: u64) {
        *into += value;
    }

    fn reduce(&self, _key: &Word<'a>, values: Groups<'_, u64>) -> u64 {
        values.iter().sum()
    }

    fn order(&self, a: &(Word<'a>, u64), b: &(Word<'a>, u64)) -> Ordering {
        b.1.cmp(&a.1)
    }
}

/// The output's checksum.
pub fn checksum(pairs: &[(Word<'_>, u64)]) -> u64 {
    text::checksum(pairs.iter().map(|(k, n)| (k.bytes(), *n)))
}
