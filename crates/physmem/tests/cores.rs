//! Puts the pieces together the way the kernel will (Corey §4.1 per-core free lists, with
//! frames freed on a foreign core sent home): usable frames are partitioned over two NUMA
//! nodes, every "core" (a thread) owns a `CoreFrames` over its share and a `ReturnStack`
//! that other cores push its frames onto. Threads allocate, free, and hand frames to each
//! other; a foreign frame is freed by pushing it onto its owner's stack (owner looked up in
//! `FrameOwners`), and owners drain their stacks into their bitmaps. A global table checks
//! that no frame is ever held twice, and free frames must add up to the same total at the end.

use physmem::{
    bitmap_words, partition, usable_frames, CoreFrames, CoreShare, FrameOwners, NodeMemory,
    PhysRange, RangeSet, FRAME_SIZE,
};
use return_stack::{AtomicU64, Links, ReturnStack};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread;

const K: u64 = FRAME_SIZE;
const MIB: u64 = 1 << 20;
const CORES: usize = 4;
const ROUNDS: usize = 20_000;
/// A core frees rather than allocates once it holds this many frames.
const HOLD_MAX: usize = 200;

/// Stands in for frame memory: the link word of frame `addr` is `words[addr / K]`.
struct FrameLinks {
    words: Vec<AtomicU64>,
}

impl Links for FrameLinks {
    fn link(&self, node: u64) -> &AtomicU64 {
        &self.words[(node / K) as usize]
    }
}

/// What every core shares: the read-only owner table, the return stacks, frame "memory" and
/// the checker's table of held frames.
struct Machine {
    owners: FrameOwners<64>,
    stacks: Vec<ReturnStack>,
    links: FrameLinks,
    held: Vec<AtomicBool>,
}

impl Machine {
    /// Records that `core` now holds frame `addr`; it must not be held already.
    fn take(&self, addr: u64) {
        let was = self.held[(addr / K) as usize].swap(true, Ordering::SeqCst);
        assert!(!was, "frame {addr:#x} handed out while held");
    }

    /// Gives up frame `addr`: freed locally if `frames` owns it, else sent home.
    fn release(&self, addr: u64, frames: &mut CoreFrames) {
        let was = self.held[(addr / K) as usize].swap(false, Ordering::SeqCst);
        assert!(was, "frame {addr:#x} released but not held");
        let owner = self.owners.owner_of(addr).expect("frame has an owner");
        if owner == frames.core() {
            frames.free(addr).expect("local free");
        } else {
            self.stacks[owner].push(addr, &self.links);
        }
    }

    /// The owner's drain: frames other cores returned go back into its bitmap. Returns how
    /// many came back.
    fn drain(&self, frames: &mut CoreFrames) -> u64 {
        let mut returned = 0;
        if self.stacks[frames.core()].is_empty() {
            return 0;
        }
        let mut taken = self.stacks[frames.core()].take_all();
        while let Some(addr) = taken.next(&self.links) {
            frames.free(addr).expect("returned frame was in use");
            returned += 1;
        }
        returned
    }
}

/// Where the cores meet before the final drain. Unlike `std::sync::Barrier` it cannot hang
/// the test run when a core panicked: the others then fail too.
struct Finish {
    arrived: AtomicUsize,
    failed: AtomicBool,
}

impl Finish {
    fn wait(&self) {
        self.arrived.fetch_add(1, Ordering::SeqCst);
        while self.arrived.load(Ordering::SeqCst) < CORES {
            assert!(!self.failed.load(Ordering::SeqCst), "another core failed");
            thread::yield_now();
        }
    }
}

/// Marks the run failed if the core holding it panics.
struct FailOnPanic<'a>(&'a Finish);

impl Drop for FailOnPanic<'_> {
    fn drop(&mut self) {
        if thread::panicking() {
            self.0.failed.store(true, Ordering::SeqCst);
        }
    }
}

/// A tiny deterministic random generator (xorshift64).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// What one core saw.
struct Report {
    free_before: u64,
    free_after: u64,
    /// Frames other cores sent home to this one.
    returned: u64,
}

