//! Host tests of the Linux platform: pinning, memory placement and sharing (also across
//! `fork`, as Corey's shared address ranges map to MAP_SHARED between processes), demand-zero
//! memory, a process per core, the barrier, and every workload at tiny sizes. Tests that
//! spin on two CPUs take a lock, so they do not fight each other for the same CPUs.
//!
//! The file has its own `main` (`harness = false`, with `libtest-mimic`, which behaves
//! like the built-in harness: filters, `--list`, the `test result:` line): the tests that
//! need two CPUs are known only at run time, and on a one-CPU host they are reported as
//! ignored rather than passed.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use libtest_mimic::{Arguments, Trial};

use workloads::linux::fd::{self, Table};
use workloads::linux::{self, ipc, Linux};
use workloads::pingpong::{self, Transport};
use workloads::shm::{self, Protocol};
use workloads::{
    alloc_slice, memclone, mempass, nullsys, unmap, CacheLine, Placement, Platform, Spaces,
    SpinBarrier,
};

/// Held by tests that keep two CPUs spinning.
static SPINNING: Mutex<()> = Mutex::new(());

/// The panic `a_panic_in_the_work_is_an_error` causes on purpose prints nothing: unlike the
/// built-in harness, libtest-mimic does not capture a test's output, and a panic message
/// in a passing run reads like a failure. Every other panic prints as usual.
fn quiet_deliberate_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if info.payload_as_str() != Some(DELIBERATE) {
            default(info);
        }
    }));
}

/// The message of the deliberate panic (`panic!` takes only a literal).
const DELIBERATE: &str = "deliberate";

/// Trials of tests that run with any number of CPUs.
macro_rules! trials {
    ($($test:ident),* $(,)?) => {
        vec![$(Trial::test(stringify!($test), || {
            $test();
            Ok(())
        })),*]
    };
}

/// Trials of tests that need two CPUs (each gets the platform): ignored unless `two_cpus`.
macro_rules! two_cpu_trials {
    ($two_cpus:expr; $($test:ident),* $(,)?) => {
        vec![$(Trial::test(stringify!($test), || {
            $test(&Linux::new());
            Ok(())
        })
        .with_ignored_flag(!$two_cpus)),*]
    };
}

fn main() {
    let args = Arguments::from_args();
    quiet_deliberate_panics();
    let two_cpus = Linux::new().cores() >= 2;
    if !two_cpus && !args.list {
        eprintln!("linux tests: this host has one CPU; the tests that need two are ignored");
    }
    let mut tests = trials![
        every_core_runs_its_work_on_its_own_cpu,
        a_missing_or_repeated_core_is_an_error_and_runs_nothing,
        a_panic_in_the_work_is_an_error,
        memory_is_zeroed_aligned_and_shared_by_the_cores,
        shared_memory_is_shared_with_a_forked_process_and_private_memory_is_not,
        the_barrier_holds_everyone_until_the_last_arrives,
        the_cycle_counter_advances_and_the_null_call_is_cheap_enough_to_count,
        the_benchmark_comes_from_the_kernel_command_line,
        reserved_memory_is_demand_zero_and_present_memory_is_not,
        separate_cores_run_in_their_own_processes_on_their_own_cpus,
        separate_work_that_fails_or_a_missing_core_is_an_error,
        spaces_have_the_config_names_atoll_prints,
        memclone_faults_every_page_in_both_configurations,
        mempass_passes_the_buffer_through_every_core,
        fd_dup_and_close_are_counted_on_both_tables,
        set_writable_changes_the_rights_of_the_whole_mapping,
        unmap_reports_reduce_and_restore_for_every_core_count,
    ];
    tests.extend(two_cpu_trials![two_cpus;
        urpc_latency_floor_and_throughput_are_measured,
        pipe_and_futex_ping_pongs_complete,
        shm_and_msg_updates_are_measured_and_counted,
    ]);
    libtest_mimic::run(&args, tests).exit();
}

