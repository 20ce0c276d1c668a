//! Unit tests of [`crate::AddressRange`]: construction, splitting on overlap, nested
//! slots, unmapping, target counting, and every error leaving the range unchanged.

use alloc::vec;
use alloc::vec::Vec;

use crate::{AddressRange, ArError, Mapping, Perms, Target, DEFAULT_GRANULARITY, PAGE_SIZE};

const P: u64 = PAGE_SIZE;
/// Small slots (4 pages) keep the tests readable.
const G: u64 = 4 * P;

fn range() -> AddressRange {
    AddressRange::new(64 * P, G).unwrap()
}

fn seg(start: u64, pages: u64, seg: u64, first_page: u64) -> Mapping {
    Mapping {
        start,
        pages,
        target: Target::Segment { seg, first_page, cow: false },
        perms: Perms::RW,
    }
}

fn all(ar: &AddressRange) -> Vec<Mapping> {
    ar.mappings().copied().collect()
}

#[test]
fn new_checks_granularity_and_span() {
    assert!(AddressRange::new(1 << 47, DEFAULT_GRANULARITY).is_ok());
    assert_eq!(AddressRange::new(64 * P, 3 * P), Err(ArError::BadGranularity));
    assert_eq!(AddressRange::new(64 * P, P / 2), Err(ArError::BadGranularity));
    assert_eq!(AddressRange::new(64 * P, 0), Err(ArError::BadGranularity));
    assert_eq!(AddressRange::new(64 * P + 1, G), Err(ArError::Unaligned));
    let ar = range();
    assert_eq!((ar.span(), ar.granularity(), ar.len()), (64 * P, G, 0));
    assert!(ar.is_empty());
}

#[test]
fn set_seg_maps_and_get_finds() {
    let mut ar = range();
    assert_eq!(ar.set_seg(2 * P, 7, 10, 3, Perms::RW, false), Ok(vec![]));
    assert_eq!(ar.get(2 * P), Some(&seg(2 * P, 3, 7, 10)));
    assert_eq!(ar.get(5 * P - 1), Some(&seg(2 * P, 3, 7, 10)));
    assert_eq!(ar.get(5 * P), None);
    assert_eq!(ar.get(2 * P - 1), None);
    assert_eq!(ar.get(u64::MAX), None);
    assert!(ar.maps(7) && !ar.maps(10));
}

#[test]
fn set_seg_in_the_middle_splits_in_three() {
    let mut ar = range();
    ar.set_seg(0, 1, 100, 10, Perms::RW, false).unwrap();
    let removed = ar.set_seg(3 * P, 2, 0, 4, Perms::R, true).unwrap();
    assert_eq!(removed, [seg(3 * P, 4, 1, 103)]);
    let new = Mapping {
        start: 3 * P,
        pages: 4,
        target: Target::Segment { seg: 2, first_page: 0, cow: true },
        perms: Perms::R,
    };
    assert_eq!(all(&ar), [seg(0, 3, 1, 100), new, seg(7 * P, 3, 1, 107)]);
    assert_eq!(ar.targets().collect::<Vec<_>>(), [1, 2]);
}

#[test]
fn set_seg_over_several_trims_both_ends() {
    let mut ar = range();
    ar.set_seg(0, 1, 0, 4, Perms::RW, false).unwrap();
    ar.set_seg(4 * P, 2, 0, 2, Perms::RW, false).unwrap();
    ar.set_seg(6 * P, 3, 50, 4, Perms::RW, false).unwrap();
    let removed = ar.set_seg(2 * P, 4, 0, 6, Perms::RW, false).unwrap();
    assert_eq!(removed, [seg(2 * P, 2, 1, 2), seg(4 * P, 2, 2, 0), seg(6 * P, 2, 3, 50)]);
    assert_eq!(all(&ar), [seg(0, 2, 1, 0), seg(2 * P, 6, 4, 0), seg(8 * P, 2, 3, 52)]);
    // Segment 2 is gone entirely; 1 and 3 are still mapped.
    assert_eq!(ar.released(&removed), [2]);
    assert!(!ar.maps(2) && ar.maps(1) && ar.maps(3));
}

