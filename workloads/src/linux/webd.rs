//! webd on Linux (Multikernel §5.4, `web_static`; issue M12): the protocol code of Atoll's
//! `webd` (`user/programs/src/bin/webd/`, through [`crate::http`]) over std sockets and
//! epoll, so that the comparison with lighttpd and nginx in the Linux guest, and with webd
//! on Atoll, measures the systems rather than two different servers.
//!
//! One thread per CPU the process may run on, each pinned, with a listening socket of its
//! own on the same address (`SO_REUSEPORT`: the kernel spreads connections over them by a
//! hash of the flow, so no two threads share a queue or a lock) and an epoll loop of its
//! own over its non-blocking connections (`TCP_NODELAY`). Every file under the document
//! root is read once at start, so no request waits for the disk. Per connection: input
//! buffered, every complete request answered in turn (pipelining), output kept until the
//! socket takes it (`EPOLLOUT`), the connection closed after an error or when the request
//! says so, and reset after [`IDLE`] without traffic, as on Atoll.

use std::collections::HashMap;
use std::fs;
use std::io::{self, ErrorKind, Read, Write};
use std::mem::size_of;
use std::net::{SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::string::String;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};
use std::vec::Vec;

use crate::http::{self, Parsed};

/// How long a connection may stay silent, neither sending nor taking anything, before it
/// is reset (10 s, as webd on Atoll): a forgotten keep-alive or a half-sent request must
/// not hold a descriptor for the rest of the run.
pub const IDLE: Duration = Duration::from_secs(10);

/// Most files read from the document root.
pub const MAX_FILES: usize = 4096;
/// Most bytes read from the document root (the bench disk's `/www` holds about 21 MiB:
/// the page and filesum's files).
pub const MAX_BYTES: usize = 64 << 20;
/// Deepest directory read below the document root (also ends a loop of symbolic links).
pub const MAX_DEPTH: usize = 8;
/// Connections waiting to be accepted on each listening socket.
const BACKLOG: libc::c_int = 1024;
/// Events taken from epoll at once.
const EVENTS: usize = 256;
/// Connections accepted per wake-up of a listener, so a burst of new connections cannot
/// starve the open ones.
const ACCEPTS_PER_WAKE: usize = 64;
/// Bytes read from a connection at once.
const READ_CHUNK: usize = 16 * 1024;
/// Unsent output above which a connection's further pipelined requests wait: a burst of
/// requests for large files must not make the server hold all their answers at once.
const OUTPUT_HIGH: usize = 256 * 1024;
/// Longest a worker sleeps in epoll, so it sees the deadline, the stop flag and idle
/// connections in time.
const TICK: Duration = Duration::from_millis(200);
/// The epoll token of the listening socket (connections are their slot numbers).
const LISTENER: u64 = u64::MAX;
/// Most descriptors webd asks for (its soft limit is raised toward the hard one).
const FD_LIMIT: libc::rlim_t = 65536;

/// The files served, each read once from the document root, by the name a request
/// resolves to (`workloads::http::resolve`: `index.html`, `fs/64k-0`).
pub struct Files {
    by_name: HashMap<String, Vec<u8>>,
    bytes: usize,
}

impl Files {
    /// Reads every file under `docroot` (following symbolic links, at most [`MAX_DEPTH`]
    /// directories deep) whose name a request can reach; an error if it cannot be read or
    /// holds more than [`MAX_FILES`] files or [`MAX_BYTES`] bytes.
    pub fn load(docroot: &Path) -> Result<Files, String> {
        let mut files = Files { by_name: HashMap::new(), bytes: 0 };
        files.read_dir(docroot, "", 0)?;
        Ok(files)
    }

