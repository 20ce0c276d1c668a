//! String match (Phoenix): how often each of a few keys occurs as a word of a text.
//! Phoenix compares each word with every key; so does map, emitting `(key number, 1)`
//! per match, combined.

use crate::job::{Emit, Groups, Job};
use crate::text::{self, Word};
use alloc::vec::Vec;
use core::ops::Range;

/// Occurrences of `keys` (as words, upper-cased like the text's) in `input`.
pub struct StrMatch<'a> {
    /// The text.
    pub input: &'a [u8],
    /// The keys sought.
    pub keys: Vec<Word<'a>>,
}

impl Job for StrMatch<'_> {
    type Key = u32;
    type Value = u64;
    type Out = u64;
    const COMBINES: bool = true;

    fn input_len(&self) -> usize {
        self.input.len()
    }

    fn split_at(&self, at: usize) -> usize {
        text::split_at(self.input, at)
    }

    fn map(&self, range: Range<usize>, out: &mut impl Emit<u32, u64>) {
        text::words(self.input, range, |_, w| {
            let w = Word::new(w);
            for (i, k) in self.keys.iter().enumerate() {
                if *k == w {
                    out.emit(i as u32, 1);
                }
            }
        });
    }

    fn combine(&self, into: &mut u64, value: u64) {
        *into += value;
    }

    fn reduce(&self, _key: &u32, values: Groups<'_, u64>) -> u64 {
        values.iter().sum()
    }
}
