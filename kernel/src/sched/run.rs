//! The loop ([`run_next`]): take the next ready thread, switch to its
//! tables and FPU state, run it until it leaves, then file it where it belongs; and the
//! tick ([`on_tick`]): the time slice, wake-up deadlines, load reports, pulls.

use super::balance::{balance, forward_load, report_load, ship, undedicate};
use super::inbox::{clear_waiter_bit, expire_deadlines, reap_on, wake_here, Inbox, INBOX};
use super::message::SchedMessage;
use super::running::{finish, leave_raw, After, Cr3, Role, Running, SWITCHED};
use super::{policy, with_current, with_sched, BALANCE_EVERY_TICKS, JOIN_SPACE, QUEUE_CAPACITY};
use crate::arch::paging;
use crate::arch::timer;
use crate::arch::user_entry::{self, KernelContext, UserRegs};
use crate::corey::{self, Ptr};
use crate::percpu::{self, this_core};
use crate::thread::ExitStatus;
use crate::transport;
use abi::pcore_status;
use alloc::boxed::Box;
use core::sync::atomic::{AtomicBool, Ordering};
use sched::{Action, Choice, Here};

/// What the scheduler does between threads and at ticks: its inbox, deadlines, load.
pub(super) fn housekeeping() {
    read_inbox();
    for t in with_sched(expire_deadlines) {
        end_off_cpu(t);
    }
    report_load();
}

/// Takes the next ready thread and runs it until it leaves the CPU; returns false if none
/// was ready. What to do with it is `sched::choose`'s: run it, end it, or move it.
pub(super) fn run_next() -> bool {
    let me = this_core().index;
    let Some(choice) = with_sched(|s| {
        s.queue.switch()?;
        let t = s.queue.running()?;
        // Marked before the check (both SeqCst): a stop that missed this core's mark
        // is seen here (`Program::stop`).
        t.program.touch(me);
        Some(sched::choose(t, me, policy(), &s.table, crate::smp::online_cores))
    }) else {
        return false;
    };
    if choice == Choice::Run {
        return run_running(me);
    }
    let Some(t) = with_sched(|s| s.queue.take_running()) else { return true };
    match choice {
        // Its program was stopped while it was queued, parked or on its way here.
        Choice::End => {
            let status = t.program.stopping().unwrap_or(ExitStatus::Halted);
            end_thread(t, status);
        }
        // Its affinity changed: it runs elsewhere (AMPS places it among its cores, §2.3.2).
        Choice::Move(to) => ship(t, to),
        Choice::Stay | Choice::Run => with_sched(|s| s.queue.push(t)),
    }
    true
}

/// What switching to the running thread needs, read from its box in the running slot.
struct SwitchIn {
    /// Its root's tables (entering the root may fail: the thread then fails).
    pml4: Result<u64, abi::Error>,
    root: Ptr,
    regs: *const UserRegs,
    fpu: *const user_entry::FpuState,
    fs_base: u64,
    /// Its pcore's tick rate, if it was started through a pcore.
    hz: Option<u64>,
}

/// Runs the thread in the running slot until it leaves the CPU, then files it where it
/// belongs. The loop's saved context (`kcontext`) lives on this frame while it runs.
fn run_running(me: usize) -> bool {
    let mut kcontext = KernelContext::default();
    let Some(prepared) = prepare(me, &kcontext) else { return false };
    let Ok(pml4) = prepared.pml4 else {
        if let Some(t) = with_sched(|s| s.queue.take_running()) {
            end_thread(t, ExitStatus::Failed);
        }
        return true;
    };
    let word = switch_in(me, &mut kcontext, prepared, pml4);
    file_after(word);
    true
}

/// Counts the switch and readies the running thread's box for it: the loop's context to
/// leave to, its pcore marked running, its root entered.
fn prepare(me: usize, kcontext: &KernelContext) -> Option<SwitchIn> {
    let context: *const KernelContext = kcontext;
    with_sched(|s| {
        s.stats.switches += 1;
        let t = s.queue.running_mut()?;
        t.context = context;
        t.shared.switches.fetch_add(1, Ordering::Relaxed);
        t.shared.core.store(me as u64, Ordering::Relaxed);
        let hz = t.pcore.as_ref().and_then(corey::pcore).map(|p| {
            p.status.store(pcore_status::RUNNING, Ordering::Release);
            p.hz.load(Ordering::Relaxed)
        });
        let pml4 = corey::enter_root(&t.objects);
        if let Ok(pml4) = pml4 {
            t.space = crate::corey::space::AddressSpace::view(pml4);
        }
        let root = t.objects.root_ar.clone();
        let (regs, fpu) = (&t.regs as *const UserRegs, &t.fpu as *const user_entry::FpuState);
        Some(SwitchIn { pml4, root, regs, fpu, fs_base: t.fs_base, hz })
    })
}

