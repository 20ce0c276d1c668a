//! The `agreement-sim` command: its arguments and its `RESULT {json}` lines (the shape
//! every Atoll result has, read by `make bench`'s runner). Parsing is a pure function so
//! that bad input is tested here, and the binary only prints.

use crate::{costs_from_measurements, curve, paper_costs, Costs, Measured, Protocol, Topology};
use record::{Cores, Fixed2, Record};
use std::fmt;

/// What `agreement-sim --help` and every argument error print.
pub const USAGE: &str = "\
usage: agreement-sim [--packages P] [--cores-per-package C]
                     [--costs send,transit_local,transit_remote,receive,shared]
                     [--round-trip-local X [--round-trip-remote Y]]
Predicts one-phase agreement (TLB shootdown, Multikernel §5.1) latency in cycles for
broadcast, unicast, multicast and numa-multicast at 2..=P*C cores.
Defaults: 8 packages x 8 cores; costs fitted from the paper's Table 2 (8x4-core AMD:
538 cycles one way within a package, 613 across). --costs gives them all directly;
--round-trip-* fits them from measured round trips instead (not both).";

/// The largest machine the command simulates (P*C): a curve is P*C simulations.
pub const MAX_CORES: usize = 1024;

/// What the command was asked for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Args {
    /// The machine.
    pub topo: Topology,
    /// The per-message costs.
    pub costs: Costs,
}

/// What the command does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Command {
    /// Print the usage and succeed (`--help`, `-h`).
    Help,
    /// Print the curves.
    Run(Args),
}

/// Why the arguments were refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArgError {
    /// An option nobody knows (or a stray word).
    Unknown(String),
    /// An option without its value.
    MissingValue(&'static str),
    /// An option given twice.
    Repeated(&'static str),
    /// A value that does not parse or is out of range: (option, value).
    BadValue(&'static str, String),
    /// `--costs` together with `--round-trip-*`.
    CostsAndRoundTrips,
    /// `--round-trip-remote` without `--round-trip-local`.
    RemoteWithoutLocal,
    /// More than [`MAX_CORES`] cores.
    TooManyCores(usize),
}

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgError::Unknown(a) => write!(f, "unknown argument {a:?}"),
            ArgError::MissingValue(o) => write!(f, "{o} needs a value"),
            ArgError::Repeated(o) => write!(f, "{o} given twice"),
            ArgError::BadValue(o, v) => write!(f, "bad value {v:?} for {o}"),
            ArgError::CostsAndRoundTrips => {
                write!(f, "--costs and --round-trip-* both give the costs; pick one")
            }
            ArgError::RemoteWithoutLocal => {
                write!(f, "--round-trip-remote needs --round-trip-local")
            }
            ArgError::TooManyCores(n) => write!(f, "{n} cores is more than {MAX_CORES}"),
        }
    }
}

/// The options, so that a repeated one is caught.
const OPTIONS: [&str; 5] =
    ["--packages", "--cores-per-package", "--costs", "--round-trip-local", "--round-trip-remote"];

/// A count of at least 1.
fn count(option: &'static str, v: &str) -> Result<usize, ArgError> {
    match v.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(ArgError::BadValue(option, v.to_string())),
    }
}

/// A finite number of cycles, at least 0 (`positive`: above 0).
fn cycles(option: &'static str, v: &str, positive: bool) -> Result<f64, ArgError> {
    match v.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && (x > 0.0 || (!positive && x == 0.0)) => Ok(x),
        _ => Err(ArgError::BadValue(option, v.to_string())),
    }
}

/// `send,transit_local,transit_remote,receive,shared`: exactly five numbers >= 0.
fn costs(v: &str) -> Result<Costs, ArgError> {
    let bad = || ArgError::BadValue("--costs", v.to_string());
    let parts: Vec<&str> = v.split(',').collect();
    let [send, tl, tr, receive, shared] = parts[..] else { return Err(bad()) };
    let num = |s: &str| cycles("--costs", s, false).map_err(|_| bad());
    Ok(Costs {
        send: num(send)?,
        transit_local: num(tl)?,
        transit_remote: num(tr)?,
        receive: num(receive)?,
        shared_line_per_reader: num(shared)?,
    })
}

/// Parses the arguments after the program name.
pub fn parse(args: &[String]) -> Result<Command, ArgError> {
    let mut values: [Option<&str>; 5] = [None; 5];
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--help" || a == "-h" {
            return Ok(Command::Help);
        }
        let Some(i) = OPTIONS.iter().position(|o| o == a) else {
            return Err(ArgError::Unknown(a.clone()));
        };
        let value = it.next().ok_or(ArgError::MissingValue(OPTIONS[i]))?;
        if values[i].replace(value).is_some() {
            return Err(ArgError::Repeated(OPTIONS[i]));
        }
    }
    let [packages, per, given_costs, local, remote] = values;
    let topo = Topology {
        packages: packages.map_or(Ok(8), |v| count("--packages", v))?,
        cores_per_package: per.map_or(Ok(8), |v| count("--cores-per-package", v))?,
    };
    if topo.cores() > MAX_CORES {
        return Err(ArgError::TooManyCores(topo.cores()));
    }
    let costs = match (given_costs, local, remote) {
        (Some(_), Some(_), _) | (Some(_), _, Some(_)) => return Err(ArgError::CostsAndRoundTrips),
        (Some(v), None, None) => costs(v)?,
        (None, None, Some(_)) => return Err(ArgError::RemoteWithoutLocal),
        (None, Some(l), r) => costs_from_measurements(&Measured {
            round_trip_local: cycles("--round-trip-local", l, true)?,
            round_trip_remote: r.map(|v| cycles("--round-trip-remote", v, true)).transpose()?,
            send: None,
            receive: None,
        }),
        (None, None, None) => paper_costs(),
    };
    Ok(Command::Run(Args { topo, costs }))
}

