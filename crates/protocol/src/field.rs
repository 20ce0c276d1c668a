//! How one payload field becomes message words and back.

use crate::Malformed;

/// A type a message field may have: it takes [`Field::WORDS`] words of the payload.
pub trait Field: Sized {
    /// Words it takes.
    const WORDS: usize;

    /// Writes the field into `out` (exactly `WORDS` words), giving up what it owns.
    fn put(self, out: &mut [u64]);

    /// Reads the field back from `words` (exactly `WORDS` words).
    ///
    /// # Safety
    /// The words were written by [`Field::put`] of the same type and are read once.
    unsafe fn take(words: &[u64]) -> Result<Self, Malformed>;
}

impl Field for u64 {
    const WORDS: usize = 1;
    fn put(self, out: &mut [u64]) {
        out[0] = self;
    }
    unsafe fn take(words: &[u64]) -> Result<Self, Malformed> {
        Ok(words[0])
    }
}

impl Field for u32 {
    const WORDS: usize = 1;
    fn put(self, out: &mut [u64]) {
        out[0] = u64::from(self);
    }
    unsafe fn take(words: &[u64]) -> Result<Self, Malformed> {
        u32::try_from(words[0]).map_err(|_| Malformed::BadField)
    }
}

impl Field for usize {
    const WORDS: usize = 1;
    fn put(self, out: &mut [u64]) {
        out[0] = self as u64;
    }
    unsafe fn take(words: &[u64]) -> Result<Self, Malformed> {
        usize::try_from(words[0]).map_err(|_| Malformed::BadField)
    }
}

impl Field for bool {
    const WORDS: usize = 1;
    fn put(self, out: &mut [u64]) {
        out[0] = u64::from(self);
    }
    unsafe fn take(words: &[u64]) -> Result<Self, Malformed> {
        match words[0] {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(Malformed::BadField),
        }
    }
}

impl<const N: usize> Field for [u64; N] {
    const WORDS: usize = N;
    fn put(self, out: &mut [u64]) {
        out.copy_from_slice(&self);
    }
    unsafe fn take(words: &[u64]) -> Result<Self, Malformed> {
        words.try_into().map_err(|_| Malformed::BadField)
    }
}

/// A field no message holds: a variant with one is never made, so an enum generic over
/// what a field carries, taken with `Infallible`, sends its other kinds only (the
/// scheduler's notes, which carry no thread). Words never decode as one.
impl Field for core::convert::Infallible {
    const WORDS: usize = 0;
    fn put(self, _out: &mut [u64]) {
        match self {}
    }
    unsafe fn take(_words: &[u64]) -> Result<Self, Malformed> {
        Err(Malformed::BadField)
    }
}
