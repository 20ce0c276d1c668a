//! AMPS against the symmetric baseline against the bound, per experiment, as the M7
//! section of docs/bench.md reports the runs; the factors (what each of migration cost,
//! staleness, tick and patience costs) and sweeps of the kernel's tunables.

use record::{median, Cores, Fixed2, Record};
use sched::Policy;

use crate::ideal;
use crate::machine::{Machine, Params};
use crate::sim::{self, Outcome};
use crate::workload::Workload;

/// One experiment's comparison on one machine.
#[derive(Clone, Debug)]
pub struct Row {
    /// The experiment.
    pub workload: Workload,
    /// The best possible metric on these speeds ([`ideal::bound`]).
    pub ideal: f64,
    /// The symmetric baseline's metric (median over the phases).
    pub symmetric: f64,
    /// AMPS's metric (median over the phases).
    pub amps: f64,
    /// AMPS's speedup over symmetric: the median of the phases' paired ratios
    /// (symmetric / AMPS for times, AMPS / symmetric for throughputs), as the M7 table
    /// pairs each ratio within a repetition.
    pub speedup: f64,
    /// The speedup a perfect scheduler would have over the simulated symmetric baseline.
    pub ideal_speedup: f64,
    /// AMPS's migrations (median over the phases).
    pub migrations: u64,
}

impl Row {
    /// How much of the possible gain AMPS gets: `(speedup - 1) / (ideal_speedup - 1)`;
    /// `None` where there is (almost) no gain to be had (the ratio would be noise).
    pub fn share_of_gain(&self) -> Option<f64> {
        (self.ideal_speedup > 1.01).then(|| (self.speedup - 1.0) / (self.ideal_speedup - 1.0))
    }
}

/// The paired ratio "how much better is `a` than `b`" for `workload`'s metric.
fn better(workload: Workload, a: f64, b: f64) -> f64 {
    if workload.higher_is_better() {
        a / b
    } else {
        b / a
    }
}

/// Compares AMPS with symmetric for `workload` on `machine`, over tick phases
/// `0..phases`.
pub fn compare(machine: &Machine, workload: Workload, params: &Params, phases: u64) -> Row {
    let mut sym = Vec::new();
    let mut amps = Vec::new();
    let mut ratios = Vec::new();
    let mut moves = Vec::new();
    for phase in 0..phases.max(1) {
        let s: Outcome = sim::run(machine, Policy::Symmetric, workload, params, phase);
        let a: Outcome = sim::run(machine, Policy::Amps, workload, params, phase);
        if params.trace {
            eprintln!(
                "{} phase {phase}: symmetric {:.1}M, AMPS {:.1}M ({} migrations)",
                workload.label(),
                s.metric / 1e6,
                a.metric / 1e6,
                a.migrations
            );
        }
        ratios.push(better(workload, a.metric, s.metric));
        sym.push(s.metric);
        amps.push(a.metric);
        moves.push(a.migrations);
    }
    let symmetric = median(&mut sym).unwrap_or(f64::NAN);
    let ideal = ideal::bound(workload, &machine.speeds, params.unit_cycles);
    Row {
        workload,
        ideal,
        symmetric,
        amps: median(&mut amps).unwrap_or(f64::NAN),
        speedup: median(&mut ratios).unwrap_or(f64::NAN),
        ideal_speedup: better(workload, ideal, symmetric),
        migrations: median(&mut moves).unwrap_or(0),
    }
}

/// Every experiment of the M7 median on `machine`.
pub fn compare_all(machine: &Machine, params: &Params, phases: u64) -> Vec<Row> {
    Workload::all(machine.cores())
        .into_iter()
        .map(|w| compare(machine, w, params, phases))
        .collect()
}

/// The median (upper middle, as `record::median`) of the rows' speedups: the M7
/// section's "median speedup over the five workloads (jobs, omp, fairness, server at
/// W = 1 … 2N, numa)".
pub fn median_speedup(rows: &[Row]) -> f64 {
    median(&mut rows.iter().map(|r| r.speedup).collect::<Vec<_>>()).unwrap_or(f64::NAN)
}

/// The five workloads' speedups, `amps_server` as SPECjbb's official metric (§4.1: "the
/// average throughput from N to 2N warehouses"): jobs, omp, fairness, server, numa.
pub fn workload_speedups(rows: &[Row], cores: usize) -> [f64; 5] {
    let pick = |w: Workload| rows.iter().find(|r| r.workload == w).map_or(f64::NAN, |r| r.speedup);
    let server: Vec<&Row> = rows
        .iter()
        .filter(|r| matches!(r.workload, Workload::Server { workers } if workers >= cores))
        .collect();
    let amps: f64 = server.iter().map(|r| r.amps).sum();
    let sym: f64 = server.iter().map(|r| r.symmetric).sum();
    [
        pick(Workload::Jobs),
        pick(Workload::Omp),
        pick(Workload::Fairness),
        if sym > 0.0 { amps / sym } else { f64::NAN },
        pick(Workload::Numa),
    ]
}

/// The median of [`workload_speedups`]: the paper's median over its benchmarks (§4.2).
pub fn median_of_workloads(rows: &[Row], cores: usize) -> f64 {
    median(&mut workload_speedups(rows, cores)).unwrap_or(f64::NAN)
}

