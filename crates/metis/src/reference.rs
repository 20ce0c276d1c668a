//! The sequential reference that every Metis run is checked against: a `BTreeMap` of each
//! word's positions, built in one pass by the rules of [`crate::text`] (whitespace bytes,
//! upper-cased keys of at most [`MAX_KEY`] bytes). It shares no code with the engine's
//! split, map, reduce or merge, so it can judge them (`cargo test -p metis`, `run metis
//! --check`).

use crate::text::{self, MAX_KEY};
use alloc::collections::BTreeMap;
use alloc::vec::Vec;

/// Word → its positions in `input`, in order.
pub fn index(input: &[u8]) -> BTreeMap<Vec<u8>, Vec<usize>> {
    let mut index: BTreeMap<Vec<u8>, Vec<usize>> = BTreeMap::new();
    let mut i = 0;
    while i < input.len() {
        if text::is_space(input[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < input.len() && !text::is_space(input[i]) {
            i += 1;
        }
        let key = input[start..i.min(start + MAX_KEY)].to_ascii_uppercase();
        index.entry(key).or_default().push(start);
    }
    index
}
