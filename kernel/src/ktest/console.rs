//! Layer 8 tests: the console (DESIGN principle 5, issue 9). Every line gets an answer:
//! a line the console refuses is an `Err`, never a panic or a hang, and the console goes
//! on answering.

use super::balance::balanced;
use crate::percpu::{self, CoreState};
use crate::thread::ExitStatus;
use crate::user;
use crate::{console, kernel_test, smp, throttle};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

kernel_test!(HOSTILE_ARGUMENTS, "console.hostile_arguments", 1, Shared, hostile_arguments);
kernel_test!(
    BENCH_TWOPHASE_ANY_CORE,
    "console.bench_twophase_from_any_core_grows_nothing",
    2,
    Shared,
    bench_twophase_from_any_core
);
kernel_test!(
    ASYM_ONLINE,
    "console.asym_changes_nothing_unless_every_core_is_online",
    1,
    Shared,
    asym_needs_every_core_online
);

/// The console through its real path: `consoletest`, holding the machine device, sends
/// every line as a thread's `kernel_command` call. Every command (the names passed are
/// the console's own) gets hostile arguments it must refuse; then lines it must accept
/// with hostile values, each change undone by the program: every TLB protocol forced, then
/// `auto`; every core slowed to 12.5 %, then back, and one core to half; one block and 64
/// blocks retyped to the last core and given back from there; `sched`; one iteration of
/// each `bench` experiment on 2 to 8 cores (on one, `bench urpc 1` is refused). The
/// program must exit 0; afterwards every core's throttle and the TLB protocol are as
/// before, and every core's frames, heap bytes, objects and threads balance.
fn hostile_arguments() -> Result<(), String> {
    let names: Vec<&str> = console::command_names().collect();
    let args = names.join(" ");
    let throttles_before = throttles();
    let protocol_before = crate::tlb::protocol_override();
    let result =
        balanced(|| match user::run_with_machine("consoletest", &args, super::JOB_TIMEOUT_US) {
            Ok(ExitStatus::Exited(0)) => Ok(()),
            other => Err(format!("consoletest {args}: {other:?}")),
        });
    let throttles_after = throttles();
    if throttles_after != throttles_before {
        restore_throttles(&throttles_before);
        return Err(format!(
            "throttles (asked, running) {throttles_before:?} became {throttles_after:?}"
        ));
    }
    let protocol_after = crate::tlb::protocol_override();
    if protocol_after != protocol_before {
        crate::tlb::set_protocol(protocol_before);
        return Err(format!("TLB protocol {protocol_before:?} became {protocol_after:?}"));
    }
    result
}

/// Every core's throttle, and one past the last: (duty asked, duty its timer runs).
fn throttles() -> Vec<(u8, u8)> {
    let last = percpu::core_count().min(percpu::MAX_CORES - 1);
    (0..=last).map(|c| (throttle::stats(c).0, throttle::duty_eighths(c))).collect()
}

/// Puts back the throttles `before` had where they changed (so a failure here does not
/// leave a core slowed for the tests after it).
fn restore_throttles(before: &[(u8, u8)]) {
    let now = throttles();
    let changed: Vec<usize> =
        (0..before.len()).filter(|&c| now.get(c) != Some(&before[c])).collect();
    for &c in &changed {
        throttle::configure(c, before[c].0);
    }
    let online: Vec<usize> = changed.into_iter().filter(|&c| !percpu::has_faulted(c)).collect();
    let restart = |core: usize| {
        throttle::start_tick(core);
        Ok(())
    };
    let _ = smp::run_on(&online, super::JOB_TIMEOUT_US, &restart);
}

/// `asym` (and `sched::change_duty` under it) naming a core that is not online, beside
/// one that is, is refused and changes no core's throttle, neither the duty asked nor the
/// one its timer runs: a core past the last (called directly; the console's parser refuses
/// it too), and every faulted or offline core (in `tlbfault4`, where some are). It used to
/// set every listed core's duty first and restart the online ones at it, then fail.
fn asym_needs_every_core_online() -> Result<(), String> {
    let me = percpu::this_core().index;
    let count = percpu::core_count();
    let before = throttles();
    let mut refused = 0;
    let mut check = |what: &str, result: Result<(), String>| -> Result<(), String> {
        let after = throttles();
        if after != before {
            restore_throttles(&before);
            let c = (0..before.len()).find(|&c| after[c] != before[c]).unwrap_or(0);
            return Err(format!(
                "{what} changed core {c}'s throttle (asked, running) from {:?} to {:?} \
                 (and returned {result:?})",
                before[c], after[c]
            ));
        }
        if result.is_ok() {
            return Err(format!("{what} was accepted"));
        }
        refused += 1;
        Ok(())
    };
    check(
        "change_duty naming a core past the last",
        crate::sched::change_duty(&[(me, 4), (count, 4)]),
    )?;
    check("`asym` naming a core past the last", console::execute(&format!("asym {count}:50")))?;
    let down = percpu::all_cores().filter(|c| c.state() != CoreState::Online).map(|c| c.index);
    for core in down.collect::<Vec<usize>>() {
        let line = format!("asym {me}:50/{core}:50");
        check(&format!("`{line}` (core {core} not online)"), console::execute(&line))?;
    }
    crate::println!("console: {refused} asym requests naming a core not online changed nothing");
    Ok(())
}

/// `bench twophase 1` from every core in turn leaves every core's frames and heap as they
/// were, on the first run: every core's replica keeps each two-phase register it ever saw,
/// so every core's experiment registers are made in every replica at boot
/// (`twophase::bench_register`). With registers made at a run, every core's heap grew by a
/// node the first time a core ran it (272 bytes a core, found by `fuzz4`, whose fuzzers
/// run it from two cores).
fn bench_twophase_from_any_core() -> Result<(), String> {
    let cores = smp::online_cores();
    crate::mem::heap::give_back_this_core(super::JOB_TIMEOUT_US);
    let before = super::balance::steady_snapshot(&cores)?;
    for &core in &cores {
        let run = |_| console::execute("bench twophase 1");
        smp::all_ok(&[core], &smp::run_on(&[core], super::JOB_TIMEOUT_US, &run))
            .map_err(|e| format!("bench twophase 1 on core {core}: {e}"))?;
    }
    super::balance::check(&cores, &before)
}