/// One `RESULT {json}` line: the predicted latency of `protocol` at `cores` cores.
pub fn result_line(protocol: Protocol, cores: usize, value: f64, packages: usize) -> String {
    let extra = format!(",\"impl\":\"simulator\",\"packages\":{packages}");
    Record::new("shootdown", "model", Cores::Machine(cores), "latency_cycles", "cycles")
        .config(protocol.name())
        .extra(&extra)
        .line(Fixed2(value))
        .to_string()
}

/// Every line the command prints for `args`: each protocol, each n in 2..=P*C.
pub fn result_lines(args: &Args) -> Vec<String> {
    let mut out = Vec::new();
    for p in Protocol::ALL {
        for (n, v) in curve(p, args.topo, &args.costs) {
            out.push(result_line(p, n, v, args.topo.packages));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(s: &str) -> Result<Command, ArgError> {
        let v: Vec<String> = s.split_whitespace().map(String::from).collect();
        parse(&v)
    }

    fn run(s: &str) -> Args {
        match parse_str(s) {
            Ok(Command::Run(a)) => a,
            other => panic!("{s}: {other:?}"),
        }
    }

    #[test]
    fn defaults_are_eight_by_eight_with_the_paper_costs() {
        let a = run("");
        assert_eq!(a.topo, Topology { packages: 8, cores_per_package: 8 });
        assert_eq!(a.costs, paper_costs());
        assert_eq!(parse_str("-h"), Ok(Command::Help));
        assert_eq!(parse_str("--packages 2 --help"), Ok(Command::Help));
    }

    #[test]
    fn good_arguments_are_taken() {
        let a = run("--packages 2 --cores-per-package 4 --costs 1,2,3.5,4,0");
        assert_eq!(a.topo, Topology { packages: 2, cores_per_package: 4 });
        assert_eq!(
            a.costs,
            Costs {
                send: 1.0,
                transit_local: 2.0,
                transit_remote: 3.5,
                receive: 4.0,
                shared_line_per_reader: 0.0
            }
        );
        let a = run("--round-trip-local 1000 --round-trip-remote 1400");
        let m = Measured {
            round_trip_local: 1000.0,
            round_trip_remote: Some(1400.0),
            send: None,
            receive: None,
        };
        assert_eq!(a.costs, costs_from_measurements(&m));
    }

    #[test]
    fn garbage_is_refused() {
        let bad = |s: &str| parse_str(s).expect_err(s);
        assert_eq!(bad("--bogus"), ArgError::Unknown("--bogus".into()));
        assert_eq!(bad("8"), ArgError::Unknown("8".into()));
        assert_eq!(bad("--packages"), ArgError::MissingValue("--packages"));
        assert_eq!(bad("--packages 2 --packages 3"), ArgError::Repeated("--packages"));
        for s in [
            "--packages 0",
            "--packages -1",
            "--packages x",
            "--cores-per-package 2.5",
            "--costs 1,2,3,4",
            "--costs 1,2,3,4,5,6",
            "--costs 1,2,-3,4,5",
            "--costs 1,2,nan,4,5",
            "--costs 1,2,inf,4,5",
            "--costs 1,,3,4,5",
            "--round-trip-local 0",
            "--round-trip-local -5",
            "--round-trip-local 100 --round-trip-remote abc",
        ] {
            assert!(matches!(bad(s), ArgError::BadValue(..)), "{s}");
        }
        assert_eq!(bad("--costs 1,2,3,4,5 --round-trip-local 9"), ArgError::CostsAndRoundTrips);
        assert_eq!(bad("--round-trip-remote 9"), ArgError::RemoteWithoutLocal);
        assert_eq!(bad("--packages 64 --cores-per-package 64"), ArgError::TooManyCores(4096));
        let huge = format!("--packages {} --cores-per-package 2", usize::MAX);
        assert!(matches!(bad(&huge), ArgError::TooManyCores(_)));
    }

    #[test]
    fn lines_have_the_atoll_result_shape() {
        assert_eq!(
            result_line(Protocol::NumaMulticast, 16, 1234.5678, 8),
            r#"RESULT {"experiment":"shootdown","system":"model","cores":16,"config":"numa-multicast","metric":"latency_cycles","value":1234.57,"unit":"cycles","impl":"simulator","packages":8}"#
        );
        let a = run("--packages 2 --cores-per-package 2");
        let lines = result_lines(&a);
        assert_eq!(lines.len(), 4 * 3);
        assert!(lines[0].contains(r#""cores":2,"config":"broadcast""#));
        assert!(lines[11].contains(r#""cores":4,"config":"numa-multicast""#));
    }
}
