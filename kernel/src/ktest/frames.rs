//! Layer 2 tests: per-core frame lists under concurrent use.

use super::{all_ok, JOB_TIMEOUT_US};
use crate::mem::frames;
use crate::percpu;
use crate::{kernel_test, smp};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};
use spin::Mutex;

kernel_test!(FRAMES_CONCURRENT, "frames.concurrent", 1, false, concurrent);
kernel_test!(FRAMES_BAD_FREE, "frames.bad_free", 1, false, bad_free);

/// Rounds of allocate / hand over / free per core.
const ROUNDS: usize = 40;
/// Frames each core allocates per round.
const BATCH: usize = 32;

/// One bit per physical frame: set while some core holds the frame.
struct HeldBitmap {
    words: Vec<AtomicU64>,
}

impl HeldBitmap {
    fn new(top: u64) -> Self {
        HeldBitmap { words: (0..(top / 4096).div_ceil(64)).map(|_| AtomicU64::new(0)).collect() }
    }

    /// Marks `pa` held; `false` if it already was (a frame handed out twice).
    fn take(&self, pa: u64) -> bool {
        let f = pa / 4096;
        let bit = 1 << (f % 64);
        self.words[(f / 64) as usize].fetch_or(bit, Ordering::AcqRel) & bit == 0
    }

    fn release(&self, pa: u64) {
        let f = pa / 4096;
        self.words[(f / 64) as usize].fetch_and(!(1 << (f % 64)), Ordering::AcqRel);
    }
}

/// All cores allocate and free at once; half of every batch is freed by the next core, so
/// frames travel back to their owners by message (`FRAME_RETURN`). No frame is ever held
/// twice, and each core's frames, heap bytes and objects are the same before and after.
fn concurrent() -> Result<(), String> {
    let cores = smp::online_cores();
    let before = super::balance::snapshot(&cores)?;
    let rejected_before = rejected_total();
    allocate_and_hand_over(&cores)?;
    if rejected_total() != rejected_before {
        return Err(format!("{} messages rejected", rejected_total() - rejected_before));
    }
    // (After the test's own bitmap and hand-off lists are gone.)
    super::balance::check(&cores, &before)
}

/// The body of [`concurrent`]: every core allocates, frees, and hands frames over.
fn allocate_and_hand_over(cores: &[usize]) -> Result<(), String> {
    let n = cores.len();

    let top = crate::boot::FACTS.get().map_or(0, |f| f.ram_top);
    let held = HeldBitmap::new(top);
    // Frames handed from core i to core (i + 1) % n, which frees them.
    let handoff: Vec<Mutex<Vec<u64>>> = (0..n).map(|_| Mutex::new(Vec::new())).collect();
    let work = |index: usize| -> Result<(), String> {
        let me = cores.iter().position(|&c| c == index).ok_or("not a test core")?;
        let mut mine = Vec::with_capacity(BATCH);
        for round in 0..ROUNDS {
            for _ in 0..BATCH {
                let pa = frames::alloc().ok_or("out of frames")?;
                if !held.take(pa) {
                    return Err(format!("frame {pa:#x} handed out twice (round {round})"));
                }
                // SAFETY: a frame this core holds; the direct map reaches it.
                unsafe { *(crate::arch::paging::phys_to_virt(pa) as *mut u64) = pa ^ index as u64 };
                mine.push(pa);
            }
            let to_next: Vec<u64> = mine.drain(BATCH / 2..).collect();
            for pa in mine.drain(..) {
                held.release(pa);
                frames::free(pa).map_err(|e| format!("local free of {pa:#x}: {e:?}"))?;
            }
            handoff[(me + 1) % n].lock().extend(to_next);
            let given: Vec<u64> = core::mem::take(&mut *handoff[me].lock());
            for pa in given {
                held.release(pa);
                frames::free(pa).map_err(|e| format!("foreign free of {pa:#x}: {e:?}"))?;
            }
        }
        Ok(())
    };
    all_ok(cores, &smp::run_on(cores, JOB_TIMEOUT_US, &work))?;
    // Frames still in hand-off slots (the last round's) are freed by the boot core.
    for slot in &handoff {
        for pa in core::mem::take(&mut *slot.lock()) {
            held.release(pa);
            frames::free(pa).map_err(|e| format!("late free of {pa:#x}: {e:?}"))?;
        }
    }
    Ok(())
}

fn rejected_total() -> u64 {
    percpu::all_cores().map(|c| c.rejected()).sum()
}

/// Bad frees are errors, not crashes: unaligned, not RAM, and a double free.
fn bad_free() -> Result<(), String> {
    let pa = frames::alloc().ok_or("out of frames")?;
    frames::free(pa).map_err(|e| format!("first free: {e:?}"))?;
    let errors = [
        (frames::free(pa), "double free"),
        (frames::free(pa + 8), "unaligned free"),
        (frames::free(0xffff_0000_0000), "free of an address that is not RAM"),
    ];
    for (result, what) in errors {
        if result.is_ok() {
            return Err(format!("{what} of {pa:#x} was accepted"));
        }
    }
    Ok(())
}
