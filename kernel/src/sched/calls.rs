//! The thread system calls: `thread_create`, `join`, `status`, `yield`, `sleep`, `wait`,
//! `wake`, `set_affinity`, `stat`, `set_fs_base`.

use super::balance::{dedicated_mask, place, start_on};
use super::inbox::{clear_waiter_bit, wake_here};
use super::running::{
    leave_raw, read_u32_of, read_words_of, write_words_of, After, OnWake, Role, Running, SWITCHED,
};
use super::{
    with_current, with_sched, JOIN_SPACE, SLEEP_MAX_US, SLEEP_SPACE, THREADS_PER_CORE_MAX,
};
use crate::arch::paging;
use crate::arch::user_entry::{self, SyscallFrame, UserRegs};
use crate::arch::{cpu, timer};
use crate::corey::{self, Ptr};
use crate::percpu::this_core;
use crate::thread::ThreadShared;
use crate::transport;
use abi::{pcore_status, wait_result, Error, ObjectKind, SysResult};
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{fence, Ordering};

/// Blocks the calling thread (its registers from `frame`; the call returns the word the
/// wake-up sets) or requeues it (`Ready`, returning `result`).
pub(super) fn switch_out(frame: &SyscallFrame, result: u64, after: After) -> ! {
    with_current(|r| {
        r.regs = UserRegs::from_syscall(frame, result);
        r.after = after;
    });
    leave_raw(SWITCHED)
}

/// A bit mask of the online cores.
pub(super) fn online_mask() -> u64 {
    let mut mask = 0;
    for c in crate::smp::online_cores() {
        if c < 64 {
            mask |= 1 << c;
        }
    }
    mask
}

/// `thread_create(&ThreadCreate)`.
pub fn thread_create(ptr: u64) -> SysResult {
    if crate::thread::live_threads(this_core().index) >= THREADS_PER_CORE_MAX {
        return Err(Error::NoResources);
    }
    corey::room_for_thread()?;
    let dedicated = dedicated_mask();
    let (t, id) = with_current(|r| {
        let a = abi::ThreadCreate::from_words(read_words_of(r, ptr)?);
        let root_ar = corey::lookup(&r.objects, a.ar[0], a.ar[1], ObjectKind::AddressRange)?;
        if !corey::is_root_range(&root_ar) || a.entry >= paging::USER_END {
            return Err(Error::InvalidArgument);
        }
        let n = usize::try_from(a.nshares).map_err(|_| Error::InvalidArgument)?;
        if n > abi::PcoreRun::MAX_SHARES {
            return Err(Error::InvalidArgument);
        }
        let online = online_mask();
        let affinity = if a.affinity == 0 { online } else { a.affinity & online };
        if affinity == 0 {
            return Err(Error::InvalidArgument);
        }
        if a.core != abi::ANY_CORE && (a.core >= 64 || affinity & (1 << a.core) == 0) {
            return Err(Error::InvalidArgument);
        }
        if a.core != abi::ANY_CORE && dedicated & (1 << a.core) != 0 {
            return Err(Error::Busy); // Corey §4.4: that pcore runs one context
        }
        if affinity & !dedicated == 0 {
            return Err(Error::Busy); // only dedicated cores: nowhere to place it
        }
        let shares = corey::shares_for_child(&r.objects, &a.shares[..n])?;
        // Revoked while the call read its block (a step serves two-phase messages): the
        // new set would start caught up with that revocation and keep them (issue M14).
        let seen = crate::corey::revocation::CAUGHT_UP.with(|c| *c);
        let carried: Vec<&Ptr> = core::iter::once(&root_ar).chain(shares.iter()).collect();
        if crate::corey::revocation::revoked_since(seen, &carried) {
            return Err(Error::NoSuchObject);
        }
        drop(carried);
        // Its objects are charged to its program's kernel memory, as the creator's are.
        let quota = r.objects.set.quota().clone();
        let objects = corey::new_context(root_ar, shares, quota)?;
        let shared = ThreadShared::new(affinity);
        let id = corey::thread_alloc(&mut r.objects, a.share, shared.clone())?;
        let mut name = r.name.clone();
        name.push_str("/thread");
        let regs = UserRegs::start(a.entry, a.stack, a.arg);
        // It lives within its program's time limit, and ends when its program does.
        let program = r.program.clone();
        let t = Running::new_thread(name, objects, shared, regs, program, Role::Spawned);
        Ok((t, (id, a.core)))
    })
    .ok_or(Error::NotPermitted)??;
    let (id, core) = id;
    let to = if core == abi::ANY_CORE {
        place(&t.shared).unwrap_or(this_core().index)
    } else {
        core as usize
    };
    start_on(t, to);
    Ok(id)
}