fn every_core_runs_its_work_on_its_own_cpu() {
    let p = Linux::new();
    let cores: Vec<usize> = (0..p.cores()).collect();
    let seen: Vec<AtomicUsize> = cores.iter().map(|_| AtomicUsize::new(usize::MAX)).collect();
    p.run_on(&cores, &|core| seen[core].store(linux::current_cpu().unwrap(), Ordering::SeqCst))
        .unwrap();
    for core in cores {
        assert_eq!(Some(seen[core].load(Ordering::SeqCst)), p.cpu(core), "core {core}");
    }
}

fn a_missing_or_repeated_core_is_an_error_and_runs_nothing() {
    let p = Linux::new();
    let ran = AtomicUsize::new(0);
    let count = |_| {
        ran.fetch_add(1, Ordering::SeqCst);
    };
    assert!(p.run_on(&[0, p.cores()], &count).is_err());
    assert!(p.run_on(&[0, 0], &count).is_err());
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    assert!(linux::pin(usize::MAX).is_err());
}

fn a_panic_in_the_work_is_an_error() {
    let p = Linux::new();
    let outcome = p.run_on(&[0], &|_| panic!("deliberate"));
    assert!(outcome.unwrap_err().contains("panicked"));
}

fn memory_is_zeroed_aligned_and_shared_by_the_cores() {
    let p = Linux::new();
    for placement in [Placement::Shared, Placement::Local(p.cores() - 1)] {
        let region = p.alloc(10_000, placement).unwrap();
        assert_eq!(region.len(), 12_288);
        assert_eq!(region.addr() % 4096, 0);
        let words = region.typed::<AtomicU64>(1536).unwrap();
        assert!(words.iter().all(|w| w.load(Ordering::Relaxed) == 0));
        let cores: Vec<usize> = (0..p.cores()).collect();
        p.run_on(&cores, &|core| {
            words[core].store(core as u64 + 1, Ordering::SeqCst);
        })
        .unwrap();
        for core in cores {
            assert_eq!(words[core].load(Ordering::SeqCst), core as u64 + 1);
        }
    }
    assert!(p.alloc(64, Placement::Shared).unwrap().typed::<CacheLine>(65).is_err());
}

fn shared_memory_is_shared_with_a_forked_process_and_private_memory_is_not() {
    let p = Linux::new();
    let shared = alloc_slice::<AtomicU64, Linux>(&p, 1, Placement::Shared).unwrap();
    let private = alloc_slice::<AtomicU64, Linux>(&p, 1, Placement::Local(0)).unwrap();
    // SAFETY: the child only stores to memory and leaves with _exit, touching no lock.
    let child = unsafe { libc::fork() };
    assert!(child >= 0, "fork failed");
    if child == 0 {
        shared[0].store(7, Ordering::SeqCst);
        private[0].store(9, Ordering::SeqCst);
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { libc::_exit(0) };
    }
    let mut status = 0;
    // SAFETY: waits for our own child.
    assert_eq!(unsafe { libc::waitpid(child, &mut status, 0) }, child);
    assert_eq!(shared[0].load(Ordering::SeqCst), 7);
    assert_eq!(private[0].load(Ordering::SeqCst), 0);
}

fn the_barrier_holds_everyone_until_the_last_arrives() {
    let p = Linux::new();
    let barrier = alloc_slice::<SpinBarrier, Linux>(&p, 1, Placement::Shared).unwrap();
    let arrived = AtomicUsize::new(0);
    let cores: Vec<usize> = (0..p.cores()).collect();
    let _guard = SPINNING.lock().unwrap();
    p.run_on(&cores, &|_| {
        for round in 0..50 {
            arrived.fetch_add(1, Ordering::SeqCst);
            barrier[0].wait(cores.len());
            assert!(arrived.load(Ordering::SeqCst) >= (round + 1) * cores.len());
            barrier[0].wait(cores.len());
        }
    })
    .unwrap();
    assert_eq!(arrived.load(Ordering::SeqCst), 50 * cores.len());
}

