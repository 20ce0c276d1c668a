//! In-kernel tests of threads and their scheduler (issues M7, M8, M14, M15): kernel threads
//! (`threadtest`), McRT on them (`mcrttest`), load reports, slow cores (AMPS placement and
//! run-time measurement) and the NUMA policies. Their names start with `user.`, the layer
//! whose programs they run.

use super::balance::balanced;
use super::user::{expect, expect_or_skip};
use super::{all_ok, skip, JOB_TIMEOUT_US};
use crate::thread::ExitStatus;
use crate::user;
use crate::{kernel_test, smp};
use alloc::format;
use alloc::string::String;
use sched::NumaPolicy;

kernel_test!(THREADS, "user.threads", 1, Shared, threads);
kernel_test!(TLS, "user.threads_keep_their_fs_base", 1, Shared, threads_keep_their_fs_base);
kernel_test!(MCRT, "user.mcrt_runtime", 1, Shared, mcrt_runtime);
kernel_test!(MCRT_LIVE, "user.mcrt_live_threads", 1, Shared, mcrt_live_threads);
kernel_test!(ASYM, "user.asym_placement", 3, Alone, asym_placement);
kernel_test!(LOADS, "user.load_reports_reach_every_core", 2, Shared, load_reports_reach_every_core);
kernel_test!(ASYM_NOW, "user.asym_at_run_time_is_measured", 2, Alone, asym_at_run_time);
kernel_test!(PEER_DEATH, "user.waits_see_a_dead_peer", 1, Shared, waits_see_a_dead_peer);
kernel_test!(DEDICATED, "user.threads_dedicated_core", 1, Shared, threads_dedicated_core);
kernel_test!(RSS_KEEPS, "user.rss_keeps_more_than_the_llc", 2, Alone, rss_keeps_more_than_the_llc);
kernel_test!(
    RSS_MOVES,
    "user.rss_moves_what_same_node_keeps",
    2,
    Alone,
    rss_moves_what_same_node_keeps
);

/// `threadtest` (issue M7): more threads than cores all finish; a spinning thread does
/// not starve another on its core; registers and FPU/SSE state survive preemption and
/// migration; `wait`/`wake` lose no wake-up and wake no wrong waiter; bad arguments are
/// refused; 200 threads are created and joined. Every core's resources balance after.
/// (`dedicated`, which needs 2 cores, is `user.threads_dedicated_core`; `tls` is
/// `user.threads_keep_their_fs_base`.)
fn threads() -> Result<(), String> {
    balanced(|| expect("threadtest", "-dedicated -tls", ExitStatus::Exited(0)))
}

/// `threadtest tls` (issue M15): `set_fs_base` refuses kernel-half and non-canonical
/// bases (`InvalidArgument`, the loaded base unchanged); four threads on core 0, then
/// (2 cores and more) four moving between cores 0 and 1, each find their own FS base
/// loaded after every switch and move and keep their own `thread_local!` values, whose
/// destructors run when they end; McRT-Malloc gives two kernel threads a heap each. Every
/// core balances.
fn threads_keep_their_fs_base() -> Result<(), String> {
    balanced(|| expect("threadtest", "tls", ExitStatus::Exited(0)))
}

/// Issue M14: `threadtest peerdeath`: one of 3 threads at a barrier (libatoll's platform
/// `wait_word`) faults, which ends that thread alone; the other two must see it and give
/// up, so the program ends well inside a 10 s limit (before, they waited until the
/// program's time limit, and the shell's `run` hung for its ten minutes). The last waiter
/// comes 200 ms late, after the main thread joined the first and the faulted one: joined
/// peers stay watched until the whole group is joined (before, they vanished on join, and
/// above 4 vCPUs a slow waiter missed the fault 2 times in 7). Every core balances.
fn waits_see_a_dead_peer() -> Result<(), String> {
    balanced(|| match user::run_with_limit("threadtest", "peerdeath", 10_000_000) {
        Ok(ExitStatus::Exited(0)) => Ok(()),
        other => Err(format!("threadtest peerdeath with a 10 s limit: {other:?}")),
    })
}

/// `threadtest dedicated` (issue M7): a `pcore_run` context has its core to itself: the
/// threads there move off, none is created or placed there, the context is never switched
/// out, and the core takes threads again once it ends. Skipped on one core (`threadtest`
/// exits `EXIT_SKIPPED`); every core balances.
fn threads_dedicated_core() -> Result<(), String> {
    balanced(|| expect_or_skip("threadtest", "dedicated"))
}