/// The thread ⟨rs, ro⟩ names, or the caller's own for ⟨0, 0⟩.
pub(super) fn target(rs: u64, ro: u64) -> Result<Arc<ThreadShared>, Error> {
    with_current(|r| {
        if rs == 0 && ro == 0 {
            return Ok(r.shared.clone());
        }
        let ptr: Ptr = corey::lookup(&r.objects, rs, ro, ObjectKind::Thread)?;
        corey::thread(&ptr).cloned().ok_or(Error::InvalidArgument)
    })
    .ok_or(Error::NotPermitted)?
}

/// `thread_status(ref_share, ref_obj)`.
pub fn thread_status(rs: u64, ro: u64) -> SysResult {
    Ok(target(rs, ro)?.status())
}

/// `thread_join(ref_share, ref_obj)`: returns the status word once the thread has ended.
pub fn thread_join(frame: &SyscallFrame, rs: u64, ro: u64) -> SysResult {
    let t = target(rs, ro)?;
    let own = with_current(|r| r.shared.uid).ok_or(Error::NotPermitted)?;
    if t.uid == own {
        return Err(Error::InvalidArgument); // it would wait for itself forever
    }
    join(frame, t)
}

/// Parks the caller until `t` ends; returns its status word.
pub fn join(frame: &SyscallFrame, t: Arc<ThreadShared>) -> SysResult {
    let me = this_core().index;
    t.joiners.fetch_or(1 << me, Ordering::SeqCst);
    let status = t.status.load(Ordering::SeqCst);
    if status != pcore_status::RUNNING {
        return Ok(status);
    }
    let key = (JOIN_SPACE, t.uid);
    switch_out(frame, 0, After::Park { key, deadline: None, on_wake: OnWake::Join(t) })
}

/// `yield()`.
pub fn yield_now(frame: &SyscallFrame) -> SysResult {
    switch_out(frame, 0, After::Ready)
}

/// `sleep(us)`.
pub fn sleep(frame: &SyscallFrame, us: u64) -> SysResult {
    if us > SLEEP_MAX_US {
        return Err(Error::InvalidArgument);
    }
    let uid = with_current(|r| r.shared.uid).ok_or(Error::NotPermitted)?;
    let deadline = cpu::rdtsc().saturating_add(timer::us_to_tsc(us));
    let after =
        After::Park { key: (SLEEP_SPACE, uid), deadline: Some(deadline), on_wake: OnWake::Sleep };
    switch_out(frame, 0, after)
}

