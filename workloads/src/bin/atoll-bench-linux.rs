//! `atoll-bench-linux`: the workloads on Linux, printing `RESULT {json}` lines. Built as a
//! static binary for the Linux guest of `make bench`, whose `/init` runs
//! `atoll-bench-linux --cmdline` (the benchmark comes from `bench=NAME[,ARG]` on the kernel
//! command line); it runs on any Linux machine too.

use std::process::ExitCode;

use workloads::linux::{self, fd, loopback, tcpsvc, webserver, Linux};
use workloads::{amps, memclone, mempass, multicast, nullsys, pingpong, shm, unmap};

const USAGE: &str = "\
usage: atoll-bench-linux EXPERIMENT [N]
       atoll-bench-linux --cmdline      (reads bench=EXPERIMENT[,N] from /proc/cmdline)

experiments (N: iterations or size, default in brackets):
  nullsys [21]    getpid via syscall, median of N batches of 1000 calls
  urpc [2000]     URPC latency, cache-line floor, throughput (10 N messages), and the pipe
                  and futex ping-pong, on every pair of cores
  shm [500]       SHMn vs MSGn (Multikernel Figure 3), N updates per client
  multicast [50]  broadcast, unicast and per-package multicast tree to 2..all cores
                  (Multikernel Figure 6), N rounds per protocol and core count
  unmap [50]      Multikernel Figure 7: mprotect of a page read-only and back while
                  1..all cores read it, N rounds per core count
  memclone [16]   Corey Figure 7(a): every core faults in N MiB of its own, threads of one
                  process (shared-as) and a process per core (separate-as)
  mempass [16]    Corey Figure 7(b): an N MiB shared buffer touched by each core in turn,
                  shared-as and separate-as
  fdbench [20000] Corey Figure 1: N dup+close pairs per core, one descriptor table shared by
                  threads (shared) or one per process (private)
  loopback [20000] Multikernel Table 4: UDP packets of 1000-byte payload from CPU 0 to
                  CPU 1 over 127.0.0.1; Mbit/s at the sink
  tcp_conn [2000] Corey Figure 8: Corey's TCP service on port 80 (accept, write 128
                  bytes, close), a thread per core, until N connections; connections/s
  web_static SERVER [300]
                  Multikernel §5.4 (issue M12): SERVER (webd, lighttpd or nginx) serves
                  /mnt/www on port 80 for N seconds (at most 3600) while wrk on the host
                  measures it; `bench=web_static,SERVER,N`
  file_read, file_write
                  issue M13: sequential and random reads, cold and warm, and writes with
                  and without fsync, on the bench image mounted at /mnt (ext2)
  locks [2000]    Corey Figure 3: a spin (TTS), ticket and MCS lock contended by 1..all
                  cores, N acquisitions per core
  thread_switch, thread_create, lrpc, thread_migrate, amps_jobs, amps_omp, amps_fairness,
  amps_server, amps_numa [20000]
                  the scheduler experiments (issue M7; N: units of work per job), with
                  pthreads; `bench=NAME,N,LABEL` labels the lines' config (default cfs)
  mcrt_micro, mcrt_create, mcrt_futures, mcrt_policies, mcrt_stm, mcrt_larson
                  McRT (issue M8) on pinned threads parking on a futex, beside pthreads
  metis_wri, metis_wc [2]
                  Metis MapReduce (Corey §8.5.1): the inverted index or word count of N
                  MiB of wrmem on McRT, every core; cycles and soft faults per phase
  metis_phoenix [1]
                  the Phoenix applications on Metis, inputs N times the smallest
  npb [1] [CLASS] [KERNEL]
                  the NAS Parallel Benchmarks (Multikernel Figure 9) on McRT, every core:
                  KERNEL ep|is|cg|mg|ft|all (default all) at CLASS S|W|A (default S), N
                  runs each; cycles of NPB's timed section, and NPB's verification
  all             all of the above with their defaults, but tcp_conn and web_static (they
                  need a client) and the file experiments (they need the bench image)

