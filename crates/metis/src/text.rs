//! Text input for `wri` and `wc`: Metis's generated input ([`wrmem`]), words and their
//! keys ([`Word`], [`words`]), and word-boundary splitting ([`split_at`]).
//!
//! The rules, the same for generated and file input:
//! - whitespace is space, `\n`, `\r`, `\0` and `\t`; every other byte (binary ones too)
//!   belongs to a word;
//! - a key is its word upper-cased (ASCII `a`–`z`; other bytes are kept);
//! - a key is at most [`MAX_KEY`] bytes: a longer word counts as one word whose key is
//!   its first [`MAX_KEY`] bytes (a documented result, not an error: a 1 MB word is one
//!   word).

use alloc::borrow::Cow;
use alloc::vec::Vec;
use core::cmp::Ordering;

/// The longest key, in bytes (Metis's limit).
pub const MAX_KEY: usize = 1024;

/// Which bytes separate words.
const SPACE: [bool; 256] = {
    let mut t = [false; 256];
    t[b' ' as usize] = true;
    t[b'\n' as usize] = true;
    t[b'\r' as usize] = true;
    t[0] = true;
    t[b'\t' as usize] = true;
    t
};

/// True for the bytes that separate words.
#[inline]
pub fn is_space(b: u8) -> bool {
    SPACE[b as usize]
}

/// Metis's `wrmem` input: `mb` MiB of three-letter upper-case words, each followed by a
/// space, from the C library's LCG with seed 0 (`seed = seed * 1103515245 + 12345` in 32
/// bits, each letter `'A' + (seed & 0x7fffffff) % 26`); bytes left over after the last
/// whole word are `\0`. So `mb` MiB hold `mb × 2^18` words.
pub fn wrmem(mb: usize) -> Vec<u8> {
    let size = mb << 20;
    let mut out = Vec::with_capacity(size);
    let mut seed: u32 = 0;
    let mut letter = || {
        seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        b'A' + ((seed & 0x7fff_ffff) % 26) as u8
    };
    for _ in 0..size / 4 {
        let w = [letter(), letter(), letter(), b' '];
        out.extend_from_slice(&w);
    }
    out.resize(size, 0);
    out
}

/// A word's key: its bytes (borrowed from the input when already upper-case, owned when
/// upper-casing changed them), with its first eight bytes kept as a big-endian number so
/// most comparisons are one integer compare (Corey §8.5.1: "more than 80% of the map
/// phase is spent in strcmp").
#[derive(Clone, Debug)]
pub struct Word<'a> {
    head: u64,
    bytes: Cow<'a, [u8]>,
}

impl<'a> Word<'a> {
    /// The key of the word `raw` (not empty, no whitespace): cut to [`MAX_KEY`] bytes and
    /// upper-cased.
    #[inline]
    pub fn new(raw: &'a [u8]) -> Word<'a> {
        let raw = &raw[..raw.len().min(MAX_KEY)];
        // One pass over the first eight bytes makes the head and finds lower case (the
        // common, short word needs no other pass).
        let mut head = 0u64;
        let mut lower = false;
        for (i, &b) in raw.iter().take(8).enumerate() {
            lower |= b.is_ascii_lowercase();
            head |= (b.to_ascii_uppercase() as u64) << (56 - 8 * i);
        }
        if raw.len() > 8 {
            lower |= raw[8..].iter().any(u8::is_ascii_lowercase);
        }
        let bytes = if lower { Cow::Owned(raw.to_ascii_uppercase()) } else { Cow::Borrowed(raw) };
        Word { head, bytes }
    }

    /// The same key owning its bytes (to outlive the input).
    pub fn into_owned(self) -> Word<'static> {
        Word { head: self.head, bytes: Cow::Owned(self.bytes.into_owned()) }
    }

    /// The key's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The key as text (bytes that are not UTF-8 shown as U+FFFD).
    pub fn text(&self) -> alloc::string::String {
        alloc::string::String::from_utf8_lossy(&self.bytes).into_owned()
    }

    fn rest(&self) -> &[u8] {
        self.bytes.get(8..).unwrap_or(&[])
    }
}

impl Ord for Word<'_> {
    /// Byte-wise (lexicographic) order: the heads (zero-padded, big-endian) order words as
    /// their first eight bytes do, a shorter head coming first; equal heads fall to the
    /// bytes after the eighth, then the length (which tells `A` from `A\0` apart, though
    /// words never hold `\0`).
    #[inline]
    fn cmp(&self, other: &Self) -> Ordering {
        if self.head != other.head {
            return self.head.cmp(&other.head);
        }
        let (a, b) = (self.bytes.len(), other.bytes.len());
        if a <= 8 && b <= 8 {
            // Short words (all of wrmem's) never reach the bytes: no memcmp call.
            return a.cmp(&b);
        }
        self.rest().cmp(other.rest()).then(a.cmp(&b))
    }
}

impl PartialOrd for Word<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Word<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.head == other.head && self.bytes == other.bytes
    }
}

