//! The configurations `make bench` boots an experiment in ([`Variant`]s): the scheduler
//! setups of issue M7 (AMPS, the symmetric baseline, Linux; a slowed core), AMPS's NUMA
//! policies, Metis's memory layouts and NPB's two Atoll boots. The experiments that use
//! them are in `registry.rs`.

use super::registry::Variant;

/// The scheduler experiments' configurations: the setup of issue M7 (2 vCPUs, core 1 at
/// 50 %: `ASYM="1:50"`) under AMPS, under the symmetric baseline, and Linux on the same
/// throttled vCPUs; and all three at full speed.
pub(super) const AMPS_VARIANTS: &[Variant] = &[
    Variant {
        name: "amps-asym",
        min_cores: 2,
        atoll_boot: Some("sched=amps asym=1:50"),
        atoll_args: " --config amps --asym 1:50",
        linux_args: None,
        linux_slow: &[],
        qemu_args: "",
        max_cores: u32::MAX,
    },
    Variant {
        name: "symmetric-asym",
        min_cores: 2,
        atoll_boot: Some("sched=symmetric asym=1:50"),
        atoll_args: " --config symmetric --asym 1:50",
        linux_args: None,
        linux_slow: &[],
        qemu_args: "",
        max_cores: u32::MAX,
    },
    Variant {
        name: "cfs-asym",
        min_cores: 2,
        atoll_boot: None,
        atoll_args: "",
        linux_args: Some(",cfs,1:50"),
        linux_slow: &[(1, 4)],
        qemu_args: "",
        max_cores: u32::MAX,
    },
    Variant {
        name: "amps",
        min_cores: 1,
        atoll_boot: Some("sched=amps"),
        atoll_args: " --config amps --asym none",
        linux_args: None,
        linux_slow: &[],
        qemu_args: "",
        max_cores: u32::MAX,
    },
    Variant {
        name: "cfs",
        min_cores: 1,
        atoll_boot: None,
        atoll_args: "",
        linux_args: Some(",cfs,none"),
        linux_slow: &[],
        qemu_args: "",
        max_cores: u32::MAX,
    },
    Variant {
        name: "symmetric",
        min_cores: 1,
        atoll_boot: Some("sched=symmetric"),
        atoll_args: " --config symmetric --asym none",
        linux_args: None,
        linux_slow: &[],
        qemu_args: "",
        max_cores: u32::MAX,
    },
];

/// Two NUMA nodes of one core and 256 MiB each (`MEM=512M`, the bench's default).
const NUMA_1X2: &str = "-object memory-backend-ram,size=256M,id=m0 \
    -object memory-backend-ram,size=256M,id=m1 \
    -numa node,nodeid=0,cpus=0,memdev=m0 -numa node,nodeid=1,cpus=1,memdev=m1";

/// `amps_numa`'s configurations (AMPS §3.3, Figure 11, Table 4): two nodes of one core,
/// core 1 at 50 %, AMPS under each NUMA policy, the symmetric baseline, Linux.
pub(super) const NUMA_VARIANTS: &[Variant] = &[
    Variant {
        name: "always",
        min_cores: 2,
        atoll_boot: Some("sched=amps asym=1:50 numa=always"),
        atoll_args: " --config amps --asym 1:50",
        linux_args: None,
        linux_slow: &[],
        qemu_args: NUMA_1X2,
        max_cores: 2,
    },
    Variant {
        name: "same-node",
        min_cores: 2,
        atoll_boot: Some("sched=amps asym=1:50 numa=same-node"),
        atoll_args: " --config amps-same-node --asym 1:50",
        linux_args: None,
        linux_slow: &[],
        qemu_args: NUMA_1X2,
        max_cores: 2,
    },
    Variant {
        name: "rss",
        min_cores: 2,
        atoll_boot: Some("sched=amps asym=1:50 numa=rss"),
        atoll_args: " --config amps-rss --asym 1:50",
        linux_args: None,
        linux_slow: &[],
        qemu_args: NUMA_1X2,
        max_cores: 2,
    },
    Variant {
        name: "symmetric",
        min_cores: 2,
        atoll_boot: Some("sched=symmetric asym=1:50"),
        atoll_args: " --config symmetric --asym 1:50",
        linux_args: None,
        linux_slow: &[],
        qemu_args: NUMA_1X2,
        max_cores: 2,
    },
    Variant {
        name: "cfs",
        min_cores: 2,
        atoll_boot: None,
        atoll_args: "",
        linux_args: Some(",cfs,1:50"),
        linux_slow: &[(1, 4)],
        qemu_args: NUMA_1X2,
        max_cores: 2,
    },
];

/// The thread-cost experiments' one configuration: both systems at full speed.
pub(super) const THREAD_VARIANTS: &[Variant] = &[AMPS_VARIANTS[3], AMPS_VARIANTS[4]];

