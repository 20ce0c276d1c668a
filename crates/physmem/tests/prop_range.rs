//! Property tests for `RangeSet` and `usable_frames` against plain set models.

use physmem::{usable_frames, CapacityError, PhysRange, RangeSet, FRAME_SIZE};
use proptest::prelude::*;
use std::collections::BTreeSet;

/// Addresses for `RangeSet` tests stay below this, so the model can hold every byte.
const SPACE: u64 = 200;

#[derive(Clone, Debug)]
enum Op {
    Insert(u64, u64),
    Remove(u64, u64),
}

fn op() -> impl Strategy<Value = Op> {
    let range = (0..SPACE, 0..SPACE);
    prop_oneof![
        range.clone().prop_map(|(a, b)| Op::Insert(a, b)),
        range.prop_map(|(a, b)| Op::Remove(a, b)),
    ]
}

/// Maximal runs of consecutive addresses in the model: the ranges a merged set must hold.
fn runs(model: &BTreeSet<u64>) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    for &a in model {
        match out.last_mut() {
            Some(last) if last.1 == a => last.1 = a + 1,
            _ => out.push((a, a + 1)),
        }
    }
    out
}

proptest! {
    #[test]
    fn range_set_matches_model(ops in proptest::collection::vec(op(), 0..60)) {
        let mut set = RangeSet::<4>::new();
        let mut model = BTreeSet::new();
        for op in ops {
            let (r, insert) = match op {
                Op::Insert(a, b) => (PhysRange::new(a, b), true),
                Op::Remove(a, b) => (PhysRange::new(a, b), false),
            };
            let mut next = model.clone();
            for a in r.start..r.end {
                if insert {
                    next.insert(a);
                } else {
                    next.remove(&a);
                }
            }
            let result = if insert { set.insert(r) } else { set.remove(r) };
            // Fails exactly when the merged result needs more ranges than fit.
            if runs(&next).len() > 4 {
                prop_assert_eq!(result, Err(CapacityError));
            } else {
                prop_assert_eq!(result, Ok(()));
                model = next;
            }
            let got: Vec<(u64, u64)> = set.iter().map(|r| (r.start, r.end)).collect();
            prop_assert_eq!(&got, &runs(&model));
            prop_assert_eq!(set.len(), got.len());
            prop_assert_eq!(set.total_bytes(), model.len() as u64);
            for a in 0..SPACE {
                prop_assert_eq!(set.contains(a), model.contains(&a));
            }
        }
    }
}

/// `usable_frames` works in quarter frames here: every boundary is a multiple of `UNIT`.
const UNIT: u64 = FRAME_SIZE / 4;
/// Frames in the test address space.
const FRAMES: u64 = 16;

fn unit_ranges(max: usize) -> impl Strategy<Value = Vec<(u64, u64)>> {
    proptest::collection::vec((0..4 * FRAMES, 0..4 * FRAMES), 0..max)
}

proptest! {
    #[test]
    fn usable_frames_matches_model(ram in unit_ranges(8), reserved in unit_ranges(8)) {
        let to_bytes = |v: &[(u64, u64)]| -> Vec<PhysRange> {
            v.iter().map(|&(a, b)| PhysRange::new(a * UNIT, b * UNIT)).collect()
        };
        let set: RangeSet<16> = usable_frames(to_bytes(&ram), to_bytes(&reserved)).unwrap();

        let covered = |v: &[(u64, u64)], unit: u64| v.iter().any(|&(a, b)| a <= unit && unit < b);
        for f in 0..FRAMES {
            let units = 4 * f..4 * f + 4;
            // Usable: every quarter is RAM and none is reserved.
            let usable = units.clone().all(|u| covered(&ram, u))
                && !units.clone().any(|u| covered(&reserved, u));
            prop_assert_eq!(set.contains(f * FRAME_SIZE), usable, "frame {}", f);
        }
        for r in set.iter() {
            prop_assert!(r.start.is_multiple_of(FRAME_SIZE) && r.end.is_multiple_of(FRAME_SIZE));
        }
    }
}
