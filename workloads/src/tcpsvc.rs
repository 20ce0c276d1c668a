//! Corey's TCP service (§8.3), written once: what the server writes to each connection
//! and how the experiment `tcp_conn` (Corey Figure 8) reports its rate. Atoll's `tcpsvc`
//! (a smoltcp stack per core) and Linux's (`linux::tcpsvc`, std sockets) both use it.

use alloc::string::{String, ToString};

/// What each connection gets (Corey §8.3: 128 bytes): a line, padded with dots.
pub const REPLY: [u8; 128] = reply();

const fn reply() -> [u8; 128] {
    let text = b"Atoll tcpsvc: the 128 bytes Corey's TCP service writes to each connection ";
    let mut out = [b'.'; 128];
    let mut i = 0;
    while i < text.len() {
        out[i] = text[i];
        i += 1;
    }
    out[127] = b'\n';
    out
}

/// Connections a second from `served` connections, the first served at `first_us` and
/// the last at `last_us` (microseconds of one clock): the `served - 1` intervals between
/// them (the time before the first connection, while clients wait for the server to
/// listen, is not counted). `None` below two connections.
pub fn connections_per_s(served: u64, first_us: u64, last_us: u64) -> Option<u64> {
    if served < 2 || last_us <= first_us {
        return None;
    }
    Some((served - 1) * 1_000_000 / (last_us - first_us))
}

/// The experiment's result line: `config` names who drives the device (`trap`,
/// `dedicated`, `polling`; Linux's `kernel`), `stacks` the cores serving connections.
pub fn result_line(system: &str, config: &str, stacks: usize, rate: u64, served: u64) -> String {
    let extra = alloc::format!(",\"connections\":{served}");
    let cores = record::Cores::Active(stacks);
    record::Record::new("tcp_conn", system, cores, "connections_per_s", "conn/s")
        .config(config)
        .extra(&extra)
        .line(rate)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reply_is_128_bytes_ending_in_a_newline() {
        assert_eq!(REPLY.len(), 128);
        assert_eq!(REPLY[127], b'\n');
        assert!(REPLY.starts_with(b"Atoll tcpsvc"));
    }

    #[test]
    fn the_rate_counts_the_intervals_between_the_first_and_last() {
        assert_eq!(connections_per_s(1, 0, 10), None);
        assert_eq!(connections_per_s(11, 1_000_000, 2_000_000), Some(10));
        assert_eq!(connections_per_s(5, 7, 7), None);
        let line = result_line("linux", "kernel", 2, 10, 11);
        assert!(
            line.contains("\"experiment\":\"tcp_conn\"") && line.contains("\"config\":\"kernel\"")
        );
    }
}
