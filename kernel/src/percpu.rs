//! Per-core state: one `PerCore` block per core, in that core's own memory, reached through
//! GS base (`gs:0` holds the block's address).
//!
//! Multikernel principle: a core's kernel state is its own. Fields another core may touch
//! are atomics (counters other cores read, the heap return stack they push to);
//! everything else sits in a [`CoreLocal`] that only the owning core can open.

use crate::arch::{self, cpu, gdt::CoreTables};
use core::cell::{Cell, UnsafeCell};
use core::sync::atomic::{
    AtomicBool, AtomicI64, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
use physmem::CoreFrames;
use return_stack::ReturnStack;

/// The most cores Atoll manages.
pub const MAX_CORES: usize = arch::acpi::MAX_CORES;

/// Life cycle of a core.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum CoreState {
    /// Listed by the firmware, not started (or did not answer).
    Offline = 0,
    /// Start-up IPI sent; the core is initialising itself.
    Starting = 1,
    /// Running its kernel: ticks, takes jobs.
    Online = 2,
    /// Stopped by an exception (see the trap report).
    Faulted = 3,
}

/// One core's value, opened only with interrupts off and never re-entered: the one
/// `&mut T` at a time. Who may open it is decided by the holder ([`CoreLocal`] checks an
/// owner; [`PerCoreState`] opens the calling core's slot). On cache lines of its own.
#[repr(align(64))]
pub struct Slot<T> {
    busy: Cell<bool>,
    value: UnsafeCell<T>,
}

impl<T> Slot<T> {
    /// A slot holding `value`.
    pub const fn new(value: T) -> Self {
        Slot { busy: Cell::new(false), value: UnsafeCell::new(value) }
    }

    /// Runs `f` on the value with interrupts off. Panics if re-entered. The caller makes
    /// sure only the owning core gets here.
    fn open<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        cpu::without_interrupts(|| {
            assert!(!self.busy.replace(true), "core-local state re-entered");
            // SAFETY: only the owning core opens the slot (the holder's check), with
            // interrupts off, and never twice at once: one `&mut T`.
            let r = f(unsafe { &mut *self.value.get() });
            self.busy.set(false);
            r
        })
    }
}

/// State only the owning core may open, with interrupts off and no re-entry.
pub struct CoreLocal<T> {
    owner: usize,
    slot: Slot<T>,
}

// SAFETY: `with` lets only the owning core (checked through GS) open the slot.
unsafe impl<T> Sync for CoreLocal<T> {}

impl<T> CoreLocal<T> {
    /// Wraps `value`, owned by core `owner`.
    pub const fn new(owner: usize, value: T) -> Self {
        CoreLocal { owner, slot: Slot::new(value) }
    }

    /// Runs `f` on the value. Panics if called from another core or re-entered.
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        assert_eq!(this_core().index, self.owner, "core-local state opened by another core");
        self.slot.open(f)
    }
}

/// A layer's state on every core: one [`Slot`] per core, each opened only by its own core.
/// The layers above this one (the heap, the monitor, the running context) keep their
/// per-core state in one of these, so this module, below them, never names their types.
/// Make one with [`per_core_state!`].
pub struct PerCoreState<T> {
    slots: [Slot<T>; MAX_CORES],
}

// SAFETY: `with` opens only the calling core's slot.
unsafe impl<T> Sync for PerCoreState<T> {}

impl<T> PerCoreState<T> {
    /// Every core's slot (see [`per_core_state!`]).
    pub const fn new(slots: [Slot<T>; MAX_CORES]) -> Self {
        PerCoreState { slots }
    }

    /// Runs `f` on the calling core's value. Panics if re-entered.
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        self.slots[this_core().index].open(f)
    }
}

/// A [`PerCoreState`] whose every slot starts as the constant `$init`.
#[macro_export]
macro_rules! per_core_state {
    ($init:expr) => {
        $crate::percpu::PerCoreState::new(
            [const { $crate::percpu::Slot::new($init) }; $crate::percpu::MAX_CORES],
        )
    };
}

