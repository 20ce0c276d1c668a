//! `make bench-host`: URPC between two pinned threads against the cache-line floor and rtrb,
//! then McRT's experiments against their peer libraries, then Corey Figure 3's locks against
//! parking_lot and std, then Metis against rayon. Prints
//! `RESULT {json}` lines on stdout and a short summary on stderr.
//! `bench-host [--quick] [EXPERIMENT...] [METIS OPTIONS]`: `urpc`, `locks_contended`, one of
//! `bench_host::mcrt::EXPERIMENTS` or of `bench_host::metis::EXPERIMENTS` (all when none is
//! named); `--quick` runs tiny iteration counts (a smoke test; the numbers mean nothing).
//! The Metis options (`--mb N | --file PATH --threads T --impl metis|rayon|both --cell array|btree
//! --trials K`) are `bench_host::metis::Options`; `npb` (the NAS Parallel Benchmarks) takes
//! `--kernel ep|is|cg|mg|ft|all --class S|W|A --impl mcrt|rayon|both` (`bench_host::npb::Options`) and `--threads`,
//! `--trials`, and runs only when named. `bcache` (experiment `bcache_lookup`: the buffer
//! cache's lock-free tree against a locked `BTreeMap`, `bench_host::bcache`) also runs only
//! when named.

use bench_host::{bcache, locks, mcrt, metis, npb, pinning_possible, run, Config, PAIR, QUEUE};
use std::process::ExitCode;
use std::time::Instant;

fn main() -> ExitCode {
    let mut config = Config::FULL;
    let mut chosen: Vec<String> = Vec::new();
    let usage = format!(
        "usage: bench-host [--quick] [urpc|locks_contended|{}|{}|npb|bcache]... [--mb N | --file PATH] [--threads T] [--impl metis|mcrt|rayon|both] [--cell array|btree] [--trials K] [--kernel ep|is|cg|mg|ft|all] [--class S|W|A]",
        mcrt::EXPERIMENTS.join("|"),
        metis::EXPERIMENTS.join("|")
    );
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let mut metis_options = metis::Options::new(quick);
    let mut npb_options = npb::Options::new();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--quick" => config = Config::QUICK,
            "-h" | "--help" => {
                println!("{usage}");
                return ExitCode::SUCCESS;
            }
            name if name == "urpc"
                || name == "locks_contended"
                || name == "bcache"
                || mcrt::EXPERIMENTS.contains(&name)
                || metis::EXPERIMENTS.contains(&name)
                || npb::EXPERIMENTS.contains(&name) =>
            {
                chosen.push(arg.clone())
            }
            option if option.starts_with("--") => {
                let value = args.next().map(String::as_str).unwrap_or("");
                // `--impl` is both Metis's (metis|rayon|both) and npb's (mcrt|rayon|both).
                let taken = if option == "--impl" {
                    match (npb_options.set(option, value), metis_options.set(option, value)) {
                        (Ok(true), _) | (_, Ok(true)) => Ok(true),
                        (_, other) => other,
                    }
                } else {
                    match npb_options.set(option, value) {
                        Ok(false) => metis_options.set(option, value),
                        other => other,
                    }
                };
                match taken {
                    Ok(true) => {}
                    Ok(false) => {
                        eprintln!("bench-host: unknown option {option:?} ({usage})");
                        return ExitCode::from(2);
                    }
                    Err(e) => {
                        eprintln!("bench-host: {e}");
                        return ExitCode::from(2);
                    }
                }
            }
            other => {
                eprintln!("bench-host: unknown argument {other:?} ({usage})");
                return ExitCode::from(2);
            }
        }
    }
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
    if chosen.is_empty() || chosen.iter().any(|c| c == "locks_contended") {
        let started = Instant::now();
        match locks::run(quick) {
            Ok(lines) => lines.iter().for_each(|l| println!("{l}")),
            Err(e) => {
                eprintln!("bench-host: {e}");
                return ExitCode::FAILURE;
            }
        }
        eprintln!("bench-host: locks_contended, {:.1} s", started.elapsed().as_secs_f64());
    }
    for name in metis::EXPERIMENTS {
        if chosen.is_empty() || chosen.iter().any(|c| c == name) {
            match metis::run(name, &metis_options) {
                Ok(lines) => lines.iter().for_each(|l| println!("{l}")),
                Err(e) => {
                    eprintln!("bench-host: {e}");
                    return ExitCode::FAILURE;
                }
            }
        }
    }
    // The NAS kernels run only when named (they are not a peer comparison).
    if chosen.iter().any(|c| c == "npb") {
        let started = Instant::now();
        match npb::run(&npb_options, metis_options.threads, metis_options.trials) {
            Ok(lines) => lines.iter().for_each(|l| println!("{l}")),
            Err(e) => {
                eprintln!("bench-host: {e}");
                return ExitCode::FAILURE;
            }
        }
        eprintln!("bench-host: npb, {:.1} s", started.elapsed().as_secs_f64());
    }
    // The buffer cache's lookups (issue M13) run only when named.
    if chosen.iter().any(|c| c == "bcache") {
        let started = Instant::now();
        match bcache::run(quick) {
            Ok(lines) => lines.iter().for_each(|l| println!("{l}")),
            Err(e) => {
                eprintln!("bench-host: {e}");
                return ExitCode::FAILURE;
            }
        }
        eprintln!("bench-host: {}, {:.1} s", bcache::EXPERIMENT, started.elapsed().as_secs_f64());
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