#[test]
fn exact_replacement_returns_the_old_mapping() {
    let mut ar = range();
    ar.set_seg(P, 9, 0, 2, Perms::RW, false).unwrap();
    let removed = ar.set_seg(P, 9, 5, 2, Perms::RW, false).unwrap();
    assert_eq!(removed, [seg(P, 2, 9, 0)]);
    assert_eq!(all(&ar), [seg(P, 2, 9, 5)]);
    assert_eq!(ar.released(&removed), Vec::<u64>::new());
}

#[test]
fn set_seg_errors_change_nothing() {
    let mut ar = range();
    ar.set_seg(0, 1, 0, 8, Perms::RW, false).unwrap();
    ar.set_ar(8 * P, 20, Perms::RWX).unwrap();
    let before = ar.clone();
    let rw = Perms::RW;
    assert_eq!(ar.set_seg(P + 1, 2, 0, 1, rw, false), Err(ArError::Unaligned));
    assert_eq!(ar.set_seg(P, 2, 0, 0, rw, false), Err(ArError::Empty));
    assert_eq!(ar.set_seg(60 * P, 2, 0, 5, rw, false), Err(ArError::OutOfSpan));
    assert_eq!(ar.set_seg(P, 2, 0, u64::MAX, rw, false), Err(ArError::OutOfSpan));
    assert_eq!(ar.set_seg(P, 2, 0, u64::MAX / P + 1, rw, false), Err(ArError::OutOfSpan));
    assert_eq!(ar.set_seg(P, 2, u64::MAX, 1, rw, false), Err(ArError::SegmentOverflow));
    assert_eq!(ar.set_seg(9 * P, 2, 0, 1, rw, false), Err(ArError::SplitsRange));
    assert_eq!(ar.set_seg(7 * P, 2, 0, 2, rw, false), Err(ArError::SplitsRange));
    assert_eq!(ar, before);
    assert!(ar.set_seg(P, 2, u64::MAX - 1, 1, rw, false).is_ok());
}

#[test]
fn set_seg_over_a_whole_slot_replaces_the_nested_range() {
    let mut ar = range();
    ar.set_ar(4 * P, 20, Perms::RWX).unwrap();
    let removed = ar.set_seg(3 * P, 5, 0, 6, Perms::RW, false).unwrap();
    let slot =
        Mapping { start: 4 * P, pages: 4, target: Target::Range { ar: 20 }, perms: Perms::RWX };
    assert_eq!(removed, [slot]);
    assert_eq!(ar.released(&removed), [20]);
    assert_eq!(all(&ar), [seg(3 * P, 6, 5, 0)]);
}

#[test]
fn set_ar_takes_a_whole_aligned_slot() {
    let mut ar = range();
    ar.set_seg(2 * P, 1, 0, 8, Perms::RW, false).unwrap();
    let removed = ar.set_ar(4 * P, 30, Perms::RX).unwrap();
    assert_eq!(removed, [seg(4 * P, 4, 1, 2)]);
    let slot =
        Mapping { start: 4 * P, pages: 4, target: Target::Range { ar: 30 }, perms: Perms::RX };
    assert_eq!(all(&ar), [seg(2 * P, 2, 1, 0), slot, seg(8 * P, 2, 1, 6)]);
    assert_eq!(ar.nested().collect::<Vec<_>>(), [(4 * P, 30)]);
    // Another range in the same slot replaces the first.
    assert_eq!(ar.set_ar(4 * P, 31, Perms::RX), Ok(vec![slot]));
    assert_eq!(ar.get(7 * P).map(|m| m.target), Some(Target::Range { ar: 31 }));
    assert!(!ar.maps(30) && ar.maps(31));
}

