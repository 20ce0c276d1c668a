//! The experiments `make bench` knows: how each runs on Atoll (a console command), on the
//! Linux guest (`bench=` for `atoll-bench-linux`) and on the host (`bench-host`), and how
//! its plot is drawn. `ONLY=name,...` selects by [`Experiment::name`].

/// How an experiment's PNG is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plot {
    /// Bars per result row and core count, one bar per system, one panel per unit (a table
    /// of the paper drawn as bars).
    Bars,
    /// Cycles against the cores doing the work (`active_cores`), one line per `series`
    /// value and system, from the largest VM (the paper's line figures).
    Lines {
        /// The record field naming a line, e.g. `protocol`.
        series: &'static str,
    },
}

/// One experiment.
#[derive(Clone, Copy, Debug)]
pub struct Experiment {
    /// Name in `ONLY`, in `bench/paper.json` and in the `experiment` field of its records.
    pub name: &'static str,
    /// Fewest VM cores it can run on.
    pub min_cores: u32,
    /// Atoll console command (run with `cmd=`), if Atoll runs it.
    pub atoll: Option<&'static str>,
    /// `bench=` value for the Linux guest (`atoll-bench-linux` arguments, comma-separated).
    pub linux: Option<&'static str>,
    /// Runs `bench-host` on the build machine instead of a VM (once per repetition).
    pub host: bool,
    /// Time limit of one boot, seconds.
    pub timeout_secs: u64,
    /// Its plot.
    pub plot: Plot,
}

/// Every experiment, in the order they run and appear in the report. The iteration counts
/// are the kernel's defaults, passed to both systems so they do the same work.
pub const EXPERIMENTS: &[Experiment] = &[
    Experiment {
        name: "nullsys",
        min_cores: 1,
        atoll: Some("run nullsys 21"),
        linux: Some("nullsys,21"),
        host: false,
        timeout_secs: 120,
        plot: Plot::Bars,
    },
    Experiment {
        name: "urpc",
        min_cores: 2,
        atoll: Some("bench urpc 2000"),
        linux: Some("urpc,2000"),
        host: false,
        timeout_secs: 300,
        plot: Plot::Bars,
    },
    Experiment {
        name: "shm_vs_msg",
        min_cores: 2,
        atoll: Some("bench shm 500"),
        linux: Some("shm,500"),
        host: false,
        timeout_secs: 300,
        plot: Plot::Lines { series: "protocol" },
    },
    Experiment {
        name: "multicast",
        min_cores: 2,
        atoll: Some("bench multicast 50"),
        linux: None,
        host: false,
        timeout_secs: 300,
        plot: Plot::Lines { series: "protocol" },
    },
    Experiment {
        name: "host",
        min_cores: 1,
        atoll: None,
        linux: None,
        host: true,
        timeout_secs: 300,
        plot: Plot::Bars,
    },
];

/// The experiment called `name`.
pub fn find(name: &str) -> Option<&'static Experiment> {
    EXPERIMENTS.iter().find(|e| e.name == name)
}

/// The experiments `only` selects (all when `None`); an unknown name is an error.
pub fn select(only: Option<&[String]>) -> Result<Vec<&'static Experiment>, String> {
    let Some(names) = only else {
        return Ok(EXPERIMENTS.iter().collect());
    };
    let mut chosen = Vec::new();
    for name in names {
        let experiment = find(name).ok_or_else(|| {
            let known: Vec<&str> = EXPERIMENTS.iter().map(|e| e.name).collect();
            format!("ONLY: no experiment `{name}` (known: {})", known.join(", "))
        })?;
        if !chosen.iter().any(|e: &&Experiment| e.name == experiment.name) {
            chosen.push(experiment);
        }
    }
    // Keep the registry's order, whatever order ONLY lists them in.
    chosen.sort_by_key(|e| EXPERIMENTS.iter().position(|x| x.name == e.name));
    Ok(chosen)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_every_experiment_runs_somewhere() {
        for (i, e) in EXPERIMENTS.iter().enumerate() {
            assert!(EXPERIMENTS[i + 1..].iter().all(|x| x.name != e.name), "{}", e.name);
            assert!(e.atoll.is_some() || e.linux.is_some() || e.host, "{}", e.name);
        }
    }

    #[test]
    fn linux_arguments_have_no_spaces() {
        // They travel on the kernel command line as one word.
        for e in EXPERIMENTS {
            assert!(!e.linux.unwrap_or("").contains(char::is_whitespace), "{}", e.name);
        }
    }

    #[test]
    fn only_selects_in_registry_order_and_refuses_unknown_names() {
        let only = vec!["urpc".to_string(), "nullsys".to_string(), "urpc".to_string()];
        let names: Vec<&str> = select(Some(&only)).unwrap().iter().map(|e| e.name).collect();
        assert_eq!(names, ["nullsys", "urpc"]);
        assert!(select(Some(&["nope".to_string()])).is_err());
        assert_eq!(select(None).unwrap().len(), EXPERIMENTS.len());
    }
}
