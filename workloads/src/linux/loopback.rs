//! Multikernel Table 4 on Linux: a UDP source and sink over 127.0.0.1, pinned to the first
//! two CPUs (the paper pinned them with `libnuma`); the kernel's stack carries the packets.

use std::net::UdpSocket;
use std::string::String;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use std::vec::Vec;

use crate::loopback::{mbit_per_s, result_line, PAYLOAD};

/// Sends `packets` packets from a source on CPU 0 to a sink on CPU 1; the result line.
pub fn run(packets: u64) -> Result<Vec<String>, String> {
    let cpus = super::allowed_cpus();
    if cpus.len() < 2 {
        return Err(String::from("loopback needs two CPUs"));
    }
    let sink = UdpSocket::bind("127.0.0.1:0").map_err(|e| format!("sink: {e}"))?;
    let to = sink.local_addr().map_err(|e| e.to_string())?;
    sink.set_read_timeout(Some(Duration::from_secs(1))).map_err(|e| e.to_string())?;
    let start = Instant::now();
    let (sent, first, last, bytes) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let receiver = {
        let (first, last, bytes, cpu) = (first.clone(), last.clone(), bytes.clone(), cpus[1]);
        std::thread::spawn(move || {
            let _ = super::pin(cpu);
            let mut buf = [0u8; 2048];
            let mut got = 0u64;
            // Until every packet came, or none for a second (the rest were dropped).
            while got < packets {
                let Ok(n) = sink.recv(&mut buf) else { break };
                let now = start.elapsed().as_micros() as u64;
                if got == 0 {
                    first.store(now, Ordering::Relaxed);
                }
                last.store(now, Ordering::Relaxed);
                bytes.fetch_add(n as u64, Ordering::Relaxed);
                got += 1;
            }
            got
        })
    };
    let _ = super::pin(cpus[0]);
    let source = UdpSocket::bind("127.0.0.1:0").map_err(|e| format!("source: {e}"))?;
    let payload = [0x5au8; PAYLOAD];
    for _ in 0..packets {
        if source.send_to(&payload, to).is_ok() {
            sent.fetch_add(1, Ordering::Relaxed);
        }
    }
    let received = receiver.join().map_err(|_| String::from("the sink panicked"))?;
    let mbit = mbit_per_s(
        bytes.load(Ordering::Relaxed),
        first.load(Ordering::Relaxed),
        last.load(Ordering::Relaxed),
    )
    .ok_or_else(|| format!("{received} packets received"))?;
    Ok(vec![result_line("linux", "kernel", mbit, received, sent.load(Ordering::Relaxed))])
}
