//! Poll, then block (Multikernel §5.2), for every wait whose end is a message to this core
//! (`docs/architecture.md`, "Waits for a message"). A waiter polls for the budget P, then
//! halts until an interrupt: the message's wake-up IPI (its sender finds this core asleep,
//! `send::wake_if_asleep`) or the tick.
//! P is the SKB's measured cost C of that IPI (`SetPollBudget` from the boot core), which
//! makes the wait 2-competitive with the best choice in hindsight: a reply that comes
//! within P costs the waiter no more than it would have spun, and one that comes later
//! costs at most C more than ideal, while the core's cycles (a host CPU, for a vCPU) go to
//! others meanwhile.
//!
//! A wait with interrupts off (inside a system call, such as a `kernel_command` line) halts
//! too: the halt is a window for interrupts, as `monitor::step` opens one (a kernel-mode
//! tick only counts, a wake-up only acknowledges), and interrupts are off again after it.
//! Waits for something other than a message (room in a channel, a timed back-off) spin,
//! since no IPI ends them; so does `monitor::ping`, which measures latency. A message
//! handler never waits: run from a kick's interrupt, a halt there would hold off the
//! wake-up of its own priority class until the end of interrupt.

use super::has_messages;
use crate::arch::cpu;
use crate::param::DEFAULT_POLL_BUDGET;
use crate::percpu::{this_core, PerCoreState};
use core::sync::atomic::{fence, Ordering};

/// This core's poll budget P, in TSC cycles, and what its waits did with it.
struct Budget {
    cycles: u64,
    stats: WaitStats,
}

/// What this core's waits for messages did (owner only; `bench polling` reads them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WaitStats {
    /// Waits that ended.
    pub waits: u64,
    /// Waits that outlasted P and halted at least once.
    pub slept: u64,
    /// Cycles spent polling (up to P per wait): the waits' cost in cycles.
    pub polled_cycles: u64,
    /// Halts (a wait that outlasted P halts until an interrupt, perhaps several times).
    pub halts: u64,
    /// Halts that this core's tick ended (its count moved meanwhile), not a message's IPI:
    /// a wait that halts with the message it awaits already read ends only so.
    pub halts_ended_by_tick: u64,
}

static BUDGETS: PerCoreState<Budget> =
    crate::per_core_state!(Budget { cycles: DEFAULT_POLL_BUDGET, stats: WaitStats::ZERO });

impl WaitStats {
    const ZERO: WaitStats =
        WaitStats { waits: 0, slept: 0, polled_cycles: 0, halts: 0, halts_ended_by_tick: 0 };
}

/// This core's poll budget P (cycles of polling before a wait halts).
pub fn poll_budget() -> u64 {
    BUDGETS.with(|b| b.cycles)
}

/// Sets this core's poll budget (at least 1000 cycles).
pub fn set_poll_budget(cycles: u64) {
    BUDGETS.with(|b| b.cycles = cycles.max(1000));
}

/// This core's wait counters.
pub fn wait_stats() -> WaitStats {
    BUDGETS.with(|b| b.stats)
}

/// One wait for a message. Its loop reads the channels, then looks at what it awaits,
/// then calls [`PollThenBlock::pause`], in that order: a loop that reads the channels
/// after its look and then pauses halts with the awaited message already in hand
/// (consumed by the read, so no IPI is coming for it), and sleeps to the next tick while
/// its peer waits on it (`twophase.a_halted_coordinator_hears_its_votes`: 52M cycles an
/// operation at P = 1000, against 0.4M in the right order).
pub struct PollThenBlock {
    start: u64,
    budget: u64,
    /// When it first halted (its polling ended there).
    slept_at: Option<u64>,
    /// Its halts, and those its core's tick ended.
    halts: u64,
    halts_ended_by_tick: u64,
}

impl PollThenBlock {
    /// A wait starting now, with this core's P.
    pub fn new() -> PollThenBlock {
        PollThenBlock::with_budget(poll_budget())
    }

    /// A wait starting now, polling for `budget` cycles before it halts (a call site with
    /// its own reason to poll longer or shorter than P).
    pub fn with_budget(budget: u64) -> PollThenBlock {
        PollThenBlock {
            start: cpu::rdtsc(),
            budget,
            slept_at: None,
            halts: 0,
            halts_ended_by_tick: 0,
        }
    }

    /// Between two checks: a pause within the budget; past it, a halt until an interrupt
    /// (at once back if a message is already waiting, or `pending` says other work is:
    /// a TLB broadcast line, which the layer above reads). Interrupts are as they were.
    pub fn pause(&mut self, pending: &dyn Fn() -> bool) {
        let now = cpu::rdtsc();
        if now - self.start < self.budget {
            cpu::pause();
            return;
        }
        self.slept_at.get_or_insert(now);
        let were_on = cpu::interrupts_enabled();
        let ticks = this_core().ticks();
        if sleep_unless(pending) {
            self.halts += 1;
            self.halts_ended_by_tick += (this_core().ticks() != ticks) as u64;
        }
        if !were_on {
            cpu::disable_interrupts();
        }
    }
}

impl Default for PollThenBlock {
    fn default() -> Self {
        PollThenBlock::new()
    }
}

impl Drop for PollThenBlock {
    fn drop(&mut self) {
        let polled = self.slept_at.unwrap_or_else(cpu::rdtsc) - self.start;
        let slept = self.slept_at.is_some();
        BUDGETS.with(|b| {
            b.stats.waits += 1;
            b.stats.slept += slept as u64;
            b.stats.polled_cycles += polled;
            b.stats.halts += self.halts;
            b.stats.halts_ended_by_tick += self.halts_ended_by_tick;
        });
    }
}

/// Marks this core asleep and halts until an interrupt, unless a message is waiting or
/// `pending` says there is other work: the sender of a message (or a broadcast's writer,
/// `notify`) sees the flag and sends the wake-up IPI, or we see its message here (the
/// fences pair with `send::wake_if_asleep` and `send::notify`). Interrupts are on when it
/// returns; it returns whether it halted.
pub fn sleep_unless(pending: &dyn Fn() -> bool) -> bool {
    let core = this_core();
    cpu::disable_interrupts();
    core.set_asleep(true);
    fence(Ordering::SeqCst);
    if has_messages() || pending() {
        core.set_asleep(false);
        cpu::enable_interrupts();
        return false;
    }
    cpu::enable_and_halt();
    core.set_asleep(false);
    core.count_wakeup();
    true
}
