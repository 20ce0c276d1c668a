//! `cargo xtask test`: host unit tests, then the kernel's integration tests in QEMU, then
//! the bench harness's smoke test.
//!
//! Each entry of [`RUNS`] boots one virtual machine with `-append test=<selector>`,
//! captures COM1 in `target/test-logs/<label>.log` and lets `verdict::judge` decide. The
//! last line printed is always `N passed, M failed`, followed by `, K skipped` when a
//! host test was ignored or a kernel test reported `TEST SKIP` (it could check nothing in
//! its run's machine): skipped tests never count as passed.
//!
//! The last runs have a virtio-blk disk (`Run::disk`, `disk_runs.rs`, issue M13): its
//! image (`target/test-logs/<label>.img`) is built from the repository's `disk/` before the
//! run, or is the one an earlier run left, and is checked with e2fsprogs after it, a test
//! of its own. `disk-write` writes files and `disk-read`, on the same image, finds them as
//! after a reboot; `disk-kill` is a crash test: QEMU killed at a random moment while the
//! guest writes and syncs files, then the image repaired by `e2fsck -fy` and every synced
//! file read back with `debugfs`, three times.

use std::fs::{self, File};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use verdict::judge::{judge, Outcome, Verdict};

mod disk_runs;
mod log_checks;

use crate::netclient::{self, Client, Proto};
use crate::qemu::{self, Accel, Serial, Vm};
use crate::tally::Tally;
use crate::{build, disk, host, Options, Result};
use disk_runs::{
    fsck_is_clean, mount_refused_with_reason, synced_files_are_intact, Image, Prepared, TestDisk,
};
use log_checks::{
    chased_the_cache, eight_packages, four_packages, print_lines_in_order, ticks_at_250_hz,
    two_packages, two_packages_and_multicast_lines,
};

