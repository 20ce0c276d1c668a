//! Layer 7 tests: user programs from the initrd in ring 3, their system calls, and faults
//! that stop only the program.

use super::balance::balanced;
use super::{all_ok, skip, JOB_TIMEOUT_US};
use crate::thread::ExitStatus;
use crate::user;
use crate::{kernel_test, smp};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

kernel_test!(ON_EVERY_CORE, "user.program_on_every_core", 1, Shared, program_on_every_core);
kernel_test!(LONG_ARGS, "user.overlong_arguments_are_refused", 1, Shared, overlong_arguments);
kernel_test!(BAD_POINTERS, "user.bad_pointers_are_errors", 1, Shared, bad_pointers_are_errors);
kernel_test!(FAULT, "user.fault_stops_only_the_program", 1, Shared, fault_stops_only_the_program);
kernel_test!(SYSFUZZ, "user.sysfuzz_every_core", 1, Shared, sysfuzz_every_core);
kernel_test!(SYSFUZZ_MILLION, "user.sysfuzz_million", 4, Alone, sysfuzz_million);
kernel_test!(OBJECTS, "user.corey_objects", 1, Shared, corey_objects);
kernel_test!(SPIN, "user.time_limit_stops_a_spinning_program", 1, Shared, time_limit);
kernel_test!(EXHAUST, "user.exhausting_objects_is_an_error", 1, Shared, exhausting_objects);
kernel_test!(OOM, "user.out_of_memory_stops_the_program", 1, Shared, out_of_memory);
kernel_test!(LONG_CALL, "user.long_call_answers_shootdowns", 2, Shared, long_call_answers);
kernel_test!(MEMCLONE, "user.corey_memclone_every_page", 1, Shared, memclone);
kernel_test!(COW, "user.corey_cfork_copy_on_write", 2, Shared, cfork_copy_on_write);
kernel_test!(COW_SHARED, "user.corey_copy_never_changes", 2, Shared, copy_never_changes);
kernel_test!(SHARED_RANGE, "user.corey_shared_range_no_fault", 2, Shared, shared_range);
kernel_test!(REMAP, "user.remap_reaches_other_cores", 2, Shared, remap_reaches_other_cores);
kernel_test!(REVOKE, "user.revoke_reaches_other_cores", 2, Shared, revoke_reaches_other_cores);
kernel_test!(PCORES, "user.corey_pcores_run_and_halt", 2, Shared, pcores_run_and_halt);
kernel_test!(IPC_BENCH, "user.ipc_benchmarks_report", 2, Shared, ipc_benchmarks_report);
kernel_test!(LOCK_BENCH, "user.lock_benchmark_reports", 2, Shared, lock_benchmark_reports);
kernel_test!(MULTICAST, "user.multicast_program", 2, Alone, multicast_program);
kernel_test!(UNMAP_BENCH, "user.unmap_benchmark_reports", 2, Shared, unmap_benchmark_reports);
kernel_test!(LRPC_BENCH, "user.lrpc_benchmark_reports", 1, Shared, lrpc_benchmark_reports);

/// `ampsbench lrpc 50` (Multikernel Table 1's LRPC, the `workloads::amps::lrpc` code the
/// Linux guest runs over futexes): 50 calls between two threads on core 0 through `wait`
/// and `wake`; it exits 0 and prints one `one_way_cycles` line with a positive value, and
/// every core's frames, heap bytes and objects balance (a lost wake-up would hang it until
/// the job's time limit).
fn lrpc_benchmark_reports() -> Result<(), String> {
    balanced(|| {
        let lines = results("ampsbench", "lrpc 50", 1)?;
        let want = [("experiment", "lrpc"), ("metric", "one_way_cycles"), ("unit", "cycles")];
        check_fields(&lines[0], &want)
    })
}
kernel_test!(FDS, "user.corey_descriptors", 1, Shared, descriptors);
kernel_test!(KERNEL_MEMORY, "user.kernel_memory_is_refused", 1, Alone, kernel_memory_is_refused);

/// Issue M14: calls that grow the kernel's own memory (here `ar_set_seg`'s mappings, in
/// fresh slot ranges) are refused with `NoResources` at the program's quota or the core's
/// reserve, on every core
/// at once: `exhaust kernel` exits 0 (it once drained the heap, and the next allocation
/// stopped the core). Each core then still runs a program, and every core's resources
/// balance. In a run of its own on a small VM (`kmem2`), where running dry takes seconds.
fn kernel_memory_is_refused() -> Result<(), String> {
    let cores = smp::online_cores();
    let work = |_| -> Result<(), String> {
        expect("exhaust", "kernel", ExitStatus::Exited(0))?;
        expect("hello", "after exhaust kernel", ExitStatus::Exited(0))
    };
    balanced(|| all_ok(&cores, &smp::run_on(&cores, JOB_TIMEOUT_US, &work)))
}

