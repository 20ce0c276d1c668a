//! McRT's hosted experiments (issue M8), each against its peer libraries in the same run,
//! on the real cores: `bench-host mcrt_micro` etc. Each experiment's `run(quick)` returns
//! its `RESULT {json}` lines (`system` "host", the peer in `impl`).

use record::{Cores, Fixed2, Record};

pub mod create;
pub mod futures;
pub mod larson;
pub mod micro;
pub mod policies;
pub mod stm;

/// The McRT experiments `bench-host` knows, by name.
pub const EXPERIMENTS: [&str; 6] =
    ["mcrt_micro", "mcrt_create", "mcrt_futures", "mcrt_policies", "mcrt_larson", "mcrt_stm"];

/// Runs experiment `name` (one of [`EXPERIMENTS`]); `quick`: tiny counts (a smoke test).
pub fn run(name: &str, quick: bool) -> Option<Vec<String>> {
    Some(match name {
        "mcrt_micro" => micro::run(quick),
        "mcrt_create" => create::run(quick),
        "mcrt_futures" => futures::run(quick),
        "mcrt_policies" => policies::run(quick),
        "mcrt_larson" => larson::run(quick),
        "mcrt_stm" => stm::run(quick),
        _ => return None,
    })
}

/// One record line: `experiment` on the host with `cores` cores, implementation
/// `implementation` (McRT or a peer), `config` if the experiment has several.
pub fn line(
    experiment: &str,
    implementation: &str,
    config: Option<&str>,
    cores: usize,
    metric: &str,
    value: f64,
    unit: &str,
) -> String {
    let extra = format!(",\"impl\":\"{implementation}\"");
    let mut r = Record::new(experiment, "host", Cores::Machine(cores), metric, unit).extra(&extra);
    r.config = config;
    r.line(Fixed2(value)).to_string()
}

/// CPUs this process may use (at most the host's; benchmarks use 1 and 2).
pub fn cpus() -> usize {
    mcrt::hosted::allowed_cpus().len().max(1)
}

#[cfg(test)]
mod tests {
    /// Every experiment runs to its end at tiny counts and reports (a peer that aborts the
    /// process, as a suspended coroutine dropped under `panic = "abort"` did, fails this).
    #[test]
    fn every_experiment_runs_quick_and_reports() {
        for name in super::EXPERIMENTS {
            let lines = super::run(name, true).expect("a known experiment");
            assert!(!lines.is_empty(), "{name} reported nothing");
            assert!(lines.iter().all(|l| l.starts_with("RESULT {")), "{name}: {lines:?}");
        }
        assert!(super::run("bogus", true).is_none());
    }
}
