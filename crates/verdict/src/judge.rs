//! Judging a recorded test run (host side).
//!
//! [`judge`] is a pure function of what a run left behind: the serial log, QEMU's exit
//! status and whether the runner had to kill it. It never looks at the clock or the
//! file system, so a saved log can be judged again later and every rule has a unit test.
//!
//! A run passes only when all of these hold:
//! 1. the runner did not time out;
//! 2. QEMU exited with [`ExitCode::Success`] (a triple fault under `-no-reboot` exits 0);
//! 3. the summary line [`SUMMARY_MARKER`] was seen;
//! 4. its counts equal the number of PASS, FAIL and SKIP lines;
//! 5. no FAIL line;
//! 6. at least one test reported (a run whose every test was skipped passes, but counts
//!    no test as passed);
//! 7. no PANIC line;
//! 8. if a core count is expected, [`ONLINE_MARKER`] reported exactly that number.
//!
//! Markers count only at the start of a line (after leading blanks and before a trailing
//! `\r`), so a marker quoted inside another message is not mistaken for one.

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;

use crate::{
    ExitCode, FAIL_MARKER, ONLINE_MARKER, PANIC_MARKER, PASS_MARKER, SKIP_MARKER, SUMMARY_MARKER,
};

/// How one test ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A `TEST PASS` line: it checked what it claims, and that held.
    Passed,
    /// A `TEST FAIL` line.
    Failed,
    /// A `TEST SKIP` line: it could check nothing in this machine; never a pass.
    Skipped,
}

/// One test as the serial log reported it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestResult {
    /// The test's registered name, e.g. `frames.concurrent`.
    pub name: String,
    /// Which marker line reported it.
    pub outcome: Outcome,
    /// The rest of the line: `cores=4 us=1234` for a pass, the reason for a failure or
    /// a skip.
    pub detail: String,
}

/// The number of tests of each outcome, as the summary line states them or as the test
/// lines show them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// `TEST PASS` lines.
    pub passed: u32,
    /// `TEST FAIL` lines.
    pub failed: u32,
    /// `TEST SKIP` lines.
    pub skipped: u32,
}

/// Why a run did not pass. A run can fail for several reasons at once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The runner killed QEMU because the run took too long.
    TimedOut,
    /// QEMU's exit status was not the success code (`None`: killed by a signal).
    BadExit(Option<i32>),
    /// The `TESTS DONE` line never appeared.
    NoSummary,
    /// The `TESTS DONE` line is there but its counts cannot be read.
    BadSummary(String),
    /// The summary counts disagree with the PASS/FAIL/SKIP lines actually printed.
    SummaryMismatch {
        /// The counts as the summary line states them.
        claimed: Counts,
        /// The counts of the PASS, FAIL and SKIP lines.
        seen: Counts,
    },
    /// This many `TEST FAIL` lines were printed.
    TestsFailed(u32),
    /// Not a single PASS, FAIL or SKIP line: nothing was tested.
    NoTests,
    /// The kernel panicked; the first `PANIC` line.
    Panic(String),
    /// `CORES ONLINE` did not report the expected number (`seen: None`: no such line).
    WrongOnline {
        /// The number of cores the run was started with.
        expected: u32,
        /// The number the kernel reported, if it reported one.
        seen: Option<u32>,
    },
}

