//! A long McRT yield loop for profiling the switch (`perf record ./target/release/examples/switchprof`):
//! two threads on one pinned processor yield to each other 20 million times.

use mcrt::hosted::LinuxHost;
use mcrt::{Config, Policy};
fn main() {
    let n = 20_000_000u64;
    let t = mcrt::run(Config::new(Policy::Local, 1), &LinuxHost::pinned(), move || {
        let other = mcrt::spawn(move || {
            for _ in 0..n / 2 {
                mcrt::yield_now();
            }
        })
        .unwrap();
        let start = std::time::Instant::now();
        for _ in 0..n / 2 {
            mcrt::yield_now();
        }
        let t = start.elapsed();
        other.join();
        t
    })
    .unwrap();
    println!("{:.2} ns per switch", t.as_secs_f64() * 1e9 / n as f64);
}
