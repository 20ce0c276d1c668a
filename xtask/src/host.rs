//! The host half of `cargo xtask test`: every crate's unit tests with `cargo test`, and
//! the loom model checks, counted from cargo's `test result:` lines.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use crate::build;
use crate::test::Tally;

/// Loom model checks: (package, test target). Each builds with `--cfg loom` in
/// `target/loom`, so it does not invalidate the ordinary build.
const LOOM_TESTS: &[(&str, &str)] =
    &[("return-stack", "loom"), ("urpc", "loom"), ("locks", "loom")];

/// Runs all host tests, printing cargo's output and adding the results to `tally`.
pub fn run_all(tally: &mut Tally) {
    println!("== host: cargo test");
    let mut command = build::cargo();
    command.args(["test", "--workspace", "--no-fail-fast"]);
    command.args(["--exclude", "atoll-kernel"]);
    run_cargo_test("host", command, tally);

    for (package, test) in LOOM_TESTS {
        println!("== host: loom model check {package}/{test}");
        let loom_dir = build::target_dir().join("loom");
        let mut command = build::cargo();
        command.env("RUSTFLAGS", "--cfg loom");
        command.args(["test", "--release", "-p", package, "--test", test]);
        command.arg("--target-dir").arg(loom_dir);
        run_cargo_test(&format!("loom {package}/{test}"), command, tally);
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
    let (mut passed, mut failed) = (0, 0);
    let stdout = child.stdout.take().expect("stdout is piped");
    for line in BufReader::new(stdout).lines().map_while(|l| l.ok()) {
        println!("{line}");
        if let Some((p, f)) = parse_result_line(&line) {
            passed += p;
            failed += f;
        }
    }
    let status = child.wait();
    println!("{label}: {passed} passed, {failed} failed");
    tally.passed += passed;
    tally.failed += failed;
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

/// Reads `test result: ok. 12 passed; 0 failed; 1 ignored; ...` into (passed, failed).
fn parse_result_line(line: &str) -> Option<(u32, u32)> {
    let rest = line.trim().strip_prefix("test result: ")?;
    let (mut passed, mut failed) = (None, None);
    for part in rest.split(';') {
        // "ok. 12 passed" / "FAILED. 3 passed" / " 0 failed" / " 1 ignored"
        let words: Vec<&str> = part.split_whitespace().collect();
        if let [.., count, what] = words[..] {
            match what {
                "passed" => passed = count.parse().ok(),
                "failed" => failed = count.parse().ok(),
                _ => {}
            }
        }
    }
    Some((passed?, failed?))
}

#[cfg(test)]
mod tests {
    use super::parse_result_line;

    #[test]
    fn result_lines_are_counted() {
        let ok = "test result: ok. 12 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; \
                  finished in 0.01s";
        assert_eq!(parse_result_line(ok), Some((12, 0)));
        let bad = "test result: FAILED. 3 passed; 2 failed; 0 ignored; 0 measured";
        assert_eq!(parse_result_line(bad), Some((3, 2)));
    }

    #[test]
    fn other_lines_are_ignored() {
        assert_eq!(parse_result_line("test foo ... ok"), None);
        assert_eq!(parse_result_line("running 3 tests"), None);
        assert_eq!(parse_result_line("test result: garbled"), None);
    }
}