impl Failure {
    /// True when the failure is about the run as a whole rather than a test that ran and
    /// failed (the runner counts such a run as one more failure).
    pub fn is_run_level(&self) -> bool {
        !matches!(self, Failure::TestsFailed(_))
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::TimedOut => write!(f, "timed out"),
            Failure::BadExit(None) => write!(f, "QEMU was killed by a signal"),
            Failure::BadExit(Some(0)) => {
                write!(f, "QEMU exited 0 without isa-debug-exit (triple fault or reset?)")
            }
            Failure::BadExit(Some(s)) if *s == ExitCode::Failure.qemu_status() => {
                write!(f, "kernel exited with the failure code but no test failed")
            }
            Failure::BadExit(Some(s)) => write!(f, "QEMU exit status {s}"),
            Failure::NoSummary => write!(f, "no `{}` summary line", SUMMARY_MARKER.trim_end()),
            Failure::BadSummary(line) => write!(f, "unreadable summary line `{line}`"),
            Failure::SummaryMismatch { claimed, seen } => write!(
                f,
                "summary says passed={} failed={} skipped={} but the log shows passed={} \
                 failed={} skipped={}",
                claimed.passed,
                claimed.failed,
                claimed.skipped,
                seen.passed,
                seen.failed,
                seen.skipped
            ),
            Failure::TestsFailed(n) => write!(f, "{n} test(s) failed"),
            Failure::NoTests => write!(f, "no test ran"),
            Failure::Panic(line) => write!(f, "kernel panic: {line}"),
            Failure::WrongOnline { expected, seen: None } => {
                write!(f, "expected `CORES ONLINE {expected}`, saw no such line")
            }
            Failure::WrongOnline { expected, seen: Some(n) } => {
                write!(f, "expected `CORES ONLINE {expected}`, kernel reported {n}")
            }
        }
    }
}

/// The judgement of one run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// Every PASS, FAIL and SKIP line, in log order.
    pub tests: Vec<TestResult>,
    /// The number from the `CORES ONLINE` line, if there was one.
    pub online: Option<u32>,
    /// Everything wrong with the run; empty means it passed.
    pub failures: Vec<Failure>,
}

impl Verdict {
    /// How many tests the log reported with each outcome.
    pub fn counts(&self) -> Counts {
        count(&self.tests)
    }

    /// True when the run passed every rule.
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }

    /// True when something beyond failing tests went wrong (timeout, bad exit, ...).
    pub fn run_failed(&self) -> bool {
        self.failures.iter().any(Failure::is_run_level)
    }

    /// Why the run failed, on one line (empty when it passed).
    pub fn why(&self) -> String {
        let reasons: Vec<String> = self.failures.iter().map(|f| f.to_string()).collect();
        reasons.join("; ")
    }

    /// Like [`Verdict::why`] but only the run-level reasons.
    pub fn why_run(&self) -> String {
        let reasons: Vec<String> =
            self.failures.iter().filter(|f| f.is_run_level()).map(|f| f.to_string()).collect();
        reasons.join("; ")
    }
}

/// What the log says, before the rules are applied.
struct Log {
    tests: Vec<TestResult>,
    summary_line: Option<String>,
    online: Option<u32>,
    panic: Option<String>,
}

/// Judges one run from its serial log, QEMU's exit status (`None` if it was killed by a
/// signal or never exited), whether the runner timed out, and the number of cores the
/// kernel must report online (`None`: don't check).
pub fn judge(
    serial_log: &str,
    qemu_status: Option<i32>,
    timed_out: bool,
    expect_online: Option<u32>,
) -> Verdict {
    let log = scan(serial_log);
    let seen = count(&log.tests);
    let failed = seen.failed;
    let mut failures = Vec::new();

    // The most telling reasons first: they lead the one-line explanation.
    if let Some(line) = log.panic {
        failures.push(Failure::Panic(line));
    }
    if timed_out {
        failures.push(Failure::TimedOut);
    } else if qemu_status != Some(ExitCode::Success.qemu_status()) {
        // The failure code is the expected exit when tests failed; that is reported below.
        let failure_exit = qemu_status == Some(ExitCode::Failure.qemu_status());
        if !(failure_exit && failed > 0) {
            failures.push(Failure::BadExit(qemu_status));
        }
    }

    match &log.summary_line {
        None => failures.push(Failure::NoSummary),
        Some(line) => match parse_summary(line) {
            None => failures.push(Failure::BadSummary(line.clone())),
            Some(claimed) if claimed != seen => {
                failures.push(Failure::SummaryMismatch { claimed, seen })
            }
            Some(_) => {}
        },
    }

    if failed > 0 {
        failures.push(Failure::TestsFailed(failed));
    }
    if log.tests.is_empty() {
        failures.push(Failure::NoTests);
    }
    if let Some(expected) = expect_online {
        if log.online != Some(expected) {
            failures.push(Failure::WrongOnline { expected, seen: log.online });
        }
    }

    Verdict { tests: log.tests, online: log.online, failures }
}

