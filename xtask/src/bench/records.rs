//! Records: one per `RESULT` line, with the run's context added, written to `results.json`
//! as a list of objects `{experiment, system, cores, metric, value, unit, repeat, accel, git,
//! ...}`. `cores` is the VM's core count; when the cores doing the work differ (the client
//! cores of `shm_vs_msg`, the cores of one `multicast` point, the one core of `nullsys`) they
//! are kept as `active_cores`, whether the line says `cores` (the workloads' and the kernel's
//! lines) or `active_cores` (Atoll's user programs). The other fields of the line (`pair`,
//! `protocol`, `impl`, `config`, ...) are kept as they are.

use std::fs;
use std::path::Path;
use std::process::Command;
use std::thread;

use serde_json::{Map, Value};

use super::Job;
use crate::{build, Result};

/// One record.
pub type Record = Map<String, Value>;

/// What every record of a run shares.
#[derive(Clone, Debug)]
pub struct Context {
    /// `tcg` or `kvm`.
    pub accel: String,
    /// `git describe`-like name of the code measured.
    pub git: String,
    /// CPUs of the build machine (more VM cores are "oversubscribed").
    pub host_cpus: u32,
    /// The Linux guest's tick rate (`CONFIG_HZ`), which Atoll is booted with too.
    pub linux_hz: Option<u64>,
}

/// Fields that identify a row of the report beside `metric` in every experiment (see
/// [`variant`]); an experiment may add its own (`Experiment::rows_by`).
pub const VARIANT_FIELDS: &[&str] = &["pair", "protocol", "impl", "active_cores"];

/// The record of one `RESULT` line printed by `job`, which stated `conditions` (see
/// `runner::Outcome::conditions`).
pub fn record(
    json: &str,
    job: &Job,
    ctx: &Context,
    conditions: &[(String, String)],
) -> Result<Record> {
    let line: Map<String, Value> = serde_json::from_str(json)
        .map_err(|e| format!("{}: bad RESULT line `{json}`: {e}", job.label()))?;
    let text = |key: &str| line.get(key).and_then(Value::as_str).map(String::from);
    let system = text("system").ok_or_else(|| format!("no system in `{json}`"))?;
    if system != job.system {
        return Err(format!("{}: a line from system `{system}`: `{json}`", job.label()));
    }
    let mut r = Record::new();
    r.insert("experiment".into(), text("experiment").unwrap_or_default().into());
    r.insert("system".into(), system.into());
    r.insert("cores".into(), job.cores.into());
    for key in ["metric", "value", "unit"] {
        r.insert(key.into(), line.get(key).cloned().unwrap_or(Value::Null));
    }
    r.insert("repeat".into(), job.repeat.into());
    r.insert(
        "accel".into(),
        if job.system == "host" { "host".into() } else { ctx.accel.clone() }.into(),
    );
    r.insert("git".into(), ctx.git.clone().into());
    // Both spellings of the working cores end up the same, so the two systems' records of
    // one configuration fall in the same report row.
    let active = line.get("active_cores").or_else(|| line.get("cores")).and_then(Value::as_u64);
    if let Some(active) = active.filter(|&a| a != u64::from(job.cores)) {
        r.insert("active_cores".into(), active.into());
    }
    if job.system != "host" && job.cores > ctx.host_cpus {
        r.insert("oversubscribed".into(), true.into());
    }
    add_conditions(&mut r, job, ctx, conditions);
    for (key, value) in &line {
        if !r.contains_key(key) && key != "cores" && key != "active_cores" {
            r.insert(key.clone(), value.clone());
        }
    }
    Ok(r)
}

