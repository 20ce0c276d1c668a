//! `amps-sim`: AMPS against the symmetric baseline on the paper's asymmetric machines, as
//! Atoll's schedulers would run the M7 experiments (issue M15, item 2). Prints a table per
//! core count, then (with `--factors`) what each factor costs and (with `--sweep`) the
//! 2-core median under other kernel tunables. Bad arguments print the usage and exit 2.

use std::io::Write;
use std::process::ExitCode;

use amps_sim::report::{self, Row};
use amps_sim::{Machine, Params};

const USAGE: &str = "usage: amps-sim [--cores 2,4,8] [--phases N] [--hz N] [--tsc-mhz N] [--unit-cycles N] [--report-every N] \
[--balance-every N] [--patience N] [--migration CYCLES] [--message CYCLES] [--switch CYCLES] \
[--step CYCLES] [--trace] [--oracle] [--answer-ends-patience] [--eager-reports] [--recheck-pulls] [--place-woken] [--uniform] [--only EXPERIMENT] [--factors] [--sweep] [--results]";

/// What the command line asked for.
struct Args {
    cores: Vec<usize>,
    phases: u64,
    params: Params,
    uniform: bool,
    /// Only the experiments whose label starts with this.
    only: Option<String>,
    factors: bool,
    sweep: bool,
    results: bool,
}

fn number(value: Option<&String>, name: &str) -> Result<u64, String> {
    value.and_then(|v| v.parse().ok()).ok_or_else(|| format!("{name} needs a number"))
}

