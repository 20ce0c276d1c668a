//! `RESULT {json}` lines: the one output format of every benchmark, Atoll's and Linux's,
//! written by the `record` crate (the same code the kernel's `bench` commands and Atoll's
//! programs print with). `make bench` reads them from the serial port.

use alloc::string::{String, ToString};
use core::fmt::Display;
use record::{Cores, Record};

pub use record::{median, Fixed2};

/// One result line of a workload on `system`:
/// `RESULT {"experiment":…,"system":…,"cores":…,"metric":…,"value":…,"unit":…<extra>}`.
/// `extra` is appended inside the object as it is (e.g. `,"pair":[0,1]`), so it must be
/// empty or start with a comma.
pub fn line(
    system: &str,
    experiment: &str,
    cores: usize,
    metric: &str,
    value: impl Display,
    unit: &str,
    extra: &str,
) -> String {
    Record::new(experiment, system, Cores::Machine(cores), metric, unit)
        .extra(extra)
        .line(value)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_json_records_in_the_kernel_shape() {
        let text = line("linux", "urpc", 2, "latency_cycles", 412, "cycles", ",\"pair\":[0,1]");
        assert_eq!(
            text,
            "RESULT {\"experiment\":\"urpc\",\"system\":\"linux\",\"cores\":2,\
             \"metric\":\"latency_cycles\",\"value\":412,\"unit\":\"cycles\",\"pair\":[0,1]}"
        );
        assert!(line("linux", "x", 1, "m", Fixed2(f64::NAN), "u", "").contains("\"value\":null"));
    }
}
