//! `npb ep|is|cg|mg|ft|all [S|W|A] [--cores LIST] [--repeat N] [--boot NAME]`: the NAS Parallel
//! Benchmarks' kernels (issue 24 item 7; Multikernel §5.3, Figure 9) on McRT, one
//! processor on each listed core (default: all) and an OpenMP team of one McRT thread per
//! processor: the code the Linux guest runs for `bench=npb` (`workloads::npb`, over
//! `crates/npb`). Prints, for each kernel, the TSC cycles of NPB's timed section and NPB's
//! verification (`RESULT` lines, then NPB's verdict `Verification = SUCCESSFUL` and what
//! was compared). `--boot NAME` labels the lines with how Atoll was booted (`make bench`'s
//! `tlbflush=tick` runs: a `boot` field).
//!
//! Exit status: 0 when every kernel verified, 1 when one did not (or could not run), 2
//! for bad arguments (a line saying which, and the usage).
#![no_std]
#![no_main]

extern crate alloc;

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use libatoll::mcrt_host::{move_to_core, AtollHostOn};
use libatoll::platform::Atoll;
use libatoll::{args, println};
use npb::{Class, Kernel};

const HELP: &str = "usage: npb ep|is|cg|mg|ft|all [S|W|A] [--cores LIST] [--repeat N] [--boot NAME]
         class S (default), W or A; LIST: cores 0..=63, default all; N: runs each, 1..=100;
         NAME: letters, digits and '-' labelling the RESULT lines (a boot field)";

/// The most cores (a McRT processor each), as `metis`.
const MAX_CORES: usize = 64;

/// The command line.
struct Options {
    kernels: Vec<Kernel>,
    class: Class,
    cores: Vec<usize>,
    repeat: usize,
    boot: Option<String>,
}

/// The options of `line`, or what is wrong with it.
fn parse(line: &str) -> Result<Options, String> {
    let mut words = line.split_whitespace();
    let kernel = words.next().ok_or("no kernel")?;
    let kernels = workloads::npb::kernels(kernel)
        .ok_or_else(|| format!("unknown kernel {kernel:?} (ep, is, cg, mg, ft or all)"))?;
    let mut cores = libatoll::cores::all_cores();
    cores.truncate(MAX_CORES);
    let mut o = Options { kernels, class: Class::S, cores, repeat: 1, boot: None };
    let mut classed = false;
    while let Some(word) = words.next() {
        match word {
            "--cores" => {
                o.cores = args::cores_value(words.next())
                    .filter(|c| c.iter().all(|&c| c < MAX_CORES))
                    .ok_or("--cores: a list of online cores below 64, each once")?
            }
            "--repeat" => {
                o.repeat = args::number(words.next(), 1..=100).ok_or("--repeat: 1..=100")?
            }
            "--boot" => {
                let name = words.next().filter(|w| {
                    w.len() <= 32 && w.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                });
                o.boot = Some(String::from(name.ok_or("--boot: a name of letters, digits, '-'")?));
            }
            class if !classed && !class.starts_with('-') => {
                o.class = Class::parse(class)
                    .ok_or_else(|| format!("unknown class {class:?} (S, W or A)"))?;
                classed = true;
            }
            other => return Err(format!("unexpected {other:?}")),
        }
    }
    Ok(o)
}

fn main() -> i32 {
    let line = args::arg_string();
    if line.trim() == "--help" {
        println!("{HELP}");
        return 0;
    }
    let o = match parse(&line) {
        Ok(o) => o,
        Err(why) => {
            println!("npb: {why}");
            println!("{HELP}");
            return 2;
        }
    };
    // Processor 0 is this thread: it runs on the first listed core, as each other
    // processor runs on its own.
    if let Err(e) = move_to_core(o.cores[0]) {
        println!("npb: cannot move to core {}: {e:?}", o.cores[0]);
        return 1;
    }
    let host = AtollHostOn { cores: &o.cores };
    let threads = o.cores.len();
    let reports = match workloads::npb::run_kernels(&host, threads, o.class, &o.kernels, o.repeat) {
        Ok(r) => r,
        Err(e) => {
            println!("npb: {e}");
            return 1;
        }
    };
    for l in workloads::npb::lines(&Atoll::new(o.cores.clone()), &reports, o.boot.as_deref()) {
        println!("{l}");
    }
    for r in &reports {
        for l in workloads::npb::summary(r, "Mcycles", r.ticks as f64 / 1e6) {
            println!("{l}");
        }
    }
    if reports.iter().all(|r| r.verified) {
        0
    } else {
        1
    }
}

libatoll::main!(main);