/// One QEMU integration run.
struct Run {
    /// Name of the run; test lines read `PASS <label>/<test>`.
    label: &'static str,
    /// `-smp`.
    cores: u32,
    /// Packages the cores are spread over (`-smp N,sockets=S`); `None` takes `SOCKETS`,
    /// or QEMU's one package.
    sockets: Option<u32>,
    /// `-m`.
    mem: &'static str,
    /// Extra QEMU arguments for this run, split on whitespace.
    qemu_args: &'static str,
    /// `test=` on the kernel command line: `all`, or test names separated by commas.
    test: &'static str,
    /// The number the kernel must print in `CORES ONLINE <n>`, if checked.
    expect_online: Option<u32>,
    /// More kernel command-line arguments, after `test=`.
    append: &'static str,
    /// QEMU is killed (and the run failed) after this many seconds.
    timeout_secs: u64,
    /// A check of the serial log beyond the tests' verdicts (the topology the boot saw,
    /// a program's result lines); a failure counts as one failed test, `<label>/log`.
    check: Option<fn(&str) -> Result>,
    /// Clients on the host that talk to servers in the VM while it runs (issue M12): the
    /// VM then gets a virtio-net on restricted user networking with a forward from
    /// 127.0.0.1 for each; each client's outcome is a test, `<label>/host-<name>`.
    clients: &'static [Client],
    /// A virtio-blk disk (issue M13): its image is made before the run and checked after
    /// it, a test of its own (`disk_runs.rs`).
    disk: Option<TestDisk>,
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
const RUNS: &[Run] = &[
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
    // conversation with the host (keep-alive, HEAD, 404, HTTP/1.0, 405, 400).
    Run {
        test: "net.virtio_arp_is_answered,user.sysfuzz_every_core,user.netconf_gets_a_lease,\
               user.tcpsvc_serves_the_host,user.tcpsvc_serves_through_a_kernel_core,\
               user.tcpsvc_serves_with_a_polling_core,user.tcpsvc_serves_on_two_stacks,\
               user.tcpsvc_serves_an_address_per_stack,\
               user.udpecho_counts_the_hosts_datagrams,user.webd_serves_the_host",
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
               user.files_private_to_a_core,user.sysfuzz_with_a_disk,user.files_survive_reboot_write",
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
const FSCK: (&str, fn(&Path, &str) -> Result) = ("fsck", fsck_is_clean);

/// Runs everything selected; the exit code is failure if anything failed or could not run.
pub fn test(opts: &Options) -> Result<ExitCode> {
    let (accel, why) = Accel::choose(opts.accel.as_deref())?;
    if opts.dry_run {
        return dry_run(opts, accel, why);
    }
    let mut tally = Tally::default();
    if !opts.skip_host {
        host::run_all(&mut tally);
    }
    // Last, the bench harness end to end: nullsys on Atoll and the Linux guest (docs/bench.md).
    let filter = opts.only.as_deref().unwrap_or("");
    let smoke = "bench-smoke".contains(filter);
    if !smoke || RUNS.iter().any(|r| r.label.contains(filter)) {
        run_qemu_tests(opts, accel, why, &mut tally);
    }
    if smoke {
        crate::bench::smoke_test(opts, &mut tally);
    }
    println!("{}", tally.summary());
    Ok(if tally.failed == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// `DRY_RUN=1`: what `test` would do with these settings, building and booting nothing; an
/// error if the filter selects nothing.
fn dry_run(opts: &Options, accel: Accel, why: &str) -> Result<ExitCode> {
    let filter = opts.only.as_deref().unwrap_or("");
    let runs: Vec<&str> =
        RUNS.iter().filter(|r| r.label.contains(filter)).map(|r| r.label).collect();
    let smoke = "bench-smoke".contains(filter);
    if runs.is_empty() && !smoke {
        return Err(format!("no QEMU run's label contains `{filter}`"));
    }
    println!(
        "test: dry run ({} ({why})): host tests {}, {} QEMU runs: {}{}",
        accel.name(),
        if opts.skip_host { "skipped" } else { "run" },
        runs.len(),
        runs.join(" "),
        if smoke { ", then bench-smoke" } else { "" }
    );
    Ok(ExitCode::SUCCESS)
}

/// Builds the kernel and does the selected runs of [`RUNS`].
fn run_qemu_tests(opts: &Options, accel: Accel, why: &str, tally: &mut Tally) {
    let filter = opts.only.as_deref().unwrap_or("");
    let runs: Vec<&Run> = RUNS.iter().filter(|r| r.label.contains(filter)).collect();
    if runs.is_empty() {
        println!("FAIL qemu: no run's label contains `{filter}`");
        tally.failed += 1;
        return;
    }
    println!("== qemu: building the kernel");
    let images = match build::images() {
        Ok(images) => images,
        Err(e) => {
            println!("FAIL build: {e}");
            tally.failed += 1;
            return;
        }
    };
    let log_dir = build::target_dir().join("test-logs");
    if let Err(e) = fs::create_dir_all(&log_dir) {
        println!("FAIL qemu: cannot create {}: {e}", log_dir.display());
        tally.failed += 1;
        return;
    }
    println!("== qemu: accelerator {} ({why})", accel.name());
    for run in runs {
        let vm = machine(run, &images, accel, opts);
        if let Err(why) = qemu::check_sockets(vm.cores, vm.sockets) {
            println!("SKIP {}: {why}", run.label);
            tally.skipped += 1;
            continue;
        }
        let log = log_dir.join(format!("{}.log", run.label));
        let smp = qemu::smp_arg(vm.cores, vm.sockets);
        println!("== {}: -smp {smp} -m {} test={}", run.label, run.mem, run.test);
        let timeout = Duration::from_secs(opts.timeout.unwrap_or(run.timeout_secs));
        if let Some(disk @ TestDisk { kill_iterations: Some(n), .. }) = &run.disk {
            disk_runs::crash_test(run, disk, *n, &vm, &log_dir, timeout, tally);
            continue;
        }
        let mut vm = vm;
        let image = match &run.disk {
            None => None,
            Some(disk) => match disk_runs::prepare(run.label, disk, &log_dir) {
                Ok(Prepared::Ready(image)) => {
                    vm.extra.extend(disk::qemu_args(&image));
                    Some(image)
                }
                Ok(Prepared::Skip(why)) => {
                    println!("SKIP {}: {why}", run.label);
                    tally.skipped += 1;
                    continue;
                }
                Err(e) => {
                    println!("FAIL {}: its disk image: {e}", run.label);
                    tally.failed += 1;
                    continue;
                }
            },
        };
        let ports = match forward_ports(run, &mut vm) {
            Ok(ports) => ports,
            Err(e) => {
                println!("FAIL {}: {e}", run.label);
                tally.failed += 1;
                continue;
            }
        };
        let stop = AtomicBool::new(false);
        let deadline = Instant::now() + timeout;
        let (booted, talked) = thread::scope(|scope| {
            let talking: Vec<_> = run
                .clients
                .iter()
                .zip(&ports)
                .map(|(client, &port)| {
                    let addr = SocketAddr::from(([127, 0, 0, 1], port));
                    let stop = &stop;
                    scope.spawn(move || (client.talk)(addr, stop, deadline))
                })
                .collect();
            let booted = boot_and_judge(run, &vm, &log, timeout);
            stop.store(true, Ordering::Relaxed);
            let talked: Vec<Result> = talking
                .into_iter()
                .map(|t| t.join().unwrap_or_else(|_| Err("the client panicked".into())))
                .collect();
            (booted, talked)
        });
        match booted {
            Ok((verdict, seconds)) => report(run, &verdict, seconds, &log, tally),
            Err(e) => {
                println!("FAIL {}: {e}", run.label);
                tally.failed += 1;
            }
        }
        for (client, outcome) in run.clients.iter().zip(talked) {
            match outcome {
                Ok(()) => {
                    println!("PASS {}/host-{}", run.label, client.name);
                    tally.passed += 1;
                }
                Err(why) => {
                    println!("FAIL {}/host-{}: {why}", run.label, client.name);
                    tally.failed += 1;
                }
            }
        }
        if let (Some(disk), Some(image)) = (&run.disk, &image) {
            let (name, check) = disk.check;
            let outcome = check(image, &qemu::read_log(&log));
            disk_runs::count(run.label, name, &outcome, tally);
        }
    }
}

/// For a run with host clients: a free port on 127.0.0.1 for each, and the VM's NIC with
/// a forward from each to its client's guest port. The ports, in the clients' order.
fn forward_ports(run: &Run, vm: &mut Vm) -> Result<Vec<u16>> {
    if run.clients.is_empty() {
        return Ok(Vec::new());
    }
    let mut forwards = Vec::new();
    for client in run.clients {
        forwards.push(netclient::Forward {
            proto: client.proto,
            host: netclient::free_port(client.proto)?,
            guest_address: client.guest_address,
            guest_port: client.guest_port,
        });
    }
    vm.extra.extend(netclient::nic_args(&forwards));
    Ok(forwards.iter().map(|f| f.host).collect())
}

/// The virtual machine of `run`: its own QEMU arguments, then `QEMU_ARGS`.
fn machine(run: &Run, images: &build::Images, accel: Accel, opts: &Options) -> Vm {
    let mut extra: Vec<String> = run.qemu_args.split_whitespace().map(String::from).collect();
    extra.extend(opts.qemu_args.iter().cloned());
    Vm {
        cores: run.cores,
        sockets: run.sockets.or(opts.sockets),
        mem: run.mem.into(),
        accel,
        kernel: images.kernel.clone(),
        initrd: Some(images.initrd.clone()),
        cmdline: format!("{}={} {}", verdict::cmdline_keys::TEST, run.test, run.append)
            .trim_end()
            .to_string(),
        extra,
    }
}

/// Boots `vm` with COM1 (and QEMU's own messages) going to `log`; judges the run.
fn boot_and_judge(run: &Run, vm: &Vm, log: &Path, timeout: Duration) -> Result<(Verdict, f64)> {
    let file = File::create(log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
    let copy = file.try_clone().map_err(|e| format!("cannot share {}: {e}", log.display()))?;
    let mut command = vm.command(Serial::Stdout);
    command.stdin(Stdio::null()).stdout(file).stderr(copy);
    let mut child = qemu::spawn(&mut command)?;
    let ending = qemu::wait(&mut child, timeout)?;
    let serial = qemu::read_log(log);
    let verdict = judge(&serial, ending.status, ending.timed_out, run.expect_online);
    Ok((verdict, ending.elapsed.as_secs_f64()))
}

/// Prints a line per test, a line for a failed run, and the log's tail on failure.
fn report(run: &Run, verdict: &Verdict, seconds: f64, log: &Path, tally: &mut Tally) {
    for line in count_tests(run.label, verdict, tally) {
        println!("{line}");
    }
    if verdict.run_failed() {
        println!("FAIL {}: {} ({seconds:.1} s)", run.label, verdict.why_run());
        tally.failed += 1;
    }
    let checked = run.check.map(|check| check(&qemu::read_log(log)));
    match &checked {
        Some(Ok(())) => {
            println!("PASS {}/log", run.label);
            tally.passed += 1;
        }
        Some(Err(why)) => {
            println!("FAIL {}/log: {why}", run.label);
            tally.failed += 1;
        }
        None => {}
    }
    if !verdict.passed() || checked.is_some_and(|c| c.is_err()) {
        print_tail(log, 40);
    }
}

/// Adds a run's tests to `tally`, each by its outcome; the line to print for each.
fn count_tests(label: &str, verdict: &Verdict, tally: &mut Tally) -> Vec<String> {
    let mut lines = Vec::new();
    for test in &verdict.tests {
        lines.push(match test.outcome {
            Outcome::Passed => {
                tally.passed += 1;
                format!("PASS {label}/{}", test.name)
            }
            Outcome::Failed => {
                tally.failed += 1;
                format!("FAIL {label}/{}: {}", test.name, test.detail)
            }
            Outcome::Skipped => {
                tally.skipped += 1;
                format!("SKIP {label}/{}: {}", test.name, test.detail)
            }
        });
    }
    lines
}

/// Prints the last `count` lines of a log file.
fn print_tail(log: &Path, count: usize) {
    let text = qemu::read_log(log);
    let lines: Vec<&str> = text.lines().collect();
    let tail = &lines[lines.len().saturating_sub(count)..];
    println!("--- last {} lines of {} ---", tail.len(), log.display());
    for line in tail {
        println!("    {}", line.trim_end_matches('\r'));
    }
    println!("---");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_names_skipped_tests_only_when_there_are_some() {
        let mut tally = Tally { passed: 5, failed: 1, skipped: 0 };
        assert_eq!(tally.summary(), "5 passed, 1 failed");
        tally.skipped = 3;
        assert_eq!(tally.summary(), "5 passed, 1 failed, 3 skipped");
    }

    #[test]
    fn kernel_skips_count_as_skipped_never_as_passed() {
        let log = "CORES ONLINE 1\nTEST PASS a.one cores=1 us=5\n\
                   TEST SKIP a.two: under 16 MiB free\nTEST FAIL a.three: wrong\n\
                   TESTS DONE passed=1 failed=1 skipped=1\n";
        let verdict = judge(log, Some(verdict::ExitCode::Failure.qemu_status()), false, Some(1));
        let mut tally = Tally::default();
        let lines = count_tests("smp1", &verdict, &mut tally);
        assert_eq!((tally.passed, tally.failed, tally.skipped), (1, 1, 1));
        assert_eq!(lines[1], "SKIP smp1/a.two: under 16 MiB free");
        assert_eq!(tally.summary(), "1 passed, 1 failed, 1 skipped");
    }

    #[test]
    fn labels_are_unique() {
        for (i, a) in RUNS.iter().enumerate() {
            assert!(RUNS[i + 1..].iter().all(|b| b.label != a.label), "{}", a.label);
        }
    }

    #[test]
    fn the_required_core_counts_are_all_there() {
        for cores in [1, 2, 4, 8, 16] {
            let run = RUNS.iter().find(|r| r.cores == cores && r.test == "all").unwrap();
            assert_eq!(run.expect_online, Some(cores), "{}", run.label);
        }
    }

    #[test]
    fn package_runs_spread_their_cores_evenly() {
        let runs: Vec<&Run> = RUNS.iter().filter(|r| r.sockets.is_some()).collect();
        assert!(runs.iter().any(|r| r.sockets == Some(2) && r.test.contains("user.multicast")));
        assert!(runs.iter().any(|r| r.sockets == Some(4)));
        for run in runs {
            assert!(qemu::check_sockets(run.cores, run.sockets).is_ok(), "{}", run.label);
            assert!(run.check.is_some(), "{}", run.label);
        }
    }

    #[test]
    fn a_reused_disk_image_comes_from_an_earlier_judged_run() {
        for (i, run) in RUNS.iter().enumerate() {
            let Some(TestDisk { image: Image::After(earlier), .. }) = run.disk else { continue };
            let before = RUNS[..i].iter().find(|r| r.label == earlier);
            let Some(before) = before else { panic!("{}: no earlier run {earlier}", run.label) };
            let disk = before.disk.expect("the earlier run has a disk");
            assert_eq!(disk.image, Image::Fresh, "{}", run.label);
            assert!(disk.kill_iterations.is_none(), "{}: its image is killed", run.label);
        }
    }

    #[test]
    fn the_disk_runs_come_last_with_their_checks() {
        let labels: Vec<&str> = RUNS.iter().rev().take(4).map(|r| r.label).collect();
        assert_eq!(labels, ["disk-kill", "disk-damaged", "disk-read", "disk-write"]);
        for run in RUNS.iter().rev().take(4) {
            assert_eq!((run.cores, run.mem), (2, "256M"), "{}", run.label);
            assert!(run.clients.is_empty(), "{}", run.label);
        }
        let kill = RUNS.iter().find(|r| r.label == "disk-kill").unwrap().disk.unwrap();
        assert_eq!(
            (kill.image, kill.kill_iterations, kill.check.0),
            (Image::Fresh, Some(3), "iteration")
        );
        let read = RUNS.iter().find(|r| r.label == "disk-read").unwrap();
        assert_eq!(read.disk.unwrap().check.0, "fsck");
        assert_eq!(read.test, "user.files_survive_reboot_read");
        assert_eq!(RUNS.iter().filter(|r| r.disk.is_some()).count(), 6);
    }

    #[test]
    fn numa_nodes_cover_the_cores_and_memory() {
        let numa = RUNS.iter().find(|r| r.label == "numa4").unwrap();
        assert_eq!(numa.cores, 4);
        assert_eq!(numa.mem, "512M");
        assert!(numa.qemu_args.contains("cpus=0-1") && numa.qemu_args.contains("cpus=2-3"));
    }
}
