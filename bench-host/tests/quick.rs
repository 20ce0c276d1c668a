//! `bench-host --quick` with every McRT experiment, as the binary (built with
//! `panic = "abort"`, unlike the unit tests): runs to the end and prints only records. A
//! peer that aborts the process (a suspended coroutine dropped, a `generator::done!`, a
//! panic in a processor thread) fails it.

use std::process::Command;

#[test]
fn quick_mcrt_experiments_run_to_the_end() {
    let out = Command::new(env!("CARGO_BIN_EXE_bench-host"))
        .args(["--quick", "mcrt_micro", "mcrt_create", "mcrt_futures", "mcrt_policies"])
        .args(["mcrt_larson", "mcrt_stm"])
        .output()
        .expect("bench-host runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{:?}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    for name in
        ["mcrt_micro", "mcrt_create", "mcrt_futures", "mcrt_policies", "mcrt_larson", "mcrt_stm"]
    {
        assert!(stdout.contains(&format!("\"experiment\":\"{name}\"")), "no {name} records");
    }
    assert!(stdout.lines().all(|l| l.starts_with("RESULT {")), "{stdout}");
}
