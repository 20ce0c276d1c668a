//! Layer 8 tests: the console (DESIGN principle 5, issue 9). Every line gets an answer:
//! a line the console refuses is an `Err`, never a panic or a hang, and the console goes
//! on answering.

use crate::{console, kernel_test, smp};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

kernel_test!(HOSTILE_ARGUMENTS, "console.hostile_arguments", 1, false, hostile_arguments);

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
