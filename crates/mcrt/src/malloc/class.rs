//! Size classes (McRT-Malloc [38]): a small request is rounded up to one of [`NCLASSES`]
//! sizes; every block holds objects of one class. Larger requests (or stricter alignments)
//! go to the system.

/// The class sizes, in bytes: multiples of 16, spaced at most 25% apart.
pub(super) const SIZES: [usize; NCLASSES] = [
    16, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448, 512, 640, 768, 896, 1024,
    1280, 1536, 1792, 2048,
];
/// How many classes there are.
pub(super) const NCLASSES: usize = 24;
/// The largest request a block serves.
pub(super) const MAX_SMALL: usize = 2048;

/// For alignments up to 16: the class of a request of `16 * i` bytes, by `i`.
static BY_SIXTEENTHS: [u8; MAX_SMALL / 16 + 1] = by_sixteenths();

const fn by_sixteenths() -> [u8; MAX_SMALL / 16 + 1] {
    let mut t = [0u8; MAX_SMALL / 16 + 1];
    let (mut i, mut c) = (0, 0);
    while i < t.len() {
        while SIZES[c] < i * 16 {
            c += 1;
        }
        t[i] = c as u8;
        i += 1;
    }
    t
}

/// The class of a request of `size` bytes aligned to `align` (a power of two), `None` when
/// it goes to the system. A class serves an alignment when its size is a multiple of it:
/// each block puts its first object at an offset that is a multiple of the largest power of
/// two dividing the size ([`first_offset`]), and blocks are aligned to their size.
#[inline]
pub(super) fn class_of(size: usize, align: usize) -> Option<usize> {
    if align <= 16 {
        if size <= MAX_SMALL {
            return Some(BY_SIXTEENTHS[size.div_ceil(16)] as usize);
        }
        return None;
    }
    SIZES.iter().position(|&s| s >= size && s.is_multiple_of(align))
}

/// Where a block of class size `size` puts its first object: past the header `header`,
/// at a multiple of the largest power of two dividing `size`.
pub(super) const fn first_offset(size: usize, header: usize) -> usize {
    let pow2 = 1 << size.trailing_zeros();
    header.div_ceil(pow2) * pow2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_size_and_alignment_gets_a_class_that_fits_it() {
        for align in [1usize, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048] {
            for size in 0..=MAX_SMALL {
                let Some(c) = class_of(size, align) else {
                    assert!(size.next_multiple_of(align) > MAX_SMALL, "{size} {align}");
                    continue;
                };
                assert!(
                    SIZES[c] >= size && SIZES[c].is_multiple_of(align),
                    "{size} {align} -> {c}"
                );
                if c > 0 && align <= 16 {
                    assert!(SIZES[c - 1] < size, "{size}: not the smallest class");
                }
                assert_eq!(first_offset(SIZES[c], 192) % align, 0);
            }
        }
        assert_eq!(class_of(MAX_SMALL + 1, 8), None);
        assert_eq!(class_of(8, 4096), None);
        assert_eq!(SIZES.len(), NCLASSES);
    }
}
