//! `bench-smoke`: the harness end to end on one tiny experiment (`nullsys`), on Atoll and
//! on the Linux guest, at 1 core, once, into `target/bench-smoke/`; then checks that
//! `results.json` and `report.md` were written and have both systems.

use std::path::Path;

use super::records::{self, text};
use super::Settings;
use crate::test::Tally;
use crate::{build, Options, Result};

/// The experiment it runs.
const EXPERIMENT: &str = "nullsys";

/// The smoke run's settings: `base`'s machine, but 1 core, 1 repetition, one experiment.
pub fn settings(base: &Settings) -> Settings {
    Settings {
        cores: vec![1],
        sockets: None,
        repeat: 1,
        only: Some(vec![EXPERIMENT.into()]),
        out: build::target_dir().join("bench-smoke"),
        ..base.clone()
    }
}

/// Runs the smoke test and prints `PASS bench-smoke` or `FAIL bench-smoke: why`.
pub fn run(base: &Settings) -> Result<bool> {
    let settings = settings(base);
    let outcome = super::run(&settings).and_then(|summary| {
        if let Some(first) = summary.failed.first() {
            return Err(format!("a run failed: {first}"));
        }
        check(&settings.out)
    });
    match outcome {
        Ok(()) => {
            println!("PASS bench-smoke");
            Ok(true)
        }
        Err(why) => {
            println!("FAIL bench-smoke: {why}");
            Ok(false)
        }
    }
}

/// Checks the outputs in `dir`: records of both systems for the experiment, and a report
/// whose row has a number for each.
pub fn check(dir: &Path) -> Result {
    let all = records::read_json(&dir.join("results.json"))?;
    for system in ["atoll", "linux"] {
        let found = all.iter().any(|r| {
            text(r, "experiment") == EXPERIMENT
                && text(r, "system") == system
                && records::number(r, "value").is_some_and(|v| v > 0.0)
        });
        if !found {
            return Err(format!("results.json has no {EXPERIMENT} value from {system}"));
        }
    }
    let path = dir.join("report.md");
    let report = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    // The row: | cycles_per_call (cycles) | — | 1 | <atoll> | <linux> | <ratio> | ...
    let row = report
        .lines()
        .find(|l| l.starts_with("| cycles_per_call"))
        .ok_or("report.md has no cycles_per_call row")?;
    let cells: Vec<&str> = row.split('|').map(str::trim).collect();
    match cells.get(4..7) {
        Some([atoll, linux, ratio]) if ![atoll, linux, ratio].contains(&&"—") => Ok(()),
        _ => Err(format!("report.md lacks a system in `{row}`")),
    }
}

/// The smoke test as one test of `make test` (with its accelerator and QEMU arguments),
/// counted in `tally`.
pub fn smoke_test(opts: &Options, tally: &mut Tally) {
    println!("== bench-smoke: nullsys on Atoll and on the Linux guest, 1 core");
    let base = Settings::parse(&[]).map(|s| Settings {
        accel: opts.accel.clone().or(s.accel.clone()),
        qemu_args: opts.qemu_args.clone(),
        ..s
    });
    let passed = base.and_then(|s| run(&s)).unwrap_or_else(|e| {
        println!("FAIL bench-smoke: {e}");
        false
    });
    if passed {
        tally.passed += 1;
    } else {
        tally.failed += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn the_check_wants_both_systems_in_both_files() {
        let dir = std::env::temp_dir().join(format!("atoll-smoke-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let record = |system: &str| {
            format!(
                r#"{{"experiment":"nullsys","system":"{system}","cores":1,"metric":"cycles_per_call","value":200,"unit":"cycles","repeat":1}}"#
            )
        };
        fs::write(dir.join("results.json"), format!("[{}]", record("atoll"))).unwrap();
        fs::write(
            dir.join("report.md"),
            "| cycles_per_call (cycles) | — | 1 | 200 | 300 | 0.67 |\n",
        )
        .unwrap();
        assert!(check(&dir).unwrap_err().contains("linux"));
        fs::write(dir.join("results.json"), format!("[{},{}]", record("atoll"), record("linux")))
            .unwrap();
        assert!(check(&dir).is_ok());
        fs::write(dir.join("report.md"), "| cycles_per_call (cycles) | — | 1 | 200 | — | — |\n")
            .unwrap();
        assert!(check(&dir).is_err());
        fs::remove_dir_all(&dir).unwrap();
    }
}