/// Counts the tests of each outcome.
fn count(tests: &[TestResult]) -> Counts {
    let mut counts = Counts::default();
    for test in tests {
        match test.outcome {
            Outcome::Passed => counts.passed += 1,
            Outcome::Failed => counts.failed += 1,
            Outcome::Skipped => counts.skipped += 1,
        }
    }
    counts
}

/// Collects the marker lines of a serial log.
fn scan(serial_log: &str) -> Log {
    let mut log = Log { tests: Vec::new(), summary_line: None, online: None, panic: None };
    for raw in serial_log.lines() {
        let line = raw.trim_start().trim_end_matches('\r');
        if let Some(rest) = line.strip_prefix(PASS_MARKER) {
            let (name, detail) = split_word(rest);
            let outcome = Outcome::Passed;
            log.tests.push(TestResult { name: name.to_string(), outcome, detail });
        } else if let Some((rest, outcome)) = line
            .strip_prefix(FAIL_MARKER)
            .map(|rest| (rest, Outcome::Failed))
            .or_else(|| line.strip_prefix(SKIP_MARKER).map(|rest| (rest, Outcome::Skipped)))
        {
            let (name, detail) = name_and_reason(rest);
            log.tests.push(TestResult { name: name.to_string(), outcome, detail });
        } else if let Some(rest) = line.strip_prefix(SUMMARY_MARKER) {
            // Printed once; if a confused kernel prints it again, the last one counts.
            log.summary_line = Some(rest.trim().to_string());
        } else if let Some(rest) = line.strip_prefix(ONLINE_MARKER) {
            log.online = rest.split_whitespace().next().and_then(|n| n.parse().ok());
        } else if line.starts_with(PANIC_MARKER) && log.panic.is_none() {
            log.panic = Some(line.trim_end().to_string());
        }
    }
    log
}

/// Splits `name: reason` (or, without a colon, `name reason`).
fn name_and_reason(text: &str) -> (&str, String) {
    match text.split_once(':') {
        Some((name, reason)) => (name.trim(), reason.trim().to_string()),
        None => split_word(text),
    }
}

/// Splits `name rest of line` at the first blank.
fn split_word(text: &str) -> (&str, String) {
    let text = text.trim();
    match text.split_once(char::is_whitespace) {
        Some((word, rest)) => (word, rest.trim().to_string()),
        None => (text, String::new()),
    }
}

