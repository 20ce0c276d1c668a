//! `report.md`: per experiment a table of Atoll, Linux and their ratio (each a median over
//! the repetitions with its [min–max] spread), the paper's numbers from `bench/paper.json`
//! with the figure or table they come from, and the plot; host benchmarks in their own
//! section; and a list of the rows where Linux wins.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::path::Path;
use std::time::Duration;

use serde_json::{Map, Value};

use super::records::{number, text, variant, variant_without, Context, Record};
use super::registry::Experiment;
use super::{clock, Settings};
use crate::Result;

/// Within this factor of 1 a ratio counts as a tie.
const TIE: f64 = 0.05;

/// The papers' numbers (`bench/paper.json`).
#[derive(Debug, Default)]
pub struct Paper {
    experiments: Map<String, Value>,
}

impl Paper {
    /// Reads the data file.
    pub fn load(path: &Path) -> Result<Paper> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let doc: Value =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        let experiments = doc.get("experiments").and_then(Value::as_object).cloned();
        Ok(Paper { experiments: experiments.ok_or("paper.json has no \"experiments\"")? })
    }

    fn field(&self, experiment: &str, key: &str) -> Option<&str> {
        self.experiments.get(experiment)?.get(key)?.as_str()
    }

    fn references(&self, experiment: &str) -> Vec<&Value> {
        let refs = self.experiments.get(experiment).and_then(|e| e.get("reference"));
        refs.and_then(Value::as_array).map(|a| a.iter().collect()).unwrap_or_default()
    }
}

/// The run's facts for the report's head.
pub struct Meta<'a> {
    /// The settings.
    pub settings: &'a Settings,
    /// accel, git, host CPUs.
    pub ctx: &'a Context,
    /// Wall time.
    pub wall: Duration,
    /// The share of the host's CPU time other processes used during the runs.
    pub others: Option<f64>,
    /// Failed jobs.
    pub failed: &'a [String],
    /// The Linux guest's description.
    pub guest: Option<&'a str>,
    /// Experiments that have a PNG.
    pub plots: &'a [&'a str],
}

/// Values of one row by system, each as (repetition, value).
#[derive(Debug, Default)]
struct Row {
    metric: String,
    variant: String,
    cores: u64,
    unit: String,
    atoll: Vec<(u64, f64)>,
    /// Linux with `mitigations=off`: the headline comparison.
    linux: Vec<(u64, f64)>,
    /// Linux with its default mitigations (experiments whose cost is kernel entry).
    linux_booted: Vec<(u64, f64)>,
    host: Vec<(u64, f64)>,
    /// The conditions its records state, by name (see [`conditions_of`]).
    conditions: BTreeMap<&'static str, BTreeSet<String>>,
    /// Atoll's row to compare with when Atoll has none of its own (a Linux-only peer).
    baseline: Option<String>,
}

/// Groups records into rows in order of first appearance; `extra` are the experiment's own
/// row fields (`Experiment::rows_by`).
fn rows(records: &[&Record], extra: &[&str]) -> Vec<Row> {
    let mut order: Vec<(String, String, u64)> = Vec::new();
    let mut by_key: BTreeMap<(String, String, u64), Row> = BTreeMap::new();
    for r in records {
        let cores = number(r, "cores").unwrap_or(0.0) as u64;
        let key = (text(r, "metric").to_string(), variant(r, extra), cores);
        let row = by_key.entry(key.clone()).or_insert_with(|| {
            order.push(key.clone());
            // A Linux-only peer (a pipe, a futex) is compared with Atoll's row without
            // `impl`; an Atoll-only variant (the kernel's own channels) stands alone.
            let peer = (r.contains_key("impl") && text(r, "system") == "linux")
                .then(|| variant_without(r, extra, "impl"));
            Row {
                metric: key.0.clone(),
                variant: key.1.clone(),
                cores: key.2,
                unit: text(r, "unit").to_string(),
                baseline: peer,
                ..Row::default()
            }
        });
        let (rep, Some(value)) = (number(r, "repeat").unwrap_or(0.0) as u64, number(r, "value"))
        else {
            continue;
        };
        for (name, value) in conditions_of(r) {
            row.conditions.entry(name).or_default().insert(value);
        }
        match (text(r, "system"), text(r, "mitigations")) {
            ("atoll", _) => row.atoll.push((rep, value)),
            ("linux", "as-booted") => row.linux_booted.push((rep, value)),
            ("linux", _) => row.linux.push((rep, value)),
            _ => row.host.push((rep, value)),
        }
    }
    order.into_iter().filter_map(|k| by_key.remove(&k)).collect()
}

