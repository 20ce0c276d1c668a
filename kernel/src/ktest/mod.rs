//! In-kernel integration tests. Each test is registered by name in the `.atoll_tests`
//! link section (see [`kernel_test!`]), selected with `-append test=NAME` (or `test=all`),
//! runs on the boot core and spreads work to the cores it needs with `smp::run_on`.
//! The runner prints one line per test and a summary in the `verdict` protocol, then exits
//! QEMU through `isa-debug-exit`; the host runner judges the serial log.
//!
//! Each test's name starts with its layer, and the runner runs the layers bottom up
//! (`layers::LAYERS`), so the first failing test names the broken layer.

mod balance;
mod boot;
mod console;
mod files;
mod frames;
mod heap;
mod interrupts;
mod kcore;
mod metis;
mod monitor;
mod net;
mod npb;
mod print;
mod retype;
mod threads;
mod tlb;
mod traps;
mod twophase;
mod user;

use crate::arch::{cpu, power, timer};
use crate::{println, smp};
use alloc::format;
use alloc::string::String;
use verdict::ExitCode;

pub use crate::testing::{all, skip, Isolation, KernelTest};

/// Runs the tests `selector` names (`all`, or test names separated by commas), prints the
/// verdict lines and exits QEMU with the verdict. `list` prints the names instead.
pub fn run(selector: &str) -> ! {
    let online = smp::online_cores().len();
    if selector == "list" {
        for t in all() {
            let layer = crate::layers::LAYERS.iter().find(|l| l.tests.contains(&layer_of(t.name)));
            let layer = layer.map_or("-", |l| l.module);
            let isolated = t.isolation == Isolation::Alone;
            println!("test {} layer={layer} min_cores={} isolated={isolated}", t.name, t.min_cores);
        }
        crate::print::flush();
        power::exit_qemu(ExitCode::Success);
    }
    let mut tests: alloc::vec::Vec<&KernelTest> = all().iter().collect();
    tests.sort_by_key(|t| (layer_rank(t.name), t.name));
    let named: alloc::vec::Vec<&str> = selector.split(',').collect();
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    // A misspelt name in a list fails the run, even when the other names run.
    for name in named.iter().filter(|&&n| n != "all" && !tests.iter().any(|t| t.name == n)) {
        println!("{}{}: no such test", verdict::FAIL_MARKER, name);
        failed += 1;
    }
    for test in tests {
        let chosen = if selector == "all" {
            test.isolation == Isolation::Shared && test.min_cores <= online
        } else {
            named.contains(&test.name)
        };
        if !chosen {
            continue;
        }
        let start = cpu::rdtsc();
        crate::testing::take_skip();
        let result = if online < test.min_cores {
            Err(alloc::format!("needs {} cores, {} online", test.min_cores, online))
        } else {
            (test.run)()
        };
        match (result, crate::testing::take_skip()) {
            (Ok(()), Some(why)) => {
                skipped += 1;
                println!("{}{}: {}", verdict::SKIP_MARKER, test.name, why);
            }
            (Ok(()), None) => {
                passed += 1;
                println!(
                    "{}{} cores={} us={}",
                    verdict::PASS_MARKER,
                    test.name,
                    online,
                    timer::us_since(start)
                );
            }
            (Err(why), _) => {
                failed += 1;
                println!("{}{}: {}", verdict::FAIL_MARKER, test.name, why);
            }
        }
    }
    if passed + failed + skipped == 0 {
        println!("{}{}: no such test", verdict::FAIL_MARKER, selector);
        failed = 1;
    }
    println!("{}passed={} failed={} skipped={}", verdict::SUMMARY_MARKER, passed, failed, skipped);
    crate::print::flush();
    power::exit_qemu(if failed == 0 { ExitCode::Success } else { ExitCode::Failure })
}