kernel_test!(KERNEL_QUOTA, "user.a_program_at_its_quota_leaves_room", 1, Alone, program_quota);

/// Issue M14: each program's kernel memory has a quota (a quarter of its core's memory).
/// `exhaust quota` fills its own on every core at once, and while it holds it all runs a
/// second program on its core, which must be granted a share, a segment, a range and
/// 2,000 mappings (before the quotas the first drained its core to the reserve and the
/// second was refused). Everything balances, every program's quota included.
fn program_quota() -> Result<(), String> {
    let cores = smp::online_cores();
    let work = |_| expect("exhaust", "quota", ExitStatus::Exited(0));
    balanced(|| all_ok(&cores, &smp::run_on(&cores, JOB_TIMEOUT_US, &work)))
}

kernel_test!(SECOND_SHELL, "user.second_shell_leaves_the_keyboard", 1, Shared, second_shell);

/// Issue M14: a second `init` (the shell's `run -c 1 init`) holds no keyboard, so it says
/// so and exits 1 at once, instead of taking every later keystroke from the first shell.
fn second_shell() -> Result<(), String> {
    balanced(|| expect("init", "", ExitStatus::Exited(1)))
}

kernel_test!(LIFETIMES, "user.program_end_reaches_every_thread", 1, Shared, program_end_reaches);

/// Issue M14: a program's end reaches every thread of it, wherever it is. `lifetest
/// orphans` leaves threads parked in `wait`, `join` and `sleep` (no time limit of their
/// own) on every core and exits: they end with it. `lifetest successors`, a chain of
/// threads each starting the next while the main thread waits with no timeout, ends at
/// the program's time limit, which every thread inherits. Every core's threads, parked
/// threads, objects and frames come back.
fn program_end_reaches() -> Result<(), String> {
    balanced(|| {
        expect("lifetest", "orphans", ExitStatus::Exited(0))?;
        match user::run_with_limit("lifetest", "successors", 500_000) {
            Ok(ExitStatus::TimedOut) => Ok(()),
            other => Err(format!("lifetest successors with a 0.5 s limit: {other:?}")),
        }
    })
}

kernel_test!(HALT_PARKED, "user.pcore_halt_reaches_a_parked_program", 1, Shared, halt_parked);

/// Issue M14: `lifetest halt` halts the pcore of a program parked (with no timeout) on
/// another core: it ends `Halted` within 2 s. Skipped on one core, where there is no other
/// core to park it on (`lifetest` exits `EXIT_SKIPPED`).
fn halt_parked() -> Result<(), String> {
    balanced(|| expect_or_skip("lifetest", "halt"))
}

/// Runs `name args` here: it must exit 0, or `abi::EXIT_SKIPPED` when it could check
/// nothing on this machine; the test is then reported skipped, with the line the program
/// printed about it.
pub(super) fn expect_or_skip(name: &str, args: &str) -> Result<(), String> {
    let (status, text) = user::run_capturing(name, args, JOB_TIMEOUT_US)
        .map_err(|e| format!("{name}: could not run: {e:?}"))?;
    match status {
        ExitStatus::Exited(0) => Ok(()),
        ExitStatus::Exited(abi::EXIT_SKIPPED) => {
            let line = text.lines().find(|l| l.contains("skipped")).unwrap_or("no reason given");
            let why = line.strip_prefix(name).and_then(|l| l.strip_prefix(": ")).unwrap_or(line);
            skip(format!("{name} {args}: {why}"))
        }
        other => Err(format!("{name} {args}: ended {other:?}, expected Exited(0)")),
    }
}

pub(super) fn expect(name: &str, args: &str, want: ExitStatus) -> Result<(), String> {
    match user::run(name, args) {
        Ok(got) if got == want => Ok(()),
        Ok(got) => Err(format!("{name}: ended {got:?}, expected {want:?}")),
        Err(e) => Err(format!("{name}: could not run: {e:?}")),
    }
}

