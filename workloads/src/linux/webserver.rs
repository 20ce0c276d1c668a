//! `web_static` in the Linux guest (Multikernel §5.4; issue M12): one web server serves the
//! bench disk's pages (`/mnt/www`, the page `static.html`) on port 80 for a while, and
//! `wrk` on the host measures its requests per second and latency through QEMU's forward.
//! The server is webd on Linux ([`super::webd`], in this process), lighttpd or nginx
//! (Debian bookworm's `lighttpd` 1.4.69 and `nginx` 1.22.1, run from `/usr/sbin`).
//!
//! Multikernel §5.4 tuned the servers it compared with: no modules or logging beyond
//! what serving static files needs, epoll, many descriptors, long keep-alive. The
//! configurations are written at run time under `/tmp` ([`nginx_conf`],
//! [`lighttpd_conf`]), with every path they name there or in the document root, so the
//! guest needs of the packages only their binaries and libraries (and, for nginx's
//! workers' user, `/etc/passwd` and `/etc/group`). Each is checked by the server itself
//! (`nginx -t`, `lighttpd -tt`) before it starts, and the run prints
//! `web_static: SERVER serving DOCROOT on port PORT` only once the port listens.

use std::fs::{self, File};
use std::io::Read;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::string::{String, ToString};
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};
use std::vec::Vec;

use super::webd::Webd;

/// The pages served: the bench disk's `/www`, where the guest's `/init` mounts it.
pub const DOCROOT: &str = "/mnt/www";
/// The port served (QEMU forwards a host port to it).
pub const PORT: u16 = 80;
/// How long a server serves when not told.
pub const DEFAULT_SECONDS: u64 = 300;
/// The longest it may be told to.
pub const MAX_SECONDS: u64 = 3600;
/// Where lighttpd and nginx are (Debian's paths).
pub const SBIN: &str = "/usr/sbin";
/// An environment variable naming another directory for them (the host tests run the
/// packages' binaries unpacked somewhere else).
pub const SBIN_VARIABLE: &str = "WEB_STATIC_SBIN";

/// Longest a server may take to check its configuration, or to listen once started.
const START: Duration = Duration::from_secs(10);
/// Longest a stopped server may take to leave before it is killed.
const STOP: Duration = Duration::from_secs(5);
/// How often a child is looked at while waiting.
const POLL: Duration = Duration::from_millis(50);
/// Lines of a server's output an error quotes.
const TAIL_LINES: usize = 20;
/// Descriptors each server may hold (Multikernel §5.4: many).
const MAX_FDS: usize = 16384;
/// Connections an nginx worker takes (the brief of §5.4's tuning).
const NGINX_CONNECTIONS: usize = 4096;

/// A server `web_static` compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Server {
    /// Atoll's webd on Linux, in this process.
    Webd,
    /// lighttpd, one process with one thread.
    Lighttpd,
    /// nginx, a master and a worker process per CPU.
    Nginx,
}

impl Server {
    /// Every server, in the order the experiment lists them.
    pub const ALL: [Server; 3] = [Server::Webd, Server::Lighttpd, Server::Nginx];

    /// The server called `name`.
    pub fn parse(name: &str) -> Option<Server> {
        Server::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Its name on the command line, in the output and of its binary.
    pub fn name(self) -> &'static str {
        match self {
            Server::Webd => "webd",
            Server::Lighttpd => "lighttpd",
            Server::Nginx => "nginx",
        }
    }
}

/// The words after `web_static` on the command line, `SERVER[,SECONDS]`: the server, and
/// the seconds to serve (default [`DEFAULT_SECONDS`], 1 to [`MAX_SECONDS`]).
pub fn parse_args(words: &[String]) -> Result<(Server, u64), String> {
    let Some(name) = words.first() else {
        return Err("web_static needs a server: webd, lighttpd or nginx".into());
    };
    let server = Server::parse(name)
        .ok_or_else(|| format!("web_static: no server {name:?} (webd, lighttpd or nginx)"))?;
    let seconds = match words.get(1) {
        None => DEFAULT_SECONDS,
        Some(word) => word
            .parse()
            .ok()
            .filter(|s| (1..=MAX_SECONDS).contains(s))
            .ok_or_else(|| format!("web_static: bad seconds {word:?} (1 to {MAX_SECONDS})"))?,
    };
    if words.len() > 2 {
        return Err(format!("web_static: too many arguments {:?}", &words[2..]));
    }
    Ok((server, seconds))
}