/// The conditions one record states, as (name, value) pairs for a row's `conditions` cell:
/// the accelerator, the packages (`sockets`, 1 unless stated), each system's tick and
/// Linux's huge-page policy. (Mitigations have columns of their own.)
fn conditions_of(r: &Record) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    let system = text(r, "system");
    if system == "host" {
        return out;
    }
    out.push(("accel", text(r, "accel").to_string()));
    let sockets = number(r, "sockets").unwrap_or(1.0);
    out.push(("packages", format!("{sockets} pkg")));
    let side = if system == "atoll" { "A" } else { "L" };
    if let Some(hz) = number(r, "tick_hz") {
        out.push(("tick", format!("{side} {hz}")));
    }
    if system == "linux" && !text(r, "thp").is_empty() {
        out.push(("thp", text(r, "thp").to_string()));
    }
    out
}

/// A row's `conditions` cell: `tcg · 1 pkg · tick A 250, L 250 Hz · THP never`.
fn conditions_cell(row: &Row) -> String {
    let joined = |name: &str| {
        row.conditions.get(name).map(|set| set.iter().cloned().collect::<Vec<_>>().join(", "))
    };
    let mut parts = Vec::new();
    parts.extend(joined("accel"));
    parts.extend(joined("packages"));
    parts.extend(joined("tick").map(|t| format!("tick {t} Hz")));
    parts.extend(joined("thp").map(|t| format!("THP {t}")));
    if parts.is_empty() {
        "—".into()
    } else {
        parts.join(" · ")
    }
}

/// The report's paragraph on the conditions of the whole run: what each side's kernel did
/// about speculative execution, as the Linux guest itself reported it.
fn conditions_paragraph(records: &[Record]) -> String {
    let mut said: BTreeMap<(&str, &str), BTreeSet<String>> = BTreeMap::new();
    for r in records.iter().filter(|r| text(r, "system") == "linux") {
        for name in ["meltdown", "spectre_v2"] {
            if !text(r, name).is_empty() {
                let entry = said.entry((text(r, "mitigations"), name)).or_default();
                entry.insert(text(r, name).to_string());
            }
        }
    }
    let mut out = String::from(
        "**Conditions.** Atoll has no speculative-execution mitigations and maps 4 KiB pages \
         only; it is booted with the Linux guest's tick rate (`hz=`). The Linux guest boots \
         with `transparent_hugepage=never` (so each first touch faults one 4 KiB page, as on \
         Atoll) and with `mitigations=off` for the *Linux* column, the headline; experiments \
         whose cost is kernel entry also run it as booted (the distribution's defaults), in \
         the *as booted* columns.",
    );
    for (mitigations, label) in [("off", "with `mitigations=off`"), ("as-booted", "as booted")] {
        let parts: Vec<String> = said
            .iter()
            .filter(|((m, _), _)| *m == mitigations)
            .map(|((_, name), values)| {
                let values: Vec<&str> = values.iter().map(String::as_str).collect();
                format!("{name} `{}`", values.join("`, `"))
            })
            .collect();
        if !parts.is_empty() {
            let _ = write!(out, " The guest {label} reported: {}.", parts.join("; "));
        }
    }
    out.push_str("  \n");
    out
}

/// `median [min–max]` of `values` (just the value if there is one), or `—`.
fn spread(values: &[f64]) -> String {
    let Some(mid) = median(values) else { return "—".into() };
    let finite = values.iter().copied().filter(|x| x.is_finite());
    let (low, high) = finite.fold((mid, mid), |(lo, hi), x| (lo.min(x), hi.max(x)));
    if low == high {
        return num(mid);
    }
    format!("{} [{}–{}]", num(mid), num(low), num(high))
}

