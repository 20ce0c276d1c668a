//! `mcrt_policies`, McRT Figures 7–8: one parallel application with uneven work, block
//! motion estimation over generated frames (`workloads::motion`), with a McRT thread per
//! block, under each scheduler configuration: one queue under a TTS lock and under a
//! ticket lock, a queue per processor without stealing (work sharing), with stealing,
//! and with neighbour stealing. Reported: time per frame and speedup over the serial loop.

use super::{cpus, line};
use crate::median_of;
use mcrt::hosted::LinuxHost;
use mcrt::{Config, Policy, QueueLock};
use std::sync::Arc;
use std::time::Instant;
use workloads::motion::Frames;

const EXPERIMENT: &str = "mcrt_policies";

/// The configurations, with their names in the report.
fn configs(p: usize) -> Vec<(&'static str, Config)> {
    vec![
        ("single-tts", Config::new(Policy::Single, p)),
        ("single-ticket", Config::new(Policy::Single, p).with_lock(QueueLock::Ticket)),
        ("sharing", Config::new(Policy::Sharing, p)),
        ("stealing", Config::new(Policy::Stealing, p)),
        ("neighbour", Config::new(Policy::Neighbour, p)),
    ]
}

/// ms per frame for `frames` frames, each block a McRT thread; checks the answer.
fn parallel(config: Config, f: &Arc<Frames>, frames: usize, expected: u64) -> f64 {
    let f = f.clone();
    let (ms, sum) = mcrt::run(config, &LinuxHost::pinned(), move || {
        let start = Instant::now();
        let mut sum = 0;
        for _ in 0..frames {
            let hs: Vec<_> = (0..f.blocks())
                .map(|b| {
                    let f = f.clone();
                    mcrt::spawn(move || f.estimate(b).wrapping_mul(b as u64 + 1)).expect("spawn")
                })
                .collect();
            sum = hs.into_iter().fold(0u64, |acc, h| acc.wrapping_add(h.join().expect("block")));
        }
        (start.elapsed().as_secs_f64() * 1e3 / frames as f64, sum)
    })
    .expect("mcrt runs");
    assert_eq!(
        sum, expected,
        "mcrt_policies: a parallel frame's answer differs from the serial one"
    );
    ms
}

/// The experiment's lines.
pub fn run(quick: bool) -> Vec<String> {
    let (bw, bh, frames, trials) = if quick { (8, 6, 1, 1) } else { (40, 30, 10, 3) };
    let f = Arc::new(Frames::new(bw, bh));
    let expected = f.checksum_serial();
    let serial = median_of(trials, || {
        let start = Instant::now();
        for _ in 0..frames {
            assert_eq!(f.checksum_serial(), expected);
        }
        start.elapsed().as_secs_f64() * 1e3 / frames as f64
    });
    let mut out = vec![line(EXPERIMENT, "serial", Some("serial"), 1, "ms_per_frame", serial, "ms")];
    for p in [1, 2].into_iter().filter(|&p| p <= cpus()) {
        for (name, config) in configs(p) {
            let ms = median_of(trials, || parallel(config.clone(), &f, frames, expected));
            out.push(line(EXPERIMENT, "mcrt", Some(name), p, "ms_per_frame", ms, "ms"));
            out.push(line(EXPERIMENT, "mcrt", Some(name), p, "speedup", serial / ms, "ratio"));
        }
    }
    out
}