fn the_cycle_counter_advances_and_the_null_call_is_cheap_enough_to_count() {
    let p = Linux::new();
    let a = p.cycles();
    let cycles = nullsys::cycles_per_call(&p, 3).unwrap();
    assert!(p.cycles() > a);
    assert!(cycles > 0);
    let lines = nullsys::run(&p, 1).unwrap();
    assert!(lines[0].contains("\"system\":\"linux\"") && lines[0].contains("getpid"));
}

fn urpc_latency_floor_and_throughput_are_measured(p: &Linux) {
    let _guard = SPINNING.lock().unwrap();
    assert!(pingpong::latency(p, 0, 1, 200, Transport::Urpc).unwrap() > 0);
    assert!(pingpong::latency(p, 0, 1, 200, Transport::Floor).unwrap() > 0);
    assert!(pingpong::throughput(p, 0, 1, 2000).unwrap() > 0.0);
    assert!(pingpong::latency(p, 0, 0, 10, Transport::Urpc).is_err());
    let lines = pingpong::run(p, 50).unwrap();
    let pairs = p.cores() * (p.cores() - 1) / 2;
    assert_eq!(lines.len(), 5 * pairs);
}

fn pipe_and_futex_ping_pongs_complete(p: &Linux) {
    let _guard = SPINNING.lock().unwrap();
    assert!(ipc::pipe_latency(p, 0, 1, 100).unwrap() > 0);
    assert!(ipc::futex_latency(p, 0, 1, 100).unwrap() > 0);
}

fn shm_and_msg_updates_are_measured_and_counted(p: &Linux) {
    let _guard = SPINNING.lock().unwrap();
    for protocol in [Protocol::Shm, Protocol::Msg] {
        let point = shm::measure(p, 1, protocol, 8, 100).unwrap();
        assert_eq!((point.clients, point.lines), (1, 8));
        assert!(point.cycles_per_update > 0);
    }
    assert!(shm::measure(p, p.cores(), Protocol::Shm, 1, 10).is_err());
    assert!(shm::measure(p, 1, Protocol::Shm, 9, 10).is_err());
    let lines = shm::run(p, 20).unwrap();
    assert_eq!(lines.len(), 8 * (p.cores() - 1));
}

fn the_benchmark_comes_from_the_kernel_command_line() {
    let words = linux::bench_from_cmdline("console=ttyS0 quiet bench=urpc,2000 panic=-1");
    assert_eq!(words.unwrap(), ["urpc", "2000"]);
    assert_eq!(linux::bench_from_cmdline("bench=nullsys").unwrap(), ["nullsys"]);
    assert_eq!(linux::bench_from_cmdline("console=ttyS0"), None);
}

/// How many of the pages of `region` are present (`mincore`).
fn resident_pages(region: &workloads::Region) -> usize {
    let pages = region.len() / 4096;
    let mut present = vec![0u8; pages];
    // SAFETY: the region is one live mapping; `present` has a byte per page.
    let status = unsafe {
        libc::mincore(region.addr() as *mut libc::c_void, region.len(), present.as_mut_ptr())
    };
    assert_eq!(status, 0, "mincore failed");
    present.iter().filter(|&&b| b & 1 != 0).count()
}

fn reserved_memory_is_demand_zero_and_present_memory_is_not() {
    let p = Linux::new();
    for placement in [Placement::Local(0), Placement::Shared] {
        let reserved = p.reserve(8 * 4096, placement).unwrap();
        assert_eq!(resident_pages(&reserved), 0, "{placement:?}");
        let words = reserved.typed::<AtomicU64>(8 * 512).unwrap();
        assert!(words.iter().all(|w| w.load(Ordering::Relaxed) == 0));
        words[3 * 512].store(1, Ordering::Relaxed);
        let present = p.alloc(8 * 4096, placement).unwrap();
        assert_eq!(resident_pages(&present), 8, "{placement:?}");
    }
}

