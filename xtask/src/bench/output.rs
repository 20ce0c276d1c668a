//! Writing a run's outputs: `results.json`, `report.md` and the plots; and redrawing the
//! report and plots from an existing `results.json` (`cargo xtask bench --render`).

use std::fs;

use super::records::{self, Context};
use super::registry::{self, Experiment};
use super::{plot, report, Settings, Summary};
use crate::{build, Result};

/// Writes results.json, report.md and the plots.
pub fn write(
    settings: &Settings,
    experiments: &[&'static Experiment],
    summary: &Summary,
    ctx: &Context,
    guest: Option<&str>,
) -> Result {
    let json = settings.out.join("results.json");
    records::write_json(&json, &summary.records)?;
    let paper = report::Paper::load(&build::root().join("bench").join("paper.json"))?;
    let mut plots = Vec::new();
    for e in experiments {
        let path = settings.out.join(format!("{}.png", e.name));
        match plot::draw(e, &summary.records, &path) {
            Ok(true) => plots.push(e.name),
            Ok(false) => {}
            Err(why) => println!("bench: no plot for {}: {why}", e.name),
        }
    }
    let meta = report::Meta {
        settings,
        ctx,
        wall: summary.wall,
        others: summary.others,
        failed: &summary.failed,
        guest,
        plots: &plots,
    };
    let text = report::render(experiments, &summary.records, &paper, &meta);
    let path = settings.out.join("report.md");
    fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Redraws report.md and the plots from the results.json in `settings.out`.
pub fn render(settings: &Settings) -> Result {
    let records = records::read_json(&settings.out.join("results.json"))?;
    let experiments = registry::select(settings.only.as_deref())?;
    let accel = records.first().map(|r| records::text(r, "accel").to_string()).unwrap_or_default();
    let git = records.first().map(|r| records::text(r, "git").to_string()).unwrap_or_default();
    let linux_hz = records
        .iter()
        .find(|r| records::text(r, "system") == "linux")
        .and_then(|r| records::number(r, "tick_hz"))
        .map(|hz| hz as u64);
    let ctx = Context { accel, git, host_cpus: records::host_cpus(), linux_hz };
    // The head of the report shows the run's core counts and repetitions, not today's.
    let mut cores: Vec<u32> =
        records.iter().filter_map(|r| records::number(r, "cores")).map(|c| c as u32).collect();
    cores.sort_unstable();
    cores.dedup();
    let repeat = records.iter().filter_map(|r| records::number(r, "repeat")).fold(1.0, f64::max);
    let settings = Settings { cores, repeat: repeat as u32, ..settings.clone() };
    let summary = Summary { records, ..Summary::default() };
    write(&settings, &experiments, &summary, &ctx, None)?;
    println!("bench: redrew {}", settings.out.join("report.md").display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::plan;

    #[test]
    fn outputs_are_written_from_records() {
        let out = std::env::temp_dir().join(format!("atoll-bench-render-{}", std::process::id()));
        let settings = Settings { out: out.clone(), ..Settings::parse(&[]).unwrap() };
        let ctx =
            Context { accel: "tcg".into(), git: "abc".into(), host_cpus: 2, linux_hz: Some(250) };
        let mut all = Vec::new();
        // Up to 3 cores: `webd_filesum` needs 3.
        for job in plan(&registry::select(None).unwrap(), &[1, 2, 3], 3) {
            let e = job.experiment.name;
            let (system, cores) = (job.system, job.cores);
            let lines = [
                format!(
                    r#"{{"experiment":"{e}","system":"{system}","cores":{cores},"metric":"latency_cycles","value":{},"unit":"cycles","protocol":"unicast"}}"#,
                    100 * job.repeat
                ),
                format!(
                    r#"{{"experiment":"{e}","system":"{system}","cores":1,"metric":"rate","value":2.5,"unit":"msgs/kcycle","pair":[0,1],"impl":"pipe"}}"#
                ),
                // As Atoll's user programs print them.
                format!(
                    r#"{{"experiment":"{e}","system":"{system}","config":"shared-as","active_cores":{cores},"metric":"cycles_per_page","value":{},"unit":"cycles"}}"#,
                    1000 * cores
                ),
            ];
            for line in lines {
                all.push(records::record(&line, &job, &ctx, &[]).unwrap());
            }
        }
        let summary =
            Summary { records: all, failed: vec!["x: timed out".into()], ..Summary::default() };
        let experiments = registry::select(None).unwrap();
        write(&settings, &experiments, &summary, &ctx, Some("Debian test")).unwrap();
        let report = fs::read_to_string(out.join("report.md")).unwrap();
        assert!(report.contains("## `urpc`") && report.contains("x: timed out"));
        assert!(
            report.contains("| latency_cycles (cycles) | protocol=unicast | 2 | 200 [100–300] |")
        );
        // The Corey experiments make a row per config, with both systems and their ratio.
        let memclone = &report[report.find("## `memclone`").unwrap()..];
        assert!(memclone.contains(
            "| cycles_per_page (cycles) | config=shared-as | 2 | 2000 | 2000 | 1 | tie |"
        ));
        let nullsys = &report[report.find("## `nullsys`").unwrap()..];
        // Kernel-entry experiments show Linux as booted beside the headline (mitigations
        // off), and every row states its conditions.
        assert!(nullsys.contains(
            "| cycles_per_page (cycles) | — | 2 | 2000 | 2000 | 1 | tie | 2000 | 1 | tcg · 1 pkg · tick L 250 Hz |"
        ));
        let shm = &report[report.find("## `shm_vs_msg`").unwrap()..];
        assert!(
            shm.contains("| cycles_per_page (cycles) | — | 2 | 2000 | 2000 | 1 | tie | — | — |")
        );
        assert!(report.contains("**Conditions.**"));
        for e in &experiments {
            assert!(out.join(format!("{}.png", e.name)).is_file(), "{}", e.name);
        }
        assert_eq!(
            records::read_json(&out.join("results.json")).unwrap().len(),
            summary.records.len()
        );
        fs::remove_dir_all(&out).unwrap();
    }
}