/// The median of the finite `values` (`record::median`, the one every benchmark reports
/// with), if there are any.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    record::median(&mut v)
}

/// A number in few characters: integers as integers, others with 2 decimals, or two
/// significant digits below 0.1 (Atoll's rates under TCG can be thousandths).
pub fn num(x: f64) -> String {
    if x.abs() >= 100.0 || x.fract() == 0.0 {
        format!("{x:.0}")
    } else if x.abs() >= 0.1 {
        format!("{x:.2}")
    } else {
        let decimals = (1 - x.abs().log10().floor() as i32).clamp(2, 12) as usize;
        format!("{x:.decimals$}")
    }
}

/// Per-repetition ratios a/b, paired by repetition.
fn ratios(a: &[(u64, f64)], b: &[(u64, f64)]) -> Vec<f64> {
    a.iter()
        .filter_map(|&(rep, x)| b.iter().find(|p| p.0 == rep).map(|&(_, y)| x / y))
        .filter(|r| r.is_finite())
        .collect()
}

/// True when a larger value of this unit is better (a rate: msgs/kcycle, ops/kcycle,
/// Mbit/s, conn/s; a speedup).
fn higher_is_better(unit: &str) -> bool {
    unit.contains("/kcycle")
        || unit.contains("/Mcycle")
        || unit.contains("/Gcycle")
        || unit.ends_with("/s")
        || unit.starts_with("speedup")
}

/// Who wins by the median ratio Atoll/Linux.
fn better(ratio: f64, unit: &str) -> &'static str {
    if (ratio - 1.0).abs() <= TIE {
        "tie"
    } else if (ratio < 1.0) != higher_is_better(unit) {
        "Atoll"
    } else {
        "Linux"
    }
}

/// The paper's values that match a row (by metric, and by protocol, config, active cores
/// and impl when the reference names them; a row without `active_cores` has all its VM's
/// cores working).
fn paper_cell(refs: &[&Value], row: &Row) -> String {
    let cells: Vec<String> = refs
        .iter()
        .filter(|r| r.get("metric").and_then(Value::as_str) == Some(row.metric.as_str()))
        .filter(|r| {
            let peer = r.get("impl").is_some();
            peer == row.baseline.is_some()
                && ["protocol", "config", "active_cores"].iter().all(|k| match r.get(*k) {
                    Some(v) => {
                        let v = v.as_str().map(String::from).unwrap_or_else(|| v.to_string());
                        let mut parts = row.variant.split(' ');
                        parts.any(|part| part == format!("{k}={v}"))
                            || (*k == "active_cores"
                                && !row.variant.contains("active_cores=")
                                && v == row.cores.to_string())
                    }
                    None => true,
                })
        })
        .filter_map(|r| r.get("value").and_then(Value::as_f64).map(num))
        .collect();
    if cells.is_empty() {
        "—".into()
    } else {
        cells.join(" / ")
    }
}

/// The whole report.
pub fn render(
    experiments: &[&Experiment],
    records: &[Record],
    paper: &Paper,
    meta: &Meta,
) -> String {
    let mut out = String::new();
    preamble(&mut out, records, meta);
    let mut linux_wins = Vec::new();
    for e in experiments.iter().filter(|e| !e.host) {
        let mine: Vec<&Record> = records
            .iter()
            .filter(|r| text(r, "experiment") == e.name && text(r, "system") != "host")
            .collect();
        section(&mut out, e, &mine, paper, meta, &mut linux_wins);
        if e.name == "unmap" {
            let shootdown: Vec<&Record> =
                records.iter().filter(|r| text(r, "experiment") == "shootdown").collect();
            super::model::unmap_section(&mut out, &mine, &shootdown);
        }
    }
    if let Some(e) = experiments.iter().find(|e| e.host) {
        let mine: Vec<&Record> = records.iter().filter(|r| text(r, "system") == "host").collect();
        section(&mut out, e, &mine, paper, meta, &mut linux_wins);
    }
    let _ = writeln!(out, "## Where Linux wins\n");
    if linux_wins.is_empty() {
        let _ = writeln!(out, "Nowhere in this run (ties within {:.0}% not counted).", TIE * 100.0);
    }
    for w in linux_wins {
        let _ = writeln!(out, "- {w}");
    }
    out
}