/// A program started with more than `abi::ARGS_MAX` bytes of arguments is refused with
/// `InvalidArgument` (it was once started with them cut, running a different command);
/// exactly `ARGS_MAX` bytes still run.
fn overlong_arguments() -> Result<(), String> {
    let long = "x".repeat(abi::ARGS_MAX + 1);
    match user::run("hello", &long) {
        Err(abi::Error::InvalidArgument) => {}
        other => return Err(format!("{} bytes of arguments: {other:?}", long.len())),
    }
    balanced(|| expect("hello", &long[1..], ExitStatus::Exited(0)))
}

/// `hello` runs on every core at once and exits 0 everywhere; every core is back to its
/// frames, heap bytes and objects afterwards.
fn program_on_every_core() -> Result<(), String> {
    let cores = smp::online_cores();
    let work = |_| expect("hello", "from the test", ExitStatus::Exited(0));
    balanced(|| all_ok(&cores, &smp::run_on(&cores, JOB_TIMEOUT_US, &work)))
}

/// `badptr` passes wild pointers and lengths: each is an error code; it exits 0. It runs
/// twice: without the machine device (the machine calls are `NotPermitted`), and given it
/// (a wild line pointer is then `BadAddress`).
fn bad_pointers_are_errors() -> Result<(), String> {
    balanced(|| {
        expect("badptr", "", ExitStatus::Exited(0))?;
        match user::run_with_machine("badptr", "", JOB_TIMEOUT_US) {
            Ok(ExitStatus::Exited(0)) => Ok(()),
            other => Err(format!("badptr with the machine device: {other:?}")),
        }
    })
}

/// `fault` writes to an unmapped page: the program is stopped with a page fault, and the
/// same core then runs another program normally.
fn fault_stops_only_the_program() -> Result<(), String> {
    let cores = smp::online_cores();
    let work = |_| -> Result<(), String> {
        expect("fault", "", ExitStatus::Faulted(crate::arch::trap::VECTOR_PAGE_FAULT))?;
        expect("hello", "after a fault", ExitStatus::Exited(0))
    };
    balanced(|| all_ok(&cores, &smp::run_on(&cores, JOB_TIMEOUT_US, &work)))
}

/// Random system calls on every core at once (20,000 each up to 4 cores, fewer past that
/// so the run stays bounded: on even cores one thread, holding the machine device; on odd
/// cores two threads of half as many, the second starting on the next core); the kernel
/// answers them all, every core is back to its resources, and afterwards every core still
/// runs a program normally.
fn sysfuzz_every_core() -> Result<(), String> {
    let cores = smp::online_cores();
    let calls = FUZZ_CALLS_PER_CORE * 4 / cores.len().max(4) as u64;
    let work = |core: usize| -> Result<(), String> {
        let args = if core.is_multiple_of(2) {
            format!("--seed {} --calls {calls}", 1000 + core)
        } else {
            format!("--seed {} --calls {} --threads 2", 1000 + core, calls / 2)
        };
        fuzz(core, &args, core.is_multiple_of(2), FUZZ_LIMIT_US)?;
        expect("hello", "after the fuzzer", ExitStatus::Exited(0))
    };
    balanced(|| all_ok(&cores, &smp::run_on(&cores, JOB_TIMEOUT_US, &work)))
}

/// Calls each core's fuzzer makes in `user.sysfuzz_every_core` on up to 4 cores. Past 4
/// the count shrinks with the cores: every core fuzzes at once, and a revocation or a
/// console line waits for all of them, so the work grows as the square of the cores; at
/// 16 vCPUs on a 2-CPU host a revocation took up to 30 s, and 20,000 calls a core passed
/// the time limit.
const FUZZ_CALLS_PER_CORE: u64 = 20_000;
/// A fuzzer's time limit in `user.sysfuzz_every_core`: within the job's, so a fuzzer that
/// runs away is stopped and reported with its seed.
const FUZZ_LIMIT_US: u64 = JOB_TIMEOUT_US * 3 / 4;
/// Calls each of the four fuzzing threads of `user.sysfuzz_million` makes.
const MILLION_CALLS_PER_THREAD: u64 = 250_000;
/// Fuzzing threads of each of its two fuzzers.
const MILLION_THREADS: u64 = 2;
/// Their time limit (the million calls take about 20 s under TCG on a 2-CPU host), and the
/// job's, within the QEMU run's 600 s.
const MILLION_LIMIT_US: u64 = 300_000_000;
const MILLION_JOB_US: u64 = 400_000_000;

