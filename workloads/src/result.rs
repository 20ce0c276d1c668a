//! `RESULT {json}` lines: the one output format of every benchmark, Atoll's and Linux's.
//! `make bench` reads them from the serial port.

use alloc::format;
use alloc::string::String;
use core::fmt::Display;

/// One result line:
/// `RESULT {"experiment":…,"system":…,"cores":…,"metric":…,"value":…,"unit":…<extra>}`,
/// with the same keys in the same order as the kernel's `bench` commands print them.
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
    format!(
        "RESULT {{\"experiment\":\"{experiment}\",\"system\":\"{system}\",\"cores\":{cores},\
         \"metric\":\"{metric}\",\"value\":{value},\"unit\":\"{unit}\"{extra}}}"
    )
}

/// A float with two decimals, or `null` (JSON has no NaN or infinity).
pub fn fixed2(value: f64) -> String {
    if value.is_finite() {
        format!("{value:.2}")
    } else {
        String::from("null")
    }
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
    }

    #[test]
    fn non_finite_values_are_null() {
        assert_eq!(fixed2(1.234), "1.23");
        assert_eq!(fixed2(f64::NAN), "null");
        assert_eq!(fixed2(f64::INFINITY), "null");
    }
}
