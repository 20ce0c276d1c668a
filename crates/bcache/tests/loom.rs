//! Loom models of the cache's lock-free parts: nodes added to the tree by racing cores, a
//! read racing a copy-on-write replacement whose old buffer is then reclaimed and reused
//! (Corey §5.3's read-write lock), an owner waiting for a buffer another core is handing
//! back, two cores missing the same block, two partial writes to
//! one block, and a write racing a sync. Buffers hold their bytes in atomic words, so a
//! reuse during a read shows as another block's bytes, which the models assert against. Run
//! with `RUSTFLAGS="--cfg loom" cargo test -p bcache --release --test loom`.
#![cfg(loom)]

use bcache::tree::RadixTree;
use bcache::{BlockDevice, Cache, Config};
use loom::sync::atomic::Ordering::Relaxed;
use loom::sync::{Arc, Mutex};
use loom::thread;

/// 8-byte blocks: one atomic word each, so the models stay small.
const BS: usize = 8;

/// A RAM disk whose block `b` starts as eight bytes of `b + 1`.
struct Ram(Mutex<Vec<[u8; BS]>>);

impl Ram {
    fn new(blocks: u8) -> Self {
        Ram(Mutex::new((0..blocks).map(|b| [b + 1; BS]).collect()))
    }

    fn block(&self, block: usize) -> [u8; BS] {
        self.0.lock().unwrap()[block]
    }
}

impl BlockDevice for Ram {
    type Error = ();

    fn blocks(&self) -> u64 {
        self.0.lock().unwrap().len() as u64
    }

    fn read_block(&self, block: u64, buf: &mut [u8]) -> Result<(), ()> {
        buf.copy_from_slice(&self.0.lock().unwrap()[block as usize]);
        Ok(())
    }

    fn write_block(&self, block: u64, buf: &[u8]) -> Result<(), ()> {
        self.0.lock().unwrap()[block as usize].copy_from_slice(buf);
        Ok(())
    }
}

fn cache(per_core: usize, blocks: u8) -> Arc<Cache<Ram>> {
    let config = Config { cores: 2, block_size: BS, buffers_per_core: per_core };
    Arc::new(Cache::new(Ram::new(blocks), config).unwrap())
}

fn read(cache: &Cache<Ram>, core: usize, block: u64) -> [u8; BS] {
    let mut out = [0; BS];
    cache.read(core, block, 0, &mut out).unwrap();
    out
}

fn bounded(preemptions: usize) -> loom::model::Builder {
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(preemptions);
    model
}

/// Two cores add nodes on one new path (a 3-level tree under loom's 4-way nodes) while a
/// third looks a key up: every node is published whole, the loser's node is freed, both
/// values land, and the lookup sees 0 or the value.
#[test]
fn tree_nodes_race_in() {
    loom::model(|| {
        let tree = Arc::new(RadixTree::new(64));
        let other = {
            let tree = tree.clone();
            thread::spawn(move || tree.entry_or_insert(37).unwrap().store(2, Relaxed))
        };
        let reader = {
            let tree = tree.clone();
            thread::spawn(move || assert!(matches!(tree.get(36), 0 | 1)))
        };
        tree.entry_or_insert(36).unwrap().store(1, Relaxed);
        other.join().unwrap();
        reader.join().unwrap();
        assert_eq!((tree.get(36), tree.get(37), tree.get(38)), (1, 2, 0));
    });
}

