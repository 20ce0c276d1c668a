//! A long single-processor STM loop for profiling (`perf record ./target/release/examples/stmprof`):
//! read-mostly transactions over a few hundred cells, as `mcrt_stm`'s tree lookups are.

use mcrt::hosted::LinuxHost;
use mcrt::stm::{self, TCell};
use mcrt::{Config, Policy};

fn main() {
    let cells: &'static Vec<TCell<u32>> = Box::leak(Box::new((0..256).map(TCell::new).collect()));
    let n = 5_000_000u64;
    let t = mcrt::run(Config::new(Policy::Local, 1), &LinuxHost::pinned(), move || {
        let start = std::time::Instant::now();
        let mut x = 1u64;
        for i in 0..n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let k = (x % 256) as usize;
            stm::atomic(|tx| {
                let mut s = 0;
                for j in 0..8 {
                    s += tx.read(&cells[(k + j * 31) % 256])?;
                }
                if i % 5 == 0 {
                    tx.write(&cells[k], s % 1000)?;
                }
                Ok(s)
            });
        }
        start.elapsed()
    })
    .unwrap();
    println!("{:.1} ns per transaction", t.as_secs_f64() * 1e9 / n as f64);
}
