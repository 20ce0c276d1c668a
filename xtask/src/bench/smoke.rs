//! `bench-smoke`: the harness end to end on one tiny experiment (`nullsys`), on Atoll and
//! on the Linux guest, at 1 core, once, into `target/bench-smoke/`; then checks that
//! `results.json` and `report.md` were written and have both systems.

use std::path::Path;

use super::records::{self, text};
use super::Settings;
use crate::tally::Tally;
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

/// Checks the outputs in `dir`: records of both systems for the experiment, stating the
/// conditions each ran under (Linux with and without mitigations, its huge pages off, both
/// ticking at the same rate), and a report whose row has a number for each.
pub fn check(dir: &Path) -> Result {
    let all = records::read_json(&dir.join("results.json"))?;
    let linux = |mitigations: &str| {
        all.iter().find(|r| text(r, "system") == "linux" && text(r, "mitigations") == mitigations)
    };
    let (Some(off), Some(_)) = (linux("off"), linux("as-booted")) else {
        return Err("results.json lacks a linux record with mitigations off or as booted".into());
    };
    if text(off, "thp") != "never" {
        return Err(format!("the Linux guest's THP policy is `{}`, not never", text(off, "thp")));
    }
    let atoll = all.iter().find(|r| text(r, "system") == "atoll");
    let tick = |r: Option<&records::Record>| r.and_then(|r| records::number(r, "tick_hz"));
    if tick(atoll).is_none() || tick(atoll) != tick(Some(off)) {
        return Err(format!(
            "Atoll ticks at {:?} Hz, the Linux guest at {:?} Hz",
            tick(atoll),
            tick(Some(off))
        ));
    }
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
    // The row: | cycles_per_call (cycles) | — | 1 | <atoll> | <linux> | <ratio> | <better>
    // | <linux as booted> | <ratio> | <conditions> | ...
    let row = report
        .lines()
        .find(|l| l.starts_with("| cycles_per_call"))
        .ok_or("report.md has no cycles_per_call row")?;
    let cells: Vec<&str> = row.split('|').map(str::trim).collect();
    let wanted = [4, 5, 6, 8, 9, 10].map(|i| cells.get(i).copied().unwrap_or("—"));
    if wanted.contains(&"—") || wanted.contains(&"") {
        return Err(format!("report.md lacks a system or a condition in `{row}`"));
    }
    Ok(())
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
        let record = |system: &str, mitigations: &str, hz: u32| {
            format!(
                r#"{{"experiment":"nullsys","system":"{system}","cores":1,"metric":"cycles_per_call","value":200,"unit":"cycles","repeat":1,"mitigations":"{mitigations}","thp":"never","tick_hz":{hz}}}"#
            )
        };
        let write_records = |records: &[String]| {
            fs::write(dir.join("results.json"), format!("[{}]", records.join(","))).unwrap()
        };
        let good = "| cycles_per_call (cycles) | — | 1 | 200 | 300 | 0.67 | Atoll | 350 | 0.57 | tcg · 1 pkg · tick A 250, L 250 Hz · THP never | — |\n";
        fs::write(dir.join("report.md"), good).unwrap();
        write_records(&[record("atoll", "none", 250)]);
        assert!(check(&dir).unwrap_err().contains("linux"));
        let both = [
            record("atoll", "none", 250),
            record("linux", "off", 250),
            record("linux", "as-booted", 250),
        ];
        write_records(&both);
        assert!(check(&dir).is_ok());
        // Atoll must tick as the guest does.
        write_records(&[record("atoll", "none", 100), both[1].clone(), both[2].clone()]);
        assert!(check(&dir).unwrap_err().contains("ticks"));
        // Linux must have run as booted too.
        write_records(&both[..2]);
        assert!(check(&dir).is_err());
        write_records(&both);
        fs::write(dir.join("report.md"), "| cycles_per_call (cycles) | — | 1 | 200 | — | — |\n")
            .unwrap();
        assert!(check(&dir).is_err());
        fs::write(dir.join("report.md"), good.replace("| 350 | 0.57 |", "| — | — |")).unwrap();
        assert!(check(&dir).is_err());
        fs::remove_dir_all(&dir).unwrap();
    }
}
