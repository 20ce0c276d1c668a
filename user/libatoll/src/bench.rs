//! What the benchmarks share: a barrier in shared memory, fixed-point numbers (user
//! code has no floating point here) and the `RESULT {json}` line `make bench` reads.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;
use core::sync::atomic::{AtomicU64, Ordering};

/// Prints an experiment's `RESULT` lines, or `bench: <experiment>: <why>` (the line `make
/// bench` reads as a failed run); false when it failed.
pub fn print_lines(experiment: &str, lines: Result<Vec<String>, String>) -> bool {
    match lines {
        Ok(lines) => {
            for line in lines {
                crate::println!("{line}");
            }
            true
        }
        Err(why) => {
            crate::println!("bench: {experiment}: {why}");
            false
        }
    }
}

/// Adds this core to `count` and waits until `n` cores have: a one-shot barrier, so the
/// timed parts of a benchmark start together. `count` must be in shared memory and 0
/// before the first core arrives.
pub fn barrier(count: &AtomicU64, n: u64) {
    count.fetch_add(1, Ordering::AcqRel);
    while count.load(Ordering::Acquire) < n {
        core::hint::spin_loop();
    }
}

/// `num / den` printed with a fixed number of decimals (`null` when `den` is 0: JSON has
/// no infinity).
#[derive(Clone, Copy, Debug)]
pub struct Ratio {
    /// Numerator.
    pub num: u64,
    /// Denominator.
    pub den: u64,
    /// Decimals printed (at most 9).
    pub places: u32,
}

impl Ratio {
    /// `num / den` with two decimals.
    pub fn new(num: u64, den: u64) -> Ratio {
        Ratio { num, den, places: 2 }
    }

    /// `num / den` with `places` decimals (for small values).
    pub fn precise(num: u64, den: u64, places: u32) -> Ratio {
        Ratio { num, den, places: places.min(9) }
    }
}

impl fmt::Display for Ratio {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        if self.den == 0 {
            return f.write_str("null");
        }
        let scale = 10u128.pow(self.places);
        let scaled = (self.num as u128 * scale + self.den as u128 / 2) / self.den as u128;
        if self.places == 0 {
            return write!(f, "{scaled}");
        }
        write!(f, "{}.{:0width$}", scaled / scale, scaled % scale, width = self.places as usize)
    }
}

/// One measurement of an Atoll program, printed through the `record` crate (the one
/// `RESULT` formatter every benchmark shares) as
/// `RESULT {"experiment":…,"system":"atoll","active_cores":…,"config":…,"metric":…,"value":…,"unit":…<extra>}`.
/// `extra` is empty or more fields starting with a comma. The kernel breaks program lines
/// at 200 bytes, so keep `extra` short.
pub struct Record<'a> {
    /// The program's name.
    pub experiment: &'a str,
    /// Which configuration of it (`shared-as`, `global`, ...).
    pub config: &'a str,
    /// How many cores took part.
    pub active_cores: usize,
    /// What was measured.
    pub metric: &'a str,
    /// Its unit.
    pub unit: &'a str,
    /// More fields (`,"mb":100`), or "".
    pub extra: &'a str,
}

impl Record<'_> {
    /// Prints the line with `value`.
    pub fn print(&self, value: impl fmt::Display) {
        let cores = record::Cores::Active(self.active_cores);
        let record = record::Record::new(self.experiment, "atoll", cores, self.metric, self.unit)
            .config(self.config)
            .extra(self.extra);
        crate::println!("{}", record.line(value));
    }
}
