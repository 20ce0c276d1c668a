//! `tls`: each thread's FS base and thread-locals, and its own McRT-Malloc heap (issue
//! M15).

use super::{joined_ok, Check};
use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::cell::Cell;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use libatoll::abi::{Error, USER_END};
use libatoll::thread::{self, Builder};
use libatoll::{cores_online, pcore_current, println, tls};

libatoll::thread_local! {
    /// How many rounds this thread counted.
    static COUNT: Cell<u64> = Cell::new(0);
    /// Which worker this thread is.
    static WHO: Cell<u64> = Cell::new(u64::MAX);
    /// Counts its drop in `TLS_DROPS` when the thread ends.
    static DROP_GUARD: DropGuard = DropGuard;
}

/// Destructors of `DROP_GUARD` that ran.
static TLS_DROPS: AtomicU64 = AtomicU64::new(0);

struct DropGuard;

impl Drop for DropGuard {
    fn drop(&mut self) {
        TLS_DROPS.fetch_add(1, Ordering::AcqRel);
    }
}

/// The FS base as loaded now (`fs:[0]` of a block whose first word is its address).
fn loaded_base() -> u64 {
    tls::block_address()
}

fn set_fs_base(base: u64) -> Result<(), Error> {
    tls::set_fs_base(base)
}

pub(crate) fn tls() -> Check {
    // Without the call (an older kernel) the thread has no block and FS base 0, and reading
    // it would fault: ask first, with a base any kernel that has the call refuses.
    if set_fs_base(u64::MAX) == Err(Error::NoSuchCall) {
        return Err("no set_fs_base call");
    }
    let block = loaded_base();
    tls_refusals(block)?;
    tls_workers(Some(0))?;
    if cores_online() >= 2 {
        tls_workers(None)?;
    } else {
        println!("threadtest: tls: one core, so no moves between cores");
    }
    tls_heaps()
}

/// Bases outside the user half are `InvalidArgument` and leave the loaded base alone;
/// then the thread's `block` is loaded again.
fn tls_refusals(block: u64) -> Check {
    let own = Box::new([0u64; 2]);
    let own_addr = own.as_ptr() as u64;
    // SAFETY: our box; its first word becomes its own address, as a thread block's.
    unsafe { *(own_addr as *mut u64) = own_addr };
    set_fs_base(own_addr).map_err(|_| "set_fs_base refused a heap address")?;
    let bad = [
        USER_END,
        USER_END + 0x1000,
        0x1234_5678_9abc_def0,
        0xffff_8000_0000_0000,
        0xffff_ffff_8000_0000,
        u64::MAX,
    ];
    for base in bad {
        if set_fs_base(base) != Err(Error::InvalidArgument) {
            println!("threadtest: tls: FS base {base:#x} was not refused");
            return Err("a kernel-half or non-canonical FS base was not refused");
        }
        if loaded_base() != own_addr {
            return Err("a refused FS base changed the loaded one");
        }
    }
    set_fs_base(block).map_err(|_| "set_fs_base refused the thread's block")?;
    drop(own);
    println!("threadtest: tls: {} bad bases refused", bad.len());
    Ok(())
}

/// Workers per run, and rounds each.
const TLS_WORKERS: usize = 4;
const TLS_ROUNDS: u64 = 200;

/// `TLS_WORKERS` threads, all on core `pin` or (None) each moving itself between cores 0
/// and 1 every round; each alternates a base of its own (a private block) with its
/// thread block (its `thread_local!`s), yielding between checks so they switch.
fn tls_workers(pin: Option<usize>) -> Check {
    let before = TLS_DROPS.load(Ordering::Acquire);
    let bad = Arc::new(AtomicU64::new(0));
    let moved = Arc::new(AtomicU64::new(0));
    let mut threads = Vec::new();
    for i in 0..TLS_WORKERS {
        let (bad, moved) = (bad.clone(), moved.clone());
        let builder = match pin {
            Some(core) => Builder::new().core(core).affinity(1 << core),
            None => Builder::new().core(i % 2).affinity(0b11),
        };
        let t = builder
            .spawn(move || {
                if let Err(why) = tls_worker(i as u64, pin.is_none(), &moved) {
                    println!("threadtest: tls: worker {i}: {why}");
                    bad.fetch_add(1, Ordering::AcqRel);
                }
                0
            })
            .map_err(|_| "spawn failed")?;
        threads.push(t);
    }
    let mut migrations = 0;
    for t in threads {
        migrations += t.stat().map(|s| s.migrations).unwrap_or(0);
        joined_ok(t)?;
    }
    if bad.load(Ordering::Acquire) != 0 {
        return Err("a thread found another's FS base or thread-local values");
    }
    if TLS_DROPS.load(Ordering::Acquire) - before != TLS_WORKERS as u64 {
        return Err("a thread's thread-local destructor did not run when it ended");
    }
    let moves = moved.load(Ordering::Acquire);
    if pin.is_none() && (moves == 0 || migrations == 0) {
        return Err("the moving threads never changed cores");
    }
    let place = match pin {
        Some(core) => alloc::format!("on core {core}"),
        None => alloc::format!("moving between cores 0 and 1 ({moves} moves)"),
    };
    println!("threadtest: tls: {TLS_WORKERS} threads {place} kept their FS bases and values");
    Ok(())
}

