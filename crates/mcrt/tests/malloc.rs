//! The allocator (McRT §2.3, McRT-Malloc): it never hands out overlapping live objects, in
//! either version, across size classes and alignments, with frees from other heaps; McRT
//! threads freeing each other's objects lose and duplicate nothing; the blocks of ended
//! threads are recycled.

use mcrt::hosted::LinuxHost;
use mcrt::malloc::{self, Heap, Version};
use mcrt::{Config, Policy};
use proptest::prelude::*;
use std::alloc::Layout;
use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

/// The tests share the allocator's version setting and counters: one at a time.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

const VERSIONS: [Version; 2] = [Version::Locked, Version::NonBlocking];

#[derive(Clone, Debug)]
enum Op {
    /// Allocate `size` bytes aligned to `1 << align_log` from heap `heap`.
    Alloc { heap: usize, size: usize, align_log: u32 },
    /// Free the live object picked by `pick` through heap `heap` (its own or another's).
    Free { heap: usize, pick: usize },
    /// Drop heap `heap` (its blocks go to the pool, live objects stay) and make a new one.
    Restart { heap: usize },
}

fn op() -> impl Strategy<Value = Op> {
    let size = prop_oneof![0usize..=64, 0usize..=512, 0usize..=2200, 2000usize..=5000];
    prop_oneof![
        6 => (0..2usize, size, 0u32..=8).prop_map(|(heap, size, align_log)| Op::Alloc { heap, size, align_log }),
        4 => (0..2usize, any::<usize>()).prop_map(|(heap, pick)| Op::Free { heap, pick }),
        1 => (0..2usize).prop_map(|heap| Op::Restart { heap }),
    ]
}

/// A live object: its layout and the byte it is filled with.
struct Live {
    layout: Layout,
    fill: u8,
}

fn check_intact(addr: usize, live: &Live) {
    // SAFETY: a live object of this layout that we filled.
    let bytes = unsafe { std::slice::from_raw_parts(addr as *const u8, live.layout.size()) };
    assert!(bytes.iter().all(|&b| b == live.fill), "object {addr:#x} was overwritten");
}

