//! The client of `web_static` (Multikernel §5.4; issue M12): Debian's `wrk` on the host,
//! against the server in the VM through the forward from 127.0.0.1. It waits until the
//! server answers the page, warms it up for a second, then measures for [`SECONDS`] with
//! [`CONNECTIONS`] kept-alive connections on one thread (the two host CPUs also carry the
//! vCPUs and QEMU's network thread), and turns wrk's report into the job's result lines:
//! requests/s, and the 50th and 99th percentile latencies.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use record::{Cores, Record};

use super::benchdisk::{STATIC_PAGE, STATIC_PAGE_BYTES};
use super::netload::Measured;
use crate::{deps, wrk, Result};

/// Seconds of the measured run.
const SECONDS: u32 = 6;
/// Connections wrk keeps open (fewer than webd's 32 listening sockets).
const CONNECTIONS: u32 = 16;

/// Measures the server at `addr`: the JSON of its result lines.
pub fn web_static(
    addr: SocketAddr,
    ended: &AtomicBool,
    deadline: Instant,
    who: Measured,
) -> Result<Vec<String>> {
    let wrk = deps::ensure_tool("wrk", "wrk")?;
    wait_for_page(addr, ended, deadline)?;
    let url = format!("http://{addr}/{STATIC_PAGE}");
    wrk::run(&wrk, &url, 1, CONNECTIONS, deadline)?;
    let report = wrk::run(&wrk, &url, SECONDS, CONNECTIONS, deadline)?;
    if report.requests == 0 {
        return Err("wrk made no requests".into());
    }
    println!("    wrk ({SECONDS} s): {report}");
    Ok(lines(&report, who))
}

/// The Linux guest's servers that are peers of webd: their lines say `"config":"webd"`
/// and `"impl":NAME`, so the report compares each with Atoll's webd row.
const PEERS: [&str; 2] = ["lighttpd", "nginx"];

/// The result lines (their JSON) of one measured run.
fn lines(r: &wrk::Report, who: Measured) -> Vec<String> {
    let mut extra = format!(
        ",\"requests\":{},\"non_2xx\":{},\"socket_errors\":{},\"connections\":{CONNECTIONS}",
        r.requests, r.non_2xx, r.socket_errors
    );
    let mut who = who;
    if PEERS.contains(&who.config) {
        extra.push_str(&format!(",\"impl\":\"{}\"", who.config));
        who.config = "webd";
    }
    let record = |metric, unit| {
        let record =
            Record::new("web_static", who.system, Cores::Machine(who.cores as usize), metric, unit);
        if who.config.is_empty() {
            record
        } else {
            record.config(who.config)
        }
    };
    [
        record("requests_per_s", "req/s")
            .extra(&extra)
            .line(r.per_second.round() as u64)
            .to_string(),
        record("latency_p50_us", "us").extra(&extra).line(r.p50_us).to_string(),
        record("latency_p99_us", "us").extra(&extra).line(r.p99_us).to_string(),
    ]
    .into_iter()
    .map(|line| line.trim_start_matches(record::MARKER).to_string())
    .collect()
}

/// Asks for the page every 200 ms until it comes whole, the VM ends or `deadline` passes.
fn wait_for_page(addr: SocketAddr, ended: &AtomicBool, deadline: Instant) -> Result {
    let mut last = String::from("no answer");
    while Instant::now() < deadline && !ended.load(Ordering::Relaxed) {
        match get_page(addr) {
            Ok(()) => return Ok(()),
            Err(why) => last = why,
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Err(format!("the server never served /{STATIC_PAGE}: {last}"))
}

/// One `GET` of the page on a connection of its own: Ok if the answer is 200 with the
/// page's length.
fn get_page(addr: SocketAddr) -> Result {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))
        .map_err(|e| format!("connect: {e}"))?;
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let request = format!("GET /{STATIC_PAGE} HTTP/1.0\r\nHost: atoll\r\n\r\n");
    stream.write_all(request.as_bytes()).map_err(|e| format!("send: {e}"))?;
    let mut answer = Vec::new();
    let _ = stream.take(64 << 10).read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer);
    let ok = text.starts_with("HTTP/1.") && text.split(' ').nth(1) == Some("200");
    let body = text.split_once("\r\n\r\n").map_or(0, |(_, body)| body.len());
    if ok && body == STATIC_PAGE_BYTES {
        Ok(())
    } else {
        Err(format!("answer `{}` with a {body}-byte body", text.lines().next().unwrap_or("")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPORT: &str = "  40012 requests in 6.00s, 178.47MB read
  Socket errors: connect 0, read 2, write 0, timeout 1
  Non-2xx or 3xx responses: 4
Requests/sec:   6668.52
     50%    2.25ms
     99%  812.00us
";

    #[test]
    fn the_lines_carry_the_jobs_system_and_configuration() {
        let r = wrk::parse(REPORT).unwrap();
        let who = Measured { system: "linux", config: "nginx", cores: 2 };
        let lines = super::lines(&r, who);
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with(
            "{\"experiment\":\"web_static\",\"system\":\"linux\",\"cores\":2,\"config\":\"webd\",\
             \"metric\":\"requests_per_s\",\"value\":6669,"
        ));
        assert!(lines[2].contains("\"metric\":\"latency_p99_us\",\"value\":812,"));
        assert!(lines[1].contains("\"non_2xx\":4,\"socket_errors\":3"));
        assert!(lines[1].ends_with(",\"impl\":\"nginx\"}"));
        let webd = super::lines(&r, Measured { system: "atoll", config: "webd", cores: 1 });
        assert!(webd[0].contains("\"config\":\"webd\"") && !webd[0].contains("impl"));
    }
}
