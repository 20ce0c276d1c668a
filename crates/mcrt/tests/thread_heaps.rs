//! McRT-Malloc's heaps for system threads found through the host's thread-local storage
//! (`malloc::set_thread_heaps`, as Atoll's `libatoll::tls` names them; issue M15): each
//! system thread outside the runtime allocates from a heap of its own, not the global
//! locked one, and its blocks go to the pool when its thread-locals are destroyed. A
//! test binary of its own: the finder, once named, serves the whole process.

use mcrt::malloc::{self, ThreadHeap};
use std::alloc::Layout;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Barrier;

/// Blocks are 32 KiB, aligned to their size (`malloc::block`).
const BLOCK: usize = 32 * 1024;

static ASKED: AtomicUsize = AtomicUsize::new(0);
static REFUSE: AtomicBool = AtomicBool::new(false);

std::thread_local! {
    static SLOT: ThreadHeap = const { ThreadHeap::new() };
}

/// The host's finder: this thread's slot, or null (as during thread-local destruction).
fn find() -> *const ThreadHeap {
    ASKED.fetch_add(1, Ordering::Relaxed);
    if REFUSE.load(Ordering::Relaxed) {
        return std::ptr::null();
    }
    SLOT.try_with(|s| s as *const ThreadHeap).unwrap_or(std::ptr::null())
}

/// Allocates `n` 64-byte objects on this thread; their addresses.
fn allocate(n: usize) -> Vec<usize> {
    let layout = Layout::from_size_align(64, 8).unwrap();
    (0..n)
        .map(|_| {
            let p = malloc::alloc(layout);
            assert!(!p.is_null());
            p as usize
        })
        .collect()
}

fn free_all(objects: &[usize]) {
    let layout = Layout::from_size_align(64, 8).unwrap();
    for &p in objects {
        // SAFETY: allocated above with this layout, freed once.
        unsafe { malloc::free(p as *mut u8, layout) };
    }
}

#[test]
fn each_system_thread_allocates_from_its_own_heap() {
    malloc::set_thread_heaps(find);
    let pooled_before = malloc::stats().blocks_pooled;
    // Two threads allocate at the same time: with one shared heap their objects would
    // share blocks; with a heap each, no block holds objects of both.
    let meet = Barrier::new(2);
    let blocks: Vec<Vec<usize>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    meet.wait();
                    let objects = allocate(200);
                    meet.wait();
                    let mut blocks: Vec<usize> = objects.iter().map(|p| p & !(BLOCK - 1)).collect();
                    blocks.sort_unstable();
                    blocks.dedup();
                    free_all(&objects);
                    blocks
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(ASKED.load(Ordering::Relaxed) >= 400, "the host's finder was not asked");
    assert!(
        blocks[0].iter().all(|b| !blocks[1].contains(b)),
        "two threads allocated from one block: {blocks:?}"
    );
    // Both threads ended: their thread-locals were destroyed, so their heaps were
    // released and their blocks pooled.
    assert!(malloc::stats().blocks_pooled >= pooled_before + 2, "{:?}", malloc::stats());

    // A thread whose slot the host cannot give (null) is served by the global heap.
    REFUSE.store(true, Ordering::Relaxed);
    let objects = std::thread::spawn(|| allocate(10)).join().unwrap();
    free_all(&objects);
    REFUSE.store(false, Ordering::Relaxed);
}