/// Serves `docroot` on `addr` with `server` for `seconds`, then stops it: lines to print
/// about the run (the measurements are the host's).
pub fn run(
    server: Server,
    docroot: &Path,
    addr: SocketAddrV4,
    seconds: u64,
) -> Result<Vec<String>, String> {
    if !docroot.is_dir() {
        return Err(format!("no document root {} (is the bench disk mounted?)", docroot.display()));
    }
    match server {
        Server::Webd => run_webd(docroot, addr, seconds),
        other => run_child(other, docroot, addr, seconds),
    }
}

/// Says that `server` serves; the host's load may start.
fn announce(server: Server, docroot: &Path, addr: SocketAddrV4) {
    println!("web_static: {} serving {} on port {}", server.name(), docroot.display(), addr.port());
}

/// webd on Linux, in this process.
fn run_webd(docroot: &Path, addr: SocketAddrV4, seconds: u64) -> Result<Vec<String>, String> {
    let webd = Webd::bind(docroot, addr)?;
    let (threads, files, bytes) = (webd.threads(), webd.files().len(), webd.files().bytes());
    announce(Server::Webd, docroot, addr);
    let responses = webd.serve(Duration::from_secs(seconds))?;
    Ok(vec![format!(
        "web_static: webd sent {responses} responses in {seconds} s ({threads} threads, \
         {files} files of {bytes} bytes in memory)"
    )])
}

/// lighttpd or nginx as a child process, its configuration and files in a directory of
/// its own under `/tmp`, removed afterwards.
fn run_child(
    server: Server,
    docroot: &Path,
    addr: SocketAddrV4,
    seconds: u64,
) -> Result<Vec<String>, String> {
    // Named for the process and the run, so no two runs share one.
    static RUNS: AtomicU64 = AtomicU64::new(0);
    let run = RUNS.fetch_add(1, Ordering::Relaxed);
    let dir = format!("/tmp/web_static-{}-{}-{run}", server.name(), std::process::id());
    let dir = PathBuf::from(dir);
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let outcome = serve_child(server, docroot, addr, seconds, &dir);
    let _ = fs::remove_dir_all(&dir);
    outcome
}

/// Writes and checks the configuration, starts the server, waits until it listens, lets
/// it serve for `seconds` and stops it.
fn serve_child(
    server: Server,
    docroot: &Path,
    addr: SocketAddrV4,
    seconds: u64,
    dir: &Path,
) -> Result<Vec<String>, String> {
    let name = server.name();
    for path in [docroot, dir] {
        if !plain(path) {
            return Err(format!("{name} cannot be configured with the path {}", path.display()));
        }
    }
    let conf = dir.join(format!("{name}.conf"));
    let text = match server {
        Server::Nginx => nginx_conf(docroot, addr, super::allowed_cpus().len().max(1), dir),
        _ => lighttpd_conf(docroot, addr, dir),
    };
    fs::write(&conf, text).map_err(|e| format!("{}: {e}", conf.display()))?;
    let binary = sbin().join(name);
    check_config(server, &binary, &conf, dir)?;
    let mut command = Command::new(&binary);
    match server {
        // `-e stderr`: the log nginx opens before it reads its configuration.
        Server::Nginx => command.arg("-e").arg("stderr").arg("-c").arg(&conf),
        _ => command.arg("-D").arg("-f").arg(&conf),
    };
    let mut child = Running::start(name, command, &dir.join(format!("{name}.log")))?;
    child.wait_listening(addr)?;
    announce(server, docroot, addr);
    child.serve_until(Instant::now() + Duration::from_secs(seconds))?;
    let status = child.stop();
    Ok(vec![format!("web_static: {name} served {seconds} s, stopped ({status})")])
}

/// Where lighttpd and nginx are: [`SBIN`], or the directory [`SBIN_VARIABLE`] names.
pub fn sbin() -> PathBuf {
    std::env::var_os(SBIN_VARIABLE).map_or_else(|| PathBuf::from(SBIN), PathBuf::from)
}

/// Whether `path` can be written into a configuration as it is: no quotes, escapes,
/// variables, separators or control characters, in nginx's syntax or lighttpd's.
fn plain(path: &Path) -> bool {
    path.to_str().is_some_and(|p| {
        !p.is_empty() && p.chars().all(|c| !c.is_control() && !"\"'\\$;{}#".contains(c))
    })
}

