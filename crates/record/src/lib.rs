//! One benchmark record, the one output format of every benchmark in the project: the
//! kernel's `bench` commands, Atoll's user programs, the workloads on Linux and the hosted
//! benchmarks all print `RESULT {json}` lines through [`Record`], and report the
//! [`median`] of their samples. `make bench` (`xtask/src/bench/`) reads the lines back
//! (`../shared/DESIGN.md`, "Measuring honestly": every number is one record
//! `{experiment, system, cores, metric, value, unit}`). `no_std` and allocation-free, so
//! the kernel and user programs format straight into their console.
#![no_std]
#![forbid(unsafe_code)]

use core::cmp::Ordering;
use core::fmt::{self, Display, Write};

/// What starts every record line; `make bench` finds records by it.
pub const MARKER: &str = "RESULT ";

/// Which cores a record's number is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cores {
    /// The machine's cores (`"cores":N`): the kernel's and the workloads' lines.
    Machine(usize),
    /// The cores that did the work, when they may differ from the machine's
    /// (`"active_cores":N`): Atoll's user programs, which run on the cores they are given.
    Active(usize),
}

/// One measurement's description; [`Record::line`] adds the value.
///
/// The line is
/// `RESULT {"experiment":…,"system":…,"cores"|"active_cores":…[,"config":…],"metric":…,"value":…,"unit":…<extra>}`.
/// The names are written as they are (no JSON escaping): they are the program's own
/// constants, never input.
#[derive(Clone, Copy, Debug)]
pub struct Record<'a> {
    /// The experiment (`urpc`, `memclone`, ...).
    pub experiment: &'a str,
    /// The system measured: `atoll`, `linux` or `host`.
    pub system: &'a str,
    /// Which cores the number is about.
    pub cores: Cores,
    /// The configuration (`shared-as`, `global`, ...), if the experiment has several.
    pub config: Option<&'a str>,
    /// What was measured (`latency_cycles`, ...).
    pub metric: &'a str,
    /// Its unit (`cycles`, `ratio`, ...).
    pub unit: &'a str,
    /// More fields, written inside the object as they are: empty, or starting with a
    /// comma (`,"pair":[0,1]`).
    pub extra: &'a str,
}

impl<'a> Record<'a> {
    /// A record of `metric` in `unit` for `experiment` on `system` with `cores`, with no
    /// configuration and no extra fields.
    pub fn new(
        experiment: &'a str,
        system: &'a str,
        cores: Cores,
        metric: &'a str,
        unit: &'a str,
    ) -> Self {
        Record { experiment, system, cores, config: None, metric, unit, extra: "" }
    }

    /// The same record with extra fields (empty, or starting with a comma).
    pub fn extra(self, extra: &'a str) -> Self {
        Record { extra, ..self }
    }

    /// The same record in configuration `config`.
    pub fn config(self, config: &'a str) -> Self {
        Record { config: Some(config), ..self }
    }

    /// The whole line with `value` (a number, or [`Fixed2`]), without a line end: print it
    /// with `{}`, or `to_string` it.
    pub fn line<V: Display>(&self, value: V) -> Line<'_, 'a, V> {
        Line { record: self, value }
    }

    /// Writes the line with `value` (no line end) to `out`.
    pub fn write<W: Write + ?Sized>(&self, out: &mut W, value: impl Display) -> fmt::Result {
        write!(
            out,
            "{MARKER}{{\"experiment\":\"{}\",\"system\":\"{}\",",
            self.experiment, self.system
        )?;
        match self.cores {
            Cores::Machine(n) => write!(out, "\"cores\":{n}")?,
            Cores::Active(n) => write!(out, "\"active_cores\":{n}")?,
        }
        if let Some(config) = self.config {
            write!(out, ",\"config\":\"{config}\"")?;
        }
        write!(
            out,
            ",\"metric\":\"{}\",\"value\":{value},\"unit\":\"{}\"{}}}",
            self.metric, self.unit, self.extra
        )
    }
}

/// A record with its value, shown as the whole `RESULT {json}` line.
pub struct Line<'r, 'a, V> {
    record: &'r Record<'a>,
    value: V,
}

impl<V: Display> Display for Line<'_, '_, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.record.write(f, &self.value)
    }
}