/// The report's title and what it is about: the run's settings, the host's load, the
/// guest, the conditions, how to read the tables, and the runs that failed.
fn preamble(out: &mut String, records: &[Record], meta: &Meta) {
    let s = meta.settings;
    let cores: Vec<String> = s.cores.iter().map(u32::to_string).collect();
    let _ = writeln!(out, "# Atoll vs Linux: benchmark report\n");
    let _ = writeln!(
        out,
        "git `{}` · accelerator {} · CORES={} · REPEAT={} · MEM={} · host CPUs {} · wall {}  ",
        meta.ctx.git,
        meta.ctx.accel,
        cores.join(","),
        s.repeat,
        s.mem,
        meta.ctx.host_cpus,
        clock(meta.wall)
    );
    if let Some(others) = meta.others {
        let _ = writeln!(
            out,
            "Other processes used {:.0}% of the host's CPU time during the runs{}  ",
            others * 100.0,
            if others > 0.1 {
                " — a busy host: under TCG each vCPU is a host thread, so spinning benchmarks \
                 at cores ≥ host CPUs stall while a partner's thread waits for a CPU."
            } else {
                "."
            }
        );
    }
    if let Some(guest) = meta.guest {
        let _ = writeln!(
            out,
            "Linux guest: {guest}; same QEMU machine, cores, memory and accelerator as Atoll.  "
        );
    }
    let _ = writeln!(out, "{}", conditions_paragraph(records));
    let _ = writeln!(
        out,
        "\nEach cell is the median over the repetitions, with [min–max]. Atoll/Linux is the ratio \
         per repetition (both measured in the same run), then its median and spread; for cycles \
         lower is better, for rates (msgs/kcycle, ops/kcycle) higher. A row marked *peer* is \
         Linux-only and is compared with Atoll's row without `impl` (Atoll's URPC). A `config` \
         row is one configuration of a Corey experiment, the same on both systems; one only a \
         single system has (Atoll's `shared-ranges`, shares) has no ratio. Cores above the \
         host's CPU count are marked oversubscribed. Raw records: `results.json`; serial logs: \
         `logs/`.\n"
    );
    if !meta.failed.is_empty() {
        let _ = writeln!(out, "**Failed runs ({}):**\n", meta.failed.len());
        for f in meta.failed {
            let _ = writeln!(out, "- {f}");
        }
        let _ = writeln!(out);
    }
}

/// The scheduler experiments' comparisons (issue M7): AMPS's speedup over the symmetric
/// baseline (symmetric / amps, each repetition with its own) and Atoll's AMPS over Linux
/// on the same cores (amps / cfs), for every metric and setting of the slow cores. Every
/// metric of these experiments is lower-is-better, so a speedup above 1 favours AMPS and
/// a ratio to Linux below 1 favours Atoll.
fn scheduler_comparison(out: &mut String, all: &[Row]) {
    let find = |row: &Row, config: &str| {
        // The same row but for its config (any further fields, e.g. `workers`, kept).
        let variant = row.variant.replacen("config=amps", &format!("config={config}"), 1);
        all.iter().find(|r| r.metric == row.metric && r.cores == row.cores && r.variant == variant)
    };
    let mut lines = Vec::new();
    // Counts (migrations) are shown in the table above; their ratios mean nothing.
    let compared = |r: &&Row| r.variant.starts_with("config=amps asym=") && r.unit != "moves";
    for row in all.iter().filter(compared) {
        let setting = row.variant.trim_start_matches("config=amps ");
        // Oriented so a speedup above 1 favours AMPS for rates too (higher is better).
        let rate = higher_is_better(&row.unit);
        let speedup = find(row, "symmetric").map(|s| match rate {
            true => ratios(&row.atoll, &s.atoll),
            false => ratios(&s.atoll, &row.atoll),
        });
        let vs_linux = find(row, "cfs").map(|c| ratios(&row.atoll, &c.linux));
        let cell =
            |r: Option<Vec<f64>>| r.filter(|r| !r.is_empty()).map_or("—".into(), |r| spread(&r));
        lines.push(format!(
            "| {} ({}) | {setting} | {} | {} | {} |",
            row.metric,
            row.unit,
            row.cores,
            cell(speedup),
            cell(vs_linux)
        ));
    }
    if lines.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\nAMPS against the symmetric baseline and against Linux on the same cores (a \
         speedup above 1 favours AMPS; Atoll/Linux is a plain ratio, below 1 better for \
         times, above 1 for rates):\n\n\
         | metric | setting | cores | speedup (symmetric / amps) | Atoll amps / Linux |\n\
         | --- | --- | --- | --- | --- |"
    );
    for line in lines {
        let _ = writeln!(out, "{line}");
    }
}