/// nginx's configuration for `web_static` (Multikernel §5.4's tuning): `workers` worker
/// processes (one per CPU) with epoll and many connections each, no access log, errors
/// only from `crit` on and to stderr, sendfile, `TCP_NODELAY`, long keep-alive; the pid
/// file and the temporary directories under `dir`; HTML's type given here, so no
/// `mime.types` is read.
pub fn nginx_conf(docroot: &Path, addr: SocketAddrV4, workers: usize, dir: &Path) -> String {
    let (root, dir) = (docroot.display(), dir.display());
    format!(
        "# web_static (Multikernel §5.4): nginx tuned for static files, by atoll-bench-linux.
daemon off;
master_process on;
worker_processes {workers};
worker_rlimit_nofile {MAX_FDS};
user nobody nogroup;
pid \"{dir}/nginx.pid\";
error_log stderr crit;
events {{
    use epoll;
    worker_connections {NGINX_CONNECTIONS};
    multi_accept on;
}}
http {{
    access_log off;
    sendfile on;
    tcp_nodelay on;
    keepalive_timeout 10s;
    keepalive_requests 100000000;
    client_body_temp_path \"{dir}/client_body\";
    proxy_temp_path \"{dir}/proxy\";
    fastcgi_temp_path \"{dir}/fastcgi\";
    uwsgi_temp_path \"{dir}/uwsgi\";
    scgi_temp_path \"{dir}/scgi\";
    types {{
        text/html html htm;
    }}
    default_type application/octet-stream;
    server {{
        listen {addr};
        root \"{root}\";
        index index.html;
    }}
}}
"
    )
}

