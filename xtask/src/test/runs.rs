//! The table of QEMU integration runs `make test` boots (`RUNS`): each run's machine, the
//! kernel tests it selects, its log checks, host clients and disk.

use std::path::Path;

use super::disk_runs::{
    fsck_is_clean, mount_refused_with_reason, synced_files_are_intact, Image, TestDisk,
};
use super::log_checks::{
    chased_the_cache, eight_packages, four_packages, print_lines_in_order, ticks_at_250_hz,
    two_packages, two_packages_and_multicast_lines,
};
use crate::netclient::{self, Client, Proto};
use crate::Result;

/// One QEMU integration run.
pub(super) struct Run {
    /// Name of the run; test lines read `PASS <label>/<test>`.
    pub label: &'static str,
    /// `-smp`.
    pub cores: u32,
    /// Packages the cores are spread over (`-smp N,sockets=S`); `None` takes `SOCKETS`,
    /// or QEMU's one package.
    pub sockets: Option<u32>,
    /// `-m`.
    pub mem: &'static str,
    /// Extra QEMU arguments for this run, split on whitespace.
    pub qemu_args: &'static str,
    /// `test=` on the kernel command line: `all`, or test names separated by commas.
    pub test: &'static str,
    /// The number the kernel must print in `CORES ONLINE <n>`, if checked.
    pub expect_online: Option<u32>,
    /// More kernel command-line arguments, after `test=`.
    pub append: &'static str,
    /// QEMU is killed (and the run failed) after this many seconds.
    pub timeout_secs: u64,
    /// A check of the serial log beyond the tests' verdicts (the topology the boot saw,
    /// a program's result lines); a failure counts as one failed test, `<label>/log`.
    pub check: Option<fn(&str) -> Result>,
    /// Clients on the host that talk to servers in the VM while it runs (issue M12): the
    /// VM then gets a virtio-net on restricted user networking with a forward from
    /// 127.0.0.1 for each; each client's outcome is a test, `<label>/host-<name>`.
    pub clients: &'static [Client],
    /// A virtio-blk disk (issue M13): its image is made before the run and checked after
    /// it, a test of its own (`disk_runs.rs`).
    pub disk: Option<TestDisk>,
}

/// Two NUMA nodes of two cores and 256 MiB each.
const NUMA_2X2: &str = "-object memory-backend-ram,size=256M,id=m0 \
     -object memory-backend-ram,size=256M,id=m1 \
     -numa node,nodeid=0,cpus=0-1,memdev=m0 -numa node,nodeid=1,cpus=2-3,memdev=m1";

/// Two NUMA nodes of one core and 256 MiB each (AMPS's NUMA-1 in small: with `asym=1:50`
/// the fast core's node is not the slow core's).
const NUMA_1X2: &str = "-object memory-backend-ram,size=256M,id=m0 \
     -object memory-backend-ram,size=256M,id=m1 \
     -numa node,nodeid=0,cpus=0,memdev=m0 -numa node,nodeid=1,cpus=1,memdev=m1";

/// A run of every test with `cores` cores; `expect_online` is the core count.
const fn all(label: &'static str, cores: u32, mem: &'static str) -> Run {
    Run {
        label,
        cores,
        sockets: None,
        mem,
        qemu_args: "",
        test: "all",
        expect_online: Some(cores),
        append: "",
        timeout_secs: 120,
        check: None,
        clients: &[],
        disk: None,
    }
}

/// The tests of a VM with several packages: the SKB's multicast tree has one aggregator
/// per package, and the multicast program runs over it.
const PACKAGE_TESTS: &str = "boot.multicast_tree_per_package,user.multicast_program,\
     user.load_reports_reach_every_core,tlb.no_stale_entry_after_shootdown";