/// One experiment's section.
fn section(
    out: &mut String,
    e: &Experiment,
    records: &[&Record],
    paper: &Paper,
    meta: &Meta,
    linux_wins: &mut Vec<String>,
) {
    let title = paper.field(e.name, "title").unwrap_or(e.name);
    let _ = writeln!(out, "## `{}`: {title}\n", e.name);
    if let (Some(p), Some(f)) = (paper.field(e.name, "paper"), paper.field(e.name, "figure")) {
        let _ = writeln!(out, "Paper: {p} — {f}.  ");
    }
    if let Some(claim) = paper.field(e.name, "claim") {
        let _ = writeln!(out, "{claim}\n");
    }
    if records.is_empty() {
        let _ = writeln!(out, "No results.\n");
        return;
    }
    let refs = paper.references(e.name);
    let all = rows(records, e.rows_by);
    if e.host {
        host_table(out, &all, &refs);
    } else {
        let _ = writeln!(
            out,
            "| metric | variant | cores | Atoll | Linux | Atoll/Linux | better | Linux as booted \
             | Atoll/Linux as booted | conditions | paper |\n\
             | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
        );
        for row in &all {
            let (line, linux_won) = comparison_row(row, &all, &refs, meta);
            let _ = writeln!(out, "{line}");
            if let Some(ratio) = linux_won {
                linux_wins.push(format!(
                    "`{}` {} {} at {} cores: Atoll/Linux = {ratio}",
                    e.name, row.metric, row.variant, row.cores
                ));
            }
        }
    }
    if !e.variants.is_empty() {
        scheduler_comparison(out, &all);
    }
    if e.name == "shootdown" {
        super::model::section(out, records);
    }
    paper_numbers(out, &refs);
    if meta.plots.contains(&e.name) {
        let _ = writeln!(out, "\n![{}]({}.png)", e.name, e.name);
    }
    let _ = writeln!(out);
}

/// The table of a host-only experiment (`bench-host`): one value per row.
fn host_table(out: &mut String, all: &[Row], refs: &[&Value]) {
    let _ = writeln!(out, "| metric | variant | host | paper |\n| --- | --- | --- | --- |");
    for row in all {
        let host: Vec<f64> = row.host.iter().map(|p| p.1).collect();
        let variant = if row.variant.is_empty() { "—" } else { &row.variant };
        let _ = writeln!(
            out,
            "| {} ({}) | {variant} | {} | {} |",
            row.metric,
            row.unit,
            spread(&host),
            paper_cell(refs, row)
        );
    }
}