/// CI's long fuzzing run (its own QEMU run, `fuzz4`): 1,000,000 random system calls, two
/// fuzzers at once on cores 0 and 1, each with two threads (the second starting on the
/// other core), the one on core 0 holding the machine device; cores 2 and 3 stay free for
/// the programs, contexts and `cfork` children they start (on a core running a fuzzer
/// those would wait until it ends). Then every core is back to its resources. A short run
/// first settles what grows once (see `balanced`), so the long one balances on its first
/// try. A failure names the seed: `sysfuzz --seed S --calls N`
/// repeats the run (`make run CMD=...`).
fn sysfuzz_million() -> Result<(), String> {
    let cores = [0, 1];
    let run = |calls: u64| {
        move |core: usize| {
            let args = format!(
                "--seed {} --calls {calls} --threads {MILLION_THREADS} --others 2-3",
                7000 + core
            );
            fuzz(core, &args, core == 0, MILLION_LIMIT_US)
        }
    };
    all_ok(&cores, &smp::run_on(&cores, JOB_TIMEOUT_US, &run(20_000)))?;
    let long = run(MILLION_CALLS_PER_THREAD);
    balanced(|| all_ok(&cores, &smp::run_on(&cores, MILLION_JOB_US, &long)))
}

/// Runs `sysfuzz ARGS` here (holding the machine device if `machine`); it must exit 0.
fn fuzz(core: usize, args: &str, machine: bool, limit_us: u64) -> Result<(), String> {
    let status = if machine {
        user::run_with_machine("sysfuzz", args, limit_us)
    } else {
        user::run_with_limit("sysfuzz", args, limit_us)
    };
    match status {
        Ok(ExitStatus::Exited(0)) => Ok(()),
        other => Err(format!(
            "sysfuzz {args} on core {core} (machine device: {machine}) ended {other:?}"
        )),
    }
}

/// `objtest` uses segments, shares, address ranges and soft faults from user space on every
/// core; afterwards every core is back to its resources (segments freed with their last
/// reference, page tables with the program).
fn corey_objects() -> Result<(), String> {
    let cores = smp::online_cores();
    let work = |_| expect("objtest", "", ExitStatus::Exited(0));
    balanced(|| all_ok(&cores, &smp::run_on(&cores, JOB_TIMEOUT_US, &work)))
}

/// `spin` loops forever without a system call; its time limit stops it on every core, and
/// the cores go on to run another program.
fn time_limit() -> Result<(), String> {
    let cores = smp::online_cores();
    let work = |_| -> Result<(), String> {
        match user::run_with_limit("spin", "", 200_000) {
            Ok(ExitStatus::TimedOut) => expect("hello", "after a spinner", ExitStatus::Exited(0)),
            other => Err(format!("spin ended {other:?}, expected TimedOut")),
        }
    };
    balanced(|| all_ok(&cores, &smp::run_on(&cores, JOB_TIMEOUT_US, &work)))
}

/// `exhaust` creates shares until the kernel refuses with `NoResources` (object cap or
/// memory reserve), on every core at once; the kernel stays up, frees them all at exit,
/// and every core is back to its resources.
fn exhausting_objects() -> Result<(), String> {
    let cores = smp::online_cores();
    let work = |_| expect("exhaust", "", ExitStatus::Exited(0));
    balanced(|| all_ok(&cores, &smp::run_on(&cores, JOB_TIMEOUT_US, &work)))
}

/// A core inside one long system call still answers the rest of the machine: `longcall`
/// on core 1 copies its segment with one `segment_copy(PLAIN)`; once that call has taken a
/// step (`PerCore::stepped`, cleared when the call returns), core 0 shoots down core 1's
/// TLB, and the shootdown must complete while core 1 is still inside the call (before
/// system calls took steps, core 1 answered only after the call returned). Up to three
/// tries: with more vCPUs than host CPUs, core 0 may be descheduled long enough after
/// seeing the step for the call to end first, once; a core that answers only after its
/// calls fails every try.
fn long_call_answers() -> Result<(), String> {
    let mut last = Ok(());
    for _ in 0..3 {
        last = long_call_answers_once();
        if last.is_ok() {
            break;
        }
    }
    last
}