    /// Reads directory `dir`, whose files are named `prefix/NAME`.
    fn read_dir(&mut self, dir: &Path, prefix: &str, depth: usize) -> Result<(), String> {
        let entries = fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
            let Some(name) = entry.file_name().to_str().map(String::from) else { continue };
            let name = if prefix.is_empty() { name } else { format!("{prefix}/{name}") };
            // A name no request resolves to could never be served: not worth the memory.
            if http::resolve(&format!("/{name}")).as_deref() != Some(name.as_str()) {
                continue;
            }
            let path = entry.path();
            let meta = fs::metadata(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            if meta.is_dir() && depth < MAX_DEPTH {
                self.read_dir(&path, &name, depth + 1)?;
            } else if meta.is_file() {
                let bytes = fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                self.bytes += bytes.len();
                if self.by_name.len() >= MAX_FILES || self.bytes > MAX_BYTES {
                    return Err(format!(
                        "more than {MAX_FILES} files or {MAX_BYTES} bytes under the document root"
                    ));
                }
                self.by_name.insert(name, bytes);
            }
        }
        Ok(())
    }

    /// The bytes of file `name`.
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.by_name.get(name).map(Vec::as_slice)
    }

    /// How many files there are.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// Their bytes in all.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

/// webd bound and ready: the files read, a listening socket for every CPU.
pub struct Webd {
    files: Files,
    /// Each CPU and its listening socket.
    listeners: Vec<(usize, TcpListener)>,
    addr: SocketAddrV4,
    idle: Duration,
}

impl Webd {
    /// Reads the files under `docroot` and binds a listening socket on `addr` for every
    /// CPU the process may run on (port 0: one port the kernel chooses, the same for all).
    /// Connections queue from here on; [`Webd::serve`] answers them.
    pub fn bind(docroot: &Path, addr: SocketAddrV4) -> Result<Webd, String> {
        let files = Files::load(docroot)?;
        raise_fd_limit();
        let mut cpus = super::allowed_cpus();
        if cpus.is_empty() {
            cpus.push(0);
        }
        let mut listeners = Vec::with_capacity(cpus.len());
        let mut addr = addr;
        for cpu in cpus {
            let listener = listen(addr).map_err(|e| format!("listen on {addr}: {e}"))?;
            // The first socket's port, when the kernel chose it, is everyone's.
            if let Ok(std::net::SocketAddr::V4(bound)) = listener.local_addr() {
                addr = bound;
            }
            listeners.push((cpu, listener));
        }
        Ok(Webd { files, listeners, addr, idle: IDLE })
    }

    /// The address it listens on (with the port the kernel chose, if asked to).
    pub fn addr(&self) -> SocketAddrV4 {
        self.addr
    }

    /// Its serving threads (one per CPU).
    pub fn threads(&self) -> usize {
        self.listeners.len()
    }

    /// The files it serves.
    pub fn files(&self) -> &Files {
        &self.files
    }

    /// Resets connections silent for `idle` rather than [`IDLE`] (the tests wait less).
    pub fn with_idle(mut self, idle: Duration) -> Webd {
        self.idle = idle;
        self
    }

    /// Serves for `run_for`; the responses sent.
    pub fn serve(self, run_for: Duration) -> Result<u64, String> {
        self.serve_until(Instant::now() + run_for, &AtomicBool::new(false))
    }

    /// Serves until `deadline` or until `stop` is set; the responses sent. Every thread
    /// is pinned to its CPU; one that cannot be is an error, once the others are done.
    pub fn serve_until(self, deadline: Instant, stop: &AtomicBool) -> Result<u64, String> {
        let (files, idle) = (&self.files, self.idle);
        thread::scope(|s| {
            let handles: Vec<_> = self
                .listeners
                .into_iter()
                .map(|(cpu, listener)| {
                    s.spawn(move || {
                        super::pin(cpu)?;
                        let worker = Worker::new(files, listener, idle)
                            .map_err(|e| format!("epoll on CPU {cpu}: {e}"))?;
                        worker.run(deadline, stop).map_err(|e| format!("epoll on CPU {cpu}: {e}"))
                    })
                })
                .collect();
            let mut responses = 0;
            let mut failure = None;
            for handle in handles {
                match handle.join() {
                    Ok(Ok(n)) => responses += n,
                    Ok(Err(e)) => failure = Some(e),
                    Err(_) => failure = Some("a webd thread panicked".into()),
                }
            }
            failure.map_or(Ok(responses), Err)
        })
    }
}

/// An epoll instance.
struct Epoll(OwnedFd);