/// The conditions a system ran under, in every record (issue 10: "every row says under
/// which conditions each side ran"): `mitigations` (Atoll `none`; Linux `off` or
/// `as-booted`, as asked on its command line), `tick_hz` (Atoll's from its boot line, Linux's
/// `CONFIG_HZ`), `thp` (Linux's policy as the guest reports it; Atoll `none`: it maps 4 KiB
/// pages only), and the guest's own `meltdown` and `spectre_v2` status.
fn add_conditions(r: &mut Record, job: &Job, ctx: &Context, conditions: &[(String, String)]) {
    let stated = |name: &str| conditions.iter().find(|c| c.0 == name).map(|c| c.1.as_str());
    match job.system {
        "atoll" => {
            r.insert("mitigations".into(), "none".into());
            r.insert("thp".into(), "none".into());
            if let Some(hz) = stated("tick_hz").and_then(|v| v.parse::<u64>().ok()) {
                r.insert("tick_hz".into(), hz.into());
            }
        }
        "linux" => {
            let asked = job.mitigations.map_or("off", |m| m.name());
            r.insert("mitigations".into(), asked.into());
            if let Some(hz) = ctx.linux_hz {
                r.insert("tick_hz".into(), hz.into());
            }
            if let Some(policy) = stated("thp") {
                r.insert("thp".into(), chosen(policy).into());
            }
            for name in ["meltdown", "spectre_v2"] {
                if let Some(value) = stated(name) {
                    r.insert(name.into(), value.into());
                }
            }
        }
        _ => {}
    }
}

/// The chosen word of a sysfs choice list: `never` from `always madvise [never]`.
fn chosen(list: &str) -> &str {
    let inner = list.split_once('[').and_then(|(_, rest)| rest.split_once(']'));
    inner.map_or(list, |(word, _)| word)
}

/// A record's string field.
pub fn text<'a>(r: &'a Record, key: &str) -> &'a str {
    r.get(key).and_then(Value::as_str).unwrap_or("")
}

/// A record's number field.
pub fn number(r: &Record, key: &str) -> Option<f64> {
    r.get(key).and_then(Value::as_f64)
}

/// The row a record belongs to beside its metric: `pair=[0,1] impl=pipe`,
/// `config=shared-as`, or empty. `extra` are the experiment's own row fields
/// (`Experiment::rows_by`), placed before `active_cores`.
pub fn variant(r: &Record, extra: &[&str]) -> String {
    variant_without(r, extra, "")
}

/// [`variant`] leaving out the field `skip`.
pub fn variant_without(r: &Record, extra: &[&str], skip: &str) -> String {
    let (last, common) = VARIANT_FIELDS.split_last().expect("variant fields");
    let fields = common.iter().chain(extra.iter().filter(|k| !VARIANT_FIELDS.contains(k)));
    let parts: Vec<String> = fields
        .chain([last])
        .filter(|&&k| k != skip)
        .filter_map(|&k| r.get(k).map(|v| format!("{k}={}", plain(v))))
        .collect();
    parts.join(" ")
}

/// A JSON value without the quotes around strings.
fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Writes `records` as a pretty JSON list.
pub fn write_json(path: &Path, records: &[Record]) -> Result {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(records).map_err(|e| e.to_string())?;
    fs::write(path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))
}