fn long_call_answers_once() -> Result<(), String> {
    let core1 = crate::percpu::core(1).ok_or("no core 1")?;
    // The segment and its copy, with the kernel's reserve to spare: up to 8 MiB. A call
    // shorter than 4 MiB is over too soon to be sure which came first, so a VM too small
    // for it (64 MiB over 16 cores) does not run the check, and says so.
    let mib = (core1.free_frames().saturating_sub(1024) / 2 / 256).min(8);
    if mib < 4 {
        return skip(format!("core 1 has room for a {mib} MiB copy; the check needs 4 MiB"));
    }
    balanced(|| {
        let args = format!("{mib}");
        let run = |_| expect("longcall", &args, ExitStatus::Exited(0));
        let call = crate::monitor::call_async(1, &run).map_err(|e| format!("{e:?}"))?;
        let start = crate::arch::cpu::rdtsc();
        let mut answered_inside = None;
        while crate::arch::timer::us_since(start) < 60_000_000 {
            if core1.stepped.load(core::sync::atomic::Ordering::Acquire) {
                crate::tlb::shootdown(1 << 1)
                    .map_err(|c| format!("cores {:#x} never flushed", c.0))?;
                answered_inside = Some(core1.stepped.load(core::sync::atomic::Ordering::Acquire));
                break;
            }
            crate::monitor::poll();
            crate::arch::cpu::pause();
        }
        all_ok(&[1], &[crate::monitor::wait(call, JOB_TIMEOUT_US)])?;
        match answered_inside {
            Some(true) => Ok(()),
            Some(false) => Err("the shootdown completed only after the long call".into()),
            None => Err("the long call never took a step".into()),
        }
    })
}

/// Free frames left to the core while `exhaust memory` runs (16 MiB): the rest is
/// borrowed by the test, so running out takes the same short time on any VM.
const OOM_FREE_FRAMES: u64 = 4096;

/// `exhaust memory` writes pages until none is left: the kernel stops it with a page
/// fault (never a kernel panic on a failed heap allocation), the core then runs another
/// program, and every frame, heap byte and object comes back.
fn out_of_memory() -> Result<(), String> {
    balanced(|| {
        let borrowed = BorrowedFrames::leaving(OOM_FREE_FRAMES);
        let status = user::run("exhaust", "memory");
        drop(borrowed);
        match status {
            Ok(ExitStatus::Faulted(crate::arch::trap::VECTOR_PAGE_FAULT)) => {
                expect("hello", "after running out of memory", ExitStatus::Exited(0))
            }
            other => Err(format!("exhaust memory ended {other:?}, expected a page fault")),
        }
    })
}

/// Frames taken from this core's list (no heap: a frame chain), given back when dropped.
pub(super) struct BorrowedFrames(crate::mem::frames::FrameChain);

impl BorrowedFrames {
    /// Takes frames until only `left` are free.
    pub(super) fn leaving(left: u64) -> BorrowedFrames {
        let mut chain = crate::mem::frames::FrameChain::new();
        while crate::percpu::this_core().free_frames() > left {
            let Some(pa) = crate::mem::frames::alloc() else { break };
            chain.push(pa);
        }
        BorrowedFrames(chain)
    }
}

impl Drop for BorrowedFrames {
    fn drop(&mut self) {
        self.0.free_all();
    }
}

/// (Named to run before `user.exhausting_objects_is_an_error`: on a 64 MiB VM with 16
/// cores that test leaves each core little more than its reserve.)
/// `memclone --mb 1` started once and spread over up to four cores in each of Figure 7's
/// configurations: contexts on one root range (`shared-as`), `cfork`ed address spaces
/// (`separate-as`), and each core's array in a slot range of its own (`shared-ranges`,
/// where the program checks one soft fault per page). (More cores add nothing to the
/// check and, under TCG on a small host, a lot of time.)
fn memclone() -> Result<(), String> {
    let last = smp::online_cores().len().min(4) - 1;
    let args = format!("--mb 1 --config all --cores 0-{last}");
    balanced(|| expect("memclone", &args, ExitStatus::Exited(0)))
}

/// `cowtest`: a child made with `cfork` on another core writes a global and a heap buffer;
/// neither side sees the other's writes (copy-on-write), and every frame comes back.
fn cfork_copy_on_write() -> Result<(), String> {
    balanced(|| expect("cowtest", "", ExitStatus::Exited(0)))
}

/// `fdtest` on every core at once: a `dup`ped descriptor names the same open file and
/// shares its offset, closing the original keeps the `dup` readable, descriptors in a
/// shared table, refusals, `dup` until `NoResources`; every core balances after.
fn descriptors() -> Result<(), String> {
    let cores = smp::online_cores();
    let work = |_| expect("fdtest", "", ExitStatus::Exited(0));
    balanced(|| all_ok(&cores, &smp::run_on(&cores, JOB_TIMEOUT_US, &work)))
}