The Corey experiments use every core the process may run on.";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let words = if args.first().map(String::as_str) == Some("--cmdline") {
        let cmdline = std::fs::read_to_string("/proc/cmdline").unwrap_or_default();
        match linux::bench_from_cmdline(&cmdline) {
            Some(words) => words,
            None => return fail("no bench= on the kernel command line"),
        }
    } else {
        args
    };
    let Some(experiment) = words.first() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    // web_static's first argument is its server, not a count.
    let count = match words.get(1).map(|n| n.parse::<usize>()) {
        None => None,
        Some(_) if experiment == "web_static" => None,
        Some(Ok(n)) if n >= 1 => Some(n),
        Some(_) => return fail(&format!("bad iteration count {:?}\n{USAGE}", words[1])),
    };
    let platform = Linux::new();
    let outcome = match experiment.as_str() {
        "nullsys" => {
            run("nullsys", || nullsys::run(&platform, count.unwrap_or(nullsys::DEFAULT_BATCHES)))
        }
        "urpc" => run("urpc", || urpc(&platform, count.unwrap_or(pingpong::DEFAULT_ITERATIONS))),
        "shm" => run("shm", || shm::run(&platform, count.unwrap_or(shm::DEFAULT_UPDATES))),
        "multicast" => run("multicast", || {
            multicast::run(&platform, count.unwrap_or(multicast::DEFAULT_ROUNDS))
        }),
        "unmap" => run("unmap", || unmap::run(&platform, count.unwrap_or(unmap::DEFAULT_ROUNDS))),
        "memclone" => {
            run("memclone", || memclone::run(&platform, count.unwrap_or(memclone::DEFAULT_MB)))
        }
        "mempass" => {
            run("mempass", || mempass::run(&platform, count.unwrap_or(mempass::DEFAULT_MB)))
        }
        "fdbench" => run("fdbench", || fd::run(&platform, count.unwrap_or(fd::DEFAULT_OPS))),
        "loopback" => run("loopback", || {
            loopback::run(count.map_or(workloads::loopback::DEFAULT_PACKETS, |n| n as u64))
        }),
        "tcp_conn" => run("tcp_conn", || tcpsvc::run(count.unwrap_or(tcpsvc::DEFAULT_CONNECTIONS))),
        "web_static" => match webserver::parse_args(&words[1..]) {
            Ok((server, seconds)) => run("web_static", || {
                let docroot = std::path::Path::new(webserver::DOCROOT);
                let addr = std::net::SocketAddrV4::new([0, 0, 0, 0].into(), webserver::PORT);
                webserver::run(server, docroot, addr, seconds)
            }),
            Err(message) => Err(format!("{message}\n{USAGE}")),
        },
        "file_read" => run("file_read", linux::fileio::read),
        "file_write" => run("file_write", linux::fileio::write),
        "locks" => run("locks", || {
            workloads::locks::run(
                &platform,
                count.unwrap_or(workloads::locks::DEFAULT_ACQUISITIONS),
            )
        }),
        name if workloads::metis::EXPERIMENTS.contains(&name) => run(name, || {
            let mb = count.unwrap_or(workloads::metis::DEFAULT_MB);
            let host = mcrt::hosted::LinuxHost::pinned();
            let faults = linux::process_minor_faults;
            workloads::metis::run(&platform, &host, name, mb, faults)
        }),
        "metis_phoenix" => run("metis_phoenix", || {
            let host = mcrt::hosted::LinuxHost::pinned();
            let threads = workloads::Platform::cores(&platform);
            let outcomes = workloads::phoenix::run_apps(&host, threads, count.unwrap_or(1))?;
            Ok(workloads::phoenix::lines(&platform, threads, &outcomes))
        }),
        "npb" => run("npb", || {
            let class = words.get(2).map_or("S", String::as_str);
            let class = npb::Class::parse(class).ok_or(format!("npb: no class {class:?}"))?;
            let kernel = words.get(3).map_or("all", String::as_str);
            let kernels =
                workloads::npb::kernels(kernel).ok_or(format!("npb: no kernel {kernel:?}"))?;
            let host = mcrt::hosted::LinuxHost::pinned();
            let threads = workloads::Platform::cores(&platform);
            let reports =
                workloads::npb::run_kernels(&host, threads, class, &kernels, count.unwrap_or(1))?;
            for r in &reports {
                let m = r.ticks as f64 / 1e6;
                for l in workloads::npb::summary(r, "Mcycles", m) {
                    eprintln!("{l}");
                }
            }
            Ok(workloads::npb::lines(&platform, &reports, None))
        }),
        name if workloads::mcrt::EXPERIMENTS.contains(&name) => {
            run(name, || workloads::mcrt::run(&platform, &mcrt::hosted::LinuxHost::pinned(), name))
        }
        name if amps::EXPERIMENTS.contains(&name) => run(name, || {
            let setting = amps::Setting {
                sched: words.get(2).cloned().unwrap_or_else(|| "cfs".into()),
                asym: words.get(3).cloned().unwrap_or_else(|| "none".into()),
            };
            let units = count.map_or(amps::DEFAULT_JOB_UNITS, |n| n as u64);
            let mut lines = amps::run(&platform, name, units, &setting)?;
            if name == "lrpc" {
                // Linux's other way to call a thread on the same core: a pipe each way.
                let cycles = linux::ipc::pipe_latency_one_core(&platform, 1000)?;
                let extra = format!("{},\"impl\":\"pipe\"", setting.extra());
                lines.push(workloads::result::line(
                    "linux",
                    "lrpc",
                    workloads::Platform::cores(&platform),
                    "one_way_cycles",
                    cycles,
                    "cycles",
                    &extra,
                ));
            }
            Ok(lines)
        }),
        "all" => run("nullsys", || nullsys::run(&platform, nullsys::DEFAULT_BATCHES))
            .and_then(|_| run("urpc", || urpc(&platform, pingpong::DEFAULT_ITERATIONS)))
            .and_then(|_| run("shm", || shm::run(&platform, shm::DEFAULT_UPDATES)))
            .and_then(|_| run("multicast", || multicast::run(&platform, multicast::DEFAULT_ROUNDS)))
            .and_then(|_| run("unmap", || unmap::run(&platform, unmap::DEFAULT_ROUNDS)))
            .and_then(|_| run("memclone", || memclone::run(&platform, memclone::DEFAULT_MB)))
            .and_then(|_| run("mempass", || mempass::run(&platform, mempass::DEFAULT_MB)))
            .and_then(|_| run("fdbench", || fd::run(&platform, fd::DEFAULT_OPS))),
        "-h" | "--help" | "help" => {
            println!("{USAGE}");
            Ok(())
        }
        other => Err(format!("unknown experiment {other:?}\n{USAGE}")),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => fail(&message),
    }
}