/// Reads a `results.json`.
pub fn read_json(path: &Path) -> Result<Vec<Record>> {
    let text = fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// The commit measured: short hash, `-dirty` if the tree has changes; `unknown` without git.
pub fn git_describe() -> String {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(build::root())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    match git(&["rev-parse", "--short", "HEAD"]) {
        Some(hash) => {
            let dirty = git(&["status", "--porcelain"]).is_some_and(|s| !s.is_empty());
            if dirty {
                format!("{hash}-dirty")
            } else {
                hash
            }
        }
        None => "unknown".into(),
    }
}

/// The CPUs this host offers us.
pub fn host_cpus() -> u32 {
    thread::available_parallelism().map_or(1, |n| n.get() as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::registry;

    fn job(system: &'static str, cores: u32) -> Job {
        Job {
            experiment: registry::find("shm_vs_msg").unwrap(),
            system,
            mitigations: None,
            cores,
            repeat: 2,
            variant: None,
        }
    }

    fn ctx() -> Context {
        Context { accel: "tcg".into(), git: "abc".into(), host_cpus: 2, linux_hz: Some(250) }
    }

    #[test]
    fn records_state_each_side_s_conditions() {
        use crate::bench::guest::Mitigations;
        let line = r#"{"experiment":"nullsys","system":"linux","cores":1,"metric":"m","value":1,"unit":"u"}"#;
        let mut linux = job("linux", 1);
        linux.mitigations = Some(Mitigations::AsBooted);
        let said = [
            ("thp".to_string(), "always madvise [never]".to_string()),
            ("spectre_v2".to_string(), "Mitigation: Retpolines".to_string()),
        ];
        let r = record(line, &linux, &ctx(), &said).unwrap();
        assert_eq!(
            (&r["mitigations"], &r["thp"], &r["tick_hz"], &r["spectre_v2"]),
            (&"as-booted".into(), &"never".into(), &250.into(), &"Mitigation: Retpolines".into())
        );
        let line = line.replace("linux", "atoll");
        let ticks = [("tick_hz".to_string(), "250".to_string())];
        let r = record(&line, &job("atoll", 1), &ctx(), &ticks).unwrap();
        assert_eq!((&r["mitigations"], &r["tick_hz"]), (&"none".into(), &250.into()));
        assert_eq!(chosen("[always] madvise never"), "always");
    }

    #[test]
    fn a_line_becomes_a_record_with_its_context() {
        let line = r#"{"experiment":"shm_vs_msg","system":"atoll","cores":1,"metric":"cycles_per_update","value":51,"unit":"cycles","protocol":"shm1","lines":1}"#;
        let r = record(line, &job("atoll", 4), &ctx(), &[]).unwrap();
        let keys: Vec<&str> = r.keys().map(String::as_str).collect();
        assert_eq!(
            keys[..9],
            ["experiment", "system", "cores", "metric", "value", "unit", "repeat", "accel", "git"]
        );
        assert_eq!(r["cores"], 4);
        assert_eq!(r["active_cores"], 1);
        assert_eq!(r["oversubscribed"], true);
        assert_eq!(r["protocol"], "shm1");
        assert_eq!(variant(&r, &[]), "protocol=shm1 active_cores=1");
        assert_eq!(number(&r, "value"), Some(51.0));
    }

    #[test]
    fn a_line_of_the_wrong_system_or_bad_json_is_refused() {
        let line =
            r#"{"experiment":"x","system":"linux","cores":1,"metric":"m","value":1,"unit":"u"}"#;
        assert!(record(line, &job("atoll", 1), &ctx(), &[]).is_err());
        assert!(record("{not json", &job("atoll", 1), &ctx(), &[]).is_err());
        let r = record(line, &job("linux", 1), &ctx(), &[]).unwrap();
        assert!(!r.contains_key("active_cores") && !r.contains_key("oversubscribed"));
    }

    #[test]
    fn variants_can_leave_a_field_out() {
        let line = r#"{"experiment":"urpc","system":"linux","cores":2,"metric":"m","value":1,"unit":"u","pair":[0,1],"impl":"pipe"}"#;
        let r = record(line, &job("linux", 2), &ctx(), &[]).unwrap();
        assert_eq!(variant(&r, &[]), "pair=[0,1] impl=pipe");
        assert_eq!(variant_without(&r, &[], "impl"), "pair=[0,1]");
    }

    #[test]
    fn both_spellings_of_the_working_cores_give_the_same_row() {
        let job = |system| Job {
            experiment: registry::find("memclone").unwrap(),
            system,
            mitigations: None,
            cores: 2,
            repeat: 1,
            variant: None,
        };
        let atoll = r#"{"experiment":"memclone","system":"atoll","config":"shared-as","active_cores":2,"metric":"cycles_per_page","value":9,"unit":"cycles","mb":16}"#;
        let linux = r#"{"experiment":"memclone","system":"linux","cores":2,"metric":"cycles_per_page","value":7,"unit":"cycles","config":"shared-as","mb":16}"#;
        let a = record(atoll, &job("atoll"), &ctx(), &[]).unwrap();
        let l = record(linux, &job("linux"), &ctx(), &[]).unwrap();
        assert!(!a.contains_key("active_cores") && !l.contains_key("active_cores"));
        assert_eq!(variant(&a, &["config"]), "config=shared-as");
        assert_eq!(variant(&a, &["config"]), variant(&l, &["config"]));
        // Without the experiment's own fields the config is not a row of its own.
        assert_eq!(variant(&a, &[]), "");
        let one = atoll.replace(r#""active_cores":2"#, r#""active_cores":1"#);
        let a1 = record(&one, &job("atoll"), &ctx(), &[]).unwrap();
        assert_eq!(variant(&a1, &["config"]), "config=shared-as active_cores=1");
    }
}