/// One worker: see [`tls_workers`].
fn tls_worker(me: u64, moving: bool, moved: &AtomicU64) -> Check {
    let block = loaded_base();
    WHO.with(|w| w.set(me));
    DROP_GUARD.with(|_| ());
    let own = Box::new([0u64; 2]);
    let own_addr = own.as_ptr() as u64;
    // SAFETY: our box; its first word becomes its own address, as a thread block's.
    unsafe { *(own_addr as *mut u64) = own_addr };
    let mut core = pcore_current();
    for round in 0..TLS_ROUNDS {
        set_fs_base(own_addr).map_err(|_| "set_fs_base refused a heap address")?;
        for _ in 0..3 {
            thread::yield_now();
            if loaded_base() != own_addr {
                return Err("after a switch its own FS base was not loaded");
            }
        }
        if moving {
            // Move to the other core at once (the affinity excludes this one).
            let to = 1 - (round as usize % 2);
            thread::set_my_affinity(1 << to).map_err(|_| "set_my_affinity failed")?;
            if pcore_current() != core {
                moved.fetch_add(1, Ordering::AcqRel);
                core = pcore_current();
            }
            if loaded_base() != own_addr {
                return Err("after a move its own FS base was not loaded");
            }
        }
        set_fs_base(block).map_err(|_| "set_fs_base refused its block")?;
        COUNT.with(|c| c.set(c.get() + 1));
        thread::yield_now();
        if loaded_base() != block || WHO.with(|w| w.get()) != me {
            return Err("after a switch its thread block was not loaded");
        }
    }
    if COUNT.with(|c| c.get()) != TLS_ROUNDS {
        return Err("its thread-local count took another thread's counts");
    }
    drop(own);
    Ok(())
}

/// McRT-Malloc on kernel threads outside the runtime: two threads allocating at once
/// share no 32 KiB block (each has a heap of its own, found through its thread-local
/// storage); when they end, their heaps' blocks go to the pool.
fn tls_heaps() -> Check {
    const BLOCK: u64 = 32 * 1024;
    let pooled = mcrt::malloc::stats().blocks_pooled;
    let ready = Arc::new(AtomicU64::new(0));
    let blocks: Arc<[AtomicU64; 2]> = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
    let shared = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for i in 0..2usize {
        let (ready, blocks, shared) = (ready.clone(), blocks.clone(), shared.clone());
        let core = i % cores_online();
        let t = Builder::new()
            .core(core)
            .affinity(1 << core)
            .spawn(move || {
                let layout = core::alloc::Layout::from_size_align(64, 8).unwrap();
                ready.fetch_add(1, Ordering::AcqRel);
                while ready.load(Ordering::Acquire) < 2 {
                    thread::yield_now();
                }
                let mut objects = Vec::with_capacity(200);
                for k in 0..200 {
                    let p = mcrt::malloc::alloc(layout) as u64;
                    if p == 0 {
                        return 1;
                    }
                    objects.push(p);
                    if k % 20 == 0 {
                        thread::yield_now();
                    }
                }
                blocks[i].store(objects[0] & !(BLOCK - 1), Ordering::Release);
                ready.fetch_add(1, Ordering::AcqRel);
                while ready.load(Ordering::Acquire) < 4 {
                    thread::yield_now();
                }
                let other = blocks[1 - i].load(Ordering::Acquire);
                if objects.iter().any(|p| p & !(BLOCK - 1) == other) {
                    shared.store(true, Ordering::Release);
                }
                for p in objects {
                    // SAFETY: allocated above with this layout, freed once.
                    unsafe { mcrt::malloc::free(p as *mut u8, layout) };
                }
                0
            })
            .map_err(|_| "spawn failed")?;
        threads.push(t);
    }
    for t in threads {
        joined_ok(t)?;
    }
    if shared.load(Ordering::Acquire) {
        return Err("two kernel threads allocated from one McRT-Malloc block (one shared heap)");
    }
    if mcrt::malloc::stats().blocks_pooled < pooled + 2 {
        return Err("the threads' McRT-Malloc blocks did not go to the pool when they ended");
    }
    println!("threadtest: tls: McRT-Malloc gave each kernel thread its own heap");
    Ok(())
}
