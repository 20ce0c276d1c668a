//! Layer 3 tests: per-core heaps, with blocks freed on foreign cores.

use super::{all_ok, JOB_TIMEOUT_US};
use crate::{kernel_test, smp};
use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use spin::Mutex;

kernel_test!(HEAP_CROSS_CORE_FREE, "heap.cross_core_free", 1, false, cross_core_free);

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
