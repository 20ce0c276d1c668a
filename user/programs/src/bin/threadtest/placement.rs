//! `placement`, `numa-small`, `numa-big` and `resident`: where AMPS places a thread and
//! what its NUMA policy moves (AMPS §2.3, §2.4).

use super::{joined_ok, Check};
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use libatoll::thread::{self, Builder};
use libatoll::{cores_online, pcore_current, println, Status};

pub(crate) fn placement() -> Check {
    let cores = cores_online();
    let speeds: Vec<u64> = (0..cores)
        .map(|c| libatoll::locality_get(c).map(|l| l.compute_speed).unwrap_or(0))
        .collect();
    let fastest = (0..cores).max_by_key(|&c| speeds[c]).ok_or("no cores")?;
    let slowest = speeds.iter().copied().min().unwrap_or(0);
    println!("threadtest: placement: speeds {speeds:?}, fastest core {fastest}");
    if slowest * 10 > speeds[fastest] * 7 {
        return Err("the slowed cores do not measure slower (asym= not in force?)");
    }
    let here = pcore_current();
    if here == fastest {
        return Err("run this from a slow core: the fast one is busy with this program");
    }
    let landed = Arc::new(AtomicU64::new(u64::MAX));
    let t = {
        let landed = landed.clone();
        thread::spawn(move || {
            landed.store(pcore_current() as u64, Ordering::Release);
            0
        })
    }
    .map_err(|_| "spawn failed")?;
    joined_ok(t)?;
    let stat_core = landed.load(Ordering::Acquire);
    if stat_core != fastest as u64 {
        println!("threadtest: placement: the thread started on core {stat_core}");
        return Err("AMPS did not place the new thread on the fastest core");
    }
    Ok(())
}

/// AMPS §2.4.3, Table 4: whether a running thread with `bytes` resident on core 1's node
/// moves to core 0 when core 0 is idle and faster (see the module comment). Reports, on
/// one line, what the NUMA policy decided; fails only if the thread could not run its part
/// (no memory, pages not charged to it).
pub(crate) fn numa_move(bytes: u64) -> Check {
    if cores_online() < 2 {
        return Err("needs 2 cores");
    }
    let stop = Arc::new(AtomicBool::new(false));
    let landed = Arc::new(AtomicU64::new(u64::MAX));
    let t = {
        let (stop, landed) = (stop.clone(), landed.clone());
        // Held on core 1 while it faults its pages in, so all are on core 1's node (AMPS's
        // allocation-phase check needs a tick to see the growth: a pull before that one
        // would take it away half-allocated), then free to go anywhere.
        let every_core = (1u64 << cores_online().min(63)) - 1;
        Builder::new().core(1).affinity(1 << 1).spawn(move || {
            let Ok(mapping) = libatoll::private::map_new(bytes) else { return 2 };
            for page in (0..mapping.bytes).step_by(4096) {
                // SAFETY: the page lies in the fresh private mapping, which this thread owns.
                unsafe { core::ptr::write_volatile((mapping.va + page) as *mut u8, 1) };
            }
            let resident = thread::my_stat().map_or(0, |s| s.resident_pages);
            if thread::set_my_affinity(every_core).is_err() {
                return 4;
            }
            let mut core = pcore_current();
            // Running, not allocating (AMPS §2.4.3's allocation phase has ended at the next
            // tick): only the NUMA policy stands between it and the idle, faster core 0.
            while core == 1 && !stop.load(Ordering::Acquire) {
                for _ in 0..1000 {
                    core::hint::spin_loop();
                }
                core = pcore_current();
            }
            libatoll::private::free(mapping.va, mapping.bytes);
            landed.store(core as u64, Ordering::Release);
            if resident < bytes / 4096 {
                return 3;
            }
            0
        })
    }
    .map_err(|_| "spawn on core 1 failed")?;
    // Long enough for core 0 to ask many times (every few ticks) once the pages are in.
    let _ = thread::sleep_us(1_500_000 + bytes / 16);
    stop.store(true, Ordering::Release);
    match t.join() {
        Status::Exited(0) => {}
        Status::Exited(2) => return Err("no memory for the resident set"),
        Status::Exited(3) => return Err("the touched pages were not charged to the thread"),
        Status::Exited(4) => return Err("the thread could not widen its affinity"),
        _ => return Err("the thread did not exit 0"),
    }
    let kib = bytes >> 10;
    match landed.load(Ordering::Acquire) {
        1 => println!("threadtest: numa: {kib} KiB resident, stayed on core 1"),
        core => println!("threadtest: numa: {kib} KiB resident, moved to core {core}"),
    }
    Ok(())
}

/// AMPS §3.3's per-thread resident pages: a thread that touches 64 fresh pages has at
/// least 64 charged to it, and they are uncharged when the memory is freed.
pub(crate) fn resident() -> Check {
    let t = thread::spawn(|| {
        let before = thread::my_stat().map_or(0, |s| s.resident_pages);
        let pages = 64;
        let mapping = match libatoll::private::map_new(pages * 4096) {
            Ok(m) => m,
            Err(_) => return 2,
        };
        for p in 0..pages {
            // SAFETY: the page lies in the fresh private mapping, which this thread owns.
            unsafe { core::ptr::write_volatile((mapping.va + p * 4096) as *mut u8, 1) };
        }
        let touched = thread::my_stat().map_or(0, |s| s.resident_pages);
        libatoll::private::free(mapping.va, mapping.bytes);
        let after = thread::my_stat().map_or(0, |s| s.resident_pages);
        if touched < before + pages {
            return 3;
        }
        if after > touched - pages {
            return 4;
        }
        0
    })
    .map_err(|_| "spawn failed")?;
    match t.join() {
        Status::Exited(0) => Ok(()),
        Status::Exited(3) => Err("touched pages were not charged to the thread"),
        Status::Exited(4) => Err("freed pages stayed charged to the thread"),
        _ => Err("the resident-pages thread failed"),
    }
}