fn parse(args: &[String]) -> Result<Option<Args>, String> {
    let mut a = Args {
        cores: vec![2, 4, 8],
        phases: 8,
        params: Params::default(),
        uniform: false,
        only: None,
        factors: false,
        sweep: false,
        results: false,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let p = &mut a.params;
        match arg.as_str() {
            "-h" | "--help" => return Ok(None),
            "--cores" => {
                let list = it.next().ok_or("--cores needs a list")?;
                a.cores = list
                    .split(',')
                    .map(|c| c.parse().ok().filter(|&c: &usize| (1..=64).contains(&c)))
                    .collect::<Option<Vec<_>>>()
                    .ok_or("--cores takes numbers 1..=64, comma-separated")?;
            }
            "--phases" => a.phases = number(it.next(), arg)?.max(1),
            "--hz" => p.hz = number(it.next(), arg)?.max(1),
            "--unit-cycles" => p.unit_cycles = number(it.next(), arg)?.max(1),
            "--tsc-mhz" => {
                let mhz = number(it.next(), arg)?.clamp(1, 1_000_000);
                p.tsc_hz = mhz * 1_000_000;
            }
            "--eager-reports" => p.eager_reports = true,
            "--recheck-pulls" => p.recheck_pulls = true,
            "--place-woken" => p.place_woken = true,
            "--report-every" => p.report_every_ticks = number(it.next(), arg)?.max(1),
            "--balance-every" => p.balance_every_ticks = number(it.next(), arg)?.max(1),
            "--patience" => p.pull_patience_ticks = number(it.next(), arg)?,
            "--migration" => p.migration_cycles = number(it.next(), arg)?,
            "--message" => p.message_cycles = number(it.next(), arg)?,
            "--switch" => p.switch_cycles = number(it.next(), arg)?,
            "--step" => p.step_cycles = number(it.next(), arg)?.max(1),
            "--oracle" => p.oracle_table = true,
            "--answer-ends-patience" => p.answer_ends_patience = true,
            "--uniform" => a.uniform = true,
            "--only" => a.only = Some(it.next().ok_or("--only needs a name")?.clone()),
            "--trace" => p.trace = true,
            "--factors" => a.factors = true,
            "--sweep" => a.sweep = true,
            "--results" => a.results = true,
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(Some(a))
}

fn machine(args: &Args, cores: usize) -> Machine {
    if args.uniform {
        Machine::uniform(cores)
    } else {
        Machine::paper(cores)
    }
}

fn run(args: &Args, out: &mut dyn Write) -> std::io::Result<()> {
    let p = &args.params;
    writeln!(
        out,
        "kernel: {} Hz ({} cycles a tick), reports every {} ticks, balance every {}, patience {}, \
         slice {} tick; migration {} cycles, message {}, switch {}; {} tick phases{}{}\n",
        p.hz,
        p.tick_cycles(),
        p.report_every_ticks,
        p.balance_every_ticks,
        p.pull_patience_ticks,
        p.slice_ticks,
        p.migration_cycles,
        p.message_cycles,
        p.switch_cycles,
        args.phases,
        if p.oracle_table { ", true loads" } else { "" },
        if p.answer_ends_patience { ", an answer ends patience" } else { "" },
    )?;
    if p.eager_reports {
        writeln!(out, "(eager reports: on every change, and after a wake-up)\n")?;
    }
    for &cores in &args.cores {
        let m = machine(args, cores);
        let rows: Vec<Row> = amps_sim::Workload::all(cores)
            .into_iter()
            .filter(|w| args.only.as_ref().is_none_or(|o| w.label().starts_with(o.as_str())))
            .map(|w| report::compare(&m, w, p, args.phases))
            .collect();
        writeln!(out, "{}", report::table(&m, &rows))?;
        if args.results {
            for line in report::result_lines(&m, &rows) {
                writeln!(out, "{line}")?;
            }
            writeln!(out)?;
        }
    }
    if args.factors {
        factors(args, out)?;
    }
    if args.sweep {
        sweep(args, out)?;
    }
    Ok(())
}

/// Each experiment's speedup and the medians at each core count under each factor's
/// variant.
fn factors(args: &Args, out: &mut dyn Write) -> std::io::Result<()> {
    for &cores in &args.cores {
        let m = machine(args, cores);
        writeln!(
            out,
            "What each factor costs at {cores} cores ({}): AMPS's speedup over symmetric\n",
            m.name()
        )?;
        writeln!(out, "| variant | jobs | omp | fairness | server (W = N … 2N) | numa | median of the five | median of the rows |")?;
        writeln!(out, "| --- | --- | --- | --- | --- | --- | --- | --- |")?;
        for (name, params) in report::factor_variants(&args.params) {
            let rows: Vec<Row> = report::compare_all(&m, &params, args.phases);
            let w = report::workload_speedups(&rows, cores);
            writeln!(
                out,
                "| {name} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
                w[0],
                w[1],
                w[2],
                w[3],
                w[4],
                report::median_of_workloads(&rows, cores),
                report::median_speedup(&rows),
            )?;
        }
        writeln!(out)?;
    }
    Ok(())
}

/// The medians at each core count over a grid of the kernel's tunables.
fn sweep(args: &Args, out: &mut dyn Write) -> std::io::Result<()> {
    for &cores in &args.cores {
        sweep_at(args, cores, out)?;
    }
    Ok(())
}

/// The medians at `cores` cores over a grid of the kernel's tunables, best first.
fn sweep_at(args: &Args, cores: usize, out: &mut dyn Write) -> std::io::Result<()> {
    let m = machine(args, cores);
    let mut results = Vec::new();
    for hz in [100, 250, 1000] {
        for report_every in [1, 2, 5, 10] {
            for balance_every in [1, 2] {
                for patience in [1, 2, 4] {
                    let params = Params {
                        hz,
                        report_every_ticks: report_every,
                        balance_every_ticks: balance_every,
                        pull_patience_ticks: patience,
                        ..args.params.clone()
                    };
                    let rows = report::compare_all(&m, &params, args.phases);
                    let w = report::workload_speedups(&rows, cores);
                    let five = report::median_of_workloads(&rows, cores);
                    results.push((
                        five,
                        format!(
                            "| {hz} | {report_every} | {balance_every} | {patience} | {:.2} / {:.2} / {:.2} / {:.2} / {:.2} | {five:.2} | {:.2} |",
                            w[0],
                            w[1],
                            w[2],
                            w[3],
                            w[4],
                            report::median_speedup(&rows),
                        ),
                    ));
                }
            }
        }
    }
    results.sort_by(|a, b| b.0.total_cmp(&a.0));
    writeln!(out, "Sweep at {cores} cores ({}), best first:\n", m.name())?;
    writeln!(out, "| hz | REPORT_EVERY_TICKS | BALANCE_EVERY_TICKS | PULL_PATIENCE_TICKS | jobs / omp / fairness / server / numa | median of the five | median of the rows |")?;
    writeln!(out, "| --- | --- | --- | --- | --- | --- | --- |")?;
    for (_, line) in &results {
        writeln!(out, "{line}")?;
    }
    writeln!(out)
}

fn main() -> ExitCode {
    // Not `env::args`, which panics on an argument that is not UTF-8.
    let args: Option<Vec<String>> =
        std::env::args_os().skip(1).map(|a| a.into_string().ok()).collect();
    let Some(args) = args else {
        eprintln!("amps-sim: an argument is not UTF-8\n{USAGE}");
        return ExitCode::from(2);
    };
    match parse(&args) {
        Ok(None) => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        Ok(Some(a)) => {
            let mut out = std::io::stdout().lock();
            // A closed pipe (`| head`) ends the output; it is not an error to report.
            let _ = run(&a, &mut out);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("amps-sim: {e}\n{USAGE}");
            ExitCode::from(2)
        }
    }
}
