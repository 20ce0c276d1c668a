//! The rayon peer: `wri` and `wc` as a Rust user would write them with rayon: the same
//! word-boundary chunks (`threads × 16`), a `fold` into a std `HashMap` (default hasher)
//! per rayon job, a `reduce` merging the maps left to right (so each word's positions
//! stay ascending), then a parallel sort into the output order. Same rules as Metis's
//! text (`metis::text`: whitespace, upper case, 1024-byte keys), same output.

use metis::text::{self, MAX_KEY};
use rayon::prelude::*;
use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::Range;

/// A word's key, as the peer makes it: borrowed unless upper-casing changed it.
fn key(w: &[u8]) -> Cow<'_, [u8]> {
    let w = &w[..w.len().min(MAX_KEY)];
    if w.iter().any(u8::is_ascii_lowercase) {
        Cow::Owned(w.to_ascii_uppercase())
    } else {
        Cow::Borrowed(w)
    }
}

fn chunks(input: &[u8], threads: usize) -> Vec<Range<usize>> {
    metis::plan::split(input.len(), threads * 16, |at| text::split_at(input, at))
}

/// The inverted index: `(word, positions)` sorted by word.
pub fn wri(input: &[u8], threads: usize) -> Vec<(Cow<'_, [u8]>, Vec<usize>)> {
    let map = chunks(input, threads)
        .into_par_iter()
        .fold(HashMap::new, |mut m: HashMap<Cow<[u8]>, Vec<usize>>, r| {
            text::words(input, r, |pos, w| m.entry(key(w)).or_default().push(pos));
            m
        })
        .reduce(HashMap::new, |mut a, b| {
            for (k, mut v) in b {
                a.entry(k).or_default().append(&mut v);
            }
            a
        });
    let mut out: Vec<_> = map.into_iter().collect();
    out.par_sort_unstable_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Word count: `(word, count)` by count descending, then word.
pub fn wc(input: &[u8], threads: usize) -> Vec<(Cow<'_, [u8]>, u64)> {
    let map = chunks(input, threads)
        .into_par_iter()
        .fold(HashMap::new, |mut m: HashMap<Cow<[u8]>, u64>, r| {
            text::words(input, r, |_, w| *m.entry(key(w)).or_insert(0) += 1);
            m
        })
        .reduce(HashMap::new, |mut a, b| {
            for (k, n) in b {
                *a.entry(k).or_insert(0) += n;
            }
            a
        });
    let mut out: Vec<_> = map.into_iter().collect();
    out.par_sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    out
}