#[test]
fn set_ar_errors_change_nothing() {
    let mut ar = range();
    let before = ar.clone();
    assert_eq!(ar.set_ar(2 * P, 1, Perms::RW), Err(ArError::Unaligned));
    assert_eq!(ar.set_ar(64 * P, 1, Perms::RW), Err(ArError::OutOfSpan));
    assert_eq!(ar.set_ar(u64::MAX - G + 1, 1, Perms::RW), Err(ArError::OutOfSpan));
    let mut odd = AddressRange::new(6 * P, G).unwrap();
    assert_eq!(odd.set_ar(4 * P, 1, Perms::RW), Err(ArError::OutOfSpan));
    assert_eq!(ar, before);
    assert_eq!(ar.set_ar(60 * P, 1, Perms::RW), Ok(vec![]));
}

#[test]
fn unmap_removes_and_splits() {
    let mut ar = range();
    ar.set_seg(0, 1, 0, 10, Perms::RW, false).unwrap();
    ar.set_ar(12 * P, 2, Perms::RW).unwrap();
    assert_eq!(ar.unmap(2 * P, 3), Ok(vec![seg(2 * P, 3, 1, 2)]));
    assert_eq!(all(&ar)[..2], [seg(0, 2, 1, 0), seg(5 * P, 5, 1, 5)]);
    assert_eq!(ar.unmap(2 * P, 3), Ok(vec![]));
    assert_eq!(ar.unmap(13 * P, 1), Err(ArError::SplitsRange));
    assert_eq!(ar.unmap(10 * P, 8).map(|r| r.len()), Ok(1));
    assert_eq!(ar.released(&[seg(0, 1, 2, 0)]), [2]);
    assert_eq!(ar.unmap(0, 64).map(|r| r.len()), Ok(2));
    assert!(ar.is_empty() && ar.targets().next().is_none());
    assert_eq!(ar.unmap(1, 1), Err(ArError::Unaligned));
    assert_eq!(ar.unmap(0, 0), Err(ArError::Empty));
    assert_eq!(ar.unmap(0, 65), Err(ArError::OutOfSpan));
}

#[test]
fn one_segment_mapped_twice_is_one_target() {
    let mut ar = range();
    ar.set_seg(0, 5, 0, 2, Perms::RW, false).unwrap();
    ar.set_seg(8 * P, 5, 0, 2, Perms::R, false).unwrap();
    assert_eq!(ar.targets().collect::<Vec<_>>(), [5]);
    let removed = ar.unmap(0, 2).unwrap();
    assert_eq!(ar.released(&removed), Vec::<u64>::new());
    let removed = ar.unmap(8 * P, 2).unwrap();
    assert_eq!(ar.released(&removed), [5]);
}

#[test]
fn set_perms_changes_only_an_exact_remap_in_place() {
    let mut r = AddressRange::new(1 << 30, 1 << 21).unwrap();
    r.set_seg(0, 7, 2, 3, Perms::RW, false).unwrap();
    r.set_seg(3 * PAGE_SIZE, 8, 0, 1, Perms::RW, true).unwrap();
    // Another run, another segment, a part, or copy-on-write: not a rights change.
    assert_eq!(r.set_perms(0, 7, 2, 2, Perms::R), None);
    assert_eq!(r.set_perms(0, 7, 3, 3, Perms::R), None);
    assert_eq!(r.set_perms(0, 9, 2, 3, Perms::R), None);
    assert_eq!(r.set_perms(PAGE_SIZE, 7, 3, 2, Perms::R), None);
    assert_eq!(r.set_perms(3 * PAGE_SIZE, 8, 0, 1, Perms::R), None);
    assert_eq!(r.get(0).unwrap().perms, Perms::RW, "a refused change changed nothing");
    assert_eq!(r.set_perms(0, 7, 2, 3, Perms::R), Some(Perms::RW));
    let m = *r.get(2 * PAGE_SIZE).unwrap();
    assert_eq!((m.start, m.pages, m.perms), (0, 3, Perms::R));
    assert_eq!(r.set_perms(0, 7, 2, 3, Perms::RX), Some(Perms::R));
}