/// `cowshared`: a child on another core keeps writing a segment it maps in its own root
/// range; a copy-on-write copy the parent makes of it never changes afterwards.
fn copy_never_changes() -> Result<(), String> {
    balanced(|| expect("cowshared", "", ExitStatus::Exited(0)))
}

/// `sharedrange`: pages one core faults in through a slot range are mapped on another core
/// sharing the range with no fault there; a privately mapped segment faults on each.
fn shared_range() -> Result<(), String> {
    balanced(|| expect("sharedrange", "", ExitStatus::Exited(0)))
}

/// `remaptest` (issue M9): a page core 1 keeps reading is remapped to another segment's
/// page by `ar_set_seg` on core 0, in a slot range spliced into the root and in the root
/// range; every read core 1 starts after the call returned sees the new page (the
/// shootdown named the right address in core 1's address space). An argument gets the
/// usage (exit 2; `--help` exit 0).
fn remap_reaches_other_cores() -> Result<(), String> {
    balanced(|| {
        expect("remaptest", "junk", ExitStatus::Exited(2))?;
        expect("remaptest", "--help", ExitStatus::Exited(0))?;
        expect("remaptest", "", ExitStatus::Exited(0))
    })
}

/// `revoketest` (issue M9): a segment core 1 names through the threads' common share is
/// revoked on core 0 keeping its root entry; core 1 can no longer name it, core 0's
/// descriptor of it is gone, the kept entry works, and an entry made afterwards survives.
/// Bad arguments are refused; an argument gets the usage (exit 2; `--help` exit 0).
fn revoke_reaches_other_cores() -> Result<(), String> {
    balanced(|| {
        expect("revoketest", "junk", ExitStatus::Exited(2))?;
        expect("revoketest", "--help", ExitStatus::Exited(0))?;
        expect("revoketest", "", ExitStatus::Exited(0))
    })
}

/// `pcoretest`: pcore objects are one per core, `program_run` starts a program on another
/// core and reports its exit status, `pcore_halt` stops a spinning one, `pcore_run` on the
/// caller's own core is refused.
fn pcores_run_and_halt() -> Result<(), String> {
    balanced(|| expect("pcoretest", "", ExitStatus::Exited(0)))
}

/// The URPC and SHM-vs-MSG benchmarks written once (`urpcbench`, `shmbench`: the
/// `workloads` code the Linux guest runs) on cores 0 and 1 with small counts: each exits 0
/// and prints the lines the Linux guest prints, with a positive value each (a ratio may
/// round to 0): the five URPC metrics of pair [0,1]; SHMn and MSGn of one client for 1, 2,
/// 4 and 8 lines. Every core's frames, heap bytes and objects balance afterwards (threads
/// on core 1, `Shared` memory).
/// Bad arguments get the usage (exit 2), one core is refused (exit 1).
fn ipc_benchmarks_report() -> Result<(), String> {
    balanced(|| {
        for name in ["urpcbench", "shmbench"] {
            for bad in ["0", "100001", "x", "--cores", "--cores 0-99", "5 --nope", "5 5"] {
                expect(name, bad, ExitStatus::Exited(2))?;
            }
            expect(name, "--help", ExitStatus::Exited(0))?;
            expect(name, "1 --cores 1", ExitStatus::Exited(1))?;
        }
        let urpc = results("urpcbench", "50 --cores 0-1", 5)?;
        let metrics = [
            "latency_cycles",
            "floor_latency_cycles",
            "latency_vs_floor",
            "throughput_msgs_per_kcycle",
            "throughput_vs_bound",
        ];
        for (line, metric) in urpc.iter().zip(metrics) {
            let want =
                [("experiment", "urpc"), ("cores", "2"), ("pair", "[0,1]"), ("metric", metric)];
            check_fields(line, &want)?;
        }
        let shm = results("shmbench", "20 --cores 0-1", 8)?;
        let protocols = ["shm1", "msg1", "shm2", "msg2", "shm4", "msg4", "shm8", "msg8"];
        for (line, protocol) in shm.iter().zip(protocols) {
            let want = [
                ("experiment", "shm_vs_msg"),
                ("cores", "1"),
                ("protocol", protocol),
                ("metric", "cycles_per_update"),
            ];
            check_fields(line, &want)?;
        }
        Ok(())
    })
}

