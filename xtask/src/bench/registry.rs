//! The experiments `make bench` knows: how each runs on Atoll (a console command), on the
//! Linux guest (`bench=` for `atoll-bench-linux`) and on the host (`bench-host`), and how
//! its plot is drawn. `ONLY=name,...` selects by [`Experiment::name`]. In both command
//! lines `{cores}` stands for every core of the job's VM (`0-3` at 4 cores, `0` at 1).

use super::variants::{
    AMPS_VARIANTS, METIS_VARIANTS, NPB_VARIANTS, NUMA_VARIANTS, TCP_CONN_VARIANTS, THREAD_VARIANTS,
    WEBD_FILESUM_VARIANTS, WEB_STATIC_VARIANTS,
};

/// The arguments `bench-host` runs host experiment `name` with (none: its default set).
pub fn host_args(name: &str) -> &'static [&'static str] {
    match name {
        "bcache_lookup" => &["bcache"],
        _ => &[],
    }
}

/// How an experiment's PNG is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plot {
    /// Bars per result row and core count, one bar per system, one panel per unit (a table
    /// of the paper drawn as bars).
    Bars,
    /// Cycles against the cores doing the work (`active_cores`), one line per `series`
    /// value and system, from the largest VM (the paper's line figures).
    Lines {
        /// The record field naming a line, e.g. `protocol`.
        series: &'static str,
    },
    /// One metric against the cores doing the work, one line per `series` value and
    /// system, a point per VM size (each boot uses all its cores): the scaling figures.
    Scaling {
        /// The record field naming a line, e.g. `config`.
        series: &'static str,
        /// The metric drawn, e.g. `cycles_per_page`.
        metric: &'static str,
    },
}

/// One experiment.
#[derive(Clone, Copy, Debug)]
pub struct Experiment {
    /// Name in `ONLY`, in `bench/paper.json` and in the `experiment` field of its records.
    pub name: &'static str,
    /// Fewest VM cores it can run on.
    pub min_cores: u32,
    /// Atoll console command (run with `cmd=`), if Atoll runs it.
    pub atoll: Option<&'static str>,
    /// `bench=` value for the Linux guest (`atoll-bench-linux` arguments, comma-separated).
    pub linux: Option<&'static str>,
    /// Runs `bench-host` on the build machine instead of a VM (once per repetition).
    pub host: bool,
    /// Time limit of one boot, seconds.
    pub timeout_secs: u64,
    /// True when the cost measured is dominated by entering the kernel (system calls, page
    /// faults; the pipe and futex peers of `urpc`): Linux then runs both with
    /// `mitigations=off` (the headline, as Atoll has no mitigations) and as booted.
    pub kernel_entry: bool,
    /// Its plot.
    pub plot: Plot,
    /// Record fields whose values make rows of their own in the report, beside the common
    /// ones (`pair`, `protocol`, `impl`, `active_cores`), e.g. `config` for the Corey
    /// experiments, whose configurations are compared side by side on both systems.
    pub rows_by: &'static [&'static str],
    /// The configurations it runs under, each a job of its own (the scheduler experiments:
    /// AMPS or the symmetric baseline, with or without emulated slow cores); empty: one
    /// plain job per system.
    pub variants: &'static [Variant],
}

/// One configuration of an experiment (issue M7: which scheduler, which cores are slowed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Variant {
    /// Its name in job labels.
    pub name: &'static str,
    /// Fewest VM cores it needs (a slowed core 1 needs 2).
    pub min_cores: u32,
    /// Atoll: added to the kernel command line (`sched=`, `asym=`); `None`: Atoll does not
    /// run this variant.
    pub atoll_boot: Option<&'static str>,
    /// Atoll: appended to the console command (the labels of its result lines).
    pub atoll_args: &'static str,
    /// Linux: appended to the `bench=` value (the labels of its result lines); `None`: the
    /// guest does not run this variant.
    pub linux_args: Option<&'static str>,
    /// Linux: vCPUs the host throttles, as (vCPU, eighths of its time): QEMU's vCPU
    /// threads in a cgroup with a CPU quota, so the guest runs on the same slow cores as
    /// Atoll's `asym=` emulates.
    pub linux_slow: &'static [(u32, u8)],
    /// QEMU arguments of its own (the NUMA experiment's nodes), for both systems.
    pub qemu_args: &'static str,
    /// Most VM cores it fits (its `qemu_args` may name each core).
    pub max_cores: u32,
}

