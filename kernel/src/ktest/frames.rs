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

kernel_test!(FRAMES_CONCURRENT, "frames.concurrent", 1, Shared, concurrent);
kernel_test!(FRAMES_BAD_FREE, "frames.bad_free", 1, Shared, bad_free);
kernel_test!(
    FRAMES_FULL_CHANNEL,
    "frames.returns_survive_a_full_channel",
    2,
    Alone,
    returns_survive_a_full_channel
);

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

    let top = crate::knowledge::FACTS.get().map_or(0, |f| f.ram_top);
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

/// Frames core 1 lends core 0 to free in [`returns_survive_a_full_channel`] (many more
/// than a channel's 32 slots hold in `FRAME_RETURN` batches of 6).
const LENT_FRAMES: usize = 600;

/// Core 1 stops serving its channels for longer than a send waits (it runs a remote call
/// that spins), while core 0 frees frames core 1 owns: core 0's channel to core 1 fills
/// and its `FRAME_RETURN` sends time out. No frame may be lost: once core 1 serves its
/// channels again, every frame goes home and every core is back to its resources.
/// (Isolated: it takes a few seconds, so it runs in a VM of its own.)
fn returns_survive_a_full_channel() -> Result<(), String> {
    let cores = smp::online_cores();
    let before = super::balance::snapshot(&cores)?;
    let lent: Mutex<Vec<u64>> = Mutex::new(Vec::new());
    let take = |_| -> Result<(), String> {
        let mut list = lent.lock();
        list.try_reserve(LENT_FRAMES).map_err(|_| "no room for the list")?;
        for _ in 0..LENT_FRAMES {
            list.push(frames::alloc().ok_or("core 1 is out of frames")?);
        }
        Ok(())
    };
    all_ok(&[1], &smp::run_on(&[1], JOB_TIMEOUT_US, &take))?;
    // Longer than a send waits for room (2 s): core 0's sends to core 1 time out.
    let deaf = |_| -> Result<(), String> {
        crate::arch::timer::spin_us(3_000_000);
        Ok(())
    };
    let call = crate::monitor::call_async(1, &deaf).map_err(|e| format!("{e:?}"))?;
    crate::arch::timer::spin_us(100_000); // core 1 is spinning now
    for pa in core::mem::take(&mut *lent.lock()) {
        frames::free(pa).map_err(|e| format!("free of {pa:#x}: {e:?}"))?;
        crate::monitor::poll(); // sends full batches home: some time out
    }
    all_ok(&[1], &[crate::monitor::wait(call, JOB_TIMEOUT_US)])?;
    super::balance::check(&cores, &before)
}