/// One row of the Atoll-against-Linux table, and (when Linux wins it) the spread of its
/// ratios. A *peer* row (Linux only) is compared with Atoll's row it names.
fn comparison_row(
    row: &Row,
    all: &[Row],
    refs: &[&Value],
    meta: &Meta,
) -> (String, Option<String>) {
    let baseline = row.baseline.as_ref().and_then(|b| {
        all.iter().find(|r| r.metric == row.metric && r.cores == row.cores && &r.variant == b)
    });
    let atoll = if row.atoll.is_empty() { baseline.map(|b| &b.atoll) } else { Some(&row.atoll) };
    let ratio = atoll.map(|a| ratios(a, &row.linux)).unwrap_or_default();
    let ratio_booted = atoll.map(|a| ratios(a, &row.linux_booted)).unwrap_or_default();
    let values = |v: &[(u64, f64)]| spread(&v.iter().map(|p| p.1).collect::<Vec<_>>());
    let atoll_cell = match (row.atoll.is_empty(), baseline) {
        (false, _) => values(&row.atoll),
        // Atoll's number the peer is compared with: its row's (URPC for `urpc`'s pipe
        // and futex, webd for `web_static`'s lighttpd and nginx).
        (true, Some(b)) => format!("(Atoll {})", values(&b.atoll)),
        (true, None) => "—".into(),
    };
    let winner = median(&ratio).map_or("", |r| better(r, &row.unit));
    let oversubscribed =
        if row.cores > u64::from(meta.ctx.host_cpus) { " (oversubscribed)" } else { "" };
    let variant = match (&row.variant, row.baseline.is_some()) {
        (v, true) => format!("{v} *peer*"),
        (v, false) if v.is_empty() => "—".into(),
        (v, false) => v.clone(),
    };
    let line = format!(
        "| {} ({}) | {variant} | {}{oversubscribed} | {atoll_cell} | {} | {} | {winner} | {} \
         | {} | {} | {} |",
        row.metric,
        row.unit,
        row.cores,
        values(&row.linux),
        spread(&ratio),
        values(&row.linux_booted),
        spread(&ratio_booted),
        conditions_cell(row),
        paper_cell(refs, row)
    );
    (line, (winner == "Linux").then(|| spread(&ratio)))
}