/// `wait(addr, expected, timeout_us)`: parks the caller on the 32-bit word at `addr` if
/// it holds `expected`. This core's waiter bit on the address space is set before the
/// word is read, and a waker reads the bits after its store (both SeqCst), so a wake-up
/// that follows the store that changed the word always finds this thread.
pub fn wait(frame: &SyscallFrame, addr: u64, expected: u64, timeout_us: u64) -> SysResult {
    if !addr.is_multiple_of(4) || expected > u64::from(u32::MAX) || timeout_us > SLEEP_MAX_US {
        return Err(Error::InvalidArgument);
    }
    let me = this_core().index;
    let (space, word) = with_current(|r| {
        let root = r.objects.root_ar.clone();
        if let Some(mask) = corey::range_waiters(&root) {
            mask.fetch_or(1 << me, Ordering::SeqCst);
        }
        let word = read_u32_of(r, addr);
        (root, word)
    })
    .ok_or(Error::NotPermitted)?;
    // Not parking (the word changed, or it cannot be read): the bit set above goes again
    // unless another thread here waits in this address space.
    let not_parking = |space: &Ptr| {
        if !with_sched(|s| s.waits.has_space(space.id().0)) {
            clear_waiter_bit(space);
        }
    };
    let word = match word {
        Ok(word) => word,
        Err(e) => {
            not_parking(&space);
            return Err(e);
        }
    };
    if u64::from(word) != expected {
        not_parking(&space);
        return Ok(wait_result::CHANGED);
    }
    let deadline = (timeout_us > 0)
        .then(|| cpu::rdtsc().saturating_add(timeout_us * (timer::tsc_hz() / 1_000_000)));
    let key = (space.id().0, addr);
    drop(space);
    switch_out(frame, wait_result::WOKEN, After::Park { key, deadline, on_wake: OnWake::Wait })
}

/// `wake(addr, n)`: wakes up to `n` waiters on the word, here first, then on the other
/// cores with waiters in this address space, one after another by message.
pub fn wake(addr: u64, n: u64) -> SysResult {
    if !addr.is_multiple_of(4) {
        return Err(Error::InvalidArgument);
    }
    if n == 0 {
        return Ok(0);
    }
    let root = with_current(|r| r.objects.root_ar.clone()).ok_or(Error::NotPermitted)?;
    let space = root.id().0;
    // Pairs with the waiter's: its bit is visible, or it sees the new word.
    fence(Ordering::SeqCst);
    let cores = corey::range_waiters(&root).map_or(0, |m| m.load(Ordering::SeqCst));
    drop(root);
    let me = this_core().index;
    let woken = with_sched(|s| wake_here(s, (space, addr), n));
    if let Some((next, rest)) = sched::inbox::pass_on(me, (space, addr), n, woken, cores) {
        let _ = transport::send(next, rest);
    }
    Ok(woken)
}

/// `thread_set_affinity(ref_share, ref_obj, mask)`.
pub fn set_affinity(frame: &SyscallFrame, rs: u64, ro: u64, mask: u64) -> SysResult {
    let t = target(rs, ro)?;
    let mask = mask & online_mask();
    if mask == 0 {
        return Err(Error::InvalidArgument);
    }
    if mask & !dedicated_mask() == 0 {
        return Err(Error::Busy); // only dedicated cores (Corey §4.4): nowhere to run it
    }
    t.affinity.store(mask, Ordering::Relaxed);
    let me = this_core().index;
    let own = with_current(|r| Arc::ptr_eq(&r.shared, &t)).unwrap_or(false);
    if own && !t.allowed_on(me) {
        // Leave this core now: the loop sends it where it may run.
        drop(t);
        switch_out(frame, 0, After::Ready);
    }
    Ok(0)
}

/// `thread_stat(ref_share, ref_obj, &mut ThreadStat)`.
pub fn thread_stat(rs: u64, ro: u64, out: u64) -> SysResult {
    let t = target(rs, ro)?;
    let stat = abi::ThreadStat {
        status: t.status(),
        core: t.core.load(Ordering::Relaxed),
        migrations: t.migrations.load(Ordering::Relaxed),
        switches: t.switches.load(Ordering::Relaxed),
        resident_pages: t.resident.counts().iter().sum(),
    };
    drop(t);
    with_current(|r| write_words_of(r, out, &stat.to_words())).ok_or(Error::NotPermitted)??;
    Ok(0)
}

/// `set_fs_base(base)`: the calling thread's FS base, loaded now and kept in its box
/// whenever it is off the CPU (`run_next`), so every switch and migration keeps it. A
/// base outside the user half is `InvalidArgument` (`abi::fs_base_allowed`).
pub fn set_fs_base(base: u64) -> SysResult {
    if !abi::fs_base_allowed(base) {
        return Err(Error::InvalidArgument);
    }
    with_current(|r| r.fs_base = base).ok_or(Error::NotPermitted)?;
    user_entry::load_fs_base(base);
    Ok(0)
}