impl Experiment {
    /// Atoll's console command for a VM of `cores` cores, if Atoll runs it.
    pub fn atoll_command(&self, cores: u32) -> Option<String> {
        self.atoll.map(|c| with_cores(c, cores))
    }

    /// The `bench=` value for a Linux guest of `cores` cores, if Linux runs it.
    pub fn linux_args(&self, cores: u32) -> Option<String> {
        self.linux.map(|c| with_cores(c, cores))
    }
}

/// `template` with `{cores}` replaced by the list of all `cores` cores (`0-3`, or `0`),
/// `{last}` by the last core's number and `{others}` by how many cores the others are.
pub fn with_cores(template: &str, cores: u32) -> String {
    let list = match cores {
        0 | 1 => "0".to_string(),
        n => format!("0-{}", n - 1),
    };
    let last = cores.saturating_sub(1);
    template
        .replace("{cores}", &list)
        .replace("{last}", &last.to_string())
        .replace("{others}", &last.max(1).to_string())
}

/// A scheduler experiment of issue M7 (`workloads::amps`, the `ampsbench` program).
const fn amps(
    name: &'static str,
    atoll: &'static str,
    linux: &'static str,
    variants: &'static [Variant],
) -> Experiment {
    Experiment {
        name,
        min_cores: 1,
        atoll: Some(atoll),
        linux: Some(linux),
        host: false,
        kernel_entry: false,
        timeout_secs: 600,
        plot: Plot::Bars,
        rows_by: &["config", "asym"],
        variants,
    }
}

/// One of McRT's experiments (issue M8): `mcrtbench NAME` on Atoll, `bench=NAME` in the
/// guest, the same `workloads::mcrt` code over each system's McRT host; rows by
/// configuration (and implementation: McRT or the system's native threads).
const fn mcrt(name: &'static str, atoll: &'static str) -> Experiment {
    Experiment {
        name,
        min_cores: 1,
        atoll: Some(atoll),
        linux: Some(name),
        host: false,
        kernel_entry: false,
        timeout_secs: 300,
        plot: Plot::Bars,
        rows_by: &["config"],
        variants: &[],
    }
}

/// A Metis experiment (issue 24): `atoll` runs `metis` (in each of [`METIS_VARIANTS`]'
/// layouts when `variants` says so), `linux` is the guest's `bench=`; rows by layout or
/// application (`config`).
const fn metis(
    name: &'static str,
    atoll: &'static str,
    linux: &'static str,
    variants: &'static [Variant],
) -> Experiment {
    Experiment {
        name,
        min_cores: 1,
        atoll: Some(atoll),
        linux: Some(linux),
        host: false,
        kernel_entry: false,
        timeout_secs: 300,
        plot: Plot::Bars,
        rows_by: &["config"],
        variants,
    }
}

/// An Atoll-only experiment of the kernel's own `bench` command (issue M9: the protocols
/// Linux has no message-based peer for), on 2 cores and up, rows by `rows_by`, a line per
/// `series` value.
const fn kernel_bench(
    name: &'static str,
    atoll: &'static str,
    series: &'static str,
    rows_by: &'static [&'static str],
) -> Experiment {
    Experiment {
        name,
        min_cores: 2,
        atoll: Some(atoll),
        linux: None,
        host: false,
        kernel_entry: false,
        timeout_secs: 300,
        plot: Plot::Lines { series },
        rows_by,
        variants: &[],
    }
}