/// Core 1 reads block 0 while core 0 overwrites it (copy on write into its second buffer,
/// retiring the first) and then misses on block 1, which makes core 0 reclaim the retired
/// buffer and refill it with block 1. Core 1 must see block 0's old or new bytes, never
/// block 1's: the reclaim's write lock waits for core 1's read section.
#[test]
fn a_read_never_sees_its_buffer_reused() {
    bounded(3).check(|| {
        let cache = cache(2, 2);
        assert_eq!(read(&cache, 0, 0), [1; BS]);
        let reader = {
            let cache = cache.clone();
            thread::spawn(move || {
                let seen = read(&cache, 1, 0);
                assert!(seen == [1; BS] || seen == [9; BS], "{seen:?}");
            })
        };
        cache.write(0, 0, 0, &[9; BS]).unwrap();
        assert_eq!(read(&cache, 0, 1), [2; BS]);
        reader.join().unwrap();
        assert_eq!(read(&cache, 0, 0), [9; BS]);
    });
}

/// Core 0 owns one buffer, holding block 0; core 1 overwrites block 0 (its own buffer
/// replaces core 0's, which it then hands back) while core 0 misses on block 1. Core 0's
/// only buffer may be replaced but not yet handed back: it must wait for it, not fail
/// with `NoBuffer` (the stress test's one-buffer run found that).
#[test]
fn an_owner_waits_for_a_buffer_being_handed_back() {
    bounded(3).check(|| {
        let cache = cache(1, 2);
        assert_eq!(read(&cache, 0, 0), [1; BS]);
        let writer = {
            let cache = cache.clone();
            thread::spawn(move || cache.write(1, 0, 0, &[7; BS]).unwrap())
        };
        assert_eq!(read(&cache, 0, 1), [2; BS]);
        writer.join().unwrap();
        assert_eq!(read(&cache, 1, 0), [7; BS]);
    });
}

/// Two cores miss on the same block at once: both read the device, one links its buffer,
/// the other frees its own and uses the winner's.
#[test]
fn two_misses_on_one_block() {
    bounded(3).check(|| {
        let cache = cache(1, 1);
        let other = {
            let cache = cache.clone();
            thread::spawn(move || assert_eq!(read(&cache, 1, 0), [1; BS]))
        };
        assert_eq!(read(&cache, 0, 0), [1; BS]);
        other.join().unwrap();
        let (a, b) = (cache.stats(0).unwrap(), cache.stats(1).unwrap());
        // One core hits: the second to look, or the loser of the race on its retry.
        assert_eq!((a.hits + b.hits, a.misses + b.misses >= 1), (1, true));
        // The loser's buffer went back to its pool: another block still fits.
        cache.write(0, 0, 0, &[5; BS]).unwrap();
        cache.write(1, 0, 4, &[6; 4]).unwrap();
        assert_eq!(read(&cache, 0, 0), [5, 5, 5, 5, 6, 6, 6, 6]);
    });
}

/// Two cores write different bytes of one cached block at once: the version in the tree
/// entry makes the later swap retry on the earlier copy, so neither write is lost.
#[test]
fn two_partial_writes_to_one_block() {
    bounded(3).check(|| {
        let cache = cache(2, 1);
        read(&cache, 0, 0);
        let other = {
            let cache = cache.clone();
            thread::spawn(move || cache.write(1, 0, 6, &[7, 7]).unwrap())
        };
        cache.write(0, 0, 0, &[3, 3]).unwrap();
        other.join().unwrap();
        assert_eq!(read(&cache, 0, 0), [3, 3, 1, 1, 1, 1, 7, 7]);
    });
}

/// Core 1 writes a block while core 0 syncs: the sync writes the old or the new bytes, and
/// a later sync always leaves the newest on the device (a write-back marks a block clean
/// only if it is still the copy written).
#[test]
fn a_write_racing_a_sync_is_not_lost() {
    bounded(2).check(|| {
        let cache = cache(2, 1);
        cache.write(0, 0, 0, &[4; BS]).unwrap();
        let other = {
            let cache = cache.clone();
            thread::spawn(move || cache.write(1, 0, 0, &[8; BS]).unwrap())
        };
        cache.sync(0).unwrap();
        other.join().unwrap();
        cache.sync(0).unwrap();
        assert_eq!(cache.device().block(0), [8; BS]);
    });
}