/// `mcrttest` (issue M8): the McRT runtime on Atoll, its processors kernel threads, one
/// per core: threads, yield, predicate yield, barrier, the three mutexes, futures,
/// thread-local keys, 10,000 threads, the allocator's remote frees, STM transfers, the
/// pthread and OpenMP adaptors, under every scheduler policy (work stealing alone
/// on 8 processors above 4 cores); scheduling domains at two cores and more. Every core's
/// resources balance after.
fn mcrt_runtime() -> Result<(), String> {
    // Each core's memory bounds its program's heap segments: 10,000 threads with 64 KiB
    // stacks, 100 live at a time, and a processor per core need about 16 MiB; a VM too
    // small for that (64 MiB over 16 cores) does not run the check, and says so.
    let free = crate::percpu::this_core().free_frames();
    if free < 4096 {
        return skip(format!("this core has {} KiB free; the runtime needs 16 MiB", free * 4));
    }
    // Every policy at up to 4 cores (the 1, 2 and 4); above that, where TCG runs
    // 8 or 16 vCPUs on the host's few CPUs, work stealing alone, on at most 8 processors:
    // every handoff between processors then waits for the host to run the other vCPU,
    // and 16 processors take from 20 s to 100 s on 2 host CPUs.
    let args = if crate::percpu::core_count() <= 4 { "" } else { "--processors 8 stealing" };
    balanced(|| expect("mcrttest", args, ExitStatus::Exited(0)))
}

/// `mcrttest --live 10000` (issue M15, McRT Figure 2's measure): 10,000 McRT threads live
/// at once on one processor, as hosted, then all joined; every core's resources balance
/// after. Their stacks come from segments made on whichever core has memory to spare
/// (`libatoll::mcrt_host`), one core's memory being too small for them in most runs.
fn mcrt_live_threads() -> Result<(), String> {
    // Each stack takes a page from some core, and every core keeps 2048 frames back from
    // the stack segments (a segment's 1024 pages and a margin for its heap) and more for
    // the heap and the kernel: a VM with less than 15,000 frames to spare over that cannot
    // hold them (64 MiB over 2 or 16 cores), and does not run the check, and says so.
    let spare: u64 = crate::percpu::all_cores().map(|c| c.free_frames().saturating_sub(3072)).sum();
    if spare < 15_000 {
        return skip(format!(
            "the cores have {} KiB to spare for stacks; 10,000 live threads need 60 MiB",
            spare * 4
        ));
    }
    balanced(|| expect("mcrttest", "--live 10000", ExitStatus::Exited(0)))
}

/// A load report from this core reaches every other core's replica (AMPS's load by
/// message, along the SKB's multicast tree: with packages, through each package's
/// aggregator): each core soon holds it, or a newer one. The true length (0: no thread here) is
/// reported again afterwards.
fn load_reports_reach_every_core() -> Result<(), String> {
    let cores = smp::online_cores();
    let me = crate::percpu::this_core().index;
    let seq = crate::sched::report_for_test(7);
    let heard = |core: usize| -> Result<(), String> {
        if core == me {
            return Ok(());
        }
        let start = crate::arch::cpu::rdtsc();
        loop {
            crate::monitor::poll();
            match crate::sched::replica_of(me) {
                // The report, or a newer one along the same tree (core 0's scheduler
                // reports its true length again as soon as it looks).
                Some((7, s)) if s >= seq => return Ok(()),
                Some((_, s)) if s > seq => return Ok(()),
                Some((length, s)) if crate::arch::timer::us_since(start) > 5_000_000 => {
                    return Err(format!(
                        "core {core} holds length {length} (report {s}) for core {me}, not 7 (report {seq})"
                    ))
                }
                _ => crate::arch::cpu::pause(),
            }
        }
    };
    let result = all_ok(&cores, &smp::run_on(&cores, JOB_TIMEOUT_US, &heard));
    crate::sched::report_for_test(0);
    result
}

/// Slowing core 1 to half at run time (the console's `asym 1:50`) is measured: its speed
/// drops under 0.7 of core 0's, and every core's scheduler then holds core 0 as the more
/// powerful; back at full speed the two measure within a quarter of each other. In a run
/// of its own on 2 cores (`asym2`): with more vCPUs than host CPUs the cores, measured at
/// once, share the host's CPUs and their speeds mean little.
fn asym_at_run_time() -> Result<(), String> {
    let (fast, slow) = duty_measured(4, |fast, slow| slow * 10 <= fast * 7)?;
    let cores = smp::online_cores();
    let powers = |_| -> Result<(), String> {
        let (_, _, _, loads) = crate::sched::report();
        match (loads.first(), loads.get(1)) {
            (Some(a), Some(b)) if a.1 > b.1 => Ok(()),
            _ => Err(format!("the replica's powers are {loads:?}")),
        }
    };
    let replicas = all_ok(&cores, &smp::run_on(&cores, JOB_TIMEOUT_US, &powers));
    let (a, b) = duty_measured(8, |a, b| a.max(b) * 4 <= a.min(b) * 5)?;
    if slow * 10 > fast * 7 {
        return Err(format!("core 1 at half speed measured {slow} against core 0's {fast}"));
    }
    replicas?;
    if a.max(b) * 4 > a.min(b) * 5 {
        return Err(format!("back at full speed the cores measure {a} and {b}"));
    }
    Ok(())
}

