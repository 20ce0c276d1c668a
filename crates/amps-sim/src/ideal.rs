//! The best any scheduler could do on given speeds, with free and instant preemption and
//! migration: the optimum of `Q|pmtn|Cmax` (uniform machines, preemption allowed;
//! Horvath, Lam and Sethi 1977), `max(total work / total speed, max over k < m of the k
//! largest works / the k fastest speeds)`. A thread can use one core at a time, so a few
//! long threads are bounded by the fastest cores alone (§2.3.1's point: a fast core left
//! idle while a slow one runs a thread is speed lost).

use crate::machine::FULL;
use crate::workload::Workload;

/// The optimal preemptive makespan (cycles) of threads with `works` (full-speed cycles)
/// on cores of `speeds` (thousandths).
pub fn makespan(works: &[u64], speeds: &[u64]) -> f64 {
    let mut w: Vec<f64> = works.iter().map(|&x| x as f64).collect();
    w.sort_by(|a, b| b.total_cmp(a));
    let mut s: Vec<f64> = speeds.iter().map(|&x| x as f64 / FULL as f64).collect();
    s.sort_by(|a, b| b.total_cmp(a));
    let total_w: f64 = w.iter().sum();
    let total_s: f64 = s.iter().sum();
    if total_s <= 0.0 {
        return f64::INFINITY;
    }
    let mut best = total_w / total_s;
    let (mut wk, mut sk) = (0.0, 0.0);
    for k in 0..s.len().saturating_sub(1).min(w.len()) {
        wk += w[k];
        sk += s[k];
        best = best.max(wk / sk);
    }
    best
}

/// The best value of `workload`'s metric on `speeds`: a makespan or median completion
/// (cycles, lower is better), or for `amps_server` a throughput (transactions per
/// Gcycle, higher is better); a work unit costs `unit_cycles`.
pub fn bound(workload: Workload, speeds: &[u64], unit_cycles: u64) -> f64 {
    let cores = speeds.len();
    let seg = workload.segment_cycles(cores, unit_cycles);
    let n = workload.threads(cores);
    match workload {
        Workload::Jobs => makespan(&vec![seg; n], speeds),
        // Each step ends at a barrier: the steps' bounds add up.
        Workload::Omp | Workload::Numa => {
            f64::from(workload.steps()) * makespan(&vec![seg; n], speeds)
        }
        // The metric is the median (the upper middle of 4N) of the first jobs' completion
        // times: at best the first `4N / 2 + 1` jobs are all the machine does until then.
        Workload::Fairness => makespan(&vec![seg; n / 2 + 1], speeds),
        // W threads keep at most the W fastest cores busy.
        Workload::Server { workers } => {
            let mut s = speeds.to_vec();
            s.sort_unstable_by(|a, b| b.cmp(a));
            let speed: u64 = s.iter().take(workers).sum();
            let per_cycle = speed as f64 / FULL as f64 / seg as f64;
            // Transactions per Gcycle, as `workloads::amps::server` reports it.
            per_cycle * 1e9
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_jobs_on_one_fast_and_one_slow_core() {
        // 8 jobs of 1 on speeds 1 and 0.5: 8 / 1.5.
        let m = makespan(&[1000; 8], &[1000, 500]);
        assert!((m - 8000.0 / 1.5).abs() < 1e-6);
        // One job cannot go faster than the fastest core.
        assert!((makespan(&[1000], &[1000, 500]) - 1000.0).abs() < 1e-9);
        // Two equal jobs share both cores: 2 / 1.5.
        assert!((makespan(&[1000, 1000], &[1000, 500]) - 2000.0 / 1.5).abs() < 1e-6);
    }

    #[test]
    fn one_long_thread_is_bounded_by_the_fastest_core() {
        let m = makespan(&[10_000, 100, 100], &[1000, 500, 500]);
        assert!((m - 10_000.0).abs() < 1e-9);
    }
}