/// One core's kernel state.
#[repr(C)]
pub struct PerCore {
    /// Must stay first: `gs:0` reads it.
    self_ptr: *const PerCore,
    /// `gs:8`: the kernel stack a system call runs on (set by `user_entry::resume_user`).
    syscall_rsp: AtomicU64,
    /// `gs:16`: the user stack pointer, saved by `syscall_entry`.
    user_rsp: AtomicU64,
    /// Atoll's index of this core (0 = boot core); also its memid (Corey §4.1).
    pub index: usize,
    /// Local APIC id.
    pub apic_id: u32,
    /// Package / core / SMT position.
    pub location: topology::CpuLocation,
    /// NUMA node.
    pub node: u32,
    state: AtomicU8,
    fault_vector: AtomicU8,
    ticks: AtomicU64,
    /// The tick at which a long system call last served the monitor (`user::step`).
    pub served_tick: AtomicU64,
    /// Set when the running system call took a step (`user::step`): it checks the time
    /// limit and halt flag before returning.
    pub stepped: AtomicBool,
    unexpected_interrupts: AtomicU64,
    /// Test IPIs received, per sending core.
    test_ipis: [AtomicU32; MAX_CORES],
    /// What this core last wrote to its APIC's ICR high half (only this core reads or
    /// writes it).
    pub icr_destination: arch::apic::IcrDestination,
    /// Set while the core is halted in its idle loop: a sender must wake it with an IPI.
    asleep: AtomicBool,
    /// Times the core woke from an idle halt.
    wakeups: AtomicU64,
    /// Messages the monitor rejected.
    rejected: AtomicU64,
    /// Free frames (mirror of `frames`, readable by any core).
    free_frames: AtomicU64,
    /// Heap blocks this core owns, freed by other cores, waiting to be taken back. (The
    /// one cross-core path that is not a URPC channel: a `dealloc` cannot send messages.)
    pub heap_returns: ReturnStack,
    /// TLB flushes this core did on request (a shootdown waits for these to advance).
    pub tlb_flushes: AtomicU64,
    /// Set while a pcore object names this core (Corey §4.4: one per physical core).
    pub pcore_claimed: AtomicBool,
    /// Set while this core runs a user context (system calls included).
    pub in_context: AtomicBool,
    /// This core's free-frame bitmap.
    pub frames: CoreLocal<CoreFrames<'static>>,
    tables: UnsafeCell<CoreTables>,
    idt: &'static arch::trap::Idt,
    stack: (u64, u64),
    critical_stack_top: u64,
    /// Who sends the next test IPI: set by the sender just before sending (the IPI test
    /// sends one at a time, so one slot suffices).
    pub test_ipi_sender: AtomicUsize,
}

// SAFETY: shared fields are atomics or `CoreLocal`; `tables` is touched only by the owner
// during its own initialisation.
unsafe impl Sync for PerCore {}

static CORES: [AtomicPtr<PerCore>; MAX_CORES] =
    [const { AtomicPtr::new(core::ptr::null_mut()) }; MAX_CORES];
static CORE_COUNT: AtomicUsize = AtomicUsize::new(0);

/// Everything needed to build a core's block.
pub struct CoreSetup {
    /// Core index.
    pub index: usize,
    /// Local APIC id.
    pub apic_id: u32,
    /// Position in the machine.
    pub location: topology::CpuLocation,
    /// NUMA node.
    pub node: u32,
    /// The core's frame allocator (already holding its own bookkeeping frames).
    pub frames: CoreFrames<'static>,
    /// Kernel stack bounds (low, high).
    pub stack: (u64, u64),
    /// Top of the IST stack for double faults and NMIs.
    pub critical_stack_top: u64,
    /// The core's interrupt descriptor table (in a frame of its own).
    pub idt: &'static arch::trap::Idt,
}

/// Writes core `setup.index`'s block into `frame_va` (a frame of its own) and publishes it.
///
/// # Safety
/// `frame_va` must be a writable, unused kernel address with room for a `PerCore`, kept
/// for the life of the kernel.
pub unsafe fn publish(frame_va: u64, setup: CoreSetup) -> &'static PerCore {
    let free = setup.frames.free_count();
    let block = frame_va as *mut PerCore;
    let value = PerCore {
        self_ptr: block,
        syscall_rsp: AtomicU64::new(0),
        user_rsp: AtomicU64::new(0),
        index: setup.index,
        apic_id: setup.apic_id,
        location: setup.location,
        node: setup.node,
        state: AtomicU8::new(CoreState::Offline as u8),
        fault_vector: AtomicU8::new(0),
        ticks: AtomicU64::new(0),
        served_tick: AtomicU64::new(0),
        stepped: AtomicBool::new(false),
        unexpected_interrupts: AtomicU64::new(0),
        test_ipis: [const { AtomicU32::new(0) }; MAX_CORES],
        icr_destination: arch::apic::IcrDestination::new(),
        asleep: AtomicBool::new(false),
        wakeups: AtomicU64::new(0),
        rejected: AtomicU64::new(0),
        free_frames: AtomicU64::new(free),
        heap_returns: ReturnStack::new(),
        tlb_flushes: AtomicU64::new(0),
        pcore_claimed: AtomicBool::new(false),
        in_context: AtomicBool::new(false),
        frames: CoreLocal::new(setup.index, setup.frames),
        tables: UnsafeCell::new(CoreTables::new()),
        idt: setup.idt,
        stack: setup.stack,
        critical_stack_top: setup.critical_stack_top,
        test_ipi_sender: AtomicUsize::new(usize::MAX),
    };
    // SAFETY: forwarded from the caller.
    unsafe { block.write(value) };
    CORES[setup.index].store(block, Ordering::Release);
    CORE_COUNT.fetch_max(setup.index + 1, Ordering::AcqRel);
    // SAFETY: just written; never freed.
    unsafe { &*block }
}