/// The value of field `key` of a `RESULT` line that [`Record::write`] wrote: the text of a
/// number, `null` or an array (`[0,1]`), or a string's text without its quotes. `None` if
/// the line is not a record or has no such field. A reader for checks of a program's
/// output (the kernel's tests), not a JSON parser: it relies on what `write` produces
/// (one flat object, no escapes in strings).
pub fn field<'l>(line: &'l str, key: &str) -> Option<&'l str> {
    let object = line.strip_prefix(MARKER)?.strip_prefix('{')?.strip_suffix('}')?;
    let mut rest = object;
    while !rest.is_empty() {
        let (name, after) = rest.strip_prefix('"')?.split_once("\":")?;
        let (value, next) = if let Some(text) = after.strip_prefix('"') {
            let (value, tail) = text.split_once('"')?;
            (value, tail)
        } else if after.starts_with('[') {
            let end = after.find(']')? + 1;
            (&after[..end], &after[end..])
        } else {
            let end = after.find(',').unwrap_or(after.len());
            (&after[..end], &after[end..])
        };
        if name == key {
            return Some(value);
        }
        rest = match next.strip_prefix(',') {
            Some(tail) => tail,
            None if next.is_empty() => "",
            None => return None,
        };
    }
    None
}

/// A value with two decimals, or `null` when it is not finite (JSON has no NaN or
/// infinity): for ratios and rates. A value that is not zero but would print as `0.00`
/// prints in exponent form (`4.200e-3`, a JSON number too): a rate measured on a loaded
/// host can be that small, and it is not zero.
#[derive(Clone, Copy, Debug)]
pub struct Fixed2(pub f64);

impl Display for Fixed2 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.0.is_finite() {
            f.write_str("null")
        } else if self.0 != 0.0 && self.0.abs() < 0.005 {
            write!(f, "{:.3e}", self.0)
        } else {
            write!(f, "{:.2}", self.0)
        }
    }
}

/// A sample type with a total order, so [`median`] can sort it (Rust's sorts may panic
/// on an order that is not total, and `f64`'s `<` is not: NaN).
pub trait Sample: Copy {
    /// The total order samples sort by.
    fn order(&self, other: &Self) -> Ordering;
}

macro_rules! ordered_samples {
    ($($t:ty),*) => {$(
        impl Sample for $t {
            fn order(&self, other: &Self) -> Ordering {
                self.cmp(other)
            }
        }
    )*};
}
ordered_samples!(u32, u64, usize, i64);

impl Sample for f64 {
    fn order(&self, other: &Self) -> Ordering {
        self.total_cmp(other)
    }
}

