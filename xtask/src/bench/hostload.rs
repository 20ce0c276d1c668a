//! How busy the host was with work that is not ours: between two samples, the CPU time all
//! processes used (`/proc/stat`) minus what this process and its waited-for children (QEMU,
//! cargo) used (`/proc/self/stat`), as a share of the host's CPU time. Under TCG a vCPU is a
//! host thread, so other work on the host shows up directly as stalls in spinning benchmarks.

use std::fs;

/// One sample, in clock ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sample {
    /// Busy time of all CPUs.
    busy: u64,
    /// Busy plus idle time of all CPUs.
    total: u64,
    /// Time used by this process and its waited-for children.
    ours: u64,
}

/// Takes a sample (all zero if `/proc` cannot be read).
pub fn sample() -> Sample {
    let stat = fs::read_to_string("/proc/stat").unwrap_or_default();
    let me = fs::read_to_string("/proc/self/stat").unwrap_or_default();
    parse(&stat, &me).unwrap_or_default()
}

/// The sample in the texts of `/proc/stat` and `/proc/self/stat`.
fn parse(stat: &str, me: &str) -> Option<Sample> {
    let cpu = stat.lines().find(|l| l.starts_with("cpu "))?;
    let t: Vec<u64> = cpu.split_whitespace().skip(1).filter_map(|v| v.parse().ok()).collect();
    // user nice system idle iowait irq softirq steal ...
    let busy = t.first()? + t.get(1)? + t.get(2)? + t.get(5)? + t.get(6)? + t.get(7).unwrap_or(&0);
    let total = busy + t.get(3)? + t.get(4)?;
    // After the command name in parentheses: fields 3.. of stat(5); utime is field 14.
    let rest = &me[me.rfind(')')? + 1..];
    let f: Vec<u64> = rest.split_whitespace().map(|v| v.parse().unwrap_or(0)).collect();
    let ours = f.get(11)? + f.get(12)? + f.get(13)? + f.get(14)?;
    Some(Sample { busy, total, ours })
}

/// The share (0..=1) of the host's CPU time that other processes used between `a` and `b`,
/// or `None` if nothing was measured.
pub fn others_share(a: Sample, b: Sample) -> Option<f64> {
    let total = b.total.checked_sub(a.total).filter(|&t| t > 0)?;
    let busy = b.busy.saturating_sub(a.busy);
    let ours = b.ours.saturating_sub(a.ours);
    Some((busy.saturating_sub(ours) as f64 / total as f64).clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  100 0 50 800 10 5 5 0 0 0\ncpu0 50 0 25 400 5 2 3 0 0 0\n";
    const ME: &str = "42 (x task) S 1 42 42 0 -1 0 0 0 0 0 30 10 20 10 20 0 1 0 5 6 7";

    #[test]
    fn samples_are_read_from_proc_texts() {
        let s = parse(STAT, ME).unwrap();
        assert_eq!(s, Sample { busy: 160, total: 970, ours: 70 });
        assert_eq!(parse("nonsense", ME), None);
    }

    #[test]
    fn the_share_of_others_excludes_our_own_time() {
        let a = Sample { busy: 100, total: 1000, ours: 50 };
        let b = Sample { busy: 300, total: 1200, ours: 150 };
        assert_eq!(others_share(a, b), Some(0.5));
        assert_eq!(others_share(a, a), None);
        let mostly_ours = Sample { busy: 200, total: 1200, ours: 200 };
        assert_eq!(others_share(a, mostly_ours), Some(0.0));
        assert!(sample().total > 0);
    }
}
