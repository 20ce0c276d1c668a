//! `make bench-host`: URPC between two pinned threads against the cache-line floor and rtrb,
//! then McRT's experiments against their peer libraries. Prints `RESULT {json}` lines on
//! stdout and a short summary on stderr. `bench-host [--quick] [EXPERIMENT...]`: `urpc`
//! or one of `bench_host::mcrt::EXPERIMENTS` (all when none is named); `--quick` runs tiny
//! iteration counts (a smoke test; the numbers mean nothing).

use bench_host::{mcrt, pinning_possible, run, Config, PAIR, QUEUE};
use std::process::ExitCode;
use std::time::Instant;

fn main() -> ExitCode {
    let mut config = Config::FULL;
    let mut chosen: Vec<String> = Vec::new();
    let usage = format!("usage: bench-host [--quick] [urpc|{}]...", mcrt::EXPERIMENTS.join("|"));
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--quick" => config = Config::QUICK,
            "-h" | "--help" => {
                println!("{usage}");
                return ExitCode::SUCCESS;
            }
            name if name == "urpc" || mcrt::EXPERIMENTS.contains(&name) => chosen.push(arg.clone()),
            other => {
                eprintln!("bench-host: unknown argument {other:?} ({usage})");
                return ExitCode::from(2);
            }
        }
    }
    let quick =
        config.trials == Config::QUICK.trials && config.round_trips == Config::QUICK.round_trips;
    if chosen.is_empty() || chosen.iter().any(|c| c == "urpc") {
        urpc(config);
    }
    for name in mcrt::EXPERIMENTS {
        if chosen.is_empty() || chosen.iter().any(|c| c == name) {
            let started = Instant::now();
            for line in mcrt::run(name, quick).unwrap_or_default() {
                println!("{line}");
            }
            eprintln!("bench-host: {name}, {:.1} s", started.elapsed().as_secs_f64());
        }
    }
    ExitCode::SUCCESS
}

/// The URPC experiment (Multikernel Table 2 on the real cores).
fn urpc(config: Config) {
    if !pinning_possible() {
        eprintln!(
            "bench-host: warning: CPUs {} and {} are not both available; threads run unpinned",
            PAIR[0], PAIR[1]
        );
    }
    let started = Instant::now();
    let r = run(config);
    for line in r.lines() {
        println!("{line}");
    }
    eprintln!(
        "bench-host: CPUs {} and {}, median of {} trials, {:.1} s",
        PAIR[0],
        PAIR[1],
        config.trials,
        started.elapsed().as_secs_f64()
    );
    eprintln!(
        "  one-way latency (cycles): urpc {:.1}, floor {:.1} ({:.2}x floor), rtrb {:.1}",
        r.urpc_latency,
        r.floor_latency,
        r.latency_vs_floor(),
        r.rtrb_latency
    );
    eprintln!(
        "  throughput, queue {QUEUE} (msgs/kcycle): urpc {:.2} ({:.2} of the bound at this floor), rtrb {:.2} ({:.2}x rtrb)",
        r.urpc_throughput,
        r.throughput_vs_bound(),
        r.rtrb_throughput,
        r.throughput_vs_peer()
    );
}