/// Every experiment, in the order they run and appear in the report. `urpc_kernel` and
/// `shm_vs_msg_kernel` are Atoll-only: the kernel's own measurement of the same channels in
/// ring 0 (`bench urpc`, `bench shm`), beside the like-for-like `urpc` and `shm_vs_msg`,
/// where both systems run the `workloads` code. The iteration counts
/// are the kernel's defaults, passed to both systems so they do the same work; the Corey
/// experiments' sizes (16 MiB, 20000 operations per core) are far below the paper's (100 MB)
/// so that a boot takes seconds under TCG.
pub const EXPERIMENTS: &[Experiment] = &[
    Experiment {
        name: "nullsys",
        min_cores: 1,
        atoll: Some("run nullsys 21"),
        linux: Some("nullsys,21"),
        host: false,
        kernel_entry: true,
        timeout_secs: 120,
        plot: Plot::Bars,
        rows_by: &[],
        variants: &[],
    },
    Experiment {
        name: "urpc",
        min_cores: 2,
        atoll: Some("run urpcbench 2000 --cores {cores}"),
        linux: Some("urpc,2000"),
        host: false,
        kernel_entry: true,
        timeout_secs: 300,
        plot: Plot::Bars,
        rows_by: &[],
        variants: &[],
    },
    Experiment {
        name: "urpc_kernel",
        min_cores: 2,
        atoll: Some("bench urpc 2000"),
        linux: None,
        host: false,
        kernel_entry: false,
        timeout_secs: 300,
        plot: Plot::Bars,
        rows_by: &[],
        variants: &[],
    },
    Experiment {
        name: "shm_vs_msg",
        min_cores: 2,
        atoll: Some("run shmbench 500 --cores {cores}"),
        linux: Some("shm,500"),
        host: false,
        kernel_entry: false,
        timeout_secs: 300,
        plot: Plot::Lines { series: "protocol" },
        rows_by: &[],
        variants: &[],
    },
    Experiment {
        name: "shm_vs_msg_kernel",
        min_cores: 2,
        atoll: Some("bench shm 500"),
        linux: None,
        host: false,
        kernel_entry: false,
        timeout_secs: 300,
        plot: Plot::Lines { series: "protocol" },
        rows_by: &[],
        variants: &[],
    },
    // The user program and the Linux guest run `workloads::multicast`; the kernel's own
    // `bench multicast` follows, its rows apart (`impl` `kernel`). Run it with SOCKETS=S
    // for a tree that is not flat.
    Experiment {
        name: "multicast",
        min_cores: 2,
        atoll: Some("run mcbench 50; bench multicast 50"),
        linux: Some("multicast,50"),
        host: false,
        kernel_entry: false,
        timeout_secs: 300,
        plot: Plot::Lines { series: "protocol" },
        rows_by: &[],
        variants: &[],
    },
    // TLB shootdown by message (issue M9): the real 1PC invalidation by each protocol, and
    // the simulator's prediction beside it (`model.rs`). Run it with SOCKETS=S for trees.
    kernel_bench("shootdown", "bench shootdown 50", "protocol", &["link"]),
    // Multikernel Figure 7: a page's write access taken away (and given back) while
    // 1..=all cores map it: Atoll's `ar_set_seg`, shot down by message before it returns,
    // against Linux's `mprotect`, shot down by IPI; the same `workloads::unmap` code.
    Experiment {
        name: "unmap",
        min_cores: 1,
        atoll: Some("run unmapbench 50 --cores {cores}"),
        linux: Some("unmap,50"),
        host: false,
        kernel_entry: true,
        timeout_secs: 300,
        plot: Plot::Lines { series: "config" },
        rows_by: &["config"],
        variants: &[],
    },
    // Polling then blocking (issue M9, Multikernel §5.2): latency and overhead against the
    // gap between messages, P = C.
    Experiment {
        plot: Plot::Bars,
        ..kernel_bench("polling", "bench polling 30", "config", &["config"])
    },
    // Console output without a shared lock (issue M10 item 7): what a line costs the
    // printing core (a ring of its own) and the serial port's core (which drains them all).
    kernel_bench("console", "bench console 50", "metric", &[]),
    // Two-phase commit between the monitors (issue M9, Figure 8): one operation at a time
    // and pipelined, against the participants.
    kernel_bench("twophase", "bench twophase 50", "config", &["config"]),
    Experiment {
        name: "memclone",
        min_cores: 1,
        atoll: Some("run memclone --mb 16 --cores {cores} --config all"),
        linux: Some("memclone,16"),
        host: false,
        kernel_entry: true,
        timeout_secs: 120,
        plot: Plot::Scaling { series: "config", metric: "cycles_per_page" },
        rows_by: &["config"],
        variants: &[],
    },
    Experiment {
        name: "mempass",
        min_cores: 1,
        atoll: Some("run mempass --mb 16 --cores {cores} --config all"),
        linux: Some("mempass,16"),
        host: false,
        kernel_entry: true,
        timeout_secs: 120,
        plot: Plot::Scaling { series: "config", metric: "total_cycles" },
        rows_by: &["config"],
        variants: &[],
    },
    // Multikernel §5.4, Table 4 (issue M12): IP loopback, two user-space stacks on two
    // cores joined by URPC (Atoll) against Linux's kernel stack over 127.0.0.1.
    Experiment {
        name: "loopback",
        min_cores: 2,
        atoll: Some("run loopback 20000 --cores 0,1"),
        linux: Some("loopback,20000"),
        host: false,
        kernel_entry: false,
        timeout_secs: 180,
        plot: Plot::Bars,
        rows_by: &[],
        variants: &[],
    },
    // Corey §8.3, Figure 8 (issue M12): Corey's TCP service (accept, write 128 bytes,
    // close) against a client on the host through a forward from 127.0.0.1
    // (`bench/netload.rs`), by device configuration.
    Experiment {
        name: "tcp_conn",
        min_cores: 1,
        atoll: Some("run tcpsvc --count 1000 --seconds 60 --backlog 16"),
        linux: Some("tcp_conn,1000"),
        host: false,
        kernel_entry: false,
        timeout_secs: 180,
        plot: Plot::Scaling { series: "config", metric: "connections_per_s" },
        rows_by: &["config"],
        variants: TCP_CONN_VARIANTS,
    },
    // Multikernel §5.4 (issue M12): the 4.1 kB static page, served from the bench disk's
    // `www/`, measured by `wrk` on the host (`bench/webload.rs`): webd on Atoll and on
    // Linux, and Debian's lighttpd and nginx in the Linux guest, tuned as §5.4 did.
    Experiment {
        name: "web_static",
        min_cores: 1,
        atoll: Some("run webd --port 80 --count 1000000 --seconds 170"),
        linux: Some("web_static"),
        host: false,
        kernel_entry: false,
        timeout_secs: 200,
        plot: Plot::Bars,
        rows_by: &["config"],
        variants: WEB_STATIC_VARIANTS,
    },
    // Corey §3.2, §4.4 (issue M12): a null call through a syscall device to a kernel core,
    // one at a time and pipelined, against a trap on the caller's core. Atoll's mechanism
    // alone: Linux has no kernel cores.
    Experiment {
        name: "syscall_device",
        min_cores: 2,
        atoll: Some("run sysdevbench 21"),
        linux: None,
        host: false,
        kernel_entry: false,
        timeout_secs: 120,
        plot: Plot::Bars,
        rows_by: &["config"],
        variants: &[],
    },
    Experiment {
        name: "sharebench",
        min_cores: 1,
        atoll: Some("run sharebench --cores {cores} --ops 20000 --config all"),
        linux: None,
        host: false,
        kernel_entry: false,
        timeout_secs: 120,
        plot: Plot::Scaling { series: "config", metric: "ops_per_kcycle" },
        rows_by: &["config"],
        variants: &[],
    },
    Experiment {
        name: "fdbench",
        min_cores: 1,
        atoll: Some("run fdbench --cores {cores} --ops 20000 --config all"),
        linux: Some("fdbench,20000"),
        host: false,
        kernel_entry: true,
        timeout_secs: 120,
        plot: Plot::Scaling { series: "config", metric: "ops_per_kcycle" },
        rows_by: &["config"],
        variants: &[],
    },
    // Corey Figure 3: a spin (TTS), ticket and MCS lock contended by 1..all cores, the same
    // `workloads::locks` code on both systems (issue M11 item 8).
    Experiment {
        name: "locks_contended",
        min_cores: 1,
        atoll: Some("run lockbench 2000 --cores {cores}"),
        linux: Some("locks,2000"),
        host: false,
        kernel_entry: false,
        timeout_secs: 120,
        plot: Plot::Lines { series: "impl" },
        rows_by: &["impl"],
        variants: &[],
    },
    // Metis MapReduce (issue 24, Corey §8.5.1, Figure 10): `wri` and `wc` over 2 MiB of
    // `wrmem` on McRT, cycles and soft faults per phase; Atoll in both of Figure 4's
    // layouts (`config` shared, corey; a boot each), the Linux guest with threads
    // (shared), the same `workloads::metis` code.
    metis("metis_wri", "run metis wri --mb 2 --cores {cores}", "metis_wri,2", METIS_VARIANTS),
    metis("metis_wc", "run metis wc --mb 2 --cores {cores}", "metis_wc,2", METIS_VARIANTS),
    metis("metis_phoenix", "run metis phoenix --cores {cores}", "metis_phoenix,1", &[]),
    // The NAS Parallel Benchmarks (issue 24 item 7; Multikernel §5.3, Figure 9): EP, IS,
    // CG, MG and FT at class S on McRT's OpenMP adaptor, one processor per core, the same
    // `workloads::npb` code on both systems (Atoll's `npb` built with SSE2, as the guest's
    // binary); the cycles of NPB's timed section and NPB's verification, rows by kernel;
    // Atoll also with `tlbflush=tick` (variant `tickflush`).
    Experiment {
        name: "npb",
        min_cores: 1,
        atoll: Some("run npb all S --cores {cores}"),
        linux: Some("npb,1,S,all"),
        host: false,
        kernel_entry: false,
        timeout_secs: 300,
        plot: Plot::Bars,
        rows_by: &["config", "boot"],
        variants: NPB_VARIANTS,
    },
    // Corey §5.3 (issue M13): buffer-cache lookups per second against threads, the
    // lock-free tree against a locked one, on the build machine's cores (`bench-host
    // bcache`).
    Experiment {
        name: "bcache_lookup",
        min_cores: 1,
        atoll: None,
        linux: None,
        host: true,
        kernel_entry: false,
        timeout_secs: 300,
        plot: Plot::Bars,
        rows_by: &[],
        variants: &[],
    },
    // Issue M13: the disk's files, sequential and random reads, cold and warm, and writes
    // with and without fsync, on one ext2 image (`bench/benchdisk.rs`) on both systems.
    Experiment {
        name: "file_read",
        min_cores: 1,
        atoll: Some("run filebench read"),
        linux: Some("file_read"),
        host: false,
        kernel_entry: false,
        timeout_secs: 180,
        plot: Plot::Bars,
        rows_by: &["config"],
        variants: &[],
    },
    Experiment {
        name: "file_write",
        min_cores: 1,
        atoll: Some("run filebench write"),
        linux: Some("file_write"),
        host: false,
        kernel_entry: false,
        timeout_secs: 180,
        plot: Plot::Bars,
        rows_by: &["config"],
        variants: &[],
    },
    // Corey §6.2's filesum (issue M13): a file's bytes summed through the buffer cache
    // (`fs_read` each round) against a copy mapped once, in cycles per byte. Atoll only.
    Experiment {
        name: "filesum_disk",
        min_cores: 1,
        atoll: Some("run filesum /bench/seq.bin --rounds 5"),
        linux: None,
        host: false,
        kernel_entry: false,
        timeout_secs: 120,
        plot: Plot::Bars,
        rows_by: &["config", "round"],
        variants: &[],
    },
    // Corey §6.2, Figure 12 (issues M12, M13): webd's filesum on application cores, the
    // file's core chosen at random or by the file (Locality), against file size; the
    // host's client asks for 96 sums of each size (`bench/benchdisk.rs`). Atoll only, as
    // Corey's figure. Three cores at least: the two modes differ only with two
    // application cores or more (`make bench ONLY=webd_filesum CORES=3`).
    Experiment {
        name: "webd_filesum",
        min_cores: 3,
        atoll: Some("run webd --port 80 --count 480 --seconds 150 --apps 1-{last}"),
        linux: None,
        host: false,
        kernel_entry: false,
        timeout_secs: 200,
        plot: Plot::Bars,
        rows_by: &["config", "file_size"],
        variants: WEBD_FILESUM_VARIANTS,
    },
    Experiment {
        name: "host",
        min_cores: 1,
        atoll: None,
        linux: None,
        host: true,
        kernel_entry: false,
        timeout_secs: 300,
        plot: Plot::Bars,
        rows_by: &[],
        variants: &[],
    },
    mcrt("mcrt_micro", "run mcrtbench mcrt_micro"),
    mcrt("mcrt_create", "run mcrtbench mcrt_create"),
    mcrt("mcrt_futures", "run mcrtbench mcrt_futures"),
    mcrt("mcrt_policies", "run mcrtbench mcrt_policies"),
    mcrt("mcrt_stm", "run mcrtbench mcrt_stm"),
    mcrt("mcrt_larson", "run mcrtbench mcrt_larson"),
    amps("thread_switch", "run ampsbench thread_switch", "thread_switch,1", THREAD_VARIANTS),
    amps("thread_create", "run ampsbench thread_create", "thread_create,1", THREAD_VARIANTS),
    // Multikernel Table 1's LRPC (issue M9): a call between two threads on one core through
    // the kernel (Atoll `wait`/`wake`, Linux futex; Linux's pipe peer beside it).
    Experiment {
        kernel_entry: true,
        ..amps("lrpc", "run ampsbench lrpc 1000", "lrpc,1000", THREAD_VARIANTS)
    },
    Experiment {
        min_cores: 2,
        ..amps(
            "thread_migrate",
            "run ampsbench thread_migrate",
            "thread_migrate,1",
            THREAD_VARIANTS,
        )
    },
    amps("amps_jobs", "run ampsbench amps_jobs 200000", "amps_jobs,200000", AMPS_VARIANTS),
    amps("amps_omp", "run ampsbench amps_omp 200000", "amps_omp,200000", AMPS_VARIANTS),
    amps(
        "amps_fairness",
        "run ampsbench amps_fairness 200000",
        "amps_fairness,200000",
        AMPS_VARIANTS,
    ),
    Experiment {
        min_cores: 2,
        ..amps("amps_numa", "run ampsbench amps_numa 200000", "amps_numa,200000", NUMA_VARIANTS)
    },
    Experiment {
        rows_by: &["config", "asym", "workers"],
        ..amps(
            "amps_server",
            "run ampsbench amps_server 200000",
            "amps_server,200000",
            AMPS_VARIANTS,
        )
    },
];