/// Runs `ops` on two heaps of `version`, checking every object handed out: aligned, not
/// overlapping any live one, and its contents intact until it is freed.
fn run_ops(version: Version, ops: &[Op]) {
    let _g = serial();
    let mut heaps = [Heap::new(version).unwrap(), Heap::new(version).unwrap()];
    let mut live: BTreeMap<usize, Live> = BTreeMap::new();
    for (n, op) in ops.iter().enumerate() {
        match *op {
            Op::Alloc { heap, size, align_log } => {
                let layout = Layout::from_size_align(size, 1 << align_log).unwrap();
                let p = heaps[heap].alloc(layout) as usize;
                assert_ne!(p, 0, "out of memory");
                assert_eq!(p % layout.align(), 0, "{layout:?} misaligned at {p:#x}");
                let end = p + size.max(1);
                if let Some((&a, l)) = live.range(..=p).next_back() {
                    assert!(a + l.layout.size().max(1) <= p, "{p:#x} overlaps {a:#x}");
                }
                if let Some((&a, _)) = live.range(p..).next() {
                    assert!(end <= a, "{p:#x}+{size} overlaps {a:#x}");
                }
                let fill = n as u8 | 1;
                // SAFETY: fresh memory of `size` bytes.
                unsafe { std::ptr::write_bytes(p as *mut u8, fill, size) };
                live.insert(p, Live { layout, fill });
            }
            Op::Free { heap, pick } => {
                if live.is_empty() {
                    continue;
                }
                let addr = *live.keys().nth(pick % live.len()).unwrap();
                let l = live.remove(&addr).unwrap();
                check_intact(addr, &l);
                // SAFETY: a live object of this layout, not used again.
                unsafe { heaps[heap].free(addr as *mut u8, l.layout) };
            }
            Op::Restart { heap } => heaps[heap] = Heap::new(version).unwrap(),
        }
    }
    for (addr, l) in live {
        check_intact(addr, &l);
        // SAFETY: as above.
        unsafe { heaps[addr % 2].free(addr as *mut u8, l.layout) };
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn live_objects_never_overlap_locked(ops in prop::collection::vec(op(), 1..400)) {
        run_ops(Version::Locked, &ops);
    }

    #[test]
    fn live_objects_never_overlap_non_blocking(ops in prop::collection::vec(op(), 1..400)) {
        run_ops(Version::NonBlocking, &ops);
    }
}

/// Many objects of one class: a heap fills block after block, frees them all, and reuses
/// them (blocks are not created again).
#[test]
fn freed_objects_are_reused() {
    let _g = serial();
    for v in VERSIONS {
        let h = Heap::new(v).unwrap();
        let layout = Layout::from_size_align(40, 8).unwrap();
        let first: Vec<usize> = (0..10_000).map(|_| h.alloc(layout) as usize).collect();
        for &p in &first {
            // SAFETY: ours, not used again.
            unsafe { h.free(p as *mut u8, layout) };
        }
        let before = malloc::stats().blocks_created;
        let second: HashSet<usize> = (0..10_000).map(|_| h.alloc(layout) as usize).collect();
        assert_eq!(malloc::stats().blocks_created, before, "{v:?}: blocks made again");
        assert_eq!(second, first.iter().copied().collect(), "{v:?}");
    }
}

/// McRT threads allocate objects tagged with unique ids and pass them to other threads,
/// which check and free them (remote frees): every id arrives exactly once, intact; then
/// the next round reuses the memory.
#[test]
fn mcrt_threads_free_each_others_objects() {
    let _g = serial();
    for v in VERSIONS {
        malloc::set_version(v);
        let before = malloc::stats();
        const THREADS: usize = 8;
        const PER: usize = 5_000;
        let seen = mcrt::run(Config::new(Policy::Stealing, 2), &LinuxHost::unpinned(), || {
            let mail: Arc<Vec<Mutex<Vec<usize>>>> =
                Arc::new((0..THREADS).map(|_| Mutex::new(Vec::new())).collect());
            let hs: Vec<_> = (0..THREADS)
                .map(|me| {
                    let mail = mail.clone();
                    mcrt::spawn(move || {
                        let mut got = Vec::new();
                        for i in 0..PER {
                            let id = me * PER + i;
                            let size = 16 + (id * 37) % 1500;
                            let layout = Layout::from_size_align(size, 8).unwrap();
                            let p = malloc::alloc(layout) as *mut u64;
                            assert!(!p.is_null());
                            // SAFETY: fresh, at least 8 bytes; the last word too.
                            unsafe {
                                p.write(id as u64);
                                (p as *mut u8)
                                    .add(size - 8)
                                    .cast::<u64>()
                                    .write_unaligned(!(id as u64));
                            }
                            mail[(me + 1 + i % (THREADS - 1)) % THREADS]
                                .lock()
                                .unwrap()
                                .push(p as usize);
                            if i.is_multiple_of(64) {
                                got.extend(take_and_free(&mail[me]));
                                mcrt::yield_now();
                            }
                        }
                        got
                    })
                    .unwrap()
                })
                .collect();
            let mut all: Vec<u64> = hs.into_iter().flat_map(|h| h.join().unwrap()).collect();
            for m in mail.iter() {
                all.extend(take_and_free(m));
            }
            all
        })
        .unwrap();
        let mut seen = seen;
        seen.sort_unstable();
        assert_eq!(seen, (0..(THREADS * PER) as u64).collect::<Vec<_>>(), "{v:?}: lost or doubled");
        let after = malloc::stats();
        assert!(after.remote_batches > before.remote_batches, "{v:?}: no remote batches");
        assert!(after.blocks_pooled > before.blocks_pooled, "{v:?}: exited threads kept blocks");
    }
}

/// Takes the objects in a mailbox, checks their two tags, frees them; returns their ids.
fn take_and_free(mail: &Mutex<Vec<usize>>) -> Vec<u64> {
    let objs = std::mem::take(&mut *mail.lock().unwrap());
    objs.into_iter()
        .map(|p| {
            let p = p as *mut u64;
            // SAFETY: an object from `mcrt_threads_free_each_others_objects`, tagged there.
            let id = unsafe { p.read() };
            assert!(
                id < 40_000,
                "bad id {id:#x} at {:#x} version {:?}",
                p as usize,
                malloc::version()
            );
            let size = 16 + (id as usize * 37) % 1500;
            // SAFETY: as above.
            let tail = unsafe { (p as *const u8).add(size - 8).cast::<u64>().read_unaligned() };
            assert_eq!(tail, !id, "object {id} was overwritten");
            // SAFETY: its layout, recomputed from its id; not used again.
            unsafe { malloc::free(p.cast(), Layout::from_size_align(size, 8).unwrap()) };
            id
        })
        .collect()
}

/// Threads that allocate and end one after another: the later ones run on the blocks the
/// earlier ones left in the pool, so the system is asked for few blocks.
#[test]
fn blocks_of_exited_threads_are_recycled() {
    let _g = serial();
    for v in VERSIONS {
        malloc::set_version(v);
        let before = malloc::stats();
        const THREADS: u64 = 200;
        mcrt::run(Config::new(Policy::Stealing, 2), &LinuxHost::unpinned(), || {
            for _ in 0..THREADS {
                mcrt::spawn(|| {
                    // A class nothing else here uses; kept live, the block stays in use.
                    let layout = Layout::from_size_align(1000, 8).unwrap();
                    let ps: Vec<_> = (0..20).map(|_| malloc::alloc(layout)).collect();
                    for p in ps {
                        // SAFETY: ours, not used again.
                        unsafe { malloc::free(p, layout) };
                    }
                })
                .unwrap()
                .join()
                .unwrap();
            }
        })
        .unwrap();
        let after = malloc::stats();
        let created = after.blocks_created - before.blocks_created;
        let recycled = after.blocks_recycled - before.blocks_recycled;
        assert!(recycled >= THREADS - 5, "{v:?}: only {recycled} blocks recycled");
        assert!(created <= 10, "{v:?}: {created} blocks made for {THREADS} threads");
    }
}

/// OS threads (thread-local heaps) of both versions hammer one shared pool and each
/// other's blocks: many threads start, allocate, pass objects on, and end, at once.
#[test]
fn os_threads_stress_the_pools() {
    let _g = serial();
    for v in VERSIONS {
        malloc::set_version(v);
        let shared: Arc<Mutex<Vec<(usize, usize)>>> = Arc::new(Mutex::new(Vec::new()));
        for _wave in 0..4 {
            let ts: Vec<_> = (0..16)
                .map(|t| {
                    let shared = shared.clone();
                    std::thread::spawn(move || {
                        for i in 0..2_000usize {
                            let size = 16 + (t * 131 + i * 17) % 700;
                            let l = Layout::from_size_align(size, 16).unwrap();
                            let p = malloc::alloc(l);
                            // SAFETY: fresh, `size` bytes.
                            unsafe { std::ptr::write_bytes(p, size as u8, size) };
                            let old = {
                                let mut s = shared.lock().unwrap();
                                s.push((p as usize, size));
                                let n = s.len();
                                (n > 500).then(|| s.swap_remove((t * 7 + i) % n))
                            };
                            if let Some((q, n)) = old {
                                // SAFETY: a live object of `n` bytes from this test.
                                let bytes =
                                    unsafe { std::slice::from_raw_parts(q as *const u8, n) };
                                assert!(bytes.iter().all(|&b| b == n as u8), "overwritten");
                                // SAFETY: its layout; not used again.
                                unsafe {
                                    malloc::free(
                                        q as *mut u8,
                                        Layout::from_size_align(n, 16).unwrap(),
                                    )
                                };
                            }
                        }
                    })
                })
                .collect();
            for t in ts {
                t.join().unwrap();
            }
        }
        for (q, n) in std::mem::take(&mut *shared.lock().unwrap()) {
            // SAFETY: as above.
            unsafe { malloc::free(q as *mut u8, Layout::from_size_align(n, 16).unwrap()) };
        }
    }
}
