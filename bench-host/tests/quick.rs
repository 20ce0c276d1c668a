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

/// `bench-host --quick metis_wri metis_wc metis_phoenix` (1 MiB): Metis and the rayon peer
/// report the same keys, words and output checksum, and the ratio line; every Phoenix
/// application reports its time.
#[test]
fn quick_metis_experiments_agree_with_the_rayon_peer() {
    let out = Command::new(env!("CARGO_BIN_EXE_bench-host"))
        .args(["--quick", "metis_wri", "metis_wc", "metis_phoenix", "--threads", "2"])
        .output()
        .expect("bench-host runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{:?}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    assert!(stdout.lines().all(|l| l.starts_with("RESULT {")), "{stdout}");
    for app in ["metis_wri", "metis_wc"] {
        let keys: Vec<(&str, &str, &str)> = stdout
            .lines()
            .filter(|l| record::field(l, "experiment") == Some(app))
            .filter(|l| record::field(l, "metric") == Some("keys"))
            .filter_map(|l| {
                Some((
                    record::field(l, "impl")?,
                    record::field(l, "value")?,
                    record::field(l, "checksum")?,
                ))
            })
            .collect();
        assert_eq!(keys.len(), 2, "{app}: {keys:?}");
        assert_eq!((keys[0].1, keys[0].2), (keys[1].1, keys[1].2), "{app}: {keys:?}");
        assert_eq!(keys[0].1, "4394.00");
        assert!(
            stdout.contains(&format!("\"experiment\":\"{app}\""))
                && stdout.contains("speed_vs_rayon")
        );
    }
    let phoenix =
        stdout.lines().filter(|l| record::field(l, "experiment") == Some("metis_phoenix"));
    assert_eq!(phoenix.count(), 5, "{stdout}");
}