/// The experiment called `name`.
pub fn find(name: &str) -> Option<&'static Experiment> {
    EXPERIMENTS.iter().find(|e| e.name == name)
}

/// The experiments `only` selects (all when `None`); an unknown name is an error.
pub fn select(only: Option<&[String]>) -> Result<Vec<&'static Experiment>, String> {
    let Some(names) = only else {
        return Ok(EXPERIMENTS.iter().collect());
    };
    let mut chosen = Vec::new();
    for name in names {
        let experiment = find(name).ok_or_else(|| {
            let known: Vec<&str> = EXPERIMENTS.iter().map(|e| e.name).collect();
            format!("ONLY: no experiment `{name}` (known: {})", known.join(", "))
        })?;
        if !chosen.iter().any(|e: &&Experiment| e.name == experiment.name) {
            chosen.push(experiment);
        }
    }
    // Keep the registry's order, whatever order ONLY lists them in.
    chosen.sort_by_key(|e| EXPERIMENTS.iter().position(|x| x.name == e.name));
    Ok(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_every_experiment_runs_somewhere() {
        for (i, e) in EXPERIMENTS.iter().enumerate() {
            assert!(EXPERIMENTS[i + 1..].iter().all(|x| x.name != e.name), "{}", e.name);
            assert!(e.atoll.is_some() || e.linux.is_some() || e.host, "{}", e.name);
        }
    }

    #[test]
    fn linux_arguments_have_no_spaces() {
        // They travel on the kernel command line as one word.
        for e in EXPERIMENTS {
            assert!(!e.linux.unwrap_or("").contains(char::is_whitespace), "{}", e.name);
        }
    }

    #[test]
    fn commands_name_every_core_of_the_vm() {
        let memclone = find("memclone").unwrap();
        assert_eq!(
            memclone.atoll_command(4).unwrap(),
            "run memclone --mb 16 --cores 0-3 --config all"
        );
        assert_eq!(
            memclone.atoll_command(1).unwrap(),
            "run memclone --mb 16 --cores 0 --config all"
        );
        assert_eq!(memclone.linux_args(2).unwrap(), "memclone,16");
        assert_eq!(find("sharebench").unwrap().linux_args(2), None);
        let unmap = find("unmap").unwrap();
        assert_eq!(unmap.atoll_command(2).unwrap(), "run unmapbench 50 --cores 0-1");
        assert_eq!(unmap.linux_args(2).unwrap(), "unmap,50");
        for e in EXPERIMENTS {
            for cores in [1, 2, 16] {
                let atoll = e.atoll_command(cores).unwrap_or_default();
                let linux = e.linux_args(cores).unwrap_or_default();
                assert!(!atoll.contains('{') && !linux.contains('{'), "{}", e.name);
            }
        }
    }

    #[test]
    fn like_for_like_runs_programs_and_the_kernel_measurement_stands_alone() {
        // Both systems run the `workloads` code; the kernel's ring-0 version has its own
        // experiment name, so its rows are never put beside Linux's.
        for (name, kernel) in [("urpc", "urpc_kernel"), ("shm_vs_msg", "shm_vs_msg_kernel")] {
            let e = find(name).unwrap();
            assert!(e.atoll_command(2).unwrap().starts_with("run "), "{name}");
            assert!(e.linux.is_some(), "{name}");
            let k = find(kernel).unwrap();
            assert!(k.atoll.unwrap().starts_with("bench ") && k.linux.is_none(), "{kernel}");
        }
    }

    #[test]
    fn scaling_plots_draw_a_field_that_makes_rows() {
        // Each line of a scaling figure is a row of the report table, on both systems.
        for e in EXPERIMENTS {
            if let Plot::Scaling { series, .. } = e.plot {
                assert!(e.rows_by.contains(&series), "{}", e.name);
            }
        }
    }

    #[test]
    fn only_selects_in_registry_order_and_refuses_unknown_names() {
        let only = vec!["urpc".to_string(), "nullsys".to_string(), "urpc".to_string()];
        let names: Vec<&str> = select(Some(&only)).unwrap().iter().map(|e| e.name).collect();
        assert_eq!(names, ["nullsys", "urpc"]);
        assert!(select(Some(&["nope".to_string()])).is_err());
        assert_eq!(select(None).unwrap().len(), EXPERIMENTS.len());
    }
}