/// lighttpd's configuration for `web_static` (Multikernel §5.4's tuning): Linux epoll,
/// many descriptors, as many requests per connection as it allows (65535), sendfile; no
/// modules but the two built in that serve files (so none is loaded from
/// `/usr/lib/lighttpd`), hence no access log; errors to stderr; the pid file and upload
/// directory under `dir`; HTML's type given here.
pub fn lighttpd_conf(docroot: &Path, addr: SocketAddrV4, dir: &Path) -> String {
    let (root, dir, ip, port) = (docroot.display(), dir.display(), addr.ip(), addr.port());
    format!(
        "# web_static (Multikernel §5.4): lighttpd tuned for static files, by atoll-bench-linux.
server.document-root = \"{root}\"
server.bind = \"{ip}\"
server.port = {port}
server.pid-file = \"{dir}/lighttpd.pid\"
server.upload-dirs = ( \"{dir}\" )
server.event-handler = \"linux-sysepoll\"
server.network-backend = \"sendfile\"
server.max-fds = {MAX_FDS}
server.max-connections = {connections}
server.max-keep-alive-requests = 65535
server.max-keep-alive-idle = 10
server.compat-module-load = \"disable\"
server.modules = ( \"mod_indexfile\", \"mod_staticfile\" )
index-file.names = ( \"index.html\" )
mimetype.assign = ( \".html\" => \"text/html\", \".htm\" => \"text/html\" )
",
        connections = MAX_FDS / 2
    )
}

/// Has `server` check configuration `conf` (`nginx -t`, `lighttpd -tt`, which also loads
/// its modules); its complaint if it finds one.
pub fn check_config(server: Server, binary: &Path, conf: &Path, dir: &Path) -> Result<(), String> {
    let name = server.name();
    let mut command = Command::new(binary);
    match server {
        Server::Nginx => command.arg("-e").arg("stderr").arg("-t").arg("-c").arg(conf),
        _ => command.arg("-tt").arg("-f").arg(conf),
    };
    let log = dir.join(format!("{name}-check.log"));
    let mut child = Running::start(name, command, &log)?;
    let deadline = Instant::now() + START;
    // Bounded by the deadline.
    let status = loop {
        match child.child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => thread::sleep(POLL),
            _ => return Err(format!("{name}'s configuration check did not end: {}", child.tail())),
        }
    };
    child.reaped = true;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{name} refuses its configuration ({status}): {}", child.tail()))
    }
}

/// Whether the kernel's table of TCP sockets (`/proc/net/tcp`) has one listening on
/// `addr` (or on its port of every address).
pub fn listening(table: &str, addr: SocketAddrV4) -> bool {
    table.lines().skip(1).any(|line| {
        // `sl local_address rem_address st ...`, an address as `0100007F:0050`.
        let mut fields = line.split_whitespace();
        let (Some(local), Some(state)) = (fields.nth(1), fields.nth(1)) else { return false };
        let Some((ip, port)) = local.split_once(':') else { return false };
        let (Ok(ip), Ok(port)) = (u32::from_str_radix(ip, 16), u16::from_str_radix(port, 16))
        else {
            return false;
        };
        // The kernel prints the address's bytes read as a word of this machine's order.
        let ip = Ipv4Addr::from(ip.to_ne_bytes());
        state == "0A" && port == addr.port() && (ip == *addr.ip() || ip.is_unspecified())
    })
}

/// A server process, in a process group of its own (nginx's workers with it), its
/// output going to a file; stopped when dropped.
struct Running {
    name: &'static str,
    child: Child,
    log: PathBuf,
    /// It has been waited for.
    reaped: bool,
    /// What it left in its group has been stopped too.
    stopped: bool,
}

impl Running {
    /// Starts `command`, its output to `log`.
    fn start(name: &'static str, mut command: Command, log: &Path) -> Result<Running, String> {
        use std::os::unix::process::CommandExt;
        let out = File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| format!("{}: {e}", log.display()))?;
        command.stdin(Stdio::null()).stdout(out).stderr(err).process_group(0);
        let child = command
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", command.get_program().display()))?;
        Ok(Running { name, child, log: log.to_path_buf(), reaped: false, stopped: false })
    }

    /// The last lines of its output.
    fn tail(&self) -> String {
        let mut text = String::new();
        if let Ok(mut file) = File::open(&self.log) {
            let _ = file.read_to_string(&mut text);
        }
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(TAIL_LINES)..].join("\n");
        if tail.is_empty() {
            "(no output)".into()
        } else {
            tail
        }
    }

    /// An error if it has ended.
    fn still_running(&mut self) -> Result<(), String> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => {
                self.reaped = true;
                Err(format!("{} exited early ({status}): {}", self.name, self.tail()))
            }
            Err(e) => Err(format!("{}: {e}", self.name)),
        }
    }

    /// Waits until something listens on `addr` (at most [`START`]).
    fn wait_listening(&mut self, addr: SocketAddrV4) -> Result<(), String> {
        let deadline = Instant::now() + START;
        // Bounded by the deadline.
        while Instant::now() < deadline {
            self.still_running()?;
            if listening(&fs::read_to_string("/proc/net/tcp").unwrap_or_default(), addr) {
                return Ok(());
            }
            thread::sleep(POLL);
        }
        Err(format!("{} does not listen on {addr} after {START:?}: {}", self.name, self.tail()))
    }

    /// Lets it serve until `deadline`; an error if it ends before.
    fn serve_until(&mut self, deadline: Instant) -> Result<(), String> {
        // Bounded by the deadline.
        while Instant::now() < deadline {
            self.still_running()?;
            thread::sleep(POLL.min(deadline.saturating_duration_since(Instant::now())));
        }
        self.still_running()
    }

    /// Stops it: SIGTERM to its group (nginx's master stops its workers), SIGKILL to
    /// whatever is left after [`STOP`], also when the server itself ended (a master that
    /// died may leave workers); how it ended.
    fn stop(&mut self) -> String {
        if self.stopped {
            return "stopped".into();
        }
        self.stopped = true;
        let group = self.child.id();
        let mut status = "ended by itself".to_string();
        if !self.reaped {
            signal_group(group, libc::SIGTERM);
            let ended = wait_for(&mut self.child, STOP).or_else(|| {
                signal_group(group, libc::SIGKILL);
                self.child.wait().ok()
            });
            self.reaped = true;
            status = ended.map_or_else(|| "not reaped".into(), |s| s.to_string());
        }
        // Bounded by the deadline.
        let deadline = Instant::now() + STOP;
        while signal_group(group, 0) && Instant::now() < deadline {
            thread::sleep(POLL);
        }
        if signal_group(group, 0) {
            signal_group(group, libc::SIGKILL);
        }
        status
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Waits at most `timeout` for `child` to end; its status if it did.
fn wait_for(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    // Bounded by the deadline.
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => thread::sleep(POLL),
            _ => return None,
        }
    }
}

/// Sends `signal` to process group `group` (0 only asks whether it has members); whether
/// it was delivered.
fn signal_group(group: u32, signal: libc::c_int) -> bool {
    let Ok(group) = libc::pid_t::try_from(group) else { return false };
    // SAFETY: kill takes plain integers and touches no memory of ours; `group` is the
    // group this process made for its own child, whose pid names it.
    unsafe { libc::kill(-group, signal) == 0 }
}

#[cfg(test)]
mod tests;