const _: () = assert!(core::mem::size_of::<PerCore>() <= 4096, "PerCore must fit one frame");

/// The calling core's block.
pub fn this_core() -> &'static PerCore {
    // SAFETY: GS base points at a published, never-freed `PerCore` on every running core.
    unsafe { &*(arch::gs_self() as *const PerCore) }
}

/// Core `index`'s block, if it exists.
pub fn core(index: usize) -> Option<&'static PerCore> {
    let p = CORES.get(index)?.load(Ordering::Acquire);
    // SAFETY: published blocks are never freed.
    (!p.is_null()).then(|| unsafe { &*p })
}

/// Whether core `index` will never answer: there is no such core, or it faulted. (The
/// agreement protocols count such a participant failed instead of waiting for it.)
pub fn has_faulted(index: usize) -> bool {
    core(index).is_none_or(|c| c.state() == CoreState::Faulted)
}

/// Number of cores with a block (online or not).
pub fn core_count() -> usize {
    CORE_COUNT.load(Ordering::Acquire)
}

/// Every core's block, in index order.
pub fn all_cores() -> impl Iterator<Item = &'static PerCore> {
    (0..core_count()).filter_map(core)
}

impl PerCore {
    /// Makes this block the calling core's: GS base, GDT, TSS and IDT.
    ///
    /// # Safety
    /// Call once, on the core the block belongs to, before enabling interrupts.
    pub unsafe fn enter(&'static self) {
        // SAFETY: the block starts with its own address (see `publish`).
        unsafe { arch::set_gs_base(self as *const PerCore as u64) };
        // SAFETY: `tables` lives as long as the kernel and only this core touches it, now.
        unsafe { (*self.tables.get()).load(self.critical_stack_top) };
        self.idt.load();
        arch::user_entry::init_this_core();
        self.set_state(CoreState::Starting);
    }

    /// This core's TSS RSP0 slot (the stack interrupts from user mode land on).
    pub fn rsp0_slot(&self) -> *mut u64 {
        // SAFETY: only the owning core calls this (to enter user mode); the TSS lives as
        // long as the block.
        unsafe { (*self.tables.get()).rsp0_slot() }
    }

    /// The TSS's RSP0 (the stack interrupts from user mode land on), to save around a
    /// nested program.
    pub fn rsp0(&self) -> u64 {
        // SAFETY: the owning core's own TSS slot (see `rsp0_slot`).
        unsafe { self.rsp0_slot().read() }
    }

    /// Restores an RSP0 saved with [`PerCore::rsp0`].
    pub fn set_rsp0(&self, rsp: u64) {
        // SAFETY: as in `rsp0`.
        unsafe { self.rsp0_slot().write(rsp) }
    }

    /// Current life-cycle state.
    pub fn state(&self) -> CoreState {
        match self.state.load(Ordering::Acquire) {
            1 => CoreState::Starting,
            2 => CoreState::Online,
            3 => CoreState::Faulted,
            _ => CoreState::Offline,
        }
    }

    /// Sets the life-cycle state.
    pub fn set_state(&self, s: CoreState) {
        self.state.store(s as u8, Ordering::Release);
    }

    /// Timer ticks seen by this core.
    pub fn ticks(&self) -> u64 {
        self.ticks.load(Ordering::Relaxed)
    }

    /// The kernel stack system calls enter on (`gs:8`), to save around a nested program.
    pub fn syscall_stack(&self) -> u64 {
        self.syscall_rsp.load(Ordering::Relaxed)
    }

    /// Restores the system-call stack saved with [`PerCore::syscall_stack`].
    pub fn set_syscall_stack(&self, rsp: u64) {
        self.syscall_rsp.store(rsp, Ordering::Relaxed);
    }