/// Reads `passed=<p> failed=<f> skipped=<s>` (in any order; other `key=value` words are
/// ignored; `skipped=` may be missing, as in logs from before skips, and then is 0).
fn parse_summary(text: &str) -> Option<Counts> {
    let mut passed = None;
    let mut failed = None;
    let mut skipped = 0;
    for word in text.split_whitespace() {
        match word.split_once('=') {
            Some(("passed", n)) => passed = Some(n.parse().ok()?),
            Some(("failed", n)) => failed = Some(n.parse().ok()?),
            Some(("skipped", n)) => skipped = n.parse().ok()?,
            _ => {}
        }
    }
    Some(Counts { passed: passed?, failed: failed?, skipped })
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    const OK: Option<i32> = Some(ExitCode::Success.qemu_status());
    const BAD: Option<i32> = Some(ExitCode::Failure.qemu_status());

    /// A log that passes every rule with 4 cores online.
    const GOOD: &str = "\
atoll: booting
CORES ONLINE 4
ATOLL READY
TEST PASS frames.concurrent cores=4 us=1234
TEST PASS timer.ticks cores=4 us=99
TESTS DONE passed=2 failed=0
";

    /// Judges `log` and returns only the failures.
    fn failures(log: &str, status: Option<i32>, timed_out: bool, online: u32) -> Vec<Failure> {
        judge(log, status, timed_out, Some(online)).failures
    }

    #[test]
    fn good_run_passes() {
        let v = judge(GOOD, OK, false, Some(4));
        assert!(v.passed(), "{}", v.why());
        assert!(!v.run_failed());
        assert_eq!(v.online, Some(4));
        assert_eq!(v.tests.len(), 2);
        assert_eq!(v.tests[0].name, "frames.concurrent");
        assert_eq!(v.tests[0].outcome, Outcome::Passed);
        assert_eq!(v.tests[0].detail, "cores=4 us=1234");
        assert_eq!(v.why(), "");
    }

    #[test]
    fn carriage_returns_and_indentation_are_tolerated() {
        let log = GOOD.replace('\n', "\r\n").replace("TEST PASS timer", "  TEST PASS timer");
        let v = judge(&log, OK, false, Some(4));
        assert!(v.passed(), "{}", v.why());
        assert_eq!(v.tests[1].detail, "cores=4 us=99");
    }

    #[test]
    fn timeout_fails() {
        assert_eq!(failures(GOOD, OK, true, 4), vec![Failure::TimedOut]);
    }

    #[test]
    fn exit_status_must_be_success() {
        // A triple fault under -no-reboot: QEMU exits 0.
        assert_eq!(failures(GOOD, Some(0), false, 4), vec![Failure::BadExit(Some(0))]);
        assert_eq!(failures(GOOD, None, false, 4), vec![Failure::BadExit(None)]);
        assert_eq!(failures(GOOD, Some(1), false, 4), vec![Failure::BadExit(Some(1))]);
        // The failure code with no failed test is a lie too.
        assert_eq!(failures(GOOD, BAD, false, 4), vec![Failure::BadExit(BAD)]);
    }

    #[test]
    fn summary_must_be_seen() {
        let log = GOOD.replace("TESTS DONE passed=2 failed=0\n", "");
        assert_eq!(failures(&log, OK, false, 4), vec![Failure::NoSummary]);
    }

    #[test]
    fn summary_must_be_readable() {
        let log = GOOD.replace("passed=2 failed=0", "passed=two failed=0");
        let expected = Failure::BadSummary("passed=two failed=0".into());
        assert_eq!(failures(&log, OK, false, 4), vec![expected]);
    }

    #[test]
    fn summary_must_match_the_test_lines() {
        let counts = |passed, failed, skipped| Counts { passed, failed, skipped };
        let log = GOOD.replace("passed=2", "passed=3");
        let expected = Failure::SummaryMismatch { claimed: counts(3, 0, 0), seen: counts(2, 0, 0) };
        assert_eq!(failures(&log, OK, false, 4), vec![expected]);
        let log = GOOD.replace("failed=0", "failed=1");
        let expected = Failure::SummaryMismatch { claimed: counts(2, 1, 0), seen: counts(2, 0, 0) };
        assert_eq!(failures(&log, OK, false, 4), vec![expected]);
        let log = GOOD.replace("failed=0", "failed=0 skipped=1");
        let expected = Failure::SummaryMismatch { claimed: counts(2, 0, 1), seen: counts(2, 0, 0) };
        assert_eq!(failures(&log, OK, false, 4), vec![expected]);
    }

    #[test]
    fn a_failed_test_fails_the_run_but_is_not_a_run_failure() {
        let log = GOOD
            .replace("TEST PASS timer.ticks cores=4 us=99", "TEST FAIL timer.ticks: core 3 stuck")
            .replace("passed=2 failed=0", "passed=1 failed=1");
        let v = judge(&log, BAD, false, Some(4));
        assert_eq!(v.failures, vec![Failure::TestsFailed(1)]);
        assert!(!v.run_failed());
        assert_eq!(v.tests[1].name, "timer.ticks");
        assert_eq!(v.tests[1].outcome, Outcome::Failed);
        assert_eq!(v.tests[1].detail, "core 3 stuck");
        // Even if the kernel wrongly claims success at exit.
        assert_eq!(failures(&log, OK, false, 4), vec![Failure::TestsFailed(1)]);
    }

    #[test]
    fn at_least_one_test_must_run() {
        let log = "CORES ONLINE 4\nTESTS DONE passed=0 failed=0\n";
        assert_eq!(failures(log, OK, false, 4), vec![Failure::NoTests]);
    }

    #[test]
    fn a_panic_fails_the_run() {
        let log = GOOD.replace("ATOLL READY\n", "ATOLL READY\nPANIC core=2: oops\n");
        let expected = Failure::Panic("PANIC core=2: oops".into());
        assert_eq!(failures(&log, OK, false, 4), vec![expected]);
    }

    #[test]
    fn cores_online_must_match_when_expected() {
        let expected = Failure::WrongOnline { expected: 8, seen: Some(4) };
        assert_eq!(failures(GOOD, OK, false, 8), vec![expected]);
        let log = GOOD.replace("CORES ONLINE 4\n", "");
        let expected = Failure::WrongOnline { expected: 4, seen: None };
        assert_eq!(failures(&log, OK, false, 4), vec![expected]);
        assert!(judge(&log, OK, false, None).passed());
    }

    #[test]
    fn markers_count_only_at_the_start_of_a_line() {
        let log = GOOD.replace("ATOLL READY\n", "ATOLL READY\nlog: TEST FAIL x: y PANIC z\n");
        assert!(judge(&log, OK, false, Some(4)).passed());
    }

    #[test]
    fn several_reasons_are_reported_on_one_line() {
        let v = judge("CORES ONLINE 2\n", Some(0), false, Some(4));
        assert!(v.run_failed());
        let why = v.why();
        assert!(!why.contains('\n'));
        assert!(why.contains("triple fault"), "{why}");
        assert!(why.contains("summary"), "{why}");
        assert!(why.contains("no test ran"), "{why}");
        assert!(why.contains("CORES ONLINE 4"), "{why}");
    }

    /// [`GOOD`] with its second test skipped.
    fn with_a_skip() -> String {
        GOOD.replace(
            "TEST PASS timer.ticks cores=4 us=99",
            "TEST SKIP timer.ticks: one core, nothing to compare",
        )
        .replace("passed=2 failed=0", "passed=1 failed=0 skipped=1")
    }

    #[test]
    fn a_skipped_test_is_neither_passed_nor_failed() {
        let v = judge(&with_a_skip(), OK, false, Some(4));
        assert!(v.passed(), "{}", v.why());
        assert_eq!(v.tests[1].name, "timer.ticks");
        assert_eq!(v.tests[1].outcome, Outcome::Skipped);
        assert_eq!(v.tests[1].detail, "one core, nothing to compare");
        assert_eq!(v.counts(), Counts { passed: 1, failed: 0, skipped: 1 });
    }

    #[test]
    fn a_skip_must_be_in_the_summary() {
        // The old summary, without `skipped=`, reads as 0 skipped: one line too many.
        let log = with_a_skip().replace(" skipped=1", "");
        let expected = Failure::SummaryMismatch {
            claimed: Counts { passed: 1, failed: 0, skipped: 0 },
            seen: Counts { passed: 1, failed: 0, skipped: 1 },
        };
        assert_eq!(failures(&log, OK, false, 4), vec![expected]);
        let log = with_a_skip().replace("skipped=1", "skipped=x");
        assert!(matches!(failures(&log, OK, false, 4)[..], [Failure::BadSummary(_)]));
    }

    #[test]
    fn a_run_of_skips_alone_passes_but_a_run_of_nothing_does_not() {
        let log =
            "CORES ONLINE 1\nTEST SKIP a.b: too small\nTESTS DONE passed=0 failed=0 skipped=1\n";
        let v = judge(log, OK, false, Some(1));
        assert!(v.passed(), "{}", v.why());
        assert_eq!(v.counts(), Counts { passed: 0, failed: 0, skipped: 1 });
        let log = "CORES ONLINE 1\nTESTS DONE passed=0 failed=0 skipped=0\n";
        assert_eq!(failures(log, OK, false, 1), vec![Failure::NoTests]);
    }

    #[test]
    fn a_skip_marker_counts_only_at_the_start_of_a_line() {
        let log = GOOD.replace("ATOLL READY\n", "ATOLL READY\nsaid: TEST SKIP x: y\n");
        let v = judge(&log, OK, false, Some(4));
        assert!(v.passed(), "{}", v.why());
        assert_eq!(v.counts(), Counts { passed: 2, failed: 0, skipped: 0 });
    }
}
