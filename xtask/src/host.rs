//! The host half of `cargo xtask test`: every crate's unit tests with `cargo test`, and
//! the loom model checks, counted from cargo's `test result:` lines. A test its harness
//! ignored (e.g. one that needs two CPUs on a one-CPU host, `workloads/tests/linux.rs`)
//! counts as skipped, never as passed.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use crate::build;
use crate::tally::Tally;

/// Loom model checks: (package, what to test: a test target, or the library's tests whose
/// names contain `loom`). Each builds with `--cfg loom` in `target/loom`, so it does not
/// invalidate the ordinary build.
const LOOM_TESTS: &[(&str, &[&str])] = &[
    ("return-stack", &["--test", "loom"]),
    ("urpc", &["--test", "loom"]),
    ("locks", &["--test", "loom"]),
    // The buffer cache's tree, copy-on-write swaps and reclamation (`crates/bcache`).
    ("bcache", &["--test", "loom"]),
    // McRT: stealing from a task queue and parking (`src/queue.rs`, `src/park.rs`), and
    // the STM's commit/validate protocol (`src/stm/protocol.rs`).
    ("mcrt", &["--lib", "loom"]),
    ("mcrt", &["--test", "loom_stm"]),
    // McRT's FPU flip under `FpuControl::Auto` (issue M15): a relaxed flag suffices.
    ("mcrt", &["--test", "loom_fpu"]),
    // Agreement: 2PC between monitors over message orders, preemption-bounded (`tests/loom.rs`).
    ("agreement", &["--test", "loom"]),
];

/// Runs all host tests, printing cargo's output and adding the results to `tally`.
pub fn run_all(tally: &mut Tally) {
    println!("== host: cargo test");
    let mut command = build::cargo();
    command.args(["test", "--workspace", "--no-fail-fast"]);
    command.args(["--exclude", "atoll-kernel"]);
    run_cargo_test("host", command, tally);

    for (package, test) in LOOM_TESTS {
        let name = test.last().copied().unwrap_or("loom");
        println!("== host: loom model check {package}/{name}");
        let loom_dir = build::target_dir().join("loom");
        let mut command = build::cargo();
        command.env("RUSTFLAGS", "--cfg loom");
        command.args(["test", "--release", "-p", package]).args(test.iter());
        command.arg("--target-dir").arg(loom_dir);
        run_cargo_test(&format!("loom {package}/{name}"), command, tally);
    }
}

/// Runs one `cargo test` command, echoing its output, and counts its results. A cargo
/// that fails without a failing test (a build error, a crashed test binary) counts as one
/// failure.
fn run_cargo_test(label: &str, mut command: Command, tally: &mut Tally) {
    let mut child = match command.stdout(Stdio::piped()).spawn() {
        Ok(child) => child,
        Err(e) => {
            println!("FAIL {label}: cannot start cargo: {e}");
            tally.failed += 1;
            return;
        }
    };
    let mut counts = Counts::default();
    let stdout = child.stdout.take().expect("stdout is piped");
    for line in BufReader::new(stdout).lines().map_while(|l| l.ok()) {
        println!("{line}");
        if let Some(c) = parse_result_line(&line) {
            counts.passed += c.passed;
            counts.failed += c.failed;
            counts.ignored += c.ignored;
        }
    }
    let status = child.wait();
    let Counts { passed, failed, ignored } = counts;
    println!("{label}: {passed} passed, {failed} failed, {ignored} skipped");
    tally.passed += passed;
    tally.failed += failed;
    tally.skipped += ignored;
    let why = match status {
        Ok(status) if status.success() => return,
        Ok(status) => status.to_string(),
        Err(e) => e.to_string(),
    };
    if failed == 0 {
        println!("FAIL {label}: cargo test failed ({why}) with no failing test reported");
        tally.failed += 1;
    }
}

/// The counts of one `test result:` line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Counts {
    passed: u32,
    failed: u32,
    ignored: u32,
}

/// Reads `test result: ok. 12 passed; 0 failed; 1 ignored; ...` into its counts (a line
/// without `passed` and `failed` is not one; `ignored` is 0 when absent).
fn parse_result_line(line: &str) -> Option<Counts> {
    let rest = line.trim().strip_prefix("test result: ")?;
    let (mut passed, mut failed, mut ignored) = (None, None, 0);
    for part in rest.split(';') {
        // "ok. 12 passed" / "FAILED. 3 passed" / " 0 failed" / " 1 ignored"
        let words: Vec<&str> = part.split_whitespace().collect();
        if let [.., count, what] = words[..] {
            match what {
                "passed" => passed = count.parse().ok(),
                "failed" => failed = count.parse().ok(),
                "ignored" => ignored = count.parse().unwrap_or(0),
                _ => {}
            }
        }
    }
    Some(Counts { passed: passed?, failed: failed?, ignored })
}

#[cfg(test)]
mod tests {
    use super::{parse_result_line, Counts};

    #[test]
    fn result_lines_are_counted() {
        let ok = "test result: ok. 12 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; \
                  finished in 0.01s";
        assert_eq!(parse_result_line(ok), Some(Counts { passed: 12, failed: 0, ignored: 1 }));
        let bad = "test result: FAILED. 3 passed; 2 failed; 0 ignored; 0 measured";
        assert_eq!(parse_result_line(bad), Some(Counts { passed: 3, failed: 2, ignored: 0 }));
    }

    #[test]
    fn ignored_tests_are_not_passed() {
        // libtest-mimic's line for workloads/tests/linux.rs on a one-CPU host.
        let one_cpu = "test result: ok. 15 passed; 0 failed; 3 ignored; 0 measured; \
                       0 filtered out; finished in 0.02s";
        assert_eq!(parse_result_line(one_cpu), Some(Counts { passed: 15, failed: 0, ignored: 3 }));
    }

    #[test]
    fn other_lines_are_ignored() {
        assert_eq!(parse_result_line("test foo ... ok"), None);
        assert_eq!(parse_result_line("running 3 tests"), None);
        assert_eq!(parse_result_line("test result: garbled"), None);
    }
}
