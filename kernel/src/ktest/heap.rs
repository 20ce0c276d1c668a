//! Layer 3 tests: per-core heaps, with blocks freed on foreign cores.

use super::{all_ok, JOB_TIMEOUT_US};
use crate::{kernel_test, smp};
use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};
use spin::Mutex;

kernel_test!(HEAP_CROSS_CORE_FREE, "heap.cross_core_free", 1, Shared, cross_core_free);
kernel_test!(HEAP_GIVES_BACK, "heap.gives_back_its_free_top", 1, Shared, gives_back_its_free_top);
kernel_test!(
    HEAP_HALTED_GIVE_BACK,
    "heap.a_halted_give_back_hears_its_acknowledgements",
    2,
    Shared,
    halted_give_back_hears_its_acknowledgements
);
kernel_test!(
    HEAP_GROWS_DURING_TRIM,
    "heap.grows_while_its_trim_is_unacknowledged",
    2,
    Shared,
    grows_while_its_trim_is_unacknowledged
);

/// The heap trims its free top (a shootdown to every core) while core 1 is busy with
/// interrupts off and cannot acknowledge; then a burst makes it grow again. The grow must
/// neither wait for core 1 from inside the allocator (reading messages there re-entered
/// the heap: a kernel panic at `smp4`; and core 1 answers only after the time limit) nor
/// map other frames at the trimmed addresses: it undoes the trim, and the burst's blocks
/// keep their contents.
fn grows_while_its_trim_is_unacknowledged() -> Result<(), String> {
    use core::sync::atomic::AtomicBool;
    crate::mem::heap::give_back_this_core(5_000_000);
    // Grow the heap, then free it all: a free top to trim.
    let burst: Vec<Box<[u64; 512]>> = (0..256).map(|i| Box::new([i as u64; 512])).collect();
    drop(burst);
    let (started, go) = (AtomicBool::new(false), AtomicBool::new(false));
    let busy = |_| -> Result<(), String> {
        let were_on = crate::arch::cpu::disable_interrupts();
        started.store(true, Ordering::Release);
        while !go.load(Ordering::Acquire) {
            core::hint::spin_loop();
        }
        if were_on {
            crate::arch::cpu::enable_interrupts();
        }
        Ok(())
    };
    let call = crate::monitor::call_async(1, &busy).map_err(|e| format!("{e:?}"))?;
    while !started.load(Ordering::Acquire) {
        crate::monitor::poll();
        core::hint::spin_loop();
    }
    let timed_out = crate::tlb::timed_out_shootdowns();
    crate::mem::heap::trim_this_core();
    let pending = crate::mem::heap::trim_pending_this_core();
    let mut burst: Vec<Box<[u64; 512]>> = Vec::new();
    for i in 0..256u64 {
        burst.push(Box::new([i; 512]));
    }
    let intact = burst.iter().enumerate().all(|(i, b)| b[0] == i as u64 && b[511] == i as u64);
    let undone = !crate::mem::heap::trim_pending_this_core();
    // Waiting for core 1 (busy until released below) would end only by the time limit.
    let waited = crate::tlb::timed_out_shootdowns() != timed_out;
    drop(burst);
    go.store(true, Ordering::Release);
    all_ok(&[1], &[crate::monitor::wait(call, JOB_TIMEOUT_US)])?;
    // The burst's pages back to the core (core 0 runs every test and never idles).
    crate::mem::heap::give_back_this_core(5_000_000);
    if !pending {
        return Err("the heap had nothing to trim".into());
    }
    if !intact {
        return Err("a block of the burst lost its contents".into());
    }
    if waited {
        return Err("the grow waited for the busy core until the shootdown timed out".into());
    }
    if !undone {
        return Err("the grow left the unacknowledged trim pending".into());
    }
    Ok(())
}

/// Blocks each core makes.
const BLOCKS: u64 = 199;

/// Every core allocates blocks of many sizes, each filled with its own tag, and hands them
/// to the next core, which checks every word (two blocks sharing memory would show the
/// other's tag) and frees them. Then each core allocates again, which takes back the
/// blocks freed into its heap from elsewhere: its bytes in use must fall by at least half
/// of what it handed out (the rest is slack for what the monitor allocates meanwhile).
fn cross_core_free() -> Result<(), String> {
    let cores = smp::online_cores();
    let n = cores.len();
    let slots: Vec<Mutex<Vec<Box<[u64]>>>> = (0..n).map(|_| Mutex::new(Vec::new())).collect();
    // Per core: bytes in use with its blocks alive, and the blocks' bytes.
    let in_use: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
    let handed: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
    let position = |index: usize| cores.iter().position(|&c| c == index).ok_or("not a test core");

    let make = |index: usize| -> Result<(), String> {
        let me = position(index)?;
        let blocks: Vec<Box<[u64]>> =
            (0..BLOCKS).map(|k| vec_of(size_of_block(k), tag(index, k))).collect();
        let bytes = blocks.iter().map(|b| b.len() as u64 * 8).sum();
        slots[(me + 1) % n].lock().extend(blocks);
        handed[me].store(bytes, Ordering::Relaxed);
        in_use[me].store(heap_in_use(), Ordering::Relaxed);
        Ok(())
    };
    all_ok(&cores, &smp::run_on(&cores, JOB_TIMEOUT_US, &make))?;

    let check_and_free = |index: usize| -> Result<(), String> {
        let me = position(index)?;
        let from = cores[(me + n - 1) % n];
        let blocks = core::mem::take(&mut *slots[me].lock());
        if blocks.len() as u64 != BLOCKS {
            return Err(format!("{} of {BLOCKS} blocks from core {from} arrived", blocks.len()));
        }
        for (k, b) in (0..BLOCKS).zip(&blocks) {
            if b.len() != size_of_block(k) || b.iter().any(|&w| w != tag(from, k)) {
                return Err(format!("block {k} from core {from} corrupted"));
            }
        }
        Ok(())
    };
    all_ok(&cores, &smp::run_on(&cores, JOB_TIMEOUT_US, &check_and_free))?;

    let take_back = |index: usize| -> Result<(), String> {
        let me = position(index)?;
        // This allocation takes back what the other core freed into our heap.
        let again = vec_of(4096, tag(index, BLOCKS));
        if again.iter().any(|&w| w != tag(index, BLOCKS)) {
            return Err("a fresh block does not hold what was written".into());
        }
        let (before, handed) =
            (in_use[me].load(Ordering::Relaxed), handed[me].load(Ordering::Relaxed));
        let now = heap_in_use();
        if now + handed / 2 > before + 4096 * 8 {
            return Err(format!(
                "{now} bytes in use, {before} before core {} freed the {handed} bytes it was handed",
                cores[(me + 1) % n]
            ));
        }
        Ok(())
    };
    all_ok(&cores, &smp::run_on(&cores, JOB_TIMEOUT_US, &take_back))
}

