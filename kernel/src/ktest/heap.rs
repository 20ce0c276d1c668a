//! Layer 3 tests: per-core heaps, with blocks freed on foreign cores.

use super::{all_ok, JOB_TIMEOUT_US};
use crate::{kernel_test, smp};
use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use spin::Mutex;

kernel_test!(HEAP_CROSS_CORE_FREE, "heap.cross_core_free", 1, false, cross_core_free);
kernel_test!(HEAP_GIVES_BACK, "heap.gives_back_its_free_top", 1, false, gives_back_its_free_top);

/// Every core allocates blocks of many sizes and hands them to the next core, which frees
/// them; the blocks' contents arrive intact and the memory is reused afterwards.
fn cross_core_free() -> Result<(), String> {
    let cores = smp::online_cores();
    let n = cores.len();
    let slots: Vec<Mutex<Vec<Box<[u64]>>>> = (0..n).map(|_| Mutex::new(Vec::new())).collect();
    let make = |index: usize| -> Result<(), String> {
        let me = cores.iter().position(|&c| c == index).ok_or("not a test core")?;
        let blocks: Vec<Box<[u64]>> =
            (1..200).map(|len| vec_of(len * 3 % 517 + 1, index as u64)).collect();
        slots[(me + 1) % n].lock().extend(blocks);
        Ok(())
    };
    all_ok(&cores, &smp::run_on(&cores, JOB_TIMEOUT_US, &make))?;
    let check_and_free = |index: usize| -> Result<(), String> {
        let me = cores.iter().position(|&c| c == index).ok_or("not a test core")?;
        let from = cores[(me + n - 1) % n] as u64;
        for b in core::mem::take(&mut *slots[me].lock()) {
            if b.iter().any(|&w| w != from) {
                return Err(format!("block from core {from} corrupted"));
            }
        }
        // Allocate again: this takes back what others freed into our heap.
        let again = vec_of(4096, 7);
        if again.len() != 4096 {
            return Err("allocation after foreign frees failed".into());
        }
        Ok(())
    };
    all_ok(&cores, &smp::run_on(&cores, JOB_TIMEOUT_US, &check_and_free))
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
    let trim = || crate::mem::heap::trim_this_core(crate::tlb::shootdown_kernel);
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