/// The same median for the bound's speedups.
pub fn median_ideal_speedup(rows: &[Row]) -> f64 {
    median(&mut rows.iter().map(|r| r.ideal_speedup).collect::<Vec<_>>()).unwrap_or(f64::NAN)
}

/// A metric for the table: Mcycles for times, tx/Gcycle for throughputs.
fn shown(workload: Workload, value: f64) -> String {
    if workload.higher_is_better() {
        format!("{value:.0}")
    } else {
        format!("{:.1}", value / 1e6)
    }
}

/// The rows as a Markdown table, with the medians.
pub fn table(machine: &Machine, rows: &[Row]) -> String {
    let mut out = format!(
        "{} cores ({}, powers {}):\n\n\
         | experiment | ideal | symmetric | AMPS | AMPS migrations | speedup | ideal speedup | share of the gain |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- |\n",
        machine.cores(),
        machine.name(),
        machine
            .powers()
            .iter()
            .map(|p| format!("{:.3}", p.0 as f64 / 1000.0))
            .collect::<Vec<_>>()
            .join("/"),
    );
    for r in rows {
        out += &format!(
            "| `{}` | {} | {} | {} | {} | {:.2} | {:.2} | {} |\n",
            r.workload.label(),
            shown(r.workload, r.ideal),
            shown(r.workload, r.symmetric),
            shown(r.workload, r.amps),
            r.migrations,
            r.speedup,
            r.ideal_speedup,
            r.share_of_gain().map_or("—".to_string(), |g| format!("{:.0} %", 100.0 * g)),
        );
    }
    out += &format!(
        "\nmedian speedup over the rows {:.2} (bound {:.2}); over the five workloads, \
         amps_server as its W = N … 2N average, {:.2}; times in Mcycles (amps_fairness: median \
         first completion), amps_server in tx/Gcycle\n",
        median_speedup(rows),
        median_ideal_speedup(rows),
        median_of_workloads(rows, machine.cores()),
    );
    out
}

/// `RESULT` lines for the rows (system `sim`; `config` the policy or `ideal`).
pub fn result_lines(machine: &Machine, rows: &[Row]) -> Vec<String> {
    let mut lines = Vec::new();
    let cores = Cores::Machine(machine.cores());
    let asym = format!(",\"asym\":\"{}\"", machine.name());
    for r in rows {
        let (metric, unit) = if r.workload.higher_is_better() {
            ("tx_per_gcycle", "tx/Gcycle")
        } else if r.workload == Workload::Fairness {
            ("completion_median_kcycles", "kcycles")
        } else {
            ("makespan_kcycles", "kcycles")
        };
        let extra = match r.workload {
            Workload::Server { workers } => format!("{asym},\"workers\":{workers}"),
            _ => asym.clone(),
        };
        let scale = if r.workload.higher_is_better() { 1.0 } else { 1e-3 };
        for (config, value) in [("ideal", r.ideal), ("symmetric", r.symmetric), ("amps", r.amps)] {
            let rec = Record::new(r.workload.name(), "sim", cores, metric, unit)
                .config(config)
                .extra(&extra);
            lines.push(rec.line((value * scale).round() as u64).to_string());
        }
        let rec = Record::new(r.workload.name(), "sim", cores, "speedup", "x")
            .config("amps/symmetric")
            .extra(&extra);
        lines.push(rec.line(Fixed2(r.speedup)).to_string());
    }
    lines
}

/// One variant of the kernel for the factor study: a name and its tunables.
pub fn factor_variants(base: &Params) -> Vec<(&'static str, Params)> {
    let mut v = vec![("kernel (M7 tunables)", base.clone())];
    v.push(("migration cost 0", Params { migration_cycles: 0, ..base.clone() }));
    v.push(("no staleness (true loads)", Params { oracle_table: true, ..base.clone() }));
    v.push(("reports every tick", Params { report_every_ticks: 1, ..base.clone() }));
    v.push(("tick 10x finer (2500 Hz)", Params { hz: base.hz * 10, ..base.clone() }));
    // Not 0: with no patience at all an idle core whose table is stale asks again at
    // every refusal (each refusal wakes it).
    v.push(("pull patience 1 tick", Params { pull_patience_ticks: 1, ..base.clone() }));
    v.push(("an answer ends patience", Params { answer_ends_patience: true, ..base.clone() }));
    v.push(("eager reports", Params { eager_reports: true, ..base.clone() }));
    v.push(("the source rechecks a pull", Params { recheck_pulls: true, ..base.clone() }));
    v.push(("woken threads placed", Params { place_woken: true, ..base.clone() }));
    v.push((
        "placed, patience 1, 1000 Hz",
        Params { place_woken: true, pull_patience_ticks: 1, hz: 1000, ..base.clone() },
    ));
    v.push((
        "recheck, patience 1, 1000 Hz",
        Params { recheck_pulls: true, pull_patience_ticks: 1, hz: 1000, ..base.clone() },
    ));
    v.push((
        "all of them",
        Params {
            migration_cycles: 0,
            message_cycles: 0,
            switch_cycles: 0,
            oracle_table: true,
            report_every_ticks: 1,
            hz: base.hz * 10,
            pull_patience_ticks: 1,
            eager_reports: true,
            recheck_pulls: true,
            ..base.clone()
        },
    ));
    v
}