impl Eq for Word<'_> {}

impl crate::job::Key for Word<'_> {
    /// The head, plus FNV-1a over the rest for words longer than eight bytes.
    #[inline]
    fn hash(&self) -> u64 {
        let mut h = self.head;
        for &b in self.rest() {
            h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
        h
    }

    /// The first four bytes (zero-padded, big-endian).
    #[inline]
    fn prefix(&self) -> u32 {
        (self.head >> 32) as u32
    }

    /// Four bytes or fewer, none of them `\0` (so the zero padding tells where it ends;
    /// a longer key with the same prefix has it as a proper prefix, and sorts after it).
    #[inline]
    fn whole(&self) -> bool {
        self.bytes.len() <= 4 && !self.bytes.contains(&0)
    }
}

/// The first word boundary at or after `at`: `at` itself if a word cannot span it (it is
/// the input's start or end, or the byte before it is whitespace), else the end of the
/// word `at` falls in. Map tasks start there.
pub fn split_at(input: &[u8], at: usize) -> usize {
    let mut at = at.min(input.len());
    if at == 0 || is_space(input[at - 1]) {
        return at;
    }
    while at < input.len() && !is_space(input[at]) {
        at += 1;
    }
    at
}

/// Calls `f(position, word)` for every word starting in `input[range]` (a range from
/// [`split_at`] boundaries), in order; `position` is the word's first byte's offset.
#[inline]
pub fn words<'a>(
    input: &'a [u8],
    range: core::ops::Range<usize>,
    mut f: impl FnMut(usize, &'a [u8]),
) {
    let end = range.end.min(input.len());
    let mut i = range.start;
    while i < end {
        while i < end && is_space(input[i]) {
            i += 1;
        }
        if i == end {
            break;
        }
        let start = i;
        // A word starting before `end` is this task's, wherever it ends.
        while i < input.len() && !is_space(input[i]) {
            i += 1;
        }
        if i > start {
            f(start, &input[start..i]);
        }
    }
}

/// A checksum of a list of keyed outputs (FNV-1a over each key's bytes and the value's
/// words), so outputs from different core counts, layouts and systems compare by one
/// number.
pub fn checksum<'k, I>(pairs: I) -> u64
where
    I: IntoIterator<Item = (&'k [u8], u64)>,
{
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut mix = |b: u8| h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    for (key, value) in pairs {
        key.iter().for_each(|&b| mix(b));
        mix(0);
        value.to_le_bytes().iter().for_each(|&b| mix(b));
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::Key;
    use alloc::vec;

    #[test]
    fn wrmem_is_metis_input() {
        let input = wrmem(1);
        assert_eq!(input.len(), 1 << 20);
        // The C library's rand-style LCG from seed 0: 12345, then 1406932606, ...
        let mut seed: u32 = 0;
        let mut first = vec![];
        for _ in 0..3 {
            seed = seed.wrapping_mul(1103515245).wrapping_add(12345);
            first.push(b'A' + ((seed & 0x7fffffff) % 26) as u8);
        }
        assert_eq!(&input[..3], &first[..]);
        assert_eq!(input[3], b' ');
        assert!(input.chunks(4).all(|w| w[..3].iter().all(u8::is_ascii_uppercase) && w[3] == b' '));
    }

    #[test]
    fn words_split_on_every_whitespace_and_upper_case() {
        let input = b"  ab\tCd\n\ne\0f\rg ";
        let mut seen = vec![];
        words(input, 0..input.len(), |p, w| seen.push((p, Word::new(w).text())));
        let want = [(2, "AB"), (5, "CD"), (9, "E"), (11, "F"), (13, "G")];
        assert_eq!(seen, want.map(|(p, w)| (p, w.into())));
    }

    #[test]
    fn long_words_keep_their_first_max_key_bytes() {
        let long = vec![b'x'; MAX_KEY * 3];
        let w = Word::new(&long);
        assert_eq!(w.bytes().len(), MAX_KEY);
        assert!(w.bytes().iter().all(|&b| b == b'X'));
    }

    #[test]
    fn word_order_is_byte_order() {
        let keys: [&[u8]; 9] =
            [b"A", b"AB", b"ABCDEFGH", b"ABCDEFGHI", b"ABCDEFGHJ", b"ABD", b"B", b"\xff", b"\x01"];
        for a in keys {
            for b in keys {
                assert_eq!(Word::new(a).cmp(&Word::new(b)), a.cmp(b), "{a:?} {b:?}");
                if a < b {
                    assert!(Word::new(a).prefix() <= Word::new(b).prefix(), "{a:?} {b:?}");
                }
            }
        }
    }

    #[test]
    fn splits_fall_between_words() {
        let input = b"abc def  ghij k";
        assert_eq!(split_at(input, 1), 3);
        assert_eq!(split_at(input, 4), 4);
        assert_eq!(split_at(input, 8), 8);
        assert_eq!(split_at(input, 10), 13);
        assert_eq!(split_at(input, 99), input.len());
    }
}