/// `lockbench 50 --cores 0-1` (Corey Figure 3, the `workloads::locks` code the Linux guest
/// runs): the TTS, ticket and MCS locks contended by 1, then 2 cores; it exits 0 (the
/// workload fails if a lock let two cores in at once: its counter would come short) and
/// prints both metrics for each lock and core count, each positive; bad arguments get the
/// usage (exit 2); everything balances.
fn lock_benchmark_reports() -> Result<(), String> {
    balanced(|| {
        for bad in ["0", "100001", "x", "--cores", "--cores 0-99", "5 --nope", "5 5"] {
            expect("lockbench", bad, ExitStatus::Exited(2))?;
        }
        expect("lockbench", "--help", ExitStatus::Exited(0))?;
        let lines = results("lockbench", "50 --cores 0-1", 12)?;
        let mut want = Vec::new();
        for cores in ["1", "2"] {
            for lock in ["tts", "ticket", "mcs"] {
                for metric in ["acquisitions_per_mcycle", "cycles_per_acquisition"] {
                    want.push([
                        ("experiment", "locks_contended"),
                        ("cores", cores),
                        ("impl", lock),
                        ("metric", metric),
                    ]);
                }
            }
        }
        for (line, fields) in lines.iter().zip(&want) {
            check_fields(line, fields)?;
        }
        Ok(())
    })
}

/// `unmapbench 3 --cores 0-1` (Multikernel Figure 7, the `workloads::unmap` code the Linux
/// guest runs): the page's write access taken away and given back by `ar_set_seg` while 1,
/// then 2 cores read it, each change shot down before the call returns. It exits 0 and
/// prints `reduce` and `restore` for N = 1 and 2, each a positive number of cycles; bad
/// arguments get the usage (exit 2); every core's frames, heap bytes and objects balance
/// (the reader thread on core 1, the `Shared` page, the frames each change unmaps).
fn unmap_benchmark_reports() -> Result<(), String> {
    balanced(|| {
        for bad in ["0", "1001", "x", "--cores", "--cores 0-99", "5 --nope", "5 5"] {
            expect("unmapbench", bad, ExitStatus::Exited(2))?;
        }
        expect("unmapbench", "--help", ExitStatus::Exited(0))?;
        let lines = results("unmapbench", "3 --cores 0-1", 4)?;
        let want = [("1", "reduce"), ("1", "restore"), ("2", "reduce"), ("2", "restore")];
        for (line, (cores, config)) in lines.iter().zip(want) {
            let want = [
                ("experiment", "unmap"),
                ("cores", cores),
                ("config", config),
                ("metric", "latency_cycles"),
            ];
            check_fields(line, &want)?;
        }
        Ok(())
    })
}

/// Runs `name args` here; it must exit 0 and print exactly `count` `RESULT` lines of
/// system `atoll` with a positive number as value (a ratio may be 0), which are returned.
fn results(name: &str, args: &str, count: usize) -> Result<Vec<String>, String> {
    let (status, text) = user::run_capturing(name, args, JOB_TIMEOUT_US)
        .map_err(|e| format!("{name}: could not run: {e:?}"))?;
    if status != ExitStatus::Exited(0) {
        return Err(format!("{name} {args}: ended {status:?}"));
    }
    let lines: Vec<String> =
        text.lines().filter(|l| l.starts_with(record::MARKER)).map(String::from).collect();
    if lines.len() != count {
        return Err(format!("{name} {args}: {} result lines, expected {count}", lines.len()));
    }
    for line in &lines {
        let value = record::field(line, "value").and_then(|v| v.parse::<f64>().ok());
        // A ratio with two decimals may round to 0.00 on a slow host; nothing is negative.
        let least =
            if record::field(line, "unit") == Some("ratio") { 0.0 } else { f64::MIN_POSITIVE };
        if record::field(line, "system") != Some("atoll") || !value.is_some_and(|v| v >= least) {
            return Err(format!("{name}: bad result line `{line}`"));
        }
    }
    Ok(lines)
}

/// Checks that `line` has each (field, value) of `want`.
fn check_fields(line: &str, want: &[(&str, &str)]) -> Result<(), String> {
    match want.iter().find(|(k, v)| record::field(line, k) != Some(*v)) {
        Some((k, v)) => Err(format!("`{line}`: {k} is not {v}")),
        None => Ok(()),
    }
}

