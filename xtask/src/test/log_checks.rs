//! Checks of a run's serial log beyond the tests' verdicts (`Run::check`): the topology
//! the boot saw, the lines a program printed.

use crate::Result;

/// The boot measured the last-level cache by a pointer chase (`llc=chase`): a curve from
/// 4 KiB up to at least 4 MiB, every point a positive cost, and the SKB's line naming the
/// chase or, where the curve showed no edge, CPUID.
pub(super) fn chased_the_cache(log: &str) -> Result {
    let curve = log
        .lines()
        .find_map(|l| l.strip_prefix("skb: pointer chase (KiB:cycles per load):"))
        .ok_or("no pointer-chase line")?;
    let mut sizes = Vec::new();
    for point in curve.split_whitespace() {
        let (kib, cycles) = point.split_once("K:").ok_or(format!("bad point `{point}`"))?;
        let (kib, cycles): (u64, u64) =
            (kib.parse().map_err(|_| "bad size")?, cycles.parse().map_err(|_| "bad cost")?);
        if cycles == 0 {
            return Err(format!("the chase over {kib} KiB cost 0 cycles a load"));
        }
        sizes.push(kib);
    }
    if sizes.first() != Some(&4) || sizes.last().is_none_or(|&k| k < 4096) {
        return Err(format!("the chase covered {sizes:?} KiB, not 4 KiB to 4 MiB or more"));
    }
    let llc = log.lines().find(|l| l.starts_with("skb: last-level cache ")).ok_or("no LLC line")?;
    if !llc.contains("pointer chase") && !llc.contains("cpuid") {
        return Err(format!("the LLC line names no source: {llc}"));
    }
    Ok(())
}

/// The boot line says the tick is 250 Hz, as `hz=250` asked.
pub(super) fn ticks_at_250_hz(log: &str) -> Result {
    if log.lines().any(|l| l.starts_with("timer: ") && l.trim_end().ends_with("tick 250 Hz")) {
        Ok(())
    } else {
        Err("the boot line does not say `tick 250 Hz`".into())
    }
}

/// The boot line `cores: 4 of 4 online in 2 package(s) (...)`: the package count.
pub(super) fn packages_in_log(log: &str) -> Option<u32> {
    let line = log.lines().find(|l| l.starts_with("cores: ") && l.contains(" online in "))?;
    let (_, rest) = line.split_once(" online in ")?;
    rest.split_whitespace().next()?.parse().ok()
}

/// The boot saw `want` packages.
pub(super) fn packages_are(log: &str, want: u32) -> Result {
    match packages_in_log(log) {
        Some(got) if got == want => Ok(()),
        Some(got) => Err(format!("the boot saw {got} packages, QEMU was given {want}")),
        None => Err("no `cores: ... online in N package(s)` line".into()),
    }
}

/// `sockets4`: 2 packages, and `mcbench` printed every protocol at 2..=4 cores, the tree
/// of all 4 spanning both packages.
pub(super) fn two_packages_and_multicast_lines(log: &str) -> Result {
    packages_are(log, 2)?;
    multicast_lines_complete(log, 4, 2)
}

/// Lines `print.every_line_reaches_the_port` prints on each core.
const PRINT_TEST_LINES: u64 = 300;

/// `smp4`: each core's `print test: core C line N` lines (`print.every_line_reaches_the_port`)
/// are all in the log, whole and in order, for every one of the 4 cores: no line of a
/// core's ring lost, repeated, reordered or cut by another core's.
pub(super) fn print_lines_in_order(log: &str) -> Result {
    let mut next = [0u64; 4];
    for line in log.lines().map(|l| l.trim_end_matches('\r')) {
        let Some(rest) = line.strip_prefix("print test: core ") else { continue };
        let parsed = rest
            .split_once(" line ")
            .and_then(|(c, n)| Some((c.parse::<usize>().ok()?, n.parse::<u64>().ok()?)));
        let Some((core, n)) = parsed.filter(|&(c, _)| c < next.len()) else {
            return Err(format!("a garbled print test line: {line:?}"));
        };
        if n != next[core] {
            return Err(format!("core {core}: line {n} where line {} was due", next[core]));
        }
        next[core] += 1;
    }
    match next.iter().position(|&n| n != PRINT_TEST_LINES) {
        Some(core) => {
            Err(format!("core {core}: {} print test lines of {PRINT_TEST_LINES}", next[core]))
        }
        None => Ok(()),
    }
}

/// `tlbfault4s2`: 2 packages (the aggregator that faults is the other package's).
pub(super) fn two_packages(log: &str) -> Result {
    packages_are(log, 2)
}

/// `sockets8`: 4 packages.
pub(super) fn four_packages(log: &str) -> Result {
    packages_are(log, 4)
}

/// `sockets16`: 8 packages.
pub(super) fn eight_packages(log: &str) -> Result {
    packages_are(log, 8)
}