/// Words in block `k`: sizes from 1 to 517 words, in no order.
fn size_of_block(k: u64) -> usize {
    ((k + 1) * 3 % 517 + 1) as usize
}

/// What block `k` of core `core` holds in every word.
fn tag(core: usize, k: u64) -> u64 {
    (core as u64) << 32 | k
}

/// Bytes in use in this core's heap (blocks freed by other cores taken back first).
fn heap_in_use() -> u64 {
    crate::mem::heap::usage_this_core().0
}

fn vec_of(len: usize, value: u64) -> Box<[u64]> {
    alloc::vec![value; len].into_boxed_slice()
}

/// Most blocks in the burst of [`gives_back_its_free_top`] (4 KiB each: 8 MiB).
const BURST_BLOCKS: usize = 2048;

/// A burst of kernel allocations grows this core's heap (by up to 8 MiB, half the core's
/// free memory on a small VM); once they are freed,
/// trimming gives the heap's free top back: the core's free frames come back to within
/// the heap's slack of what they were, and its frames in hand are unchanged.
fn gives_back_its_free_top() -> Result<(), String> {
    let me = crate::percpu::this_core();
    // A trim asks every core to flush, and gives the frames back on a later call once
    // all have: wait until it has (or a few seconds have passed).
    let trim = || crate::mem::heap::give_back_this_core(5_000_000);
    trim();
    let (free_before, (mapped_before, _)) = (me.free_frames(), crate::mem::heap::stats_this_core());
    let blocks = BURST_BLOCKS.min(free_before as usize / 2);
    let mut burst: Vec<Box<[u64; 512]>> = Vec::new();
    burst.try_reserve_exact(blocks).map_err(|_| "no room for the burst's list")?;
    for i in 0..blocks {
        burst.push(Box::new([i as u64; 512]));
    }
    let mapped_during = crate::mem::heap::stats_this_core().0;
    // (Less the heap's free space before the burst: at most one grow step.)
    if mapped_during + 512 * 1024 < mapped_before + (blocks as u64) * 4096 {
        return Err(format!("the heap did not grow: {mapped_before} then {mapped_during} bytes"));
    }
    if burst.iter().enumerate().any(|(i, b)| b[511] != i as u64) {
        return Err("a block of the burst lost its contents".into());
    }
    drop(burst);
    let given = trim();
    let (free_after, (mapped_after, _)) = (me.free_frames(), crate::mem::heap::stats_this_core());
    // The trimmed heap keeps some slack (TRIM_MIN, GROW_STEP): allow 1 MiB of it.
    let slack = 256;
    if given == 0 || free_after + slack < free_before || mapped_after > mapped_before + slack * 4096
    {
        return Err(format!(
            "after the burst: {given} frames given back, free frames {free_before} -> \
             {free_after}, heap mapped {mapped_before} -> {mapped_after} bytes"
        ));
    }
    Ok(())
}

/// M15 item 4: with P forced to 1000 cycles, `give_back_this_core` halts while the other
/// cores acknowledge its trim's flush, and their IPIs must wake it. Its first version read
/// the channels after looking at the trim and then halted with the last acknowledgement in
/// hand, sleeping to the next tick every time.
fn halted_give_back_hears_its_acknowledgements() -> Result<(), String> {
    const ROUNDS: u64 = 20;
    let cores = smp::online_cores();
    let (given, waits) = super::with_poll_budget(&cores, 1000, || {
        let mut given = 0;
        for i in 0..ROUNDS {
            // Grow the heap, then free it all: a free top to trim and give back.
            let burst: Vec<Box<[u64; 512]>> = (0..256).map(|j| Box::new([i + j; 512])).collect();
            drop(burst);
            given += crate::mem::heap::give_back_this_core(5_000_000);
        }
        given
    })?;
    if given == 0 {
        return Err("no round gave frames back".into());
    }
    super::woken_by_their_messages("heap", &waits)?;
    crate::println!(
        "heap: {ROUNDS} give-backs at P = 1000: {given} frames, {} past P, {} halts, {} ended by the tick",
        waits.past_budget,
        waits.halts,
        waits.ended_by_tick
    );
    Ok(())
}
