//! Multikernel Table 4, IP loopback, written once where it is the same on both systems: a
//! UDP source on one core sends packets of 1000-byte payload to a sink on another, which
//! reads and discards them; the throughput is measured at the sink, between its first and
//! last packet. Atoll joins two user-space IP stacks (smoltcp) by URPC channels
//! (`loopback` program); Linux uses its kernel stack over 127.0.0.1 (`linux::loopback`).

use alloc::string::{String, ToString};

/// The payload of each packet (Multikernel §5.4: 1000 bytes).
pub const PAYLOAD: usize = 1000;
/// Packets sent when none are asked for.
pub const DEFAULT_PACKETS: u64 = 20_000;

/// Megabits a second for `bytes` received between `first_us` and `last_us`; `None` if
/// that is no time.
pub fn mbit_per_s(bytes: u64, first_us: u64, last_us: u64) -> Option<u64> {
    let us = last_us.checked_sub(first_us).filter(|&us| us > 0)?;
    Some(bytes * 8 / us)
}

/// The result line: `config` names the link (`urpc` on Atoll, `kernel` on Linux).
pub fn result_line(system: &str, config: &str, mbit: u64, received: u64, sent: u64) -> String {
    let extra = alloc::format!(",\"received\":{received},\"sent\":{sent},\"payload\":{PAYLOAD}");
    record::Record::new("loopback", system, record::Cores::Active(2), "throughput", "Mbit/s")
        .config(config)
        .extra(&extra)
        .line(mbit)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throughput_is_bits_over_the_sinks_time() {
        assert_eq!(mbit_per_s(1_000_000, 0, 8_000), Some(1000));
        assert_eq!(mbit_per_s(5, 7, 7), None);
        assert_eq!(mbit_per_s(5, 9, 7), None);
        let line = result_line("atoll", "urpc", 10, 3, 4);
        assert!(line.contains("\"experiment\":\"loopback\"") && line.contains("\"sent\":4"));
    }
}