/// The paper's numbers for an experiment, as a list.
fn paper_numbers(out: &mut String, refs: &[&Value]) {
    if refs.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nPaper's numbers:");
    for r in refs {
        let value = r.get("value").and_then(Value::as_f64).map(num).unwrap_or_default();
        let unit = r.get("unit").and_then(Value::as_str).unwrap_or("");
        let metric = r.get("metric").and_then(Value::as_str).unwrap_or("");
        let place = r.get("where").and_then(Value::as_str).unwrap_or("");
        let _ = writeln!(out, "- {metric}: {value} {unit} — {place}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spreads_and_numbers() {
        assert_eq!(spread(&[]), "—");
        assert_eq!(spread(&[3.0]), "3");
        assert_eq!(spread(&[3.0, 1.0, 2.0]), "2 [1–3]");
        assert_eq!(spread(&[0.5, 0.25, 0.75]), "0.50 [0.25–0.75]");
        assert_eq!(num(1234.567), "1235");
        assert_eq!(num(0.0021), "0.0021");
        assert_eq!(num(0.05), "0.050");
        assert_eq!(num(0.001), "0.0010");
    }

    #[test]
    fn ratios_pair_repetitions() {
        let a = [(1, 10.0), (2, 20.0), (3, 30.0)];
        let b = [(2, 10.0), (1, 10.0)];
        assert_eq!(ratios(&a, &b), [1.0, 2.0]);
    }

    #[test]
    fn amps_is_compared_with_symmetric_and_with_linux_per_repetition() {
        let rec = |system: &str, config: &str, repeat: u64, value: f64| -> Record {
            let text = format!(
                r#"{{"experiment":"amps_jobs","system":"{system}","cores":2,"metric":"makespan_kcycles","value":{value},"unit":"kcycles","repeat":{repeat},"config":"{config}","asym":"1:50"}}"#
            );
            serde_json::from_str(&text).unwrap()
        };
        let records = [
            rec("atoll", "amps", 1, 100.0),
            rec("atoll", "amps", 2, 200.0),
            rec("atoll", "symmetric", 1, 120.0),
            rec("atoll", "symmetric", 2, 220.0),
            rec("linux", "cfs", 1, 125.0),
            rec("linux", "cfs", 2, 250.0),
        ];
        let refs: Vec<&Record> = records.iter().collect();
        let mut out = String::new();
        scheduler_comparison(&mut out, &rows(&refs, &["config", "asym"]));
        // Speedups 1.2 and 1.1 (the report's median of two is the upper); amps / Linux 0.8.
        assert!(
            out.contains("| makespan_kcycles (kcycles) | asym=1:50 | 2 | 1.20 [1.10–1.20]"),
            "{out}"
        );
        assert!(out.contains("| 0.8"), "{out}");
    }

    fn record(system: &str, config: &str, cores: u64, repeat: u64, value: f64) -> Record {
        let text = format!(
            r#"{{"experiment":"fdbench","system":"{system}","cores":{cores},"metric":"ops_per_kcycle","value":{value},"unit":"ops/kcycle","repeat":{repeat},"config":"{config}"}}"#
        );
        serde_json::from_str(&text).unwrap()
    }

    #[test]
    fn each_config_is_a_row_with_both_systems() {
        let records = [
            record("atoll", "shared", 2, 1, 4.0),
            record("linux", "shared", 2, 1, 1.0),
            record("atoll", "private", 2, 1, 6.0),
            record("linux", "private", 2, 1, 3.0),
            record("atoll", "shared", 1, 1, 5.0),
        ];
        let refs: Vec<&Record> = records.iter().collect();
        let all = rows(&refs, &["config"]);
        let shape: Vec<(&str, u64, usize, usize)> = all
            .iter()
            .map(|r| (r.variant.as_str(), r.cores, r.atoll.len(), r.linux.len()))
            .collect();
        assert_eq!(
            shape,
            [("config=shared", 2, 1, 1), ("config=private", 2, 1, 1), ("config=shared", 1, 1, 0)]
        );
        assert_eq!(ratios(&all[0].atoll, &all[0].linux), [4.0]);
        // Without the experiment's row fields the configurations would be mixed up.
        assert_eq!(rows(&refs, &[]).len(), 2);
        let paper: Value = serde_json::json!({"metric": "ops_per_kcycle", "value": 7, "config": "private", "active_cores": 2});
        assert_eq!(paper_cell(&[&paper], &all[1]), "7");
        assert_eq!(paper_cell(&[&paper], &all[0]), "—");
    }

    #[test]
    fn only_linux_rows_with_an_impl_are_peers() {
        let line = |system: &str| -> Record {
            serde_json::from_str(&format!(
                r#"{{"experiment":"multicast","system":"{system}","cores":2,"metric":"latency_cycles","value":5,"unit":"cycles","repeat":1,"protocol":"unicast","impl":"{}"}}"#,
                if system == "atoll" { "kernel" } else { "pipe" }
            ))
            .unwrap()
        };
        let (atoll, linux) = (line("atoll"), line("linux"));
        let all = rows(&[&atoll, &linux], &[]);
        let baselines: Vec<bool> = all.iter().map(|r| r.baseline.is_some()).collect();
        assert_eq!(baselines, [false, true]);
    }

    #[test]
    fn the_winner_depends_on_the_unit() {
        assert_eq!(better(0.5, "cycles"), "Atoll");
        assert_eq!(better(2.0, "cycles"), "Linux");
        assert_eq!(better(2.0, "msgs/kcycle"), "Atoll");
        assert_eq!(better(2.0, "ops/kcycle"), "Atoll");
        assert_eq!(better(1.02, "cycles"), "tie");
    }

    #[test]
    fn rates_and_speedups_are_better_higher() {
        assert!(higher_is_better("ops/kcycle") && higher_is_better("speedup_x100"));
        assert!(higher_is_better("acquisitions/Mcycle"));
        assert!(higher_is_better("Mbit/s") && higher_is_better("conn/s"));
        assert!(!higher_is_better("cycles") && !higher_is_better("ratio_x100"));
        assert_eq!(better(1.5, "speedup_x100"), "Atoll");
        assert_eq!(better(1.5, "cycles"), "Linux");
    }
}