/// The median of `samples`, sorting them in place: the middle sample, or for an even
/// count the upper of the two middle ones (no averaging, so the median is always a value
/// that was measured). `None` when there are no samples.
pub fn median<T: Sample>(samples: &mut [T]) -> Option<T> {
    samples.sort_unstable_by(T::order);
    samples.get(samples.len() / 2).copied()
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use proptest::prelude::*;
    use std::string::{String, ToString};
    use std::vec::Vec;

    fn text(record: &Record, value: impl Display) -> String {
        record.line(value).to_string()
    }

    #[test]
    fn a_kernel_line_has_the_keys_in_order() {
        let r = Record::new("urpc", "atoll", Cores::Machine(2), "latency_cycles", "cycles")
            .extra(",\"pair\":[0,1]");
        assert_eq!(
            text(&r, 412),
            "RESULT {\"experiment\":\"urpc\",\"system\":\"atoll\",\"cores\":2,\
             \"metric\":\"latency_cycles\",\"value\":412,\"unit\":\"cycles\",\"pair\":[0,1]}"
        );
    }

    #[test]
    fn a_program_line_has_active_cores_and_its_config() {
        let r = Record::new("memclone", "atoll", Cores::Active(4), "cycles_per_page", "cycles")
            .config("shared-as")
            .extra(",\"mb\":16");
        assert_eq!(
            text(&r, Fixed2(1234.5678)),
            "RESULT {\"experiment\":\"memclone\",\"system\":\"atoll\",\"active_cores\":4,\
             \"config\":\"shared-as\",\"metric\":\"cycles_per_page\",\"value\":1234.57,\
             \"unit\":\"cycles\",\"mb\":16}"
        );
    }

    #[test]
    fn write_and_display_agree() {
        let r = Record::new("x", "linux", Cores::Machine(1), "m", "u");
        let mut written = String::new();
        r.write(&mut written, 7).unwrap();
        assert_eq!(written, text(&r, 7));
        assert!(written.starts_with(MARKER));
    }

    #[test]
    fn fields_are_read_back_from_a_line() {
        let r = Record::new("urpc", "atoll", Cores::Machine(2), "latency_cycles", "cycles")
            .config("c")
            .extra(",\"pair\":[0,1],\"lines\":8");
        let line = text(&r, Fixed2(1.5));
        assert_eq!(field(&line, "experiment"), Some("urpc"));
        assert_eq!(field(&line, "cores"), Some("2"));
        assert_eq!(field(&line, "config"), Some("c"));
        assert_eq!(field(&line, "value"), Some("1.50"));
        assert_eq!(field(&line, "pair"), Some("[0,1]"));
        assert_eq!(field(&line, "lines"), Some("8"));
        assert_eq!(field(&line, "unit"), Some("cycles"));
        assert_eq!(field(&line, "nope"), None);
        assert_eq!(field(&text(&r, Fixed2(f64::NAN)), "value"), Some("null"));
        for bad in ["", "RESULT ", "RESULT {", "bench: no", "RESULT {\"a\"}", "RESULT {\"a\":1"] {
            assert_eq!(field(bad, "a"), None, "{bad}");
        }
    }

    #[test]
    fn values_that_are_not_finite_are_null() {
        assert_eq!(Fixed2(1.234).to_string(), "1.23");
        assert_eq!(Fixed2(2.0).to_string(), "2.00");
        assert_eq!(Fixed2(f64::NAN).to_string(), "null");
        assert_eq!(Fixed2(f64::NEG_INFINITY).to_string(), "null");
    }

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&mut [5u64, 1, 3]), Some(3));
        assert_eq!(median(&mut [4u64, 1, 3, 2]), Some(3));
        assert_eq!(median::<u64>(&mut []), None);
        assert_eq!(median(&mut [2.0, 9.0, 1.0, 4.0]), Some(4.0));
    }

    #[test]
    fn a_nan_sorts_last_and_does_not_panic() {
        assert_eq!(median(&mut [f64::NAN, 1.0, 2.0]), Some(2.0));
        assert!(median(&mut [f64::NAN]).unwrap().is_nan());
    }

    proptest! {
        /// The median is a sample, and at most half of the others are above it and at
        /// most half below it.
        #[test]
        fn the_median_splits_the_samples(mut v in proptest::collection::vec(any::<u64>(), 1..200)) {
            let original: Vec<u64> = v.clone();
            let m = median(&mut v).unwrap();
            prop_assert!(original.contains(&m));
            let below = original.iter().filter(|&&x| x < m).count();
            let above = original.iter().filter(|&&x| x > m).count();
            prop_assert!(below <= original.len() / 2);
            prop_assert!(above <= (original.len() - 1) / 2);
        }

        /// Any finite value prints as a JSON number with two decimals, or, when that
        /// would read 0.00 and it is not zero, in exponent form with its sign kept.
        #[test]
        fn fixed2_is_a_number(x in -1e12f64..1e12) {
            let s = Fixed2(x).to_string();
            let back = s.parse::<f64>().unwrap();
            if x != 0.0 && x.abs() < 0.005 {
                prop_assert!(s.contains('e'));
                prop_assert!((back - x).abs() <= 1e-3 * x.abs());
                prop_assert_eq!(back > 0.0, x > 0.0);
            } else {
                let (_, decimals) = s.split_once('.').unwrap();
                prop_assert_eq!(decimals.len(), 2);
                prop_assert!((back - x).abs() <= 0.005 + 1e-9 * x.abs());
            }
        }

        /// A tiny rate (a loaded host) is not printed as zero.
        #[test]
        fn a_tiny_rate_is_not_zero(x in 1e-12f64..0.005) {
            prop_assert!(Fixed2(x).to_string().parse::<f64>().unwrap() > 0.0);
        }
    }
}
