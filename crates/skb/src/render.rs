//! The console view of the SKB (`skb` command, Multikernel §4.9: measured facts shown to
//! the user). Compact enough that 16 cores fit in 100 columns:
//!
//! ```text
//! skb: 2 cores, 1 packages; ipi 6000 cycles (default), poll 6000; from row to column
//! llc: 16 MiB (L3, cpuid 0x80000006)
//! cpu pk co t nd speed    0    1
//!   0  0  0 0  0  1234    -  538
//!   1  0  1 0  0     ?  12k    -
//! ```
//!
//! Every number (latency in TSC cycles, speed in work units per ms) takes at most four
//! characters: below 10 000 it is printed as is, otherwise rounded down to thousands with
//! a suffix: `12k` is 12 000..=12 999, then `M`, `G`, `T`, `P`, `E` (steps of 1000).
//! `-` marks the diagonal, `?` a value not measured.

use crate::Skb;
use core::fmt::{self, Write};

/// Number of header lines [`Skb::render`] prints before its one line per core.
pub const RENDER_HEADER_LINES: usize = 3;

/// `v` as a number below 10 000, or below 1000 with a thousands suffix (at most 4 chars).
fn scale(v: u64) -> (u64, &'static str) {
    const SUFFIX: [&str; 6] = ["k", "M", "G", "T", "P", "E"];
    if v < 10_000 {
        return (v, "");
    }
    let mut v = v / 1000;
    let mut i = 0;
    while v >= 1000 {
        v /= 1000;
        i += 1;
    }
    (v, SUFFIX[i])
}

/// One value right-aligned in `width` columns: scaled, or `?` when missing.
fn cell(out: &mut impl Write, v: Option<u64>, width: usize) -> fmt::Result {
    match v {
        None => write!(out, "{:>width$}", "?"),
        Some(v) => {
            let (n, s) = scale(v);
            write!(out, "{:>w$}{}", n, s, w = width - s.len())
        }
    }
}

/// A scaled value with no padding, for the summary line.
fn short(out: &mut impl Write, v: u64) -> fmt::Result {
    let (n, s) = scale(v);
    write!(out, "{}{}", n, s)
}

/// A size in whole MiB where it is one, else in KiB.
fn bytes(out: &mut impl Write, b: u64) -> fmt::Result {
    const MIB: u64 = 1024 * 1024;
    if b >= MIB && b.is_multiple_of(MIB) {
        write!(out, "{} MiB", b / MIB)
    } else {
        write!(out, "{} KiB", b / 1024)
    }
}