/// The URPC experiment and its Linux-only peers.
fn urpc(platform: &Linux, iterations: usize) -> Result<Vec<String>, String> {
    let mut lines = pingpong::run(platform, iterations)?;
    lines.extend(linux::ipc::run(platform, iterations)?);
    Ok(lines)
}

/// Runs one experiment and prints its lines as they come.
fn run(name: &str, experiment: impl FnOnce() -> Result<Vec<String>, String>) -> Result<(), String> {
    let lines = experiment().map_err(|e| format!("{name}: {e}"))?;
    for line in lines {
        println!("{line}");
    }
    Ok(())
}

/// Prints `bench: <message>` (the kernel's wording for a failed benchmark) and fails.
fn fail(message: &str) -> ExitCode {
    println!("bench: {message}");
    eprintln!("atoll-bench-linux: {message}");
    ExitCode::FAILURE
}

#[cfg(test)]
mod tests {
    #[test]
    fn usage_names_every_experiment() {
        for name in [
            "nullsys",
            "urpc",
            "shm",
            "multicast",
            "unmap",
            "memclone",
            "mempass",
            "fdbench",
            "tcp_conn",
            "web_static",
            "loopback",
            "file_read",
            "file_write",
            "thread_switch",
            "lrpc",
            "amps_fairness",
            "mcrt_micro",
            "mcrt_policies",
            "metis_wri",
            "metis_wc",
            "metis_phoenix",
            "npb",
            "all",
            "--cmdline",
        ] {
            assert!(super::USAGE.contains(name), "{name}");
        }
    }

    #[test]
    fn the_platform_is_linux() {
        use workloads::Platform;
        let linux = workloads::linux::Linux::new();
        assert_eq!(linux.system(), "linux");
        assert!(linux.cores() >= 1);
    }
}