/// `mcbench 3` (isolated; run `sockets4`, 4 cores in 2 packages): Figure 6's protocols as
/// a user program over threads on every core, in few rounds. It exits 0 and everything
/// balances; the host checks its `RESULT` lines (`xtask/src/test.rs`).
fn multicast_program() -> Result<(), String> {
    balanced(|| expect("mcbench", "3", ExitStatus::Exited(0)))
}

kernel_test!(
    LATE_REVOKE,
    "user.a_late_revocation_is_reported_and_forgotten",
    2,
    Alone,
    late_revocation
);

/// How long core 1 stays deaf in [`late_revocation`]: past the coordinator's deadline for
/// acknowledgements (a timeout for the votes, then one more from there: `agreement`'s
/// `TwoPhase`).
const DEAF_US: u64 = 2 * crate::param::TWO_PHASE_TIMEOUT_US + 2_000_000;

/// Issue M14 (defect 4): core 1 votes Yes on a revocation, then is silent past the
/// coordinator's deadline for acknowledgements (a remote call that serves its channels
/// until it has prepared, then spins). `obj_revoke` commits and says core 1 was not reached; core 1
/// applies the revocation when it reads the decision, and its log entry goes with the
/// object (it was once kept for good: the coordinator had let go of the object's weak
/// pointer by then, and 1,024 such entries made a core refuse every revocation). Every
/// core's resources, revocation logs included, balance. Isolated (run `deaf2`): 22 s.
fn late_revocation() -> Result<(), String> {
    use crate::corey::{self, revocation};
    let cores = smp::online_cores();
    // One revocation first: every core's two-phase state grows once (its list of decided
    // operations), and the baseline is taken after that.
    let mut warm = corey::new_program().map_err(|e| format!("new_program: {e:?}"))?;
    let root = warm.set.root_id().0;
    let seg = corey::segment_alloc(&mut warm, root, 4096).map_err(|e| format!("{e:?}"))?;
    if revocation::obj_revoke(&mut warm, root, seg) != Ok(0) {
        return Err("a revocation with every core listening did not reach them all".into());
    }
    corey::end_context(warm);
    let before = super::balance::snapshot(&cores)?;
    let mut p = corey::new_program().map_err(|e| format!("new_program: {e:?}"))?;
    let root = p.set.root_id().0;
    let seg = corey::segment_alloc(&mut p, root, 4096).map_err(|e| format!("{e:?}"))?;
    // Core 1 serves its channels until it has prepared the revocation (voted Yes), then
    // is deaf: the decision waits in its channel.
    let deaf = |_| -> Result<(), String> {
        for _ in 0..5000 {
            crate::monitor::poll();
            if crate::twophase::revocation_prepared_here() {
                // Interrupts off too: a wake-up IPI would serve the channel.
                let were_on = crate::arch::cpu::disable_interrupts();
                crate::arch::timer::spin_us(DEAF_US);
                if were_on {
                    crate::arch::cpu::enable_interrupts();
                }
                return Ok(());
            }
            crate::arch::timer::spin_us(1000);
        }
        Err("core 1 never prepared the revocation".into())
    };
    let call = core::cell::Cell::new(None);
    let agree = |participants, operation| {
        call.set(crate::monitor::call_async(1, &deaf).ok());
        let op = crate::twophase::start(participants, operation);
        loop {
            if let Some((decision, failed)) = crate::twophase::poll_outcome(op) {
                return (decision == agreement::Decision::Commit).then_some(failed);
            }
            crate::twophase::deliver_decisions();
            crate::monitor::poll();
        }
    };
    let unreached = revocation::obj_revoke_with(&mut p, root, seg, &agree);
    let call = call.take().ok_or("the deaf call could not be sent")?;
    all_ok(&[1], &[crate::monitor::wait(call, JOB_TIMEOUT_US)])?;
    if unreached != Ok(1 << 1) {
        return Err(format!("obj_revoke with core 1 deaf: {unreached:?}, want Ok(core 1's bit)"));
    }
    // Core 1 reads the decision now and applies it, while the segment still lives.
    let committed = revocation::revocations_committed();
    let caught_up = |_| -> Result<(), String> {
        for _ in 0..2000 {
            crate::monitor::poll();
            if revocation::revocations_committed() == committed {
                return Ok(());
            }
            crate::arch::timer::spin_us(1000);
        }
        Err(format!("core 1 never applied revocation {committed}"))
    };
    all_ok(&[1], &smp::run_on(&[1], JOB_TIMEOUT_US, &caught_up))?;
    // The segment goes with the program's objects; so must every log entry of it.
    corey::end_context(p);
    super::balance::check(&cores, &before)
}
