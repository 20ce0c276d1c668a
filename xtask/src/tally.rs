//! The running count of passed, failed and skipped tests that `make test` prints last
//! (host tests, QEMU runs and the bench smoke test add to it).

/// Running count of passed and failed tests (host and QEMU alike).
#[derive(Debug, Default)]
pub struct Tally {
    /// Tests that passed.
    pub passed: u32,
    /// Tests that failed, plus runs that failed as a whole or could not run.
    pub failed: u32,
    /// Tests their harness ignored (e.g. ones that need two CPUs, on a one-CPU host), and
    /// kernel tests that could check nothing in their run (`TEST SKIP`).
    pub skipped: u32,
}

impl Tally {
    /// The closing line: `N passed, M failed`, and `, K skipped` if any were.
    pub fn summary(&self) -> String {
        let mut line = format!("{} passed, {} failed", self.passed, self.failed);
        if self.skipped > 0 {
            line += &format!(", {} skipped", self.skipped);
        }
        line
    }
}
