//! The cache's behaviour through its public API, one mechanism per test: hits and misses,
//! copy-on-write across cores, write-back in block order, eviction within the pool,
//! invalidation, private blocks, device errors and refused arguments.
#![cfg(not(loom))]

mod common;

use bcache::{Cache, Config, ConfigError, Error, Stats};
use common::{Failed, MemDevice};
use std::sync::atomic::Ordering::SeqCst;

const BS: usize = 64;

fn cache(cores: usize, per_core: usize, blocks: u64) -> Cache<MemDevice> {
    let config = Config { cores, block_size: BS, buffers_per_core: per_core };
    Cache::new(MemDevice::new(blocks, BS), config).expect("valid config")
}

fn pattern(seed: u8) -> Vec<u8> {
    (0..BS).map(|i| seed.wrapping_mul(31).wrapping_add(i as u8)).collect()
}

fn read_all(c: &Cache<MemDevice>, core: usize, block: u64) -> Vec<u8> {
    let mut out = vec![0; BS];
    c.read(core, block, 0, &mut out).expect("read");
    out
}

#[test]
fn configs_are_checked() {
    let bad = |cores, block_size, buffers_per_core| {
        Cache::new(MemDevice::new(4, BS), Config { cores, block_size, buffers_per_core }).err()
    };
    assert_eq!(bad(0, 64, 1), Some(ConfigError::NoCores));
    assert_eq!(bad(1, 0, 1), Some(ConfigError::BadBlockSize(0)));
    assert_eq!(bad(1, 12, 1), Some(ConfigError::BadBlockSize(12)));
    assert_eq!(bad(1, 64, 0), Some(ConfigError::NoBuffers));
    assert_eq!(bad(usize::MAX, 64, 2), Some(ConfigError::TooManyBuffers));
    assert!(bad(2, 64, 1).is_none());
}

#[test]
fn a_miss_reads_the_device_once_then_every_core_hits() {
    let c = cache(2, 4, 100);
    c.device().set(42, &pattern(1));
    assert!(!c.contains(0, 42).unwrap());
    assert_eq!(read_all(&c, 0, 42), pattern(1));
    assert!(c.contains(1, 42).unwrap());
    let mut part = [0u8; 5];
    c.read(1, 42, 10, &mut part).unwrap();
    assert_eq!(part, pattern(1)[10..15]);
    assert_eq!(*c.device().reads.lock().unwrap(), 1);
    assert_eq!(c.stats(0).unwrap(), Stats { misses: 1, ..Stats::default() });
    assert_eq!(c.stats(1).unwrap(), Stats { hits: 1, ..Stats::default() });
}

#[test]
fn writes_copy_on_write_and_other_cores_see_them() {
    let c = cache(2, 4, 16);
    c.device().set(3, &pattern(2));
    c.write(0, 3, 4, b"abcd").unwrap(); // partial, uncached: reads the device first
    assert_eq!(*c.device().reads.lock().unwrap(), 1);
    let mut expect = pattern(2);
    expect[4..8].copy_from_slice(b"abcd");
    assert_eq!(read_all(&c, 1, 3), expect);
    c.write(1, 3, 0, &pattern(9)).unwrap(); // whole, cached: core 1's buffer replaces core 0's
    c.write(0, 5, 0, &pattern(5)).unwrap(); // whole, uncached: no device read
    assert_eq!(*c.device().reads.lock().unwrap(), 1);
    assert_eq!(read_all(&c, 0, 3), pattern(9));
    assert_eq!(read_all(&c, 1, 5), pattern(5));
    assert!(c.device().take_writes().is_empty(), "write-back, not write-through");
    assert_eq!(c.device().block(3), pattern(2));
}

#[test]
fn sync_writes_dirty_blocks_once_in_block_order() {
    let c = cache(3, 8, 1000);
    for (core, block) in [(2, 900u64), (0, 7), (1, 300), (0, 64), (2, 8)] {
        c.write(core, block, 0, &pattern(block as u8)).unwrap();
    }
    read_all(&c, 1, 500); // clean: not written
    c.make_private(1, 100).unwrap();
    c.write(1, 100, 0, &pattern(100)).unwrap();
    c.sync(2).unwrap();
    assert_eq!(c.device().take_writes(), [7, 8, 64, 100, 300, 900]);
    for block in [7u64, 8, 64, 100, 300, 900] {
        assert_eq!(c.device().block(block), pattern(block as u8));
    }
    c.sync(0).unwrap();
    assert!(c.device().take_writes().is_empty(), "clean after sync");
    assert_eq!(c.stats(2).unwrap().writebacks, 6);
}

#[test]
fn a_full_pool_evicts_clean_blocks_first_and_keeps_memory_bounded() {
    let c = cache(1, 4, 64);
    c.write(0, 0, 0, &pattern(0)).unwrap(); // dirty: kept while clean blocks remain
    for block in 1..40 {
        c.device().set(block, &pattern(block as u8));
        assert_eq!(read_all(&c, 0, block), pattern(block as u8));
    }
    let cached = (0..64).filter(|&b| c.contains(0, b).unwrap()).count();
    assert!(cached <= 4, "{cached} blocks cached in 4 buffers");
    assert!(c.contains(0, 0).unwrap(), "the dirty block was not evicted");
    assert!(c.device().take_writes().is_empty());
    let s = c.stats(0).unwrap();
    assert_eq!(s.misses, 40);
    assert!(s.evictions >= 35, "{s:?}");
}

