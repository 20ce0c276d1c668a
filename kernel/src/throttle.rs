//! Emulated slow cores (issue M7; AMPS §4 made its slow cores by clock modulation): a
//! throttled core (`asym=1:50` on the command line) runs only its duty of every
//! millisecond and halts for the rest. Its timer alternates two one-shot phases instead
//! of ticking periodically: "on" for `duty × 1 ms`, then "off" (as long as the on phase
//! really ran, times `(1 - duty) / duty`: an interrupt that comes late lengthens the
//! period, never the share), in which the timer
//! interrupt's handler halts (other interrupts still come in) until the off phase's own
//! interrupt ends it. Every `1000 / tick_hz` periods count as one scheduler tick, so the
//! core's ticks keep the boot's rate. The SKB then measures the slower speed, and AMPS
//! schedules by that measurement, not by this setting.

use crate::arch::{apic, cpu, timer};
use crate::param::THROTTLE_PERIOD_US;
use crate::percpu::MAX_CORES;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};

/// Duty in eighths: 8 is a core at full speed.
const FULL: u8 = 8;

/// One core's throttle (touched by that core's timer interrupts, set once at boot).
struct Throttle {
    /// The duty asked for, in eighths of every period.
    eighths: AtomicU8,
    /// The duty its timer runs now (taken from `eighths` when the timer starts, on the
    /// core itself, so a change never catches the timer between phases).
    active: AtomicU8,
    /// In the off phase (its handler halts until the phase's interrupt clears this).
    off: AtomicBool,
    /// Periods since its timer started.
    periods: AtomicU64,
    /// TSC cycles spent halted in off phases.
    off_cycles: AtomicU64,
    /// TSC when the current on phase started.
    on_since: AtomicU64,
}

static THROTTLES: [Throttle; MAX_CORES] = [const {
    Throttle {
        eighths: AtomicU8::new(FULL),
        active: AtomicU8::new(FULL),
        off: AtomicBool::new(false),
        periods: AtomicU64::new(0),
        off_cycles: AtomicU64::new(0),
        on_since: AtomicU64::new(0),
    }
}; MAX_CORES];

/// Throttles `core` to `eighths` of every millisecond (8: full speed). At boot before the
/// core's timer starts; at run time the core then restarts its timer ([`start_tick`]).
pub fn configure(core: usize, eighths: u8) {
    if let Some(t) = THROTTLES.get(core) {
        t.eighths.store(eighths.clamp(1, FULL), Ordering::Relaxed);
    }
}

/// `core`'s duty in eighths as its timer runs it (8: not throttled).
pub fn duty_eighths(core: usize) -> u8 {
    THROTTLES.get(core).map_or(FULL, |t| t.active.load(Ordering::Relaxed))
}

/// `core`'s duty (eighths), the periods its timer has run, and the TSC cycles it spent
/// halted in off phases (for the console's `sched`).
pub fn stats(core: usize) -> (u8, u64, u64) {
    THROTTLES.get(core).map_or((FULL, 0, 0), |t| {
        (
            t.eighths.load(Ordering::Relaxed),
            t.periods.load(Ordering::Relaxed),
            t.off_cycles.load(Ordering::Relaxed),
        )
    })
}

fn throttled(core: usize) -> bool {
    duty_eighths(core) < FULL
}

/// Timer units (APIC) for `us` microseconds.
fn units(us: u64) -> u32 {
    (timer::apic_timer_hz() * us / 1_000_000).clamp(1, u64::from(u32::MAX)) as u32
}

/// Starts this core's timer: the periodic tick, or on a throttled core the first on
/// phase.
pub fn start_tick(core: usize) {
    let Some(t) = THROTTLES.get(core) else { return };
    // No timer interrupt between the mode and the timer's programming.
    cpu::without_interrupts(|| {
        t.active.store(t.eighths.load(Ordering::Relaxed), Ordering::Relaxed);
        t.off.store(false, Ordering::Relaxed);
        if throttled(core) {
            t.on_since.store(cpu::rdtsc(), Ordering::Relaxed);
            apic::timer_one_shot(units(on_us(core)));
        } else {
            timer::start_tick();
        }
    });
}

/// Sets this core's tick to `hz` (a pcore's time slice); a throttled core keeps its
/// phases (its ticks stay at the boot's rate).
pub fn set_tick_hz(core: usize, hz: u64) {
    if !throttled(core) {
        timer::set_tick_hz(hz);
    }
}

fn on_us(core: usize) -> u64 {
    THROTTLE_PERIOD_US * u64::from(duty_eighths(core)) / u64::from(FULL)
}

/// A timer interrupt on `core` (interrupts off): acknowledges it, and on a throttled core
/// runs the phase it ends; returns whether it counts as a scheduler tick.
pub fn on_timer(core: usize) -> bool {
    apic::eoi();
    if !throttled(core) {
        return true;
    }
    let t = &THROTTLES[core];
    if t.off.load(Ordering::Relaxed) {
        // The off phase is over: the halting handler below sees it and returns.
        t.off.store(false, Ordering::Relaxed);
        t.on_since.store(cpu::rdtsc(), Ordering::Relaxed);
        apic::timer_one_shot(units(on_us(core)));
        return false;
    }
    // The on phase is over: halt for the rest of the period. Interrupts come in meanwhile
    // (a wake-up, a shootdown, and the off phase's end). The off phase is sized from the
    // on phase as it really ran, so the share is exact even when the timer's interrupt
    // comes late (under TCG it can be late by a good part of a millisecond).
    let periods = t.periods.fetch_add(1, Ordering::Relaxed) + 1;
    let eighths = u64::from(duty_eighths(core));
    let ran = cpu::rdtsc().saturating_sub(t.on_since.load(Ordering::Relaxed));
    let off_us = timer::tsc_to_us(ran) * (u64::from(FULL) - eighths) / eighths;
    t.off.store(true, Ordering::Relaxed);
    apic::timer_one_shot(units(off_us.clamp(1, 100 * THROTTLE_PERIOD_US)));
    let halted = cpu::rdtsc();
    while t.off.load(Ordering::Relaxed) {
        cpu::enable_and_halt();
        cpu::disable_interrupts();
    }
    t.off_cycles.fetch_add(cpu::rdtsc() - halted, Ordering::Relaxed);
    let per_tick = (1000 / timer::tick_hz().max(1)).max(1);
    periods.is_multiple_of(per_tick)
}
