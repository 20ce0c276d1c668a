//! Property test for retype between cores' allocators: blocks go back and forth among
//! three cores while frames are allocated and freed; no frame is ever handed out twice,
//! held by two cores, or lost, and every frame freed goes to whoever owns it by then.

use physmem::{
    bitmap_words, BlockOwners, CoreFrames, PhysRange, BLOCK_FRAMES, BLOCK_SIZE, FRAME_SIZE,
};
use proptest::prelude::*;
use std::collections::BTreeMap;

const K: u64 = FRAME_SIZE;
const CORES: usize = 3;
/// Blocks in each core's boot share.
const BLOCKS: u64 = 4;

#[derive(Clone, Debug)]
enum Op {
    Alloc(usize),
    /// Free the i-th frame in use (mod their count), on core `on` (sent to its owner).
    Free(usize, usize),
    /// Core `from` gives `count` blocks to `to`.
    Give {
        from: usize,
        to: usize,
        count: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0..CORES).prop_map(Op::Alloc),
        4 => (any::<usize>(), 0..CORES).prop_map(|(i, on)| Op::Free(i, on)),
        2 => (0..CORES, 0..CORES, 1..3u64).prop_map(|(from, to, count)| Op::Give { from, to, count }),
    ]
}

proptest! {
    #[test]
    fn retype_never_duplicates_or_loses_a_frame(ops in proptest::collection::vec(op(), 0..400)) {
        let ranges: Vec<[PhysRange; 1]> = (0..CORES as u64)
            .map(|c| [PhysRange::new(c * BLOCKS * BLOCK_SIZE, (c + 1) * BLOCKS * BLOCK_SIZE)])
            .collect();
        let mut storage: Vec<Vec<u64>> = ranges.iter().map(|r| vec![0; bitmap_words(r)]).collect();
        let mut cores: Vec<CoreFrames> = storage
            .iter_mut()
            .zip(&ranges)
            .enumerate()
            .map(|(i, (s, r))| CoreFrames::new(i, r, s).unwrap())
            .collect();
        // One replica stands for all: the commit applies the same change to each.
        let mut moved = BlockOwners::<64>::new();
        let owner = |moved: &BlockOwners<64>, pa: u64| {
            moved.owner_of(pa).unwrap_or((pa / (BLOCKS * BLOCK_SIZE)) as usize)
        };
        let mut in_use: BTreeMap<u64, usize> = BTreeMap::new(); // frame -> allocating core
        for op in ops {
            match op {
                Op::Alloc(c) => {
                    if let Some(pa) = cores[c].alloc() {
                        prop_assert!(in_use.insert(pa, c).is_none(), "{:#x} handed out twice", pa);
                        prop_assert_eq!(owner(&moved, pa), c, "core {} allocated a frame it does not own", c);
                    }
                }
                Op::Free(i, _on) if !in_use.is_empty() => {
                    let pa = *in_use.keys().nth(i % in_use.len()).unwrap();
                    in_use.remove(&pa);
                    let home = owner(&moved, pa);
                    prop_assert_eq!(cores[home].free(pa), Ok(()));
                }
                Op::Free(..) => {}
                Op::Give { from, to, count } => {
                    if from == to || !cores[to].can_adopt(count) || !moved.has_room(0, count) {
                        continue;
                    }
                    let Some(first) = cores[from].take_free_blocks(count) else { continue };
                    prop_assert!(moved.set(first, count, to));
                    for b in 0..count {
                        let block = first + b * BLOCK_SIZE;
                        prop_assert_eq!(cores[from].disown_block(block), Ok(()));
                        prop_assert_eq!(cores[to].adopt_block(block), Ok(()));
                        for f in 0..BLOCK_FRAMES {
                            prop_assert_eq!(cores[to].free(block + f * K), Ok(()));
                        }
                    }
                }
            }
            let total: u64 = cores.iter().map(|c| c.total()).sum();
            prop_assert_eq!(total, CORES as u64 * BLOCKS * BLOCK_FRAMES, "frames appeared or vanished");
            let free: u64 = cores.iter().map(|c| c.free_count()).sum();
            prop_assert_eq!(free + in_use.len() as u64, total);
        }
        // Every frame is free somewhere once all are given back, exactly once.
        for (pa, _) in std::mem::take(&mut in_use) {
            let home = owner(&moved, pa);
            prop_assert_eq!(cores[home].free(pa), Ok(()));
        }
        for pa in (0..CORES as u64 * BLOCKS * BLOCK_FRAMES).map(|f| f * K) {
            let holders = cores.iter().filter(|c| c.is_free(pa)).count();
            prop_assert_eq!(holders, 1, "frame {:#x} free on {} cores", pa, holders);
            prop_assert!(cores[owner(&moved, pa)].is_free(pa));
        }
    }
}
