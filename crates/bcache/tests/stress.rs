//! Threads hammering a small cache at once, each driving two core indices in turn (two
//! threads, as the host has two CPUs: with more threads than CPUs, a spinning lock waits out
//! the scheduler's time slice of a preempted holder and the test takes minutes; the kernel
//! never preempts a core inside the cache). Each core writes (whole and partial) only its
//! own blocks but reads everyone's, syncs and invalidates now and then, with pools
//! so small that nearly every miss evicts and buffers are reclaimed all the time. A reader
//! that copied a buffer while it was reused for another block would see that block's
//! number in the words (with 4096-byte blocks the copy is long enough that dropping the
//! read-write lock's write in `reclaim` fails this test within a second); a lost write
//! shows in the owner's exact check or on the device at the end.
#![cfg(not(loom))]

mod common;

use bcache::{Cache, Config, Stats};
use common::MemDevice;

const BS: usize = 4096;
const WORDS: usize = BS / 8;
const BLOCKS: u64 = 48;
const CORES: usize = 4;
const THREADS: usize = 2;

/// A word naming its block (high half) and the write that stored it (low half).
fn tag(block: u64, seq: u64) -> u64 {
    (block << 32) | seq
}

fn words(bytes: &[u8]) -> Vec<u64> {
    bytes.chunks(8).map(|w| u64::from_le_bytes(w.try_into().unwrap())).collect()
}

/// A small xorshift generator, so each core's sequence is reproducible.
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

fn run(per_core: usize, rounds: u64) {
    let config = Config { cores: CORES, block_size: BS, buffers_per_core: per_core };
    let cache = Cache::new(MemDevice::new(BLOCKS, BS), config).unwrap();
    let finals: Vec<Vec<(u64, Vec<u64>)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|thread| {
                let cache = &cache;
                s.spawn(move || {
                    // This thread's cores and, for each, its blocks and their expected words.
                    let cores: Vec<usize> = (thread..CORES).step_by(THREADS).collect();
                    let mut state: Vec<(Vec<u64>, Vec<Vec<u64>>)> = cores
                        .iter()
                        .map(|&core| {
                            let mine: Vec<u64> =
                                (0..BLOCKS).filter(|b| *b as usize % CORES == core).collect();
                            let model = vec![vec![0; WORDS]; mine.len()];
                            (mine, model)
                        })
                        .collect();
                    let mut rng = 0x9e37_79b9_7f4a_7c15 ^ (thread as u64 + 1);
                    for seq in 1..=rounds {
                        let r = next(&mut rng);
                        let which = (r >> 40) as usize % cores.len();
                        let core = cores[which];
                        let (mine, model) = &mut state[which];
                        match r % 16 {
                            0..=3 => {
                                let i = (r >> 8) as usize % mine.len();
                                let words = vec![tag(mine[i], seq); WORDS];
                                let bytes: Vec<u8> =
                                    words.iter().flat_map(|w| w.to_le_bytes()).collect();
                                cache.write(core, mine[i], 0, &bytes).unwrap();
                                model[i] = words;
                            }
                            4..=5 => {
                                let i = (r >> 8) as usize % mine.len();
                                let (first, n) =
                                    ((r >> 20) as usize % WORDS, 1 + (r >> 28) as usize % 3);
                                let n = n.min(WORDS - first);
                                let bytes: Vec<u8> =
                                    (0..n).flat_map(|_| tag(mine[i], seq).to_le_bytes()).collect();
                                cache.write(core, mine[i], first * 8, &bytes).unwrap();
                                model[i][first..first + n].fill(tag(mine[i], seq));
                            }
                            6..=7 => {
                                let i = (r >> 8) as usize % mine.len();
                                let mut out = vec![0; BS];
                                cache.read(core, mine[i], 0, &mut out).unwrap();
                                assert_eq!(words(&out), model[i], "core {core} block {}", mine[i]);
                            }
                            8 if r % 64 == 8 => cache.sync(core).unwrap(),
                            9 if r % 64 == 9 => {
                                cache.invalidate(core, (r >> 8) % BLOCKS).unwrap();
                            }
                            _ => {
                                let block = (r >> 8) % BLOCKS;
                                let mut out = vec![0; BS];
                                cache.read(core, block, 0, &mut out).unwrap();
                                for w in words(&out) {
                                    assert!(
                                        w == 0 || w >> 32 == block,
                                        "block {block} held {w:#x}"
                                    );
                                }
                            }
                        }
                    }
                    state
                        .into_iter()
                        .flat_map(|(mine, model)| mine.into_iter().zip(model))
                        .collect()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    cache.sync(0).unwrap();
    for (block, expect) in finals.into_iter().flatten() {
        assert_eq!(words(&cache.device().block(block)), expect, "block {block} on the device");
    }
    let total = (0..CORES).map(|c| cache.stats(c).unwrap()).fold(Stats::default(), |a, s| a + s);
    assert!(total.evictions > 0 && total.hits > 0 && total.misses > 0, "{total:?}");
}

#[test]
fn cores_hammer_a_small_cache() {
    run(3, 20_000);
}

#[test]
fn cores_hammer_a_one_buffer_cache() {
    run(1, 10_000);
}