/// Sets core 1's duty to `eighths` and returns the speeds cores 0 and 1 then measure.
/// While `expected` rejects them, the duty is set and measured again, up to three times in
/// all, and each core keeps its best speed: another program on the host can take a vCPU's
/// CPU for a while, which only ever slows a core's windows, but a duty cycle the kernel got
/// wrong is measured wrong every time.
fn duty_measured(eighths: u8, expected: impl Fn(u64, u64) -> bool) -> Result<(u64, u64), String> {
    let speed = |c| crate::knowledge::compute_speed(c).unwrap_or(0);
    let (mut core0, mut core1) = (0, 0);
    for _ in 0..3 {
        crate::sched::change_duty(&[(1, eighths)])?;
        (core0, core1) = (core0.max(speed(0)), core1.max(speed(1)));
        if expected(core0, core1) {
            break;
        }
    }
    Ok((core0, core1))
}

/// `threadtest placement`, on a boot with slow cores (`asym=0-1:50`, the `asym3` run): the
/// SKB measures cores 0 and 1 slower than core 2, and AMPS starts a new thread from
/// core 0 on the fast core 2.
fn asym_placement() -> Result<(), String> {
    expect("threadtest", "placement", ExitStatus::Exited(0))
}

/// AMPS §2.4.3, Table 4 (issue M15): on a VM where core 1 is on a node of its own and
/// slower than core 0 (`rss2`: `asym=1:50`, a node per core), a running thread on core 1
/// with 1 MiB resident there (`threadtest numa-small`) stays under Same-Node, which never
/// lets a running thread change node, and moves to the idle, faster core 0 under RSS, since
/// 1 MiB is under the last-level cache the SKB holds (16 MiB under QEMU's TCG model). With
/// the cache read as 0 (CPUID leaf 4 only, which that model leaves empty) RSS kept it too.
fn rss_moves_what_same_node_keeps() -> Result<(), String> {
    numa_machine()?;
    balanced(|| {
        numa_decides(NumaPolicy::SameNode, "numa-small", Decision::Stayed)?;
        numa_decides(NumaPolicy::Rss, "numa-small", Decision::Moved)
    })
}

/// AMPS §2.4.2's prediction with a real cache size (issue M15): on the same VM, a thread
/// with twice the last-level cache resident on core 1's node (`threadtest numa-big`) moves
/// under Always but stays under RSS. Skipped where twice the cache is more than 64 MiB
/// (a host's cache passed through under KVM), too much to fault in within the time limit.
fn rss_keeps_more_than_the_llc() -> Result<(), String> {
    numa_machine()?;
    let llc = crate::sched::last_level_cache_bytes();
    if llc == 0 || 2 * llc > 64 << 20 {
        return skip(format!("a last-level cache of {} KiB: twice it is not 1..64 MiB", llc >> 10));
    }
    balanced(|| {
        numa_decides(NumaPolicy::Always, "numa-big", Decision::Moved)?;
        numa_decides(NumaPolicy::Rss, "numa-big", Decision::Stayed)
    })
}

/// What the NUMA policy did with `threadtest numa-*`'s thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Decision {
    Moved,
    Stayed,
}

/// Fails unless cores 0 and 1 are on different nodes and core 1 measures slower (the
/// machine the NUMA tests need: AMPS's faster-core-first pull is what asks to move). A
/// boot measurement a busy host spoilt (under `make test` it once found the half-speed
/// core 1 at 0.96 of core 0) is taken again, core 1 at half speed, up to three times.
fn numa_machine() -> Result<(), String> {
    let node = |c| crate::percpu::core(c).map(|c| c.node);
    if node(0) == node(1) {
        return Err(String::from("cores 0 and 1 share a node: boot with a node per core"));
    }
    let speed = |c| crate::knowledge::compute_speed(c).unwrap_or(0);
    let slower = || speed(1) * 10 <= speed(0) * 7;
    for _ in 0..3 {
        if slower() {
            return Ok(());
        }
        crate::sched::change_duty(&[(1, 4)])?;
    }
    if slower() {
        return Ok(());
    }
    Err(format!("core 1 is not slower ({} vs {}): boot with asym=1:50", speed(1), speed(0)))
}

/// Runs `threadtest <test>` under `policy` (the one in force is put back) and checks that
/// its thread did what `want` says.
fn numa_decides(policy: NumaPolicy, test: &str, want: Decision) -> Result<(), String> {
    let before = crate::sched::numa_policy();
    crate::sched::choose_numa(policy);
    let ran = user::run_capturing("threadtest", test, JOB_TIMEOUT_US);
    crate::sched::choose_numa(before);
    let (status, text) = ran.map_err(|e| format!("threadtest {test}: could not run: {e:?}"))?;
    if status != ExitStatus::Exited(0) {
        return Err(format!("threadtest {test}: ended {status:?}"));
    }
    let line = text
        .lines()
        .find(|l| l.starts_with("threadtest: numa:"))
        .ok_or_else(|| format!("threadtest {test}: no numa line"))?;
    let got = if line.contains("moved") { Decision::Moved } else { Decision::Stayed };
    if got != want {
        return Err(format!(
            "{} with the LLC at {} KiB: {line} (expected {want:?})",
            policy.name(),
            crate::sched::last_level_cache_bytes() >> 10
        ));
    }
    crate::println!("{}: {line}", policy.name());
    Ok(())
}
