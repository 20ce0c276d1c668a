//! Time: the TSC and the local APIC timer, calibrated against PIT channel 0.
//!
//! The PIT counts at a fixed 1.193182 MHz on every PC and in every QEMU machine type. We
//! read its channel-0 counter (latch command) rather than use port 0x61's gate, which not
//! every machine type has. Calibration runs once on the boot core; all cores share the
//! result (QEMU and today's hardware give every core the same TSC and bus clock).

use super::apic;
use super::cpu::{inb, outb, rdtsc};
use core::sync::atomic::{AtomicU64, Ordering};

const PIT_HZ: u64 = 1_193_182;
const PIT_CHANNEL0: u16 = 0x40;
const PIT_COMMAND: u16 = 0x43;
/// Calibration window in PIT ticks (about 4 ms): long enough for <0.1% error, short enough
/// to keep boot fast.
const CALIBRATION_TICKS: u16 = 4773;

/// Periodic tick rate on every core when the command line does not choose one (`hz=`).
pub const DEFAULT_TICK_HZ: u64 = 100;
/// The tick rates `hz=` may choose: from 10 Hz (a slice of 100 ms) to 1000 Hz.
pub const TICK_HZ_RANGE: core::ops::RangeInclusive<u64> = 10..=1000;

/// This boot's tick rate (`hz=` on the command line, or [`DEFAULT_TICK_HZ`]); set once by
/// the boot core before any core starts its tick.
static TICK_HZ: AtomicU64 = AtomicU64::new(DEFAULT_TICK_HZ);

static TSC_HZ: AtomicU64 = AtomicU64::new(0);
static APIC_TIMER_HZ: AtomicU64 = AtomicU64::new(0);

fn pit_count() -> u16 {
    outb(PIT_COMMAND, 0x00); // latch channel 0
    let lo = inb(PIT_CHANNEL0) as u16;
    let hi = inb(PIT_CHANNEL0) as u16;
    hi << 8 | lo
}

/// Measures the TSC and local APIC timer frequencies against the PIT (boot core, once).
pub fn calibrate() {
    outb(PIT_COMMAND, 0x34); // channel 0, lo/hi byte, mode 2 (rate generator), binary
    outb(PIT_CHANNEL0, 0xff);
    outb(PIT_CHANNEL0, 0xff);
    apic::timer_start_free_running();
    // Wait for the counter to start moving from its reload value.
    let first = pit_count();
    while pit_count() == first {}
    let p0 = pit_count();
    let (t0, a0) = (rdtsc(), apic::timer_current());
    let (t1, a1, elapsed) = loop {
        let elapsed = p0.wrapping_sub(pit_count());
        if elapsed >= CALIBRATION_TICKS {
            break (rdtsc(), apic::timer_current(), elapsed as u64);
        }
    };
    TSC_HZ.store((t1 - t0) * PIT_HZ / elapsed, Ordering::Relaxed);
    APIC_TIMER_HZ.store((a0 - a1) as u64 * PIT_HZ / elapsed, Ordering::Relaxed);
}

/// TSC ticks per second.
pub fn tsc_hz() -> u64 {
    TSC_HZ.load(Ordering::Relaxed).max(1)
}

/// Local APIC timer units (bus clock / 16) per second.
pub fn apic_timer_hz() -> u64 {
    APIC_TIMER_HZ.load(Ordering::Relaxed)
}

/// This boot's tick rate in Hz.
pub fn tick_hz() -> u64 {
    TICK_HZ.load(Ordering::Relaxed)
}

/// Chooses this boot's tick rate (boot core, before any core starts its tick), so that a
/// benchmark can tick at the rate of the Linux kernel it is compared with. Refuses a rate
/// outside [`TICK_HZ_RANGE`].
pub fn choose_tick_hz(hz: u64) -> Result<(), u64> {
    if !TICK_HZ_RANGE.contains(&hz) {
        return Err(hz);
    }
    TICK_HZ.store(hz, Ordering::Relaxed);
    Ok(())
}

/// Starts this core's periodic tick at [`tick_hz`].
pub fn start_tick() {
    set_tick_hz(tick_hz());
}

/// Makes this core's tick periodic at `hz` (a pcore's time slice, `pcore_set_interval`).
pub fn set_tick_hz(hz: u64) {
    apic::timer_start_periodic((apic_timer_hz() / hz.max(1)).max(1) as u32);
}

/// Microseconds since the TSC value `since`.
pub fn us_since(since: u64) -> u64 {
    (rdtsc() - since) * 1_000_000 / tsc_hz()
}

/// Microseconds of TSC ticks.
pub fn tsc_to_us(ticks: u64) -> u64 {
    ticks * 1_000_000 / tsc_hz()
}

/// TSC ticks in `us` microseconds.
pub fn us_to_tsc(us: u64) -> u64 {
    us.saturating_mul(tsc_hz() / 1_000_000)
}

/// Waits `us` microseconds, spinning on the TSC.
pub fn spin_us(us: u64) {
    let start = rdtsc();
    while us_since(start) < us {
        core::hint::spin_loop();
    }
}
