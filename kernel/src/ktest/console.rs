//! Layer 8 tests: the console (DESIGN principle 5, issue 9). Every line gets an answer:
//! a line the console refuses is an `Err`, never a panic or a hang, and the console goes
//! on answering.

use crate::percpu::{self, CoreState};
use crate::{console, kernel_test, smp, throttle};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

kernel_test!(HOSTILE_ARGUMENTS, "console.hostile_arguments", 1, false, hostile_arguments);
kernel_test!(
    ASYM_ONLINE,
    "console.asym_changes_nothing_unless_every_core_is_online",
    1,
    false,
    asym_needs_every_core_online
);

/// Words that are no command's argument: huge numbers (`u64::MAX` and one past it),
/// negative, zero, not numbers, a hex and a float spelling, and a non-ASCII word.
const HOSTILE_WORDS: &[&str] = &[
    "99999999999999",
    "18446744073709551615",
    "18446744073709551616",
    "-1",
    "0",
    "garbage",
    "1e9",
    "0x10",
    "3.5",
    "--help",
    "\u{e9}t\u{e9}",
];

/// The benchmark experiments, whose iteration counts are checked one by one.
const EXPERIMENTS: &[&str] = &["urpc", "multicast", "shootdown", "twophase", "polling", "shm"];

/// Feeds every command hostile arguments and checks each line is refused (an accepted one
/// is a failure; a panic or a hang ends the run without a verdict); then checks that
/// ordinary lines are still accepted and the console still answers.
fn hostile_arguments() -> Result<(), String> {
    let mut accepted: Vec<String> = Vec::new();
    let mut refuse = |line: &str| {
        if console::execute(line).is_ok() {
            accepted.push(line.chars().take(60).collect());
        }
    };
    let many_words = "x ".repeat(100);
    for experiment in EXPERIMENTS {
        for word in HOSTILE_WORDS {
            refuse(&format!("bench {experiment} {word}"));
        }
        refuse(&format!("bench {experiment} 1 1"));
        refuse(&format!("bench {experiment} 1 {many_words}"));
    }
    for name in console::command_names() {
        for word in HOSTILE_WORDS {
            refuse(&format!("{name} {word}"));
        }
        refuse(&format!("{name} {many_words}"));
    }
    // (Core 0 is a good core list.)
    for word in HOSTILE_WORDS.iter().filter(|&&w| w != "0") {
        refuse(&format!("run -c {word} hello"));
    }
    for line in [
        "bench",
        "run",
        "run -c",
        "run -c 0",
        "run -c 0-1-2 hello",
        "run -c 0-99999999999999 hello",
        "run no-such-program",
        "frobnicate",
        "mem\u{1b}[2J",
        "tlb protocol",
        "tlb protocol Unicast",
        "tlb protocol unicast unicast",
        "tlb set unicast",
        "retype 0 1",
        "retype 65 1",
        "retype 1 0",
        "retype 1 64",
        "retype 1 99999999999999",
        "retype -1 1",
        "retype 1 1 1",
    ] {
        refuse(line);
    }
    refuse(&"x".repeat(256));
    refuse(&format!("mem {}", "9".repeat(252)));
    refuse(&format!("bench urpc {}", "9".repeat(245)));
    refuse(&"mem ".repeat(1024));
    if !accepted.is_empty() {
        return Err(format!(
            "{} hostile lines accepted, first {:?}",
            accepted.len(),
            &accepted[..accepted.len().min(3)]
        ));
    }

    // The console still answers, and accepts what it should.
    let online = smp::online_cores().len();
    let mut ordinary = alloc::vec![
        "",
        "help",
        "cores",
        "mem",
        "skb",
        "monitor",
        "ls",
        "tests",
        "uptime",
        "run hello",
        "tlb",
        "tlb protocol broadcast",
        "tlb protocol auto",
    ];
    // One iteration of each experiment: each sweeps every pair of cores or core count,
    // which takes seconds under TCG at 16 cores, so only up to 8.
    let benches: Vec<String> = EXPERIMENTS.iter().map(|e| format!("bench {e} 1")).collect();
    if (2..=8).contains(&online) {
        ordinary.extend(benches.iter().map(String::as_str));
    }
    for line in ordinary {
        console::execute(line).map_err(|e| format!("`{line}` refused: {e}"))?;
    }
    if online == 1 && console::execute("bench urpc 1").is_ok() {
        return Err("`bench urpc 1` accepted on one core".into());
    }
    console::execute("mem").map_err(|e| format!("`mem` after all that: {e}"))
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
        crate::user::sched::change_duty(&[(me, 4), (count, 4)]),
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
