//! The NAS Parallel Benchmarks' kernels EP, IS, CG, MG and FT (`crates/npb`; Multikernel
//! §5.3, Figure 9: "compute time in cycles on Barrelfish and Linux"), written once for
//! Atoll's `run npb` and the guest's `atoll-bench-linux npb`: each kernel runs on a McRT
//! runtime with one processor per core (the OpenMP team: one McRT thread per processor),
//! timed by the TSC, and verified against NPB's values.

use crate::result::{line, Fixed2};
use crate::Platform;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use npb::{Class, Kernel, Report};

/// The experiment's name in result lines.
pub const EXPERIMENT: &str = "npb";

/// The TSC: both systems count the same cycles.
fn tsc() -> u64 {
    // SAFETY: reads the time-stamp counter, which user mode may on both systems.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// The kernels `name` means: one kernel (`ep` … `ft`) or `all`.
pub fn kernels(name: &str) -> Option<Vec<Kernel>> {
    if name.eq_ignore_ascii_case("all") {
        return Some(Kernel::ALL.to_vec());
    }
    Kernel::parse(name).map(|k| alloc::vec![k])
}

/// Runs `kernels` at `class`, `repeat` times each, on a McRT runtime of `threads`
/// processors (stealing) over `host`, a team of `threads`. Call it outside a McRT runtime.
pub fn run_kernels(
    host: &dyn mcrt::Host,
    threads: usize,
    class: Class,
    kernels: &[Kernel],
    repeat: usize,
) -> Result<Vec<Report>, String> {
    if threads == 0 || threads > npb::MAX_THREADS {
        return Err(format!("threads must be 1..={}", npb::MAX_THREADS));
    }
    let runtime = mcrt::Config::new(mcrt::Policy::Stealing, threads);
    let kernels = kernels.to_vec();
    let done = mcrt::run(runtime, host, move || {
        let mut out = Vec::new();
        for &k in &kernels {
            for _ in 0..repeat.max(1) {
                out.push(npb::run(k, class, threads, tsc).map_err(|e| format!("{e}"))?);
            }
        }
        Ok::<Vec<Report>, String>(out)
    });
    done.map_err(|e| format!("mcrt: {e:?}"))?
}

/// `ep.S` and so on: a run's `config`.
pub fn config(r: &Report) -> String {
    format!("{}.{}", r.kernel.name(), r.class.letter())
}

/// The `RESULT` lines of runs on `p`: the timed section's cycles (`mcycles`, Figure 9's
/// "compute time in cycles") and whether NPB's verification passed (`verified`, 1 or 0).
/// NPB's operation count is in [`summary`]: Mop/s needs the TSC's rate. `boot`, if any,
/// names how the system was booted (a `boot` field: Atoll's `tlbflush=tick` runs).
pub fn lines<P: Platform + ?Sized>(p: &P, reports: &[Report], boot: Option<&str>) -> Vec<String> {
    let sys = p.system();
    let mut out = Vec::new();
    for r in reports {
        let mut extra = format!(",\"config\":\"{}\",\"threads\":{}", config(r), r.threads);
        if let Some(b) = boot {
            extra += &format!(",\"boot\":\"{b}\"");
        }
        let cores = r.threads;
        let m = Fixed2(r.ticks as f64 / 1e6);
        out.push(line(sys, EXPERIMENT, cores, "mcycles", m, "Mcycles", &extra));
        let ok = u8::from(r.verified);
        out.push(line(sys, EXPERIMENT, cores, "verified", ok, "bool", &extra));
    }
    out
}

/// Lines for people (each under the console's 200 bytes): the kernel, class, threads,
/// cycles and NPB's verdict, then what was compared, one part a line.
pub fn summary(r: &Report, unit: &str, amount: f64) -> Vec<String> {
    let verdict = if r.verified { "SUCCESSFUL" } else { "FAILED" };
    let mut out = alloc::vec![format!(
        "npb {} class {} ({} threads): {amount:.3} {unit}, {:.1} Mop; Verification = {verdict}",
        r.kernel.name().to_ascii_uppercase(),
        r.class.letter(),
        r.threads,
        r.ops / 1e6
    )];
    for part in r.detail.split("; ") {
        let mut s = format!("  {part}");
        if s.len() > 190 {
            let mut cut = 190;
            while !s.is_char_boundary(cut) {
                cut -= 1;
            }
            s.truncate(cut);
        }
        out.push(s);
    }
    out
}

#[cfg(all(test, feature = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn is_and_cg_verify_on_two_processors() {
        let host = mcrt::hosted::LinuxHost::unpinned();
        let reports = run_kernels(&host, 2, Class::S, &[Kernel::Is, Kernel::Cg], 1).expect("runs");
        assert_eq!(reports.len(), 2);
        assert!(reports.iter().all(|r| r.verified));
        let lines = lines(&crate::linux::Linux::new(), &reports, None);
        assert_eq!(lines.len(), 4);
        assert!(lines[0].contains("\"config\":\"is.S\""), "{}", lines[0]);
        assert!(summary(&reports[1], "Mcycles", 1.0).iter().all(|l| l.len() < 200));
        assert!(summary(&reports[1], "Mcycles", 1.0)[0].contains("Verification = SUCCESSFUL"));
    }

    #[test]
    fn kernel_names_parse() {
        assert_eq!(kernels("all").map(|k| k.len()), Some(5));
        assert_eq!(kernels("MG"), Some(alloc::vec![Kernel::Mg]));
        assert_eq!(kernels("bt"), None);
    }
}
