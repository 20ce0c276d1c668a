//! The cache against a model: a `HashMap` from block number to bytes. Random sequences of
//! reads, whole and partial writes, syncs, invalidations and private/shared switches on
//! several cores, with pools small enough that most operations evict, must read exactly the
//! model's bytes; after every `sync` the device must hold the model's bytes.
#![cfg(not(loom))]

mod common;

use bcache::{Cache, Config};
use common::MemDevice;
use proptest::prelude::*;
use std::collections::HashMap;

const BS: usize = 16;
const BLOCKS: u64 = 24;
const CORES: usize = 3;

#[derive(Clone, Debug)]
enum Op {
    Read {
        core: usize,
        block: u64,
        offset: usize,
        len: usize,
    },
    Write {
        core: usize,
        block: u64,
        offset: usize,
        data: Vec<u8>,
    },
    Sync {
        core: usize,
    },
    Invalidate {
        core: usize,
        block: u64,
    },
    /// Makes the block private to core `block % CORES`, or shared again if it is private.
    Toggle {
        block: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let core = 0..CORES;
    let block = 0..BLOCKS;
    let range = (0..=BS).prop_flat_map(|offset| (Just(offset), 0..=BS - offset));
    prop_oneof![
        4 => (core.clone(), block.clone(), range.clone())
            .prop_map(|(core, block, (offset, len))| Op::Read { core, block, offset, len }),
        4 => (core.clone(), block.clone(), range.prop_flat_map(|(offset, len)| {
                (Just(offset), proptest::collection::vec(any::<u8>(), len))
            }))
            .prop_map(|(core, block, (offset, data))| Op::Write { core, block, offset, data }),
        2 => (core.clone(), block.clone(), any::<u8>())
            .prop_map(|(core, block, b)| Op::Write { core, block, offset: 0, data: vec![b; BS] }),
        1 => core.clone().prop_map(|core| Op::Sync { core }),
        1 => (core, block.clone()).prop_map(|(core, block)| Op::Invalidate { core, block }),
        1 => block.prop_map(|block| Op::Toggle { block }),
    ]
}

/// Runs `ops` against a cache with `per_core` buffers per core and the model.
fn check(per_core: usize, seeds: Vec<u8>, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let device = MemDevice::new(BLOCKS, BS);
    let mut model: HashMap<u64, Vec<u8>> = HashMap::new();
    for (block, seed) in seeds.into_iter().enumerate() {
        let bytes: Vec<u8> = (0..BS as u8).map(|i| seed ^ i).collect();
        device.set(block as u64, &bytes);
        model.insert(block as u64, bytes);
    }
    let cache =
        Cache::new(device, Config { cores: CORES, block_size: BS, buffers_per_core: per_core })
            .expect("config");
    // Blocks private to a core, with that core: every operation on them runs there.
    let mut private: HashMap<u64, usize> = HashMap::new();
    let on = |private: &HashMap<u64, usize>, block: u64, core: usize| {
        private.get(&block).copied().unwrap_or(core)
    };
    for op in ops {
        match op {
            Op::Read { core, block, offset, len } => {
                let mut out = vec![0; len];
                cache.read(on(&private, block, core), block, offset, &mut out).expect("read");
                prop_assert_eq!(&out[..], &model[&block][offset..offset + len], "block {}", block);
            }
            Op::Write { core, block, offset, data } => {
                cache.write(on(&private, block, core), block, offset, &data).expect("write");
                model.get_mut(&block).unwrap()[offset..offset + data.len()].copy_from_slice(&data);
            }
            Op::Sync { core } => {
                cache.sync(core).expect("sync");
                for block in 0..BLOCKS {
                    prop_assert_eq!(
                        &cache.device().block(block),
                        &model[&block],
                        "block {}",
                        block
                    );
                }
            }
            Op::Invalidate { core, block } => {
                cache.invalidate(on(&private, block, core), block).expect("invalidate");
                prop_assert!(!cache.contains(on(&private, block, core), block).unwrap());
                prop_assert_eq!(&cache.device().block(block), &model[&block]);
            }
            Op::Toggle { block } => match private.remove(&block) {
                Some(owner) => cache.make_shared(owner, block).expect("make_shared"),
                None => {
                    let owner = block as usize % CORES;
                    cache.make_private(owner, block).expect("make_private");
                    private.insert(block, owner);
                }
            },
        }
        // Bounded memory: no more blocks cached than buffers.
        let cached =
            (0..BLOCKS).filter(|&b| cache.contains(on(&private, b, 0), b).unwrap()).count();
        prop_assert!(cached <= CORES * per_core, "{} cached", cached);
    }
    for block in 0..BLOCKS {
        let mut out = vec![0; BS];
        cache.read(on(&private, block, 1), block, 0, &mut out).expect("read");
        prop_assert_eq!(&out, &model[&block]);
    }
    cache.sync(2).expect("sync");
    for block in 0..BLOCKS {
        prop_assert_eq!(&cache.device().block(block), &model[&block], "block {}", block);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn cache_matches_a_hashmap_model(
        per_core in 1usize..5,
        seeds in proptest::collection::vec(any::<u8>(), BLOCKS as usize),
        ops in proptest::collection::vec(op(), 1..80),
    ) {
        check(per_core, seeds, ops)?;
    }
}
