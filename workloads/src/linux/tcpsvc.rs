//! Corey's TCP service (§8.3) on Linux, the peer of Atoll's `tcpsvc` in `tcp_conn`
//! (Corey Figure 8): one listening socket on port 80, a thread per core (each pinned)
//! accepting from it, writing [`REPLY`] and closing. Stops after `count` connections or
//! `seconds`; prints the rate between the first and the last connection.

use std::io::Write;
use std::net::TcpListener;
use std::string::String;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use std::vec::Vec;

use crate::tcpsvc::{connections_per_s, result_line, REPLY};

/// Connections served before it stops, when none are asked for.
pub const DEFAULT_CONNECTIONS: usize = 2000;
/// The longest it waits for them.
const SECONDS: u64 = 60;

/// Serves `count` connections on port 80 of every address (the guest's `/init` gives its
/// virtio-net 10.0.2.15/24); the result line.
pub fn run(count: usize) -> Result<Vec<String>, String> {
    let listener = TcpListener::bind("0.0.0.0:80").map_err(|e| format!("bind port 80: {e}"))?;
    let start = Instant::now();
    let served = Arc::new(AtomicU64::new(0));
    let first = Arc::new(AtomicU64::new(u64::MAX));
    let last = Arc::new(AtomicU64::new(0));
    let cpus = super::allowed_cpus();
    for &cpu in &cpus {
        let listener = listener.try_clone().map_err(|e| format!("listener: {e}"))?;
        let (served, first, last) = (served.clone(), first.clone(), last.clone());
        // The threads block in `accept`; the process ends them when `run` returns.
        std::thread::spawn(move || {
            let _ = super::pin(cpu);
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let _ = stream.set_nodelay(true);
                if stream.write_all(&REPLY).is_ok() {
                    let now = start.elapsed().as_micros() as u64;
                    first.fetch_min(now, Ordering::Relaxed);
                    last.fetch_max(now, Ordering::Relaxed);
                    served.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
    }
    println!(
        "tcpsvc: listening on port 80, {} threads, for {count} connections, {SECONDS} s",
        cpus.len()
    );
    let deadline = start + Duration::from_secs(SECONDS);
    while served.load(Ordering::Relaxed) < count as u64 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let n = served.load(Ordering::Relaxed);
    let rate = connections_per_s(n, first.load(Ordering::Relaxed), last.load(Ordering::Relaxed))
        .ok_or_else(|| format!("{n} connections served in {SECONDS} s"))?;
    Ok(vec![result_line("linux", "kernel", cpus.len(), rate, n)])
}