/// Switches to the prepared thread (its tick rate, tables, FPU state and FS base) and
/// runs it until it leaves; returns the word it left with.
fn switch_in(me: usize, kcontext: &mut KernelContext, p: SwitchIn, pml4: u64) -> u64 {
    let core = this_core();
    // A throttled core keeps its duty-cycle phases: its tick is not a pcore's to set.
    let own_tick =
        p.hz.filter(|&hz| hz != timer::tick_hz() && crate::throttle::duty_eighths(me) == 8);
    if let Some(hz) = own_tick {
        crate::throttle::set_tick_hz(me, hz);
    }
    load_tables(p.root, pml4);
    // SAFETY: the box is in the run queue's running slot until it leaves, and stable.
    unsafe { (*p.fpu).restore() };
    // Every switch loads the thread's own FS base, 0 included: the last thread's never
    // stays for the next.
    user_entry::load_fs_base(p.fs_base);
    core.in_context.store(true, Ordering::Release);
    // SAFETY: `kcontext` lives on the caller's frame until the thread leaves; RSP0 is
    // this core's; the box (and `regs` in it) stays in the running slot while it runs.
    let word = unsafe { user_entry::run_saved(kcontext, &*p.regs, core.rsp0_slot()) };
    core.in_context.store(false, Ordering::Release);
    if own_tick.is_some() {
        crate::throttle::start_tick(me);
    }
    word
}

/// Files the thread that just left the CPU with `word`: back in the run queue, parked,
/// shipped, or ended.
fn file_after(word: u64) {
    let Some(mut t) = with_sched(|s| {
        let t = s.queue.take_running();
        s.queue.shrink_when_empty(QUEUE_CAPACITY);
        // A pull of the running thread lapses with it (the puller asks again).
        s.ship_running = None;
        t
    }) else {
        return;
    };
    // The kernel never touches the FPU or FS: they still hold the thread's state.
    t.fpu.save();
    t.fs_base = user_entry::fs_base();
    if word != SWITCHED {
        return end_thread(t, ExitStatus::decode(word));
    }
    match core::mem::replace(&mut t.after, After::Ready) {
        After::Ready => with_sched(|s| s.queue.push(t)),
        After::Park { key, deadline, on_wake } => {
            t.on_wake = Some(on_wake);
            // A park never outlasts the program's time limit (it ends the thread).
            let limit = t.program.deadline();
            let deadline = Some(deadline.map_or(limit, |d| d.min(limit)));
            with_sched(|s| s.waits.park(key, t, deadline));
        }
        After::Ship(to) => ship(t, to),
    }
}

/// An ended thread that was on the CPU (or about to be): the core leaves its tables
/// (before its root forgets this core), then [`retire`].
pub(super) fn end_thread(t: Box<Running>, status: ExitStatus) {
    unload_tables();
    retire(t, status, Cr3::SwitchedAway);
}

/// A thread of a stopped program, taken from a wait or run queue here: it ends with its
/// program's status; the tables in CR3 stay (the running thread may share them).
pub(super) fn end_off_cpu(t: Box<Running>) {
    let status = t.program.stopping().unwrap_or(ExitStatus::Halted);
    let root = t.objects.root_ar.clone();
    retire(t, status, Cr3::MayHoldThem);
    // It may have been the last waiter of its address space here.
    if !with_sched(|s| s.waits.has_space(root.id().0)) {
        clear_waiter_bit(&root);
    }
}

/// An ended thread's last steps: its objects go, its status is published, its joiners
/// wake (by message elsewhere); a main thread's end stops the rest of its program.
pub(super) fn retire(t: Box<Running>, status: ExitStatus, cr3: Cr3) {
    let shared = t.shared.clone();
    undedicate(&shared);
    // Stopped before its status is published: whoever sees the status finds the rest of
    // the program stopping.
    let reap = (t.role == Role::Main).then(|| t.program.stop(ExitStatus::Halted));
    finish(*t, status, cr3);
    let word = status.status_word();
    shared.status.store(word, Ordering::SeqCst);
    let joiners = shared.joiners.swap(0, Ordering::SeqCst);
    let me = this_core().index;
    if joiners & (1 << me) != 0 {
        with_sched(|s| wake_here(s, (JOIN_SPACE, shared.uid), u64::MAX));
    }
    for c in 0..percpu::core_count().min(64) {
        if c != me && joiners & (1 << c) != 0 {
            let _ = transport::send(c, SchedMessage::Joined { uid: shared.uid });
        }
    }
    if let Some(cores) = reap {
        reap_on(cores);
    }
}