/// One core's life.
fn run_core(
    m: &Machine,
    share: &CoreShare,
    core: usize,
    tx: Vec<mpsc::Sender<u64>>,
    rx: mpsc::Receiver<u64>,
    done: &Finish,
) -> Report {
    let _fail = FailOnPanic(done);
    let mut storage = vec![0; bitmap_words(share.ranges())];
    let mut frames = CoreFrames::new(core, share.ranges(), &mut storage).unwrap();
    let before = frames.free_count();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (core as u64 + 1));
    let mut mine: Vec<u64> = Vec::new();
    let mut returned = 0;

    for _ in 0..ROUNDS {
        returned += m.drain(&mut frames);
        while let Ok(addr) = rx.try_recv() {
            mine.push(addr);
        }
        match rng.below(4) {
            0 | 1 if mine.len() < HOLD_MAX => {
                if let Some(addr) = frames.alloc() {
                    m.take(addr);
                    mine.push(addr);
                }
            }
            3 if !mine.is_empty() => {
                let addr = mine.swap_remove(rng.below(mine.len()));
                let to = (core + 1 + rng.below(CORES - 1)) % CORES;
                tx[to].send(addr).unwrap();
            }
            _ if !mine.is_empty() => {
                let addr = mine.swap_remove(rng.below(mine.len()));
                m.release(addr, &mut frames);
            }
            _ => {}
        }
    }

    // Wind down: stop sending, give back everything held or still arriving, then (once every
    // core has finished pushing) drain the frames returned to us.
    drop(tx);
    for addr in mine {
        m.release(addr, &mut frames);
    }
    for addr in rx {
        m.release(addr, &mut frames); // a frame in flight is still marked held
    }
    done.wait();
    returned += m.drain(&mut frames);
    assert_eq!(frames.free_count(), frames.total(), "core {core} leaked frames");
    Report { free_before: before, free_after: frames.free_count(), returned }
}

#[test]
fn cores_return_foreign_frames_home() {
    // 16 MiB of RAM from 1 MiB (frame 0 is never RAM here: 0 is the empty-stack marker),
    // with a reserved hole; node 0 holds the first 8 MiB, node 1 the rest.
    let ram = [PhysRange::new(MIB, 17 * MIB)];
    let reserved = [PhysRange::new(5 * MIB, 5 * MIB + 3 * K + 1)];
    let usable: RangeSet<8> = usable_frames(ram, reserved).unwrap();
    let nodes = [
        NodeMemory { node: 0, range: PhysRange::new(0, 9 * MIB) },
        NodeMemory { node: 1, range: PhysRange::new(9 * MIB, 17 * MIB) },
    ];
    let core_nodes = [0, 0, 1, 1];
    let mut shares = [CoreShare::new(); CORES];
    partition(&usable, &nodes, &core_nodes, &mut shares).unwrap();

    let frame_count = (17 * MIB / K) as usize;
    let m = Machine {
        owners: FrameOwners::from_shares(&shares).unwrap(),
        stacks: (0..CORES).map(|_| ReturnStack::new()).collect(),
        links: FrameLinks { words: (0..frame_count).map(|_| AtomicU64::new(0)).collect() },
        held: (0..frame_count).map(|_| AtomicBool::new(false)).collect(),
    };
    let done = Finish { arrived: AtomicUsize::new(0), failed: AtomicBool::new(false) };
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..CORES).map(|_| mpsc::channel()).unzip();

    let reports: Vec<Report> = thread::scope(|s| {
        let handles: Vec<_> = rxs
            .into_iter()
            .enumerate()
            .map(|(core, rx)| {
                let (m, share, done, tx) = (&m, &shares[core], &done, txs.clone());
                s.spawn(move || run_core(m, share, core, tx, rx, done))
            })
            .collect();
        drop(txs);
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });

    let before: u64 = reports.iter().map(|r| r.free_before).sum();
    let after: u64 = reports.iter().map(|r| r.free_after).sum();
    for (core, r) in reports.iter().enumerate() {
        assert!(r.returned > 0, "core {core} never got a frame back");
    }
    assert_eq!(before, usable.total_frames());
    assert_eq!(before, after);
    assert!(m.held.iter().all(|h| !h.load(Ordering::SeqCst)));
    assert!(m.stacks.iter().all(ReturnStack::is_empty));
}