impl Skb {
    /// Compact text rendering for the console (`skb` command).
    ///
    /// Three header lines ([`RENDER_HEADER_LINES`]): a summary (core and package counts,
    /// IPI cost C, poll budget), the last-level cache (size, level, where it was learnt;
    /// AMPS §2.4.2) and the column heading. Then one line per core: its
    /// index, package, core, SMT thread, NUMA node, compute speed (work per ms), and its
    /// row of the latency matrix, one-way TSC cycles from this core to each column's
    /// core. Numbers are scaled to at most four characters (see the module docs), so
    /// 16 cores fit in 100 columns while topology numbers stay below 100.
    pub fn render(&self, out: &mut impl Write) -> fmt::Result {
        let n = self.cores();
        write!(out, "skb: {} cores, {} packages; ipi ", n, self.packages().len())?;
        match self.ipi_cost() {
            Some(c) => {
                short(out, c)?;
                out.write_str(" cycles")?;
            }
            None => {
                short(out, self.poll_budget_cycles())?;
                out.write_str(" cycles (default)")?;
            }
        }
        out.write_str(", poll ")?;
        short(out, self.poll_budget_cycles())?;
        out.write_str("; from row to column\n")?;
        out.write_str("llc: ")?;
        match self.last_level_cache() {
            Some(llc) => {
                bytes(out, llc.bytes)?;
                match llc.level {
                    0 => write!(out, " ({})", llc.source.name())?,
                    level => write!(out, " (L{level}, {})", llc.source.name())?,
                }
            }
            None => out.write_str("unknown")?,
        }
        out.write_char('\n')?;

        out.write_str("cpu pk co t nd speed")?;
        for j in 0..n {
            write!(out, " {:>4}", j)?;
        }
        out.write_char('\n')?;

        for i in 0..n {
            let c = &self.cores[i];
            write!(out, "{:>3} {:>2} {:>2} {:>1} {:>2} ", i, c.package, c.core, c.smt, c.node)?;
            cell(out, self.compute_speed(i), 5)?;
            for j in 0..n {
                out.write_char(' ')?;
                if i == j {
                    out.write_str("   -")?;
                } else {
                    cell(out, self.latency(i, j), 4)?;
                }
            }
            out.write_char('\n')?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CoreInfo;
    use alloc::string::String;
    use alloc::vec::Vec;

    fn machine(n: u32, per_package: u32) -> Skb {
        let cores = (0..n)
            .map(|i| CoreInfo {
                apic_id: i,
                package: i / per_package,
                core: i % per_package,
                smt: 0,
                node: i / per_package,
            })
            .collect();
        Skb::new(cores)
    }

    fn text(s: &Skb) -> String {
        let mut t = String::new();
        s.render(&mut t).unwrap();
        t
    }

    fn scaled(v: u64) -> String {
        let mut t = String::new();
        short(&mut t, v).unwrap();
        t
    }

    #[test]
    fn scaling() {
        assert_eq!(scaled(0), "0");
        assert_eq!(scaled(538), "538");
        assert_eq!(scaled(9_999), "9999");
        assert_eq!(scaled(10_000), "10k");
        assert_eq!(scaled(12_999), "12k");
        assert_eq!(scaled(999_999), "999k");
        assert_eq!(scaled(1_000_000), "1M");
        assert_eq!(scaled(123_456_789), "123M");
        assert_eq!(scaled(u64::MAX), "18E");
    }

    #[test]
    fn two_cores_exactly() {
        let mut s = machine(2, 2);
        s.set_latency(0, 1, 538);
        s.set_latency(1, 0, 12_345);
        s.set_compute_speed(0, 1234);
        let want =
            "skb: 2 cores, 1 packages; ipi 6000 cycles (default), poll 6000; from row to column\n\
                    llc: unknown\n\
                    cpu pk co t nd speed    0    1\n\
                    \x20 0  0  0 0  0  1234    -  538\n\
                    \x20 1  0  1 0  0     ?  12k    -\n";
        assert_eq!(text(&s), want);
    }

    #[test]
    fn measured_ipi_in_summary() {
        let mut s = machine(1, 1);
        s.set_ipi_cost(4500);
        let t = text(&s);
        let first = t.lines().next().unwrap();
        assert_eq!(
            first,
            "skb: 1 cores, 1 packages; ipi 4500 cycles, poll 4500; from row to column"
        );
    }

    #[test]
    fn shape_one_line_per_core_plus_header() {
        for n in [0, 1, 2, 7, 16, 32] {
            let t = text(&machine(n, 4));
            assert_eq!(t.lines().count(), RENDER_HEADER_LINES + n as usize);
            for (i, line) in t.lines().skip(RENDER_HEADER_LINES).enumerate() {
                let fields: Vec<&str> = line.split_whitespace().collect();
                assert_eq!(fields.len(), 6 + n as usize);
                assert_eq!(fields[0].parse::<usize>().unwrap(), i);
                assert_eq!(fields[6 + i], "-");
            }
        }
    }

    #[test]
    fn sixteen_cores_fit_in_100_columns_at_worst() {
        let mut s = machine(16, 4);
        for i in 0..16 {
            s.set_compute_speed(i, u64::MAX - i as u64);
            for j in 0..16 {
                s.set_latency(i, j, u64::MAX / (j as u64 + 1));
            }
        }
        s.set_ipi_cost(u64::MAX);
        let t = text(&s);
        for line in t.lines() {
            assert!(line.len() <= 100, "{} columns: {line}", line.len());
        }
        assert_eq!(t.lines().nth(2).unwrap().len(), 100);
    }

    #[test]
    fn the_llc_line_says_size_level_and_source() {
        let mut s = machine(1, 1);
        let llc = |level, bytes, source| caches::LastLevel { level, bytes, source };
        s.set_last_level_cache(llc(3, 16 << 20, caches::Source::Leaf80000006));
        assert_eq!(text(&s).lines().nth(1).unwrap(), "llc: 16 MiB (L3, cpuid 0x80000006)");
        s.set_last_level_cache(llc(0, 1536 << 10, caches::Source::PointerChase));
        assert_eq!(text(&s).lines().nth(1).unwrap(), "llc: 1536 KiB (pointer chase)");
    }
}