/// Metis's layouts (Corey Figure 4), each a boot of its own so that every measured run is
/// the first of its boot on both systems (a second run in one boot finds TCG's
/// translations and the kernel's structures warm: 10-30 % faster): `shared` on Atoll and
/// the Linux guest (threads), `corey` on Atoll only.
pub(super) const METIS_VARIANTS: &[Variant] = &[
    Variant {
        name: "shared",
        min_cores: 1,
        atoll_boot: Some(""),
        atoll_args: " --layout shared",
        linux_args: Some(""),
        linux_slow: &[],
        qemu_args: "",
        max_cores: u32::MAX,
    },
    Variant {
        name: "corey",
        min_cores: 1,
        atoll_boot: Some(""),
        atoll_args: " --layout corey",
        linux_args: None,
        linux_slow: &[],
        qemu_args: "",
        max_cores: u32::MAX,
    },
];

/// NPB's two Atoll boots: as booted, and with `tlbflush=tick` (each core flushes its whole
/// TLB at every tick, which lets QEMU's TCG grow its software TLB as it does for the Linux
/// guest's address-space switches: `docs/npb.md`); the guest runs once, in the first.
pub(super) const NPB_VARIANTS: &[Variant] = &[
    Variant {
        name: "plain",
        min_cores: 1,
        atoll_boot: Some(""),
        atoll_args: "",
        linux_args: Some(""),
        linux_slow: &[],
        qemu_args: "",
        max_cores: u32::MAX,
    },
    Variant {
        name: "tickflush",
        min_cores: 1,
        atoll_boot: Some("tlbflush=tick"),
        atoll_args: " --boot tlbflush-tick",
        linux_args: None,
        linux_slow: &[],
        qemu_args: "",
        max_cores: u32::MAX,
    },
];

/// `tcp_conn`'s device configurations (Corey §8.3, Figure 8): Atoll's server by its own
/// traps (one stack), through a kernel core on the VM's last core that does all the device
/// work (Dedicated) or only polls it (Polling), a stack on each other core; and Linux's
/// kernel stack with a thread per core. At most 8 cores: a kernel core takes 7 stacks.
pub(super) const TCP_CONN_VARIANTS: &[Variant] = &[
    Variant {
        name: "trap",
        min_cores: 1,
        atoll_boot: Some(""),
        atoll_args: "",
        linux_args: None,
        linux_slow: &[],
        qemu_args: "",
        max_cores: 8,
    },
    Variant {
        name: "dedicated",
        min_cores: 2,
        atoll_boot: Some(""),
        atoll_args: " --kernel-core {last} --stacks {others}",
        linux_args: None,
        linux_slow: &[],
        qemu_args: "",
        max_cores: 8,
    },
    Variant {
        name: "polling",
        min_cores: 2,
        atoll_boot: Some(""),
        atoll_args: " --polling-core {last} --stacks {others}",
        linux_args: None,
        linux_slow: &[],
        qemu_args: "",
        max_cores: 8,
    },
    Variant {
        name: "kernel",
        min_cores: 1,
        atoll_boot: None,
        atoll_args: "",
        linux_args: Some(""),
        linux_slow: &[],
        qemu_args: "",
        max_cores: 8,
    },
];

/// `webd_filesum`'s modes (Corey §6.2): which application core a file's requests go to.
pub(super) const WEBD_FILESUM_VARIANTS: &[Variant] = &[
    Variant {
        name: "random",
        min_cores: 3,
        atoll_boot: Some(""),
        atoll_args: " --mode random",
        linux_args: None,
        linux_slow: &[],
        qemu_args: "",
        max_cores: 8,
    },
    Variant {
        name: "locality",
        min_cores: 3,
        atoll_boot: Some(""),
        atoll_args: " --mode locality",
        linux_args: None,
        linux_slow: &[],
        qemu_args: "",
        max_cores: 8,
    },
];

/// `web_static`'s servers (Multikernel §5.4): webd on both systems (on Atoll by its own
/// traps, one stack), webd with a kernel core on the VM's last core and a front end on
/// each other core (Atoll alone), and lighttpd and nginx in the Linux guest (their lines
/// are peers of webd's row: `bench/webload.rs`).
pub(super) const WEB_STATIC_VARIANTS: &[Variant] = &[
    Variant {
        name: "webd",
        min_cores: 1,
        atoll_boot: Some(""),
        atoll_args: "",
        linux_args: Some(",webd"),
        linux_slow: &[],
        qemu_args: "",
        max_cores: 8,
    },
    Variant {
        name: "webd-kcore",
        min_cores: 2,
        atoll_boot: Some(""),
        atoll_args: " --kernel-core {last} --stacks {others}",
        linux_args: None,
        linux_slow: &[],
        qemu_args: "",
        max_cores: 8,
    },
    Variant {
        name: "lighttpd",
        min_cores: 1,
        atoll_boot: None,
        atoll_args: "",
        linux_args: Some(",lighttpd"),
        linux_slow: &[],
        qemu_args: "",
        max_cores: 8,
    },
    Variant {
        name: "nginx",
        min_cores: 1,
        atoll_boot: None,
        atoll_args: "",
        linux_args: Some(",nginx"),
        linux_slow: &[],
        qemu_args: "",
        max_cores: 8,
    },
];