/// Switches this core to `root`'s tables (`pml4`) unless they are in CR3 already. The
/// scheduler holds the loaded root, so its tables cannot be freed while CR3 points at
/// them (a thread that moved away or ended elsewhere may take the last other reference);
/// the root it replaces loses this core from its shootdown set (a CR3 write flushed its
/// translations).
pub(super) fn load_tables(root: Ptr, pml4: u64) {
    let same = with_sched(|s| s.loaded.as_ref().is_some_and(|l| l.id() == root.id()));
    if same {
        return;
    }
    // SAFETY: the root's tables map the kernel half like the kernel's own; the thread's
    // pages fault in through its root range; the scheduler holds the root (below).
    unsafe { paging::activate(pml4) };
    let old = with_sched(|s| s.loaded.replace(root));
    if let Some(old) = old {
        corey::leave_root_range(&old);
    }
}

/// Back to the kernel's tables, letting the loaded root go (the core is idle, or the
/// thread on it ended).
pub(super) fn unload_tables() {
    let old = with_sched(|s| s.loaded.take());
    if let Some(old) = old {
        // SAFETY: the kernel tables map everything the kernel uses.
        unsafe { paging::activate(crate::mem::heap::kernel_pml4()) };
        corey::leave_root_range(&old);
    }
}

/// `tlbflush=tick` (`boot::choose_tlb_flush`): every core empties its whole TLB at each
/// tick that interrupts user mode. Off by default. For emulation: QEMU's TCG sizes its
/// software TLB only when the guest flushes it, and Atoll, whose programs keep one address
/// space (no CR3 switch), otherwise leaves it at its initial 256 entries, so a program
/// with a larger working set (NPB's CG: `docs/npb.md`) misses on nearly every access; a
/// Linux guest flushes at each address-space switch. On hardware it costs one refill per
/// tick.
static FLUSH_ON_TICK: AtomicBool = AtomicBool::new(false);

/// Turns [`FLUSH_ON_TICK`] on or off (at boot, before the cores start ticking).
pub fn choose_flush_on_tick(on: bool) {
    FLUSH_ON_TICK.store(on, Ordering::Relaxed);
}

/// A timer tick that interrupted a thread in user mode: the scheduler's turn. Ends the
/// thread's slice (its registers saved from `frame`) when its slice is over and another
/// is ready, when a puller asked for it, when its affinity excludes this core, or when
/// calls or starts wait for the core.
pub fn on_tick(frame: &crate::arch::trap::TrapFrame) {
    if FLUSH_ON_TICK.load(Ordering::Relaxed) {
        paging::flush_everything();
    }
    housekeeping();
    let now = this_core().ticks();
    if now.is_multiple_of(BALANCE_EVERY_TICKS) {
        balance();
    }
    let over = with_sched(|s| s.queue.tick());
    with_current(|r| r.shared.note_tick());
    switch_if_due(frame, over);
}

/// A kick (wake-up IPI) that interrupted a thread in user mode: as the tick, without
/// counting against the slice.
pub fn on_kick(frame: &crate::arch::trap::TrapFrame) {
    housekeeping();
    switch_if_due(frame, false);
}

/// Ends the running thread's slice (`over`), ships it to a puller, or moves it off a core
/// its affinity excludes; `frame` holds its registers.
pub(super) fn switch_if_due(frame: &crate::arch::trap::TrapFrame, over: bool) {
    let deferred = transport::has_deferred();
    let me = this_core().index;
    let after = with_sched(|s| {
        let t = s.queue.running()?;
        if let Some(to) = s.ship_running.take() {
            if t.shared.allowed_on(to) {
                return Some(After::Ship(to));
            }
        }
        if over || deferred || !t.shared.allowed_on(me) {
            s.stats.preemptions += 1;
            return Some(After::Ready);
        }
        None
    });
    if let Some(after) = after {
        with_current(|r| {
            r.regs = UserRegs::from_trap(frame);
            r.after = after;
        });
        leave_raw(SWITCHED);
    }
}

/// Reads the inbox: arrivals join the run queue, wake-ups and joins release parked
/// threads, load reports update the replica, pulls are answered (`sched::inbox::read`,
/// which decides); then does what it decided, outside the scheduler state (a send may
/// poll).
pub(super) fn read_inbox() {
    if INBOX.with(|i| i.is_empty()) {
        return;
    }
    let inbox = INBOX.with(Inbox::take);
    let me = this_core().index;
    let actions = with_sched(|s| {
        s.stats.migrations_in += inbox.arrivals() as u64;
        let mut here = Here {
            me,
            policy: policy(),
            dedicated: s.dedicated.is_some(),
            queue: &mut s.queue,
            waits: &mut s.waits,
            table: &mut s.table,
            ship_running: &mut s.ship_running,
        };
        sched::inbox::read(&mut here, inbox)
    });
    for action in actions {
        match action {
            Action::NoWaiters(root) => clear_waiter_bit(&root),
            Action::Forward(r) => forward_load(r),
            Action::Ship(t, to) => ship(t, to),
            Action::Send(to, note) => {
                let _ = transport::send(to, note);
            }
            Action::End(t) => end_off_cpu(t),
        }
    }
}