impl Epoll {
    fn new() -> io::Result<Epoll> {
        // SAFETY: epoll_create1 takes a flag and returns a new descriptor or -1.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor that nothing else owns.
        Ok(Epoll(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Adds (`EPOLL_CTL_ADD`) or changes (`EPOLL_CTL_MOD`) what `fd` is watched for.
    fn ctl(&self, op: libc::c_int, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        let mut event = libc::epoll_event { events, u64: token };
        // SAFETY: both descriptors are open, and `event` is a live epoll_event.
        let status = unsafe { libc::epoll_ctl(self.0.as_raw_fd(), op, fd, &mut event) };
        if status == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Waits at most `timeout` for events; how many were written to `events` (0 when a
    /// signal cut the wait short).
    fn wait(&self, events: &mut [libc::epoll_event], timeout: Duration) -> io::Result<usize> {
        let (max, ms) = (events.len() as libc::c_int, timeout.as_millis().max(1) as libc::c_int);
        // SAFETY: `events` is writable for the `max` entries the kernel is told of.
        let n = unsafe { libc::epoll_wait(self.0.as_raw_fd(), events.as_mut_ptr(), max, ms) };
        match usize::try_from(n) {
            Ok(n) => Ok(n),
            Err(_) if io::Error::last_os_error().kind() == ErrorKind::Interrupted => Ok(0),
            Err(_) => Err(io::Error::last_os_error()),
        }
    }
}

/// Sets socket option `name` of `level` on `fd` to `value`.
fn set_option<T>(fd: RawFd, level: libc::c_int, name: libc::c_int, value: &T) -> io::Result<()> {
    let len = size_of::<T>() as libc::socklen_t;
    // SAFETY: `value` is live and `len` bytes long; the kernel only reads it.
    let status = unsafe { libc::setsockopt(fd, level, name, (value as *const T).cast(), len) };
    if status == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A non-blocking listening socket on `addr` that shares the port with the other threads'
/// (`SO_REUSEPORT`, which std cannot set before binding).
fn listen(addr: SocketAddrV4) -> io::Result<TcpListener> {
    let kind = libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
    // SAFETY: socket takes plain integers and returns a new descriptor or -1.
    let fd = unsafe { libc::socket(libc::AF_INET, kind, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor that nothing else owns; dropping it closes it.
    let socket = unsafe { OwnedFd::from_raw_fd(fd) };
    let one: libc::c_int = 1;
    set_option(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, &one)?;
    set_option(fd, libc::SOL_SOCKET, libc::SO_REUSEPORT, &one)?;
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: addr.port().to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(addr.ip().octets()) },
        sin_zero: [0; 8],
    };
    let len = size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: `sin` is a live sockaddr_in of `len` bytes, only read; `fd` is open.
    let status = unsafe {
        if libc::bind(fd, (&sin as *const libc::sockaddr_in).cast(), len) == 0 {
            libc::listen(fd, BACKLOG)
        } else {
            -1
        }
    };
    if status != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(TcpListener::from(socket))
}

/// Raises the soft limit on descriptors toward the hard one (at most [`FD_LIMIT`]): a
/// load of many connections must not be refused at the guest's default of 1024.
fn raise_fd_limit() {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `limit` is a live rlimit: getrlimit writes it, setrlimit reads it.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            let wanted = limit.rlim_max.min(FD_LIMIT);
            if wanted > limit.rlim_cur {
                limit.rlim_cur = wanted;
                libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
            }
        }
    }
}

/// What a connection wants after its turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Next {
    /// Requests (`EPOLLIN`).
    Read,
    /// Room for its pending output (`EPOLLOUT`); it reads nothing until that has gone.
    Write,
    /// To be closed (its last response has gone, or it failed).
    Close,
}

/// One connection's state.
struct Conn {
    stream: TcpStream,
    /// Bytes received and not yet answered (a partial request, or pipelined ones waiting
    /// for output to drain).
    input: Vec<u8>,
    /// Responses not yet taken by the socket, from `sent` on.
    output: Vec<u8>,
    sent: usize,
    /// Close once the output has gone: after an error, `Connection: close` or HTTP/1.0
    /// without keep-alive.
    close_after: bool,
    /// The client has closed its side: it is answered what it asked for whole, then
    /// closed (what it left unfinished can never be completed).
    peer_done: bool,
    /// Watched for `EPOLLOUT` rather than `EPOLLIN`.
    writing: bool,
    /// When it last received or sent anything.
    active: Instant,
}

impl Conn {
    fn new(stream: TcpStream) -> Conn {
        Conn {
            stream,
            input: Vec::new(),
            output: Vec::new(),
            sent: 0,
            close_after: false,
            peer_done: false,
            writing: false,
            active: Instant::now(),
        }
    }

    /// Handles `flags` from epoll: reads, answers and sends what it can; what next.
    fn turn(&mut self, flags: u32, files: &Files, buf: &mut [u8], responses: &mut u64) -> Next {
        if flags & libc::EPOLLERR as u32 != 0 {
            return Next::Close;
        }
        if !self.writing && flags & (libc::EPOLLIN | libc::EPOLLHUP) as u32 != 0 {
            // One read per wake-up: epoll is level-triggered and says again if more came.
            match self.stream.read(buf) {
                Ok(0) => self.peer_done = true,
                Ok(n) => {
                    self.input.extend_from_slice(&buf[..n]);
                    self.active = Instant::now();
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
                Err(_) => return Next::Close,
            }
        }
        // Answer and send in turns. Bounded: a turn that answers something consumes input,
        // of which there is at most a read's worth beyond a request head.
        loop {
            let answered = self.answer(files);
            *responses += answered;
            match self.flush() {
                Err(_) => return Next::Close,
                Ok(false) => return Next::Write,
                Ok(true) if answered == 0 => break,
                Ok(true) => {}
            }
        }
        if self.close_after || self.peer_done {
            Next::Close
        } else {
            Next::Read
        }
    }

    /// Answers the complete requests at the start of the input until one says to close
    /// or [`OUTPUT_HIGH`] bytes wait to be sent; how many.
    fn answer(&mut self, files: &Files) -> u64 {
        let (mut used, mut answered) = (0, 0);
        // Bounded: every turn consumes input or leaves the loop.
        while !self.close_after && self.output.len() - self.sent < OUTPUT_HIGH {
            match http::parse(&self.input[used..]) {
                Parsed::Partial => break,
                Parsed::Request(request, n) => {
                    used += n;
                    self.close_after = !respond(&request, files, &mut self.output);
                }
                Parsed::Error(status) => {
                    used = self.input.len();
                    error(status, &mut self.output);
                    self.close_after = true;
                }
            }
            answered += 1;
        }
        self.input.drain(..used);
        if self.close_after {
            // Nothing after a closing request is ever answered.
            self.input.clear();
        }
        answered
    }

    /// Writes pending output until the socket takes no more; whether all of it has gone.
    fn flush(&mut self) -> io::Result<bool> {
        // Bounded: every write sends at least a byte or leaves the loop.
        while self.sent < self.output.len() {
            match self.stream.write(&self.output[self.sent..]) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.sent += n;
                    self.active = Instant::now();
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.output.clear();
        self.sent = 0;
        Ok(true)
    }

    /// Resets the connection (`SO_LINGER` 0: closing sends RST) rather than closing it.
    fn reset(self) {
        let abort = libc::linger { l_onoff: 1, l_linger: 0 };
        let _ = set_option(self.stream.as_raw_fd(), libc::SOL_SOCKET, libc::SO_LINGER, &abort);
    }
}

/// Appends the response to `request` to `out`; whether the connection stays open.
fn respond(request: &http::Request, files: &Files, out: &mut Vec<u8>) -> bool {
    let Some(body) = files.get(&request.file) else {
        error(404, out);
        return false;
    };
    let kind = http::content_type(&request.file);
    out.extend_from_slice(
        http::response_head(200, kind, body.len(), request.keep_alive).as_bytes(),
    );
    if !request.head_only {
        out.extend_from_slice(body);
    }
    request.keep_alive
}

/// Appends an error response to `out` (the connection closes after it).
fn error(status: u16, out: &mut Vec<u8>) {
    let body = http::error_body(status);
    let head = http::response_head(status, "text/plain; charset=utf-8", body.len(), false);
    out.extend_from_slice(head.as_bytes());
    out.extend_from_slice(body.as_bytes());
}

/// One serving thread: its listening socket, its epoll and its connections.
struct Worker<'a> {
    files: &'a Files,
    epoll: Epoll,
    listener: TcpListener,
    /// Connections by slot (the epoll token); `None` slots are in `free`.
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    idle: Duration,
    responses: u64,
}

impl<'a> Worker<'a> {
    fn new(files: &'a Files, listener: TcpListener, idle: Duration) -> io::Result<Worker<'a>> {
        let epoll = Epoll::new()?;
        epoll.ctl(libc::EPOLL_CTL_ADD, listener.as_raw_fd(), libc::EPOLLIN as u32, LISTENER)?;
        let (conns, free) = (Vec::new(), Vec::new());
        Ok(Worker { files, epoll, listener, conns, free, idle, responses: 0 })
    }

    /// Serves until `deadline` or `stop`; the responses sent.
    fn run(mut self, deadline: Instant, stop: &AtomicBool) -> io::Result<u64> {
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; EVENTS];
        let mut buf = vec![0u8; READ_CHUNK];
        // Idle connections are looked for a few times per `idle`, not on every wake-up.
        let sweep_every = (self.idle / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
        let mut swept = Instant::now();
        // Bounded by the deadline: every wait ends within a tick.
        loop {
            let now = Instant::now();
            if now >= deadline || stop.load(Ordering::Relaxed) {
                return Ok(self.responses);
            }
            let n = self.epoll.wait(&mut events, (deadline - now).min(TICK))?;
            for event in &events[..n] {
                let (token, flags) = (event.u64, event.events);
                if token == LISTENER {
                    self.accept();
                } else {
                    self.ready(token as usize, flags, &mut buf);
                }
            }
            if swept.elapsed() >= sweep_every {
                self.reset_idle();
                swept = Instant::now();
            }
        }
    }

    /// Accepts waiting connections (at most [`ACCEPTS_PER_WAKE`]).
    fn accept(&mut self) {
        for _ in 0..ACCEPTS_PER_WAKE {
            match self.listener.accept() {
                Ok((stream, _)) => self.add(stream),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                // No more waiting, or none can be taken now (out of descriptors, say): the
                // listener stays readable, so the next wake-up tries again.
                Err(_) => return,
            }
        }
    }

    /// Watches a new connection for requests.
    fn add(&mut self, stream: TcpStream) {
        if stream.set_nonblocking(true).is_err() {
            return;
        }
        // Responses leave at once, not after the delayed ACK of the last one.
        let _ = stream.set_nodelay(true);
        let slot = self.free.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.conns.len() - 1
        });
        let fd = stream.as_raw_fd();
        match self.epoll.ctl(libc::EPOLL_CTL_ADD, fd, libc::EPOLLIN as u32, slot as u64) {
            Ok(()) => self.conns[slot] = Some(Conn::new(stream)),
            Err(_) => self.free.push(slot),
        }
    }

    /// Gives connection `slot` its turn.
    fn ready(&mut self, slot: usize, flags: u32, buf: &mut [u8]) {
        let Some(conn) = self.conns.get_mut(slot).and_then(Option::as_mut) else { return };
        let next = conn.turn(flags, self.files, buf, &mut self.responses);
        let writing = match next {
            Next::Close => {
                self.conns[slot] = None;
                self.free.push(slot);
                return;
            }
            Next::Read => false,
            Next::Write => true,
        };
        if writing != conn.writing {
            conn.writing = writing;
            let events = if writing { libc::EPOLLOUT } else { libc::EPOLLIN } as u32;
            let fd = conn.stream.as_raw_fd();
            if self.epoll.ctl(libc::EPOLL_CTL_MOD, fd, events, slot as u64).is_err() {
                self.conns[slot] = None;
                self.free.push(slot);
            }
        }
    }

    /// Resets every connection silent for longer than `idle`.
    fn reset_idle(&mut self) {
        for slot in 0..self.conns.len() {
            if self.conns[slot].as_ref().is_some_and(|c| c.active.elapsed() > self.idle) {
                if let Some(conn) = self.conns[slot].take() {
                    conn.reset();
                }
                self.free.push(slot);
            }
        }
    }
}

#[cfg(test)]
mod tests;