#[test]
fn when_every_block_is_dirty_eviction_writes_one_back() {
    let c = cache(2, 2, 64);
    for block in 0..10 {
        c.write(block as usize % 2, block, 0, &pattern(block as u8)).unwrap();
    }
    assert!(!c.device().take_writes().is_empty());
    for block in 0..10 {
        assert_eq!(read_all(&c, 1, block), pattern(block as u8));
    }
    c.sync(0).unwrap();
    for block in 0..10 {
        assert_eq!(c.device().block(block), pattern(block as u8));
    }
}

#[test]
fn invalidate_writes_back_and_the_next_read_sees_the_device() {
    let c = cache(2, 4, 16);
    c.write(0, 2, 0, &pattern(1)).unwrap();
    c.invalidate(1, 2).unwrap();
    assert_eq!(c.device().take_writes(), [2]);
    assert!(!c.contains(0, 2).unwrap());
    c.device().set(2, &pattern(7)); // changed behind the cache's back
    assert_eq!(read_all(&c, 0, 2), pattern(7));
    c.invalidate(0, 9).unwrap(); // not cached: nothing to do
                                 // Buffers freed by invalidation are reused: many more blocks than buffers.
    for block in 0..16 {
        c.write(1, block, 0, &pattern(block as u8)).unwrap();
        c.invalidate(0, block).unwrap();
    }
    for block in 0..16 {
        assert_eq!(c.device().block(block), pattern(block as u8));
    }
}

#[test]
fn private_blocks_stay_out_of_the_shared_tree() {
    let c = cache(2, 4, 64);
    c.write(0, 10, 0, &pattern(1)).unwrap();
    c.make_private(1, 10).unwrap(); // the shared copy is written back and dropped
    assert_eq!(c.device().take_writes(), [10]);
    assert!(!c.contains(0, 10).unwrap(), "core 0 looks in the shared tree");
    assert_eq!(read_all(&c, 1, 10), pattern(1));
    assert!(c.contains(1, 10).unwrap());
    assert!(!c.contains(0, 10).unwrap());
    c.write(1, 10, 8, b"private!").unwrap();
    let mut expect = pattern(1);
    expect[8..16].copy_from_slice(b"private!");
    assert_eq!(read_all(&c, 1, 10), expect);
    assert_eq!(c.device().block(10), pattern(1), "not yet written back");
    // More private blocks than buffers: clean ones are evicted, dirty ones written back.
    for block in 20..30 {
        c.make_private(1, block).unwrap();
        c.write(1, block, 0, &pattern(block as u8)).unwrap();
    }
    for block in 20..30 {
        assert_eq!(read_all(&c, 1, block), pattern(block as u8));
    }
    c.make_shared(1, 10).unwrap();
    assert_eq!(c.device().block(10), expect);
    assert_eq!(read_all(&c, 0, 10), expect);
    c.sync(0).unwrap();
    for block in 20..30 {
        assert_eq!(c.device().block(block), pattern(block as u8));
    }
    c.make_shared(1, 11).unwrap(); // not private: nothing to do
}

#[test]
fn device_errors_are_returned_and_leave_the_cache_consistent() {
    let c = cache(2, 2, 16);
    c.device().set(1, &pattern(1));
    c.device().fail_reads.store(true, SeqCst);
    let mut out = vec![0; BS];
    assert_eq!(c.read(0, 1, 0, &mut out), Err(Error::Device(Failed)));
    assert_eq!(c.write(0, 1, 3, b"x"), Err(Error::Device(Failed)));
    assert!(!c.contains(0, 1).unwrap());
    c.device().fail_reads.store(false, SeqCst);
    assert_eq!(read_all(&c, 0, 1), pattern(1));

    c.write(1, 4, 0, &pattern(4)).unwrap();
    c.write(1, 2, 0, &pattern(2)).unwrap();
    c.device().fail_writes.store(true, SeqCst);
    assert_eq!(c.sync(0), Err(Error::Device(Failed)));
    assert_eq!(c.invalidate(0, 4), Err(Error::Device(Failed)));
    // Core 1's pool holds two dirty blocks: a third needs a write-back, which fails.
    assert_eq!(c.write(1, 9, 0, &pattern(9)), Err(Error::Device(Failed)));
    c.device().fail_writes.store(false, SeqCst);
    assert_eq!(read_all(&c, 0, 4), pattern(4), "still cached and dirty");
    c.sync(0).unwrap();
    assert_eq!(c.device().take_writes(), [2, 4]);
    c.write(1, 9, 0, &pattern(9)).unwrap();
}

#[test]
fn bad_arguments_are_refused() {
    let c = cache(2, 2, 16);
    let mut out = [0u8; 8];
    assert_eq!(c.read(2, 0, 0, &mut out), Err(Error::NoSuchCore(2)));
    assert_eq!(c.read(0, 16, 0, &mut out), Err(Error::NoSuchBlock(16)));
    assert_eq!(c.read(0, 0, BS - 4, &mut out), Err(Error::OutOfBlock { offset: BS - 4, len: 8 }));
    assert_eq!(
        c.write(0, 0, usize::MAX, b"ab"),
        Err(Error::OutOfBlock { offset: usize::MAX, len: 2 })
    );
    assert_eq!(c.sync(5), Err(Error::NoSuchCore(5)));
    assert_eq!(c.stats(2), Err(Error::NoSuchCore(2)));
    assert_eq!(c.make_private(0, 99), Err(Error::NoSuchBlock(99)));
    assert_eq!(c.invalidate(0, 16), Err(Error::NoSuchBlock(16)));
    assert_eq!(c.contains(3, 0), Err(Error::NoSuchCore(3)));
    assert_eq!(Error::<Failed>::NoSuchBlock(3).to_string(), "no block 3");
    c.read(0, 0, BS, &mut []).unwrap(); // an empty range at the end is fine
}