    /// Called by the timer interrupt on the owning core.
    pub fn on_tick(&self) {
        self.ticks.fetch_add(1, Ordering::Relaxed);
    }

    /// Called on receipt of a test IPI: counts it against the announced sender.
    pub fn on_test_ipi(&self) {
        let from = self.test_ipi_sender.load(Ordering::Acquire);
        if from < MAX_CORES {
            self.test_ipis[from].fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Test IPIs received from core `from`.
    pub fn test_ipis_from(&self, from: usize) -> u32 {
        self.test_ipis[from].load(Ordering::Acquire)
    }

    /// Counts an interrupt on a vector nobody handles.
    pub fn on_unexpected_interrupt(&self, _vector: u8) {
        self.unexpected_interrupts.fetch_add(1, Ordering::Relaxed);
    }

    /// Interrupts on unhandled vectors so far.
    pub fn unexpected_interrupts(&self) -> u64 {
        self.unexpected_interrupts.load(Ordering::Relaxed)
    }

    /// Marks this core stopped by exception `vector` (callers waiting on it see this).
    pub fn stop_after_fault(&self, vector: u8) {
        self.fault_vector.store(vector, Ordering::Relaxed);
        self.set_state(CoreState::Faulted);
    }

    /// Whether the core is halted in its idle loop.
    pub fn is_asleep(&self) -> bool {
        self.asleep.load(Ordering::SeqCst)
    }

    /// Marks the core asleep (about to halt) or awake.
    pub fn set_asleep(&self, asleep: bool) {
        self.asleep.store(asleep, Ordering::SeqCst);
    }

    /// Counts a wake-up from an idle halt.
    pub fn count_wakeup(&self) {
        self.wakeups.fetch_add(1, Ordering::Relaxed);
    }

    /// Wake-ups from idle halts so far.
    pub fn wakeups(&self) -> u64 {
        self.wakeups.load(Ordering::Relaxed)
    }

    /// Counts a rejected message.
    pub fn count_rejected(&self) {
        self.rejected.fetch_add(1, Ordering::Relaxed);
    }

    /// Messages rejected so far.
    pub fn rejected(&self) -> u64 {
        self.rejected.load(Ordering::Relaxed)
    }

    /// The exception that stopped this core, if it is [`CoreState::Faulted`].
    pub fn fault_vector(&self) -> Option<u8> {
        (self.state() == CoreState::Faulted).then(|| self.fault_vector.load(Ordering::Relaxed))
    }

    /// Bounds of this core's kernel stack.
    pub fn stack_range(&self) -> (u64, u64) {
        self.stack
    }

    /// Free frames in this core's list (as last published by the owner).
    pub fn free_frames(&self) -> u64 {
        self.free_frames.load(Ordering::Relaxed)
    }

    /// Publishes the owner's free-frame count.
    pub fn set_free_frames(&self, n: u64) {
        self.free_frames.store(n, Ordering::Relaxed);
    }
}

/// One core's row of [`SpreadCounts`]: on cache lines of its own.
#[repr(align(64))]
struct CountRow<const N: usize>([AtomicI64; N]);

/// `N` counts that any core may change, kept so that each core writes only its own row
/// (Multikernel §3.3: no line that two cores write). A core changes its own row's entry
/// for a count; a reader adds up every core's row, exact once changes stop.
pub struct SpreadCounts<const N: usize> {
    rows: [CountRow<N>; MAX_CORES],
}

impl<const N: usize> SpreadCounts<N> {
    /// All counts 0 (usable in a `static`).
    pub const fn new() -> Self {
        SpreadCounts { rows: [const { CountRow([const { AtomicI64::new(0) }; N]) }; MAX_CORES] }
    }

    /// Adds `delta` to count `i`, in the calling core's row.
    pub fn add(&self, i: usize, delta: i64) {
        if let Some(c) = self.rows[this_core().index].0.get(i) {
            // Relaxed: a statistic and a soft cap; nothing is published through it.
            c.fetch_add(delta, Ordering::Relaxed);
        }
    }

    /// Count `i`: every core's row added up (0 if it would be negative, which only a
    /// snapshot taken while cores change it can see). Only the machine's cores have rows
    /// that ever change: the rest are not read.
    pub fn sum(&self, i: usize) -> u64 {
        let rows = &self.rows[..core_count().clamp(1, MAX_CORES)];
        let total: i64 =
            rows.iter().filter_map(|r| r.0.get(i)).map(|c| c.load(Ordering::Relaxed)).sum();
        u64::try_from(total).unwrap_or(0)
    }
}