/// The integration runs, in order.
pub(super) const RUNS: &[Run] = &[
    all("smp1", 1, "256M"),
    all("smp2", 2, "256M"),
    Run { check: Some(print_lines_in_order), ..all("smp4", 4, "256M") },
    all("smp8", 8, "256M"),
    // 16 vCPUs on the build machine's 2 CPUs: every test runs slower (NPB's kernels alone
    // take 40 s of it here), and the whole run took 116 s of a 120 s limit in CI, once past it.
    Run { timeout_secs: 240, ..all("smp16", 16, "512M") },
    Run { qemu_args: NUMA_2X2, ..all("numa4", 4, "512M") },
    all("mem64m", 2, "64M"),
    all("mem64m-smp16", 16, "64M"),
    all("mem16g", 2, "16G"),
    Run { test: "trap.fault_isolation", ..all("fault4", 4, "256M") },
    Run { test: "trap.stack_overflow", ..all("overflow4", 4, "256M") },
    // A TLB shootdown's participant faults before it reads the invalidation; then a
    // two-phase operation names the faulted core, a coordinator faults undecided, and a
    // retype's giver faults half-way through sending its block (issue M9); last, `asym`
    // naming the faulted cores changes nothing (issue M14).
    Run {
        test: "tlb.faulted_participant_does_not_hang,twophase.faulted_participant_aborts,\
               twophase.faulted_coordinator_leaves_no_lock,\
               retype.frames_a_faulted_giver_never_sent_are_freed,\
               console.asym_changes_nothing_unless_every_core_is_online",
        ..all("tlbfault4", 4, "256M")
    },
    // A multicast's aggregator faults before it forwards (issue M9): 2 packages of 2.
    Run {
        test: "tlb.faulted_aggregator_does_not_hang",
        sockets: Some(2),
        check: Some(two_packages),
        ..all("tlbfault4s2", 4, "256M")
    },
    // A core that stops serving its channels: frames sent home find its channel full; a
    // revocation it applies late (after `obj_revoke` gave up on it, 22 s).
    Run {
        test: "frames.returns_survive_a_full_channel,\
               user.a_late_revocation_is_reported_and_forgotten",
        ..all("deaf2", 2, "256M")
    },
    // 10,000 live McRT threads with 32 MiB a core (as smp8 and smp16 have): their stacks
    // need more than one core's memory (issue M15).
    Run { test: "user.mcrt_live_threads", ..all("mcrtlive4", 4, "128M") },
    // Kernel memory grown by system calls until refused, on both cores (issue M14).
    // (With no quota per program, so one program reaches the core's reserve.)
    Run { test: "user.kernel_memory_is_refused", append: "kquota=off", ..all("kmem2", 2, "64M") },
    // ... and with 256 MiB a core, where the heap's free pieces once hid that its frames
    // were gone (the core stopped).
    Run {
        test: "user.kernel_memory_is_refused",
        append: "kquota=off",
        ..all("kmem2-512m", 2, "512M")
    },
    // Each program's kernel-memory quota leaves its core room for the next (issue M14).
    Run { test: "user.a_program_at_its_quota_leaves_room", ..all("quota2", 2, "64M") },
    // A million fuzzed system calls (issue 9), in a run of its own: two fuzzers, two cores
    // for what they start.
    Run { test: "user.sysfuzz_million", timeout_secs: 600, ..all("fuzz4", 4, "256M") },
    // Emulated slow cores (issue M7): cores 0 and 1 run half of every millisecond; the SKB
    // measures them slower and AMPS starts a new thread on the fast core 2.
    Run { test: "user.asym_placement", append: "asym=0-1:50", ..all("asym3", 3, "256M") },
    // Slowing a core at run time (the console's `asym`) is measured and reaches every
    // scheduler; on 2 cores, so the vCPUs measured at once do not share a host CPU.
    Run { test: "user.asym_at_run_time_is_measured", ..all("asym2", 2, "256M") },
    // AMPS's NUMA policies with the last-level cache the SKB read from CPUID (issue M15):
    // core 1 slow and on a node of its own, so AMPS asks to move its running thread to
    // core 0; RSS lets a small resident set go where Same-Node keeps it (Table 4), and
    // keeps one of twice the cache.
    Run {
        test: "user.rss_moves_what_same_node_keeps,user.rss_keeps_more_than_the_llc",
        append: "asym=1:50",
        qemu_args: NUMA_1X2,
        ..all("rss2", 2, "512M")
    },
    // The tick rate from the command line (`make bench` boots Atoll at the Linux guest's).
    Run {
        test: "interrupts.tick_rate",
        append: "hz=250",
        check: Some(ticks_at_250_hz),
        ..all("hz250", 2, "256M")
    },
    // The last-level cache measured by a pointer chase even though CPUID gives it (issue
    // M15): the chase runs to completion at boot and the SKB takes its answer.
    Run {
        test: "boot.cores_online",
        append: "llc=chase",
        check: Some(chased_the_cache),
        ..all("chase1", 1, "256M")
    },
    // A virtio-net device on restricted user networking (issue M12): the driver's frames
    // reach QEMU's gateway and its answer comes back; the fuzzer meets a real NIC
    // (`device_send`, `device_receive`); a program's own TCP/IP stack gets a
    // DHCP lease through the frame calls; `tcpsvc` answers the host's connections through
    // a forward from 127.0.0.1, again through a kernel core on core 1 in Corey §8.3's
    // Dedicated and Polling configurations, with two stacks of one address (software
    // RSS) and with an address per stack (10.0.2.15 and .16, a forward to each), `udpecho` counts the host's datagrams, and `webd` holds an HTTP
    // conversation with the host (keep-alive, HEAD, 404, HTTP/1.0, 405, 400), then serves a short `wrk`, and survives hostile clients (slowloris, a 64 KB header,
    // garbage, 40 connections at once, 2,000 random requests); `sockecho` echoes TCP and
    // UDP through libatoll's sockets.
    Run {
        test: "net.virtio_arp_is_answered,user.sysfuzz_every_core,user.netconf_gets_a_lease,\
               user.tcpsvc_serves_the_host,user.tcpsvc_serves_through_a_kernel_core,\
               user.tcpsvc_serves_with_a_polling_core,user.tcpsvc_serves_on_two_stacks,\
               user.tcpsvc_serves_an_address_per_stack,\
               user.udpecho_counts_the_hosts_datagrams,user.webd_serves_the_host,\
               user.webd_serves_wrk,user.webd_survives_hostile_clients,\
               user.sockecho_serves_tcp_and_udp",
        clients: &[
            Client {
                name: "tcpsvc-kernel-core",
                proto: Proto::Tcp,
                guest_port: 81,
                guest_address: None,
                talk: netclient::tcpsvc_replies,
            },
            Client {
                name: "tcpsvc-polling-core",
                proto: Proto::Tcp,
                guest_port: 82,
                guest_address: None,
                talk: netclient::tcpsvc_replies,
            },
            Client {
                name: "tcpsvc-10.0.2.15",
                proto: Proto::Tcp,
                guest_port: 84,
                guest_address: None,
                talk: netclient::tcpsvc_replies,
            },
            Client {
                name: "tcpsvc-10.0.2.16",
                proto: Proto::Tcp,
                guest_port: 84,
                guest_address: Some([10, 0, 2, 16]),
                talk: netclient::tcpsvc_replies,
            },
            Client {
                name: "tcpsvc-two-stacks",
                proto: Proto::Tcp,
                guest_port: 83,
                guest_address: None,
                talk: netclient::tcpsvc_replies,
            },
            Client {
                name: "webd",
                proto: Proto::Tcp,
                guest_port: 8080,
                guest_address: None,
                talk: netclient::webd_conversation,
            },
            Client {
                name: "sockecho-tcp",
                proto: Proto::Tcp,
                guest_port: 8087,
                guest_address: None,
                talk: netclient::sockecho_clients,
            },
            Client {
                name: "sockecho-udp",
                proto: Proto::Udp,
                guest_port: 8087,
                guest_address: None,
                talk: netclient::udp_datagrams,
            },
            Client {
                name: "webd-hostile",
                proto: Proto::Tcp,
                guest_port: 8086,
                guest_address: None,
                talk: netclient::webd_hostile,
            },
            Client {
                name: "webd-wrk",
                proto: Proto::Tcp,
                guest_port: 8085,
                guest_address: None,
                talk: netclient::webd_under_wrk,
            },
            Client {
                name: "tcpsvc",
                proto: Proto::Tcp,
                guest_port: 80,
                guest_address: None,
                talk: netclient::tcpsvc_replies,
            },
            Client {
                name: "udp",
                proto: Proto::Udp,
                guest_port: 7,
                guest_address: None,
                talk: netclient::udp_datagrams,
            },
        ],
        ..all("net2", 2, "256M")
    },
    // Several packages (issue 10): the boot sees them, the SKB's multicast tree has an
    // aggregator per package, and `mcbench` prints Figure 6's lines from that tree.
    Run {
        sockets: Some(2),
        test: PACKAGE_TESTS,
        check: Some(two_packages_and_multicast_lines),
        ..all("sockets4", 4, "256M")
    },
    Run {
        sockets: Some(4),
        test: "boot.multicast_tree_per_package,user.load_reports_reach_every_core,\
               tlb.no_stale_entry_after_shootdown",
        check: Some(four_packages),
        ..all("sockets8", 8, "256M")
    },
    // The largest (M9): 16 vCPUs in 8 packages of 2, so the tree has 8 aggregators
    // and NUMA-aware multicast reaches the farthest first; a shootdown by every protocol, and
    // conflicting two-phase operations from every core.
    Run {
        sockets: Some(8),
        test: "boot.multicast_tree_per_package,tlb.no_stale_entry_after_shootdown,\
               twophase.conflicting_operations_end_in_one_order",
        check: Some(eight_packages),
        ..all("sockets16", 16, "512M")
    },
    // webd's filesum on application cores (Corey §6.2, issues M12 and M13): the NIC and a
    // disk, the host's client asking for sums of the disk's `/www/index.html`.
    Run {
        test: "user.webd_filesum_on_application_cores",
        disk: Some(TestDisk { image: Image::Fresh, kill_iterations: None, check: FSCK }),
        clients: &[
            Client {
                name: "filesum-locality",
                proto: Proto::Tcp,
                guest_port: 8081,
                guest_address: None,
                talk: netclient::webd_filesum,
            },
            Client {
                name: "filesum-random",
                proto: Proto::Tcp,
                guest_port: 8082,
                guest_address: None,
                talk: netclient::webd_filesum,
            },
        ],
        ..all("web-disk", 2, "256M")
    },
    // webd whole (Corey §6.2): a kernel core, two front ends with stacks of their own,
    // an application core; two host clients.
    Run {
        test: "user.webd_front_ends_on_two_cores",
        disk: Some(TestDisk { image: Image::Fresh, kill_iterations: None, check: FSCK }),
        clients: &[
            Client {
                name: "front-ends-a",
                proto: Proto::Tcp,
                guest_port: 8083,
                guest_address: None,
                talk: netclient::webd_filesum,
            },
            Client {
                name: "front-ends-b",
                proto: Proto::Tcp,
                guest_port: 8083,
                guest_address: None,
                talk: netclient::webd_filesum,
            },
        ],
        ..all("web-disk4", 4, "256M")
    },
    // The disk (issue M13): files written and synced on a fresh ext2 image (from `disk/`)
    // that e2fsck then finds clean; a second boot on the same image finds them.
    Run {
        test:
            "user.files_api,user.files_two_cores_write_one_file,user.files_through_a_kernel_core,\
               user.files_private_to_a_core,user.sysfuzz_with_a_disk,\
               user.filesum_refuses_bad_arguments,user.files_survive_reboot_write",
        disk: Some(TestDisk { image: Image::Fresh, kill_iterations: None, check: FSCK }),
        ..all("disk-write", 2, "256M")
    },
    Run {
        test: "user.files_survive_reboot_read",
        disk: Some(TestDisk {
            image: Image::After("disk-write"),
            kill_iterations: None,
            check: FSCK,
        }),
        ..all("disk-read", 2, "256M")
    },
    // A damaged image: the mount is refused with the reason, and every file call says
    // there is no file system.
    Run {
        test: "user.files_refused_without_a_file_system",
        disk: Some(TestDisk {
            image: Image::Damaged,
            kill_iterations: None,
            check: ("refused", mount_refused_with_reason),
        }),
        ..all("disk-damaged", 2, "256M")
    },
    // QEMU killed at a random moment while the guest writes and syncs files, three times:
    // e2fsck repairs what the crash left and every synced file is intact.
    Run {
        test: "user.files_write_loop",
        disk: Some(TestDisk {
            image: Image::Fresh,
            kill_iterations: Some(3),
            check: ("iteration", synced_files_are_intact),
        }),
        ..all("disk-kill", 2, "256M")
    },
];

/// The check of a disk run's image: `<label>/fsck`, e2fsck finds it clean.
pub(super) const FSCK: (&str, fn(&Path, &str) -> Result) = ("fsck", fsck_is_clean);
