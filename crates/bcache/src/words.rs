//! One block buffer's bytes, kept as 64-bit atomic words. A buffer is shared between the
//! core that fills it and the cores that copy it out, and the cache's protocol (copy on
//! write, the read-write lock against reuse) is what keeps them apart. Relaxed atomic words
//! make that protocol's mistakes show up as wrong bytes in the tests instead of undefined
//! behaviour, and cost no `unsafe`; the ordering comes from the tree entry that publishes
//! the buffer (Release) and the lookup that finds it (Acquire).

use crate::sync::AtomicU64;
use alloc::boxed::Box;
use core::sync::atomic::Ordering::Relaxed;

/// Bytes per word.
const WORD: usize = 8;

/// A block buffer of `len()` bytes (a multiple of 8).
pub(crate) struct Words {
    words: Box<[AtomicU64]>,
}

impl Words {
    /// A zeroed buffer of `bytes` bytes (a multiple of 8).
    pub(crate) fn new(bytes: usize) -> Self {
        Words { words: (0..bytes / WORD).map(|_| AtomicU64::new(0)).collect() }
    }

    /// Copies bytes `offset..offset + out.len()` into `out` (the range is in bounds: the
    /// caller checked it against the block size).
    pub(crate) fn load_into(&self, offset: usize, out: &mut [u8]) {
        if offset.is_multiple_of(WORD) {
            // The common case, whole aligned words: one load and one 8-byte store each.
            let words = &self.words[offset / WORD..];
            let last = (offset + out.len()) / WORD;
            let mut chunks = out.chunks_exact_mut(WORD);
            for (chunk, word) in (&mut chunks).zip(words) {
                chunk.copy_from_slice(&word.load(Relaxed).to_le_bytes());
            }
            let tail = chunks.into_remainder();
            if !tail.is_empty() {
                let n = tail.len();
                let word = self.words[last].load(Relaxed);
                tail.copy_from_slice(&word.to_le_bytes()[..n]);
            }
            return;
        }
        let mut done = 0;
        while done < out.len() {
            let at = offset + done;
            let word = self.words[at / WORD].load(Relaxed).to_le_bytes();
            let skip = at % WORD;
            let n = (WORD - skip).min(out.len() - done);
            out[done..done + n].copy_from_slice(&word[skip..skip + n]);
            done += n;
        }
    }

    /// Stores `data` at bytes `offset..offset + data.len()`. Only the buffer's one filler
    /// calls this (a buffer nobody else can reach yet, or a private one under its core's
    /// lock), so a partial word's load-modify-store races with no other store.
    pub(crate) fn store_from(&self, offset: usize, data: &[u8]) {
        if offset.is_multiple_of(WORD) && data.len().is_multiple_of(WORD) {
            // Whole aligned words: no load of what they replace.
            let words = &self.words[offset / WORD..];
            for (chunk, word) in data.chunks_exact(WORD).zip(words) {
                let bytes: [u8; WORD] = chunk.try_into().unwrap_or([0; WORD]);
                word.store(u64::from_le_bytes(bytes), Relaxed);
            }
            return;
        }
        let mut done = 0;
        while done < data.len() {
            let at = offset + done;
            let cell = &self.words[at / WORD];
            let skip = at % WORD;
            let n = (WORD - skip).min(data.len() - done);
            let mut word = if n == WORD { [0; WORD] } else { cell.load(Relaxed).to_le_bytes() };
            word[skip..skip + n].copy_from_slice(&data[done..done + n]);
            cell.store(u64::from_le_bytes(word), Relaxed);
            done += n;
        }
    }

    /// Makes this buffer a copy of `other` (the same size); the filler's rule of
    /// `store_from` applies.
    pub(crate) fn copy_from(&self, other: &Words) {
        for (to, from) in self.words.iter().zip(other.words.iter()) {
            to.store(from.load(Relaxed), Relaxed);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn partial_and_unaligned_copies_round_trip() {
        let w = Words::new(32);
        w.store_from(3, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
        let mut out = [0xffu8; 32];
        w.load_into(0, &mut out);
        assert_eq!(&out[..3], &[0, 0, 0]);
        assert_eq!(&out[3..14], &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
        assert!(out[14..].iter().all(|&b| b == 0));
        let mut mid = [0u8; 5];
        w.load_into(9, &mut mid);
        assert_eq!(mid, [7, 8, 9, 10, 11]);
        let copy = Words::new(32);
        copy.copy_from(&w);
        let mut again = [0u8; 32];
        copy.load_into(0, &mut again);
        assert_eq!(again, out);
        w.load_into(32, &mut []);
        // Aligned starts with a tail shorter than a word, and whole aligned words.
        let mut short = [0u8; 11];
        w.load_into(0, &mut short);
        assert_eq!(&short[..], &out[..11]);
        let mut head = [0u8; 3];
        w.load_into(8, &mut head);
        assert_eq!(head, [6, 7, 8]);
        let words = Words::new(24);
        words.store_from(8, &[9; 16]);
        let mut all = [1u8; 24];
        words.load_into(0, &mut all);
        assert_eq!(all, [[0u8; 8], [9; 8], [9; 8]].concat()[..]);
    }
}