fn separate_cores_run_in_their_own_processes_on_their_own_cpus() {
    let p = Linux::new();
    let cores: Vec<usize> = (0..p.cores()).collect();
    // Per core: its process id and CPU, in memory shared across fork.
    let seen = alloc_slice::<CacheLine, Linux>(&p, 2 * cores.len(), Placement::Shared).unwrap();
    let private = alloc_slice::<AtomicU64, Linux>(&p, 1, Placement::Local(0)).unwrap();
    let _guard = SPINNING.lock().unwrap();
    p.run_separate(&cores, &|core| {
        // SAFETY: getpid has no arguments.
        seen[2 * core].0.store(unsafe { libc::getpid() } as u64, Ordering::SeqCst);
        seen[2 * core + 1].0.store(linux::current_cpu().unwrap() as u64, Ordering::SeqCst);
        private[0].store(1, Ordering::SeqCst);
    })
    .unwrap();
    // SAFETY: getpid has no arguments.
    let me = unsafe { libc::getpid() } as u64;
    let mut pids: Vec<u64> = cores.iter().map(|&c| seen[2 * c].0.load(Ordering::SeqCst)).collect();
    for &core in &cores {
        assert_eq!(seen[2 * core + 1].0.load(Ordering::SeqCst), p.cpu(core).unwrap() as u64);
    }
    assert!(pids.iter().all(|&pid| pid != me && pid != 0));
    pids.dedup();
    assert_eq!(pids.len(), cores.len());
    assert_eq!(private[0].load(Ordering::SeqCst), 0, "a child wrote the parent's private memory");
}

fn separate_work_that_fails_or_a_missing_core_is_an_error() {
    let p = Linux::new();
    let ran = alloc_slice::<AtomicU64, Linux>(&p, 1, Placement::Shared).unwrap();
    let count = |_| {
        ran[0].fetch_add(1, Ordering::SeqCst);
    };
    assert!(p.run_separate(&[0, p.cores()], &count).is_err());
    assert!(p.run_separate(&[0, 0], &count).is_err());
    assert_eq!(ran[0].load(Ordering::SeqCst), 0);
    // (No panic here: the child of a multi-threaded test process would print it under
    // locks another test thread may hold at the fork.)
    // SAFETY: ends the child at once, with a failure status.
    let outcome = p.run_separate(&[0], &|_| unsafe { libc::_exit(7) });
    assert!(outcome.unwrap_err().contains("core 0"));
    assert!(p.run_separate(&[0], &count).is_ok());
    assert_eq!(ran[0].load(Ordering::SeqCst), 1);
}

fn spaces_have_the_config_names_atoll_prints() {
    assert_eq!(Spaces::ALL.map(Spaces::name), ["shared-as", "separate-as"]);
    assert_eq!(Table::ALL.map(Table::name), ["shared", "private"]);
}

fn memclone_faults_every_page_in_both_configurations() {
    let p = Linux::new();
    let _guard = SPINNING.lock().unwrap();
    for spaces in Spaces::ALL {
        // 1024 pages, so that a few faults of another cause (a forked child's copy-on-write
        // stack page, a NUMA-balancing hint on a busy host) stay inside the margin.
        let touches = memclone::measure(&p, spaces, p.cores(), 1024 * 4096).unwrap();
        assert!(touches.cycles_per_page > 0, "{spaces:?}");
        // Each first touch of a 4 KiB page is one soft fault, counted per thread (a forked
        // child takes a couple more, copy-on-write pages of its own, hence the margin).
        let faults = touches.faults_per_page.unwrap();
        assert!((1.0..1.1).contains(&faults), "{spaces:?}: {faults}");
    }
    let lines = memclone::run(&p, 1).unwrap();
    assert_eq!(lines.len(), 4);
    assert!(lines[0].contains("\"config\":\"shared-as\"") && lines[0].contains("cycles_per_page"));
    assert!(lines[1].contains("faults_per_page") && lines[1].contains("\"value\":1.0"));
    assert!(lines[2].contains("\"config\":\"separate-as\""));
}

