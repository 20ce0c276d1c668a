//! Property test for `CoreFrames` against a model set of free frames: alloc never returns
//! a frame in use, counts stay consistent, and errors come exactly when the model says.

use physmem::{bitmap_words, CoreFrames, FrameError, PhysRange, RangeSet, FRAME_SIZE};
use proptest::prelude::*;
use std::collections::BTreeSet;

const K: u64 = FRAME_SIZE;
/// Frames in the test address space.
const FRAMES: u64 = 300;

#[derive(Clone, Debug)]
enum Op {
    Alloc,
    /// Free the i-th allocated frame (mod their count).
    FreeAllocated(usize),
    /// Free any address (maybe unaligned, foreign or already free).
    Free(u64),
    MarkUsed(u64),
}

fn addr() -> impl Strategy<Value = u64> {
    prop_oneof![(0..FRAMES + 2).prop_map(|f| f * K), 0..(FRAMES + 2) * K]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => Just(Op::Alloc),
        3 => any::<usize>().prop_map(Op::FreeAllocated),
        1 => addr().prop_map(Op::Free),
        1 => addr().prop_map(Op::MarkUsed),
    ]
}

/// What the model says freeing (or marking used) `addr` must do.
fn expect(
    ranges: &[PhysRange],
    free: &BTreeSet<u64>,
    addr: u64,
    freeing: bool,
) -> Result<(), FrameError> {
    if !addr.is_multiple_of(K) {
        Err(FrameError::Unaligned)
    } else if !ranges.iter().any(|r| r.contains(addr)) {
        Err(FrameError::NotOwned)
    } else if freeing && free.contains(&addr) {
        Err(FrameError::DoubleFree)
    } else if !freeing && !free.contains(&addr) {
        Err(FrameError::NotFree)
    } else {
        Ok(())
    }
}

proptest! {
    #[test]
    fn core_frames_match_model(
        spans in proptest::collection::vec((0..FRAMES, 0..FRAMES), 1..5),
        ops in proptest::collection::vec(op(), 0..300),
        probe in addr(),
    ) {
        let mut set = RangeSet::<8>::new();
        for &(a, b) in &spans {
            set.insert(PhysRange::new(a * K, b * K)).unwrap();
        }
        let ranges: Vec<PhysRange> = set.iter().collect();
        let mut storage = vec![0; bitmap_words(&ranges)];
        let mut frames = CoreFrames::new(1, &ranges, &mut storage).unwrap();
        let mut free: BTreeSet<u64> = ranges.iter().flat_map(|r| (r.start / K..r.end / K).map(|f| f * K)).collect();
        let mut allocated: Vec<u64> = Vec::new();
        prop_assert_eq!(frames.total(), free.len() as u64);

        for op in ops {
            match op {
                Op::Alloc => match frames.alloc() {
                    Some(a) => {
                        prop_assert!(free.remove(&a), "alloc gave {:#x}, not free", a);
                        allocated.push(a);
                    }
                    None => prop_assert!(free.is_empty()),
                },
                Op::FreeAllocated(i) => {
                    if !allocated.is_empty() {
                        let a = allocated.swap_remove(i % allocated.len());
                        prop_assert_eq!(frames.free(a), Ok(()));
                        free.insert(a);
                    }
                }
                Op::Free(a) => {
                    let want = expect(&ranges, &free, a, true);
                    prop_assert_eq!(frames.free(a), want);
                    if want.is_ok() {
                        free.insert(a);
                        allocated.retain(|&x| x != a);
                    }
                }
                Op::MarkUsed(a) => {
                    let want = expect(&ranges, &free, a, false);
                    prop_assert_eq!(frames.mark_used(a), want);
                    if want.is_ok() {
                        free.remove(&a);
                    }
                }
            }
            prop_assert_eq!(frames.free_count(), free.len() as u64);
            let frame = probe - probe % K;
            prop_assert_eq!(frames.owns(probe), ranges.iter().any(|r| r.contains(probe)));
            prop_assert_eq!(frames.is_free(probe), free.contains(&frame));
        }
    }
}
