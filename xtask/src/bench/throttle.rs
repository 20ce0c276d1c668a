//! Slow vCPUs for the Linux guest (issue M7): the host puts QEMU's vCPU threads in a
//! cgroup with a CPU quota, so Linux runs on cores as slow as the ones Atoll emulates with
//! `asym=` (Atoll halts its slow core for the rest of every millisecond; the host's
//! scheduler stops the vCPU thread for the rest of every period). QMP's `query-cpus-fast`
//! names each vCPU's thread. Needs a writable cgroup `cpu` controller (v1 at
//! `/sys/fs/cgroup/cpu`, or v2 with `cpu.max` in threaded mode): where the host does not
//! allow it (not root, no such controller), the job fails saying so.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::Result;

/// The quota period: 8 ms, so every eighth of a duty is a whole millisecond (a cgroup
/// quota is at least 1 ms).
const PERIOD_US: u64 = 8000;

/// A cgroup made for one run's slow vCPUs; removed when dropped (its threads have ended
/// with QEMU by then).
pub struct SlowCores {
    groups: Vec<PathBuf>,
}

impl Drop for SlowCores {
    fn drop(&mut self) {
        for g in &self.groups {
            // A cgroup goes once it has no thread; QEMU's may take a moment to be reaped.
            for _ in 0..50 {
                if fs::remove_dir(g).is_ok() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// The cgroup v1 `cpu` hierarchy, if the host has a writable one.
fn hierarchy() -> Result<PathBuf> {
    let v1 = Path::new("/sys/fs/cgroup/cpu");
    if v1.join("cpu.cfs_quota_us").exists() {
        return Ok(v1.to_path_buf());
    }
    Err("the host has no cgroup v1 `cpu` controller at /sys/fs/cgroup/cpu, so Linux cannot \
         run on throttled vCPUs here (Atoll's amps and symmetric runs still compare)"
        .into())
}

/// Asks QEMU's QMP socket at `socket` for each vCPU's host thread id, by vCPU index.
pub fn vcpu_threads(socket: &Path, timeout: Duration) -> Result<Vec<(u32, u32)>> {
    let start = Instant::now();
    let stream = loop {
        match UnixStream::connect(socket) {
            Ok(s) => break s,
            Err(e) if start.elapsed() > timeout => {
                return Err(format!("QMP socket {}: {e}", socket.display()))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    stream.set_read_timeout(Some(timeout)).map_err(|e| format!("QMP: {e}"))?;
    let mut writer = stream.try_clone().map_err(|e| format!("QMP: {e}"))?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).map_err(|e| format!("QMP greeting: {e}"))?;
    let mut ask = |command: &str| -> Result<serde_json::Value> {
        writeln!(writer, "{{\"execute\":\"{command}\"}}").map_err(|e| format!("QMP: {e}"))?;
        loop {
            let mut answer = String::new();
            reader.read_line(&mut answer).map_err(|e| format!("QMP {command}: {e}"))?;
            let value: serde_json::Value =
                serde_json::from_str(&answer).map_err(|e| format!("QMP {command}: {e}"))?;
            if value.get("return").is_some() {
                return Ok(value["return"].clone());
            }
            if let Some(error) = value.get("error") {
                return Err(format!("QMP {command}: {error}"));
            }
            // An event: read on.
        }
    };
    ask("qmp_capabilities")?;
    let cpus = ask("query-cpus-fast")?;
    let list = cpus.as_array().ok_or("QMP query-cpus-fast: not a list")?;
    let mut threads = Vec::new();
    for cpu in list {
        let index = cpu["cpu-index"].as_u64().ok_or("QMP: a vCPU without cpu-index")?;
        let thread = cpu["thread-id"].as_u64().ok_or("QMP: a vCPU without thread-id")?;
        threads.push((index as u32, thread as u32));
    }
    Ok(threads)
}

/// Puts each listed vCPU's thread (from `threads`, by index) in a cgroup of its own that
/// gets `eighths` of every [`PERIOD_US`].
pub fn slow_down(threads: &[(u32, u32)], slow: &[(u32, u8)]) -> Result<SlowCores> {
    let root = hierarchy()?;
    let mut made = SlowCores { groups: Vec::new() };
    for &(vcpu, eighths) in slow {
        let &(_, tid) = threads
            .iter()
            .find(|(i, _)| *i == vcpu)
            .ok_or_else(|| format!("the VM has no vCPU {vcpu}"))?;
        let group = root.join(format!("atoll-bench-{}-vcpu{vcpu}", std::process::id()));
        fs::create_dir_all(&group)
            .map_err(|e| format!("cannot make cgroup {}: {e} (root needed)", group.display()))?;
        made.groups.push(group.clone());
        let write = |file: &str, value: String| {
            fs::write(group.join(file), &value)
                .map_err(|e| format!("cannot write {value} to {}/{file}: {e}", group.display()))
        };
        write("cpu.cfs_period_us", PERIOD_US.to_string())?;
        write("cpu.cfs_quota_us", (PERIOD_US * u64::from(eighths) / 8).to_string())?;
        write("tasks", tid.to_string())?;
    }
    Ok(made)
}
