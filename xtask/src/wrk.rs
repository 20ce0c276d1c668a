//! Debian's `wrk` (the HTTP load generator), run from the host against a server in the VM
//! through a forward from 127.0.0.1, and its `--latency` report read: the client of
//! `make bench`'s `web_static` (`bench/webload.rs`) and of the test that loads webd
//! (`netclient::webd_under_wrk`).

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use crate::Result;

/// What wrk reported.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Report {
    /// Responses completed.
    pub requests: u64,
    /// Their rate.
    pub per_second: f64,
    /// The median latency, in microseconds.
    pub p50_us: u64,
    /// The 99th percentile latency, in microseconds.
    pub p99_us: u64,
    /// Responses whose status was not 2xx or 3xx.
    pub non_2xx: u64,
    /// Connect, read and write errors and timeouts, all together.
    pub socket_errors: u64,
    /// wrk's line that counts them by kind (`connect 0, read 2, write 0, timeout 1`).
    pub socket_error_kinds: String,
}

impl std::fmt::Display for Report {
    /// `N requests, R/s, p50 X us, p99 Y us, A non-2xx, B socket errors`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} requests, {:.0}/s, p50 {} us, p99 {} us, {} non-2xx, {} socket errors",
            self.requests,
            self.per_second,
            self.p50_us,
            self.p99_us,
            self.non_2xx,
            self.socket_errors
        )
    }
}

/// Runs wrk (one thread, `connections` connections) against `url` for `seconds`, killed if
/// it outlives `deadline`; its report.
pub fn run(
    wrk: &Path,
    url: &str,
    seconds: u32,
    connections: u32,
    deadline: Instant,
) -> Result<Report> {
    let mut child = Command::new(wrk)
        .args(["-t1", &format!("-c{connections}"), &format!("-d{seconds}s"), "--latency"])
        .args(["--timeout", "5s", url])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run wrk: {e}"))?;
    let limit = Duration::from_secs(u64::from(seconds) + 20);
    let until = deadline.min(Instant::now() + limit);
    let (ending, _) = crate::qemu::wait_or_stop(
        &mut child,
        until.saturating_duration_since(Instant::now()),
        &AtomicBool::new(false),
    )?;
    let mut out = String::new();
    if let Some(mut stdout) = child.stdout.take() {
        let _ = stdout.read_to_string(&mut out);
    }
    if ending.status != Some(0) {
        let mut err = String::new();
        if let Some(mut stderr) = child.stderr.take() {
            let _ = stderr.read_to_string(&mut err);
        }
        return Err(format!("wrk failed ({:?}): {}{}", ending.status, err.trim(), out.trim()));
    }
    parse(&out)
}

/// Reads wrk's report (`--latency`).
pub fn parse(out: &str) -> Result<Report> {
    let mut r = Report::default();
    for line in out.lines().map(str::trim) {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["50%", value] => r.p50_us = micros(value)?,
            ["99%", value] => r.p99_us = micros(value)?,
            [n, "requests", "in", ..] => r.requests = n.parse().map_err(|_| bad(line))?,
            ["Requests/sec:", n] => r.per_second = n.parse().map_err(|_| bad(line))?,
            ["Non-2xx", "or", "3xx", "responses:", n] => {
                r.non_2xx = n.parse().map_err(|_| bad(line))?
            }
            ["Socket", "errors:", ..] => {
                r.socket_error_kinds = line.trim_start_matches("Socket errors:").trim().to_string();
                // `Socket errors: connect 0, read 0, write 0, timeout 0`
                for count in words.iter().skip(3).step_by(2) {
                    let count = count.trim_end_matches(',');
                    r.socket_errors += count.parse::<u64>().map_err(|_| bad(line))?;
                }
            }
            _ => {}
        }
    }
    if r.per_second == 0.0 && r.requests > 0 {
        return Err(format!("no Requests/sec in wrk's report:\n{out}"));
    }
    Ok(r)
}

fn bad(line: &str) -> String {
    format!("cannot read wrk's line `{line}`")
}

/// A wrk duration (`812.00us`, `1.25ms`, `2.00s`) in whole microseconds.
fn micros(text: &str) -> Result<u64> {
    let (number, scale) = if let Some(n) = text.strip_suffix("us") {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix("ms") {
        (n, 1e3)
    } else if let Some(n) = text.strip_suffix('m') {
        (n, 60e6)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1e6)
    } else {
        return Err(format!("cannot read wrk's duration `{text}`"));
    };
    let value: f64 = number.parse().map_err(|_| format!("cannot read wrk's duration `{text}`"))?;
    Ok((value * scale).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPORT: &str = "Running 6s test @ http://127.0.0.1:41234/static.html
  1 threads and 16 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     2.41ms    1.02ms  31.50ms   90.12%
    Req/Sec     6.70k   410.22     7.31k    71.67%
  Latency Distribution
     50%    2.25ms
     75%    2.61ms
     90%    3.10ms
     99%  812.00us
  40012 requests in 6.00s, 178.47MB read
  Socket errors: connect 0, read 2, write 0, timeout 1
  Non-2xx or 3xx responses: 4
Requests/sec:   6668.52
Transfer/sec:     29.74MB
";

    #[test]
    fn wrks_report_is_read() {
        let r = parse(REPORT).unwrap();
        assert_eq!(
            r,
            Report {
                requests: 40012,
                per_second: 6668.52,
                p50_us: 2250,
                p99_us: 812,
                non_2xx: 4,
                socket_errors: 3,
                socket_error_kinds: "connect 0, read 2, write 0, timeout 1".into()
            }
        );
    }

    #[test]
    fn durations_in_every_unit() {
        assert_eq!(micros("812.00us").unwrap(), 812);
        assert_eq!(micros("1.25ms").unwrap(), 1250);
        assert_eq!(micros("2.00s").unwrap(), 2_000_000);
        assert_eq!(micros("1.50m").unwrap(), 90_000_000);
        assert!(micros("fast").is_err());
    }

    #[test]
    fn a_report_with_requests_but_no_rate_is_refused() {
        assert!(parse("  5 requests in 1.00s, 1MB read\n").is_err());
        assert_eq!(parse("").unwrap(), Report::default());
    }
}