fn mempass_passes_the_buffer_through_every_core() {
    let p = Linux::new();
    let _guard = SPINNING.lock().unwrap();
    for spaces in Spaces::ALL {
        // 1024 pages: see memclone's test for the margin.
        let pass = mempass::measure(&p, spaces, p.cores(), 1024 * 4096).unwrap();
        assert!(pass.total_cycles >= pass.cycles_per_page * 1024 * p.cores() as u64, "{spaces:?}");
        assert!(pass.cycles_per_page > 0, "{spaces:?}");
        // One address space: only the first core faults; one each: every core faults.
        let faulting = if spaces == Spaces::Shared { 1 } else { p.cores() } as f64;
        let faults = pass.faults_per_page.unwrap();
        assert!((faulting..faulting + 0.1).contains(&faults), "{spaces:?}: {faults}");
    }
    let lines = mempass::run(&p, 1).unwrap();
    assert_eq!(lines.len(), 6);
    assert!(lines[0].contains("total_cycles") && lines[1].contains("cycles_per_page"));
    assert!(lines[2].contains("faults_per_page"));
    assert!(lines[5].contains("\"config\":\"separate-as\""));
}

fn fd_dup_and_close_are_counted_on_both_tables() {
    let p = Linux::new();
    let _guard = SPINNING.lock().unwrap();
    for table in Table::ALL {
        assert!(fd::measure(&p, table, p.cores(), 200).unwrap() > 0.0, "{table:?}");
    }
    let lines = fd::run(&p, 100).unwrap();
    assert_eq!(lines.len(), 2);
    assert!(lines[0].contains("\"config\":\"shared\"") && lines[0].contains("ops/kcycle"));
    assert!(lines[1].contains("\"config\":\"private\""));
}

/// The rights `/proc/self/maps` gives the mapping that starts at `addr` (`rw-s`, `r--p`).
fn rights_of(addr: usize) -> String {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let line = maps
        .lines()
        .find(|l| l.split('-').next().and_then(|a| usize::from_str_radix(a, 16).ok()) == Some(addr))
        .unwrap_or_else(|| panic!("no mapping at {addr:#x}"));
    line.split_whitespace().nth(1).unwrap().to_string()
}

fn set_writable_changes_the_rights_of_the_whole_mapping() {
    let p = Linux::new();
    for (placement, sharing) in [(Placement::Shared, 's'), (Placement::Local(0), 'p')] {
        let words = p.alloc(2 * 4096, placement).unwrap().typed::<AtomicU64>(1024).unwrap();
        let addr = words.region().addr();
        words[1023].store(7, Ordering::Relaxed);
        p.set_writable(words.region(), false).unwrap();
        assert_eq!(rights_of(addr), format!("r--{sharing}"), "{placement:?}");
        // Still readable, with what was written before.
        assert_eq!(words[1023].load(Ordering::Relaxed), 7);
        p.set_writable(words.region(), true).unwrap();
        assert_eq!(rights_of(addr), format!("rw-{sharing}"), "{placement:?}");
        words[0].store(1, Ordering::Relaxed);
    }
}

fn unmap_reports_reduce_and_restore_for_every_core_count() {
    let p = Linux::new();
    let _guard = SPINNING.lock().unwrap();
    let latency = unmap::measure(&p, 1, 5).unwrap();
    assert!(latency.reduce > 0 && latency.restore > 0, "{latency:?}");
    assert!(unmap::measure(&p, 0, 5).is_err());
    assert!(unmap::measure(&p, p.cores() + 1, 5).is_err());
    let lines = unmap::run(&p, 3).unwrap();
    assert_eq!(lines.len(), 2 * p.cores());
    for (i, line) in lines.iter().enumerate() {
        let (n, config) = (i / 2 + 1, ["reduce", "restore"][i % 2]);
        assert!(line.contains("\"experiment\":\"unmap\""), "{line}");
        assert!(line.contains(&format!("\"cores\":{n},")), "{line}");
        assert!(line.contains(&format!("\"config\":\"{config}\"")), "{line}");
        assert!(line.contains("\"metric\":\"latency_cycles\""), "{line}");
    }
}