/// Atoll's user-space multicast lines (`experiment` `multicast`, no `impl`): a positive
/// latency for each protocol at each core count 2..=`cores`, and the line at `cores`
/// counting `packages` packages.
pub(super) fn multicast_lines_complete(log: &str, cores: u64, packages: u64) -> Result {
    let lines: Vec<serde_json::Value> = log
        .lines()
        .filter_map(|l| l.trim_end_matches('\r').strip_prefix("RESULT "))
        .filter_map(|json| serde_json::from_str(json).ok())
        .filter(|v: &serde_json::Value| v["experiment"] == "multicast" && v.get("impl").is_none())
        .collect();
    for k in 2..=cores {
        for protocol in ["broadcast", "unicast", "multicast"] {
            let line = lines
                .iter()
                .find(|v| v["cores"] == k && v["protocol"] == protocol)
                .ok_or_else(|| format!("no multicast line for {protocol} at {k} cores"))?;
            if line["value"].as_u64().is_none_or(|v| v == 0) || line["system"] != "atoll" {
                return Err(format!("bad multicast line {line}"));
            }
            if k == cores && line["packages"] != packages {
                return Err(format!(
                    "{protocol} at {k} cores spans {}, not {packages} packages",
                    line["packages"]
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The log of `print.every_line_reaches_the_port` on 4 cores, each core's lines in
    /// order, the cores' lines mixed as the port's core drains them.
    fn print_log(skip: Option<(usize, u64)>, swap: bool) -> String {
        let mut out = String::new();
        for n in 0..PRINT_TEST_LINES {
            for core in 0..4 {
                if skip == Some((core, n)) {
                    continue;
                }
                let n = if swap && core == 2 && n < 2 { 1 - n } else { n };
                out += &format!("print test: core {core} line {n}\r\n");
            }
        }
        out
    }

    #[test]
    fn print_lines_are_checked() {
        assert!(print_lines_in_order(&print_log(None, false)).is_ok());
        assert!(print_lines_in_order(&print_log(Some((3, 7)), false)).is_err());
        assert!(print_lines_in_order(&print_log(None, true)).is_err());
        let cut = print_log(None, false).replacen("core 1 line 5", "core 1 lincore 2 line 9", 1);
        assert!(print_lines_in_order(&cut).is_err());
    }

    #[test]
    fn the_package_count_comes_from_the_boot_line() {
        let log = "memory: x\ncores: 4 of 4 online in 2 package(s) (XApic), topology smt_bits=0 core_bits=1\n";
        assert_eq!(packages_in_log(log), Some(2));
        assert!(packages_are(log, 2).is_ok());
        assert!(packages_are(log, 4).unwrap_err().contains("2 packages"));
        assert!(packages_are("cores: 4 of 4 online (XApic)\n", 1).is_err());
    }

    /// A multicast line as the workload prints it.
    fn mc(k: u32, protocol: &str, value: u32, packages: u32) -> String {
        format!(
            r#"RESULT {{"experiment":"multicast","system":"atoll","cores":{k},"metric":"latency_cycles","value":{value},"unit":"cycles","protocol":"{protocol}","packages":{packages}}}"#
        )
    }

    #[test]
    fn multicast_lines_must_cover_every_protocol_and_core_count() {
        let mut lines = Vec::new();
        for k in 2..=4 {
            for p in ["unicast", "multicast", "broadcast"] {
                lines.push(mc(k, p, 100, if k == 2 { 1 } else { 2 }));
            }
        }
        let log = lines.join("\r\n");
        assert!(multicast_lines_complete(&log, 4, 2).is_ok());
        // The kernel's lines (impl "kernel") do not count.
        let kernel =
            log.replace(r#""protocol":"broadcast","#, r#""protocol":"broadcast","impl":"kernel","#);
        assert!(multicast_lines_complete(&kernel, 4, 2).unwrap_err().contains("broadcast"));
        let flat = log.replace(r#""packages":2"#, r#""packages":1"#);
        assert!(multicast_lines_complete(&flat, 4, 2).unwrap_err().contains("packages"));
        let zero = log.replace(&mc(3, "unicast", 100, 2), &mc(3, "unicast", 0, 2));
        assert!(multicast_lines_complete(&zero, 4, 2).is_err());
        assert!(multicast_lines_complete(&log, 5, 2).unwrap_err().contains("at 5 cores"));
    }

    #[test]
    fn a_chase_line_is_judged() {
        let good = "skb: pointer chase (KiB:cycles per load): 4K:11 8K:11 2048K:71 4096K:222\n\
                    skb: last-level cache 4096 KiB (pointer chase)\n";
        assert_eq!(chased_the_cache(good), Ok(()));
        let short = good.replace(" 4096K:222", "");
        assert!(chased_the_cache(&short).is_err(), "stops at 2 MiB");
        assert!(chased_the_cache(&good.replace("8K:11", "8K:0")).is_err());
        assert!(chased_the_cache("skb: last-level cache 16384 KiB (L3, cpuid 0x80000006)").is_err());
    }
}
