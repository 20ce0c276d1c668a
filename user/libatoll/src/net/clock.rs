//! smoltcp's clock: the time-stamp counter, its rate measured against a core's timer.

use crate::obj::{device_alloc, device_stat, root_share, share_delobj, ObjRef};
use crate::sys::rdtsc;
use abi::Error;
use smoltcp::time::Instant;

/// smoltcp's clock: the time-stamp counter, its rate measured once against this core's
/// timer ticks (a few ticks; a tick is 10 ms at the default 100 Hz).
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    start: u64,
    cycles_per_us: u64,
}

impl Clock {
    /// Measures the counter's rate (about 30 ms).
    pub fn new() -> Result<Clock, Error> {
        let core = crate::pcore_current();
        let root = root_share();
        let timer = ObjRef::new(root, device_alloc(root, TIMER_HWID_BASE + core as u64)?);
        let measured = measure_rate(timer);
        let _ = share_delobj(timer);
        let cycles_per_us = measured?;
        Ok(Clock { start: rdtsc(), cycles_per_us })
    }

    /// Now, from the clock's start.
    pub fn now(&self) -> Instant {
        Instant::from_micros(((rdtsc() - self.start) / self.cycles_per_us) as i64)
    }

    /// Microseconds since the clock's start.
    pub fn micros(&self) -> u64 {
        (rdtsc() - self.start) / self.cycles_per_us
    }

    /// The time-stamp counter's cycles per microsecond, as measured.
    pub fn cycles_per_us(&self) -> u64 {
        self.cycles_per_us
    }
}

/// Hardware id of core 0's timer device (core k's is this plus k; `device_list`).
const TIMER_HWID_BASE: u64 = 16;

/// Cycles of the time-stamp counter per microsecond, over three of `timer`'s ticks.
fn measure_rate(timer: ObjRef) -> Result<u64, Error> {
    let first = device_stat(timer)?;
    let hz = first.detail.max(1);
    // Start on a tick's edge, then count three.
    let mut edge = first.count;
    while edge == first.count {
        edge = device_stat(timer)?.count;
    }
    let start = rdtsc();
    let mut now = edge;
    while now < edge + 3 {
        now = device_stat(timer)?.count;
    }
    let cycles = rdtsc() - start;
    let us = (now - edge) * 1_000_000 / hz;
    Ok((cycles / us.max(1)).max(1))
}