/// Where a test's layer comes in `layers::LAYERS` (a test of no listed layer last).
fn layer_rank(name: &str) -> usize {
    let layers = crate::layers::LAYERS;
    layers.iter().position(|l| l.tests.contains(&layer_of(name))).unwrap_or(layers.len())
}

/// A test's layer prefix: the part of its name before the first dot.
fn layer_of(name: &str) -> &str {
    name.split('.').next().unwrap_or("")
}

pub use crate::smp::all_ok;

/// Stops the calling core with a page fault (a write to an address below the direct map,
/// mapped by nothing): how the destructive tests make a core fail in the middle of a
/// protocol. Returns only if the write did not fault, with that error.
pub fn fault_this_core() -> Result<(), alloc::string::String> {
    let wild = 0x0000_0000_dead_0000 as *mut u64;
    // SAFETY: deliberately not safe: this write must fault and stop this core.
    unsafe { wild.write_volatile(1) };
    Err("the wild write did not fault".into())
}

/// What [`with_poll_budget`] saw of this core's waits for messages.
pub struct HaltedWaits {
    /// Waits that outlasted P (each then halts unless a message is already there).
    pub past_budget: u64,
    /// Halts in those waits.
    pub halts: u64,
    /// Halts that the tick ended, not a message's IPI.
    pub ended_by_tick: u64,
}

/// Runs `f` with the poll budget P of every core in `cores` forced to `cycles` (restored
/// after), so that their waits for messages halt (M15 item 4), and reports this core's
/// halts meanwhile.
pub fn with_poll_budget<T>(
    cores: &[usize],
    cycles: u64,
    f: impl FnOnce() -> T,
) -> Result<(T, HaltedWaits), String> {
    let saved = crate::transport::poll_budget();
    let set = |p: u64| {
        let set_here = |_| -> Result<(), String> {
            crate::transport::set_poll_budget(p);
            Ok(())
        };
        all_ok(cores, &smp::run_on(cores, JOB_TIMEOUT_US, &set_here))
    };
    set(cycles)?;
    let before = crate::transport::wait_stats();
    let result = f();
    let after = crate::transport::wait_stats();
    set(saved)?;
    let ended_by_tick = after.halts_ended_by_tick - before.halts_ended_by_tick;
    let waits = HaltedWaits {
        past_budget: after.slept - before.slept,
        halts: after.halts - before.halts,
        ended_by_tick,
    };
    Ok((result, waits))
}

/// Checks what [`with_poll_budget`] saw in `what`'s waits: they outlasted P (else the
/// test tested nothing), and the tick ended few of their halts. A wait that halts with the
/// message it awaits already read sleeps to the tick every time; one that halts before its
/// message is read is woken by the message's IPI (or does not halt: the message came).
pub fn woken_by_their_messages(what: &str, waits: &HaltedWaits) -> Result<(), String> {
    if waits.past_budget == 0 {
        // Every message came within P (a busy host can deschedule the waiting vCPU until
        // its peers have answered): nothing to judge. A wait that halts with its message
        // in hand always outlasts P, so this never hides the bug.
        return skip(format!("{what}: no wait outlasted P = 1000 cycles, nothing to judge"));
    }
    // A tick that happens to come during a halt ends it too: rare, never most. One is
    // forgiven however few the waits: with 16 vCPUs on two host CPUs a run can have only
    // two waits past P, and a vCPU the host preempted mid-halt sees the tick move. (A
    // wait that halts with its message already read is ended by the tick every time.)
    if waits.ended_by_tick > 1 && waits.ended_by_tick * 4 > waits.past_budget {
        return Err(format!(
            "{what}: the tick ended {} halts in {} waits past P ({} halts)",
            waits.ended_by_tick, waits.past_budget, waits.halts
        ));
    }
    Ok(())
}

/// Time limit for one job in a test (generous: 16 vCPUs under TCG on two host cores).
pub const JOB_TIMEOUT_US: u64 = 60_000_000;
