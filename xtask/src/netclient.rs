//! The host's side of the network tests (issue M12): clients that talk to a server in the
//! VM through a port QEMU forwards from 127.0.0.1 only (`hostfwd=tcp:127.0.0.1:P-:G`, on
//! user networking with `restrict=on`). Each runs on a thread of its own while the VM
//! runs, bounded by a count and a deadline, and stops when told.
//!
//! Under `restrict=on` QEMU's user network drops every UDP datagram the guest sends
//! except DHCP and TFTP (libslirp's `udp_input`), so a UDP client can deliver datagrams
//! but never hear an echo: the guest's count is the check there.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::Result;

mod hostile;
pub use hostile::{wait_for_index, webd_hostile};

/// Which transport a forward carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proto {
    /// `hostfwd=tcp:...`
    Tcp,
    /// `hostfwd=udp:...`
    Udp,
}

/// One client of a test run: the guest port it reaches and what it does.
pub struct Client {
    /// Its name in the test lines (`PASS <label>/host-<name>`).
    pub name: &'static str,
    /// The transport of the forward.
    pub proto: Proto,
    /// The port the guest's server listens on.
    pub guest_port: u16,
    /// The guest address the forward reaches, if not QEMU's default guest (10.0.2.15).
    pub guest_address: Option<[u8; 4]>,
    /// Talks to `addr` (127.0.0.1 and the forwarded host port) until done, `stop` is set
    /// or `deadline` passes.
    pub talk: fn(addr: SocketAddr, stop: &AtomicBool, deadline: Instant) -> Result,
}

/// Connections `tcpsvc_replies` must see answered in full.
pub const TCPSVC_CONNECTIONS: u32 = 3;

/// `tcpsvc`'s client: connects, reads to the end, and counts the connections that got exactly 128 bytes ending in a newline, until [`TCPSVC_CONNECTIONS`] did. Before the
/// server listens, QEMU accepts the connection and closes it empty (the guest resets it):
/// the client tries again 100 ms later (at most 3,000 tries).
pub fn tcpsvc_replies(addr: SocketAddr, stop: &AtomicBool, deadline: Instant) -> Result {
    let mut served = 0;
    let mut tries = 0;
    let mut last = String::from("no connection tried");
    while served < TCPSVC_CONNECTIONS && tries < 3000 {
        if stop.load(Ordering::Relaxed) || Instant::now() > deadline {
            break;
        }
        tries += 1;
        match read_all(addr) {
            Ok(reply) if reply.len() == 128 && reply.ends_with(b"\n") => served += 1,
            Ok(reply) => last = format!("a reply of {} bytes", reply.len()),
            Err(e) => last = e,
        }
        if served < TCPSVC_CONNECTIONS {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    if served == TCPSVC_CONNECTIONS {
        Ok(())
    } else {
        Err(format!(
            "{served} of {TCPSVC_CONNECTIONS} connections answered in {tries} tries (last: {last})"
        ))
    }
}

/// Connects to `addr` and reads until the server closes (2 s at most).
fn read_all(addr: SocketAddr) -> std::result::Result<Vec<u8>, String> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))
        .map_err(|e| format!("connect: {e}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).map_err(|e| e.to_string())?;
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply).map_err(|e| format!("read: {e}"))?;
    Ok(reply)
}

/// Threads of [`connection_load`].
const LOAD_THREADS: usize = 4;
/// Connections [`connection_load`] makes at most, in all.
const LOAD_CONNECTIONS_MAX: u64 = 20_000;

/// The load of `tcp_conn` (Corey Figure 8): [`LOAD_THREADS`] threads each connecting,
/// reading the reply to its end and connecting again, as fast as the server answers, until
/// `stop`, the deadline or [`LOAD_CONNECTIONS_MAX`] connections. A connection the server
/// does not answer yet (QEMU's forward closes it empty) is tried again 20 ms later. The
/// counts, as a line for the job's output: the server measures the rate.
pub fn connection_load(addr: SocketAddr, stop: &AtomicBool, deadline: Instant) -> Result<String> {
    let answered = std::sync::atomic::AtomicU64::new(0);
    let failed = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|scope| {
        for _ in 0..LOAD_THREADS {
            scope.spawn(|| {
                while !stop.load(Ordering::Relaxed)
                    && Instant::now() < deadline
                    && answered.load(Ordering::Relaxed) + failed.load(Ordering::Relaxed)
                        < LOAD_CONNECTIONS_MAX
                {
                    match read_all(addr) {
                        Ok(reply) if reply.len() == 128 => {
                            answered.fetch_add(1, Ordering::Relaxed);
                        }
                        _ => {
                            failed.fetch_add(1, Ordering::Relaxed);
                            std::thread::sleep(Duration::from_millis(20));
                        }
                    }
                }
            });
        }
    });
    let (answered, failed) = (answered.into_inner(), failed.into_inner());
    Ok(format!("{answered} connections answered, {failed} not (closed before the server listened, or after it stopped)"))
}

/// `webd`'s client, once the server answers: on one HTTP/1.1 connection `GET /` (the
/// index, kept alive), `HEAD /hello` (a head with the file's length and no body) and `GET
/// /no-such-file` (404, then the server closes); then more half-sent requests than the
/// server has sockets, closed and then held open ([`HOSTAGES`]); then an
/// HTTP/1.0 `GET /hello` (the whole file, then the close); then `BREW /` (405) and bytes that are no request (400).
/// Six responses in all (the guest's test runs `webd --count 6`). Until the server listens, QEMU's forward closes
/// the connection empty: the client tries again every 100 ms (at most 3,000 tries).
pub fn webd_conversation(addr: SocketAddr, stop: &AtomicBool, deadline: Instant) -> Result {
    let mut tries = 0;
    loop {
        if stop.load(Ordering::Relaxed) || Instant::now() > deadline || tries >= 3000 {
            return Err(format!("webd never answered ({tries} tries)"));
        }
        tries += 1;
        match keep_alive_exchange(addr) {
            Ok(()) => break,
            Err(Retry::NotYet) => std::thread::sleep(Duration::from_millis(100)),
            Err(Retry::Failed(why)) => return Err(why),
        }
    }
    hold_sockets_hostage(addr)?;
    let hello = http(addr, b"GET /hello HTTP/1.0\r\n\r\n")?;
    expect_status(&hello, 200, "HTTP/1.0 GET /hello")?;
    if !hello.head.contains("Connection: close") || hello.body.len() != hello.length {
        return Err(format!(
            "HTTP/1.0 GET /hello: {} (body {} bytes)",
            hello.head,
            hello.body.len()
        ));
    }
    expect_status(&http(addr, b"BREW / HTTP/1.1\r\n\r\n")?, 405, "BREW /")?;
    expect_status(&http(addr, b"\x16\x03\x01 not http\r\n\r\n")?, 400, "garbage")?;
    Ok(())
}

/// Connections and seconds of [`webd_under_wrk`]'s load.
const WRK_CONNECTIONS: u32 = 16;
const WRK_SECONDS: u32 = 2;

/// A short `wrk` against webd (issue M12: "run a short wrk"): once `GET /hello` is
/// answered, [`WRK_CONNECTIONS`] kept-alive connections ask for the initrd's largest file,
/// `/metis` (about 950 KB, hundreds of frames a response), for [`WRK_SECONDS`] seconds;
/// every response must be 2xx and no connection may fail or time out. (The guest's side
/// checks that webd dropped no frame: before its send backlog, a loaded webd dropped
/// frames when the device's send buffers were all in flight, 4 in this test, and each
/// stalled its connection for a retransmission timeout.) Until the server answers, QEMU's forward
/// closes the connection empty: the client tries again every 100 ms (at most 3,000 tries).
pub fn webd_under_wrk(addr: SocketAddr, stop: &AtomicBool, deadline: Instant) -> Result {
    let wrk = crate::deps::ensure_tool("wrk", "wrk")?;
    let mut tries = 0;
    loop {
        if stop.load(Ordering::Relaxed) || Instant::now() > deadline || tries >= 3000 {
            return Err(format!("webd never answered ({tries} tries)"));
        }
        tries += 1;
        match http(addr, b"GET /hello HTTP/1.0\r\n\r\n") {
            Ok(r) if expect_status(&r, 200, "GET /hello").is_ok() => break,
            _ => std::thread::sleep(Duration::from_millis(100)),
        }
    }
    let url = format!("http://{addr}/metis");
    let report = crate::wrk::run(&wrk, &url, WRK_SECONDS, WRK_CONNECTIONS, deadline)?;
    println!("    wrk: {report}");
    if report.requests == 0 || report.non_2xx > 0 || report.socket_errors > 0 {
        return Err(format!("wrk against webd: {report:?}"));
    }
    Ok(())
}

/// `webd --apps`'s client (Corey §6.2's filesum, issue M12/M13): on one HTTP/1.1
/// connection four `GET /filesum/index.html`, each answered `<sum> <size>` of the disk's
/// `/www/index.html` (the repository's `disk/www/index.html`, summed here); then a missing
/// file (404) and a name longer than a request to an application core carries (414), each
/// HTTP/1.0. Six responses. Until the server answers, QEMU's forward closes the connection
/// empty: the client tries again every 100 ms (at most 3,000 tries).
pub fn webd_filesum(addr: SocketAddr, stop: &AtomicBool, deadline: Instant) -> Result {
    let page = crate::build::root().join("disk/www/index.html");
    let bytes = std::fs::read(&page).map_err(|e| format!("{}: {e}", page.display()))?;
    let sum = bytes.iter().fold(0u64, |s, &b| s.wrapping_add(b as u64));
    let want = format!("{sum} {}\n", bytes.len());
    let mut tries = 0;
    loop {
        if stop.load(Ordering::Relaxed) || Instant::now() > deadline || tries >= 3000 {
            return Err(format!("webd never answered a filesum ({tries} tries)"));
        }
        tries += 1;
        match filesum_exchange(addr, &want) {
            Ok(()) => break,
            Err(Retry::NotYet) => std::thread::sleep(Duration::from_millis(100)),
            Err(Retry::Failed(why)) => return Err(why),
        }
    }
    expect_status(&http(addr, b"GET /filesum/no-such-file HTTP/1.0\r\n\r\n")?, 404, "missing")?;
    let long = format!("GET /filesum/{} HTTP/1.0\r\n\r\n", "x".repeat(41));
    expect_status(&http(addr, long.as_bytes())?, 414, "a 41-byte name")
}

/// The keep-alive part of [`webd_filesum`]: four filesums on one connection.
fn filesum_exchange(addr: SocketAddr, want: &str) -> std::result::Result<(), Retry> {
    let mut stream =
        TcpStream::connect_timeout(&addr, Duration::from_secs(2)).map_err(|_| Retry::NotYet)?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| Retry::Failed(e.to_string()))?;
    for i in 0..4 {
        let request = b"GET /filesum/index.html HTTP/1.1\r\nHost: atoll\r\n\r\n";
        stream.write_all(request).map_err(|_| Retry::NotYet)?;
        let response = match read_response(&mut stream, true) {
            Ok(r) => r,
            // The first read of an empty, closed connection: not listening yet.
            Err(_) if i == 0 => return Err(Retry::NotYet),
            Err(e) => return Err(Retry::Failed(format!("filesum {i}: {e}"))),
        };
        expect_status(&response, 200, "filesum").map_err(Retry::Failed)?;
        if response.body != want.as_bytes() {
            let got = String::from_utf8_lossy(&response.body).into_owned();
            return Err(Retry::Failed(format!("filesum {i}: {got:?}, expected {want:?}")));
        }
    }
    Ok(())
}

/// More connections than `webd` has listening sockets (32), each sending half a request:
/// first 40 that then close (the server must close its side of each, not keep waiting for
/// the rest of a request that cannot come), then 40 that stay open and silent, until the
/// server resets them (its idle limit is 10 s; the client waits 12). Then the server must
/// answer again (the caller's next request).
const HOSTAGES: usize = 40;

/// See [`HOSTAGES`].
fn hold_sockets_hostage(addr: SocketAddr) -> Result {
    let half = b"GET /hello HTTP/1.1\r\nHost: at";
    for _ in 0..HOSTAGES {
        let mut c = TcpStream::connect_timeout(&addr, Duration::from_secs(2))
            .map_err(|e| format!("a cut-short request: connect: {e}"))?;
        let _ = c.write_all(half);
    }
    let mut idle = Vec::new();
    for _ in 0..HOSTAGES {
        if let Ok(mut c) = TcpStream::connect_timeout(&addr, Duration::from_secs(2)) {
            let _ = c.write_all(half);
            idle.push(c);
        }
    }
    std::thread::sleep(Duration::from_secs(12));
    drop(idle);
    Ok(())
}

/// Why a first exchange did not happen.
enum Retry {
    /// The server is not listening yet (the connection closed empty).
    NotYet,
    /// It answered wrongly.
    Failed(String),
}

/// The keep-alive part of [`webd_conversation`]: three requests on one connection.
fn keep_alive_exchange(addr: SocketAddr) -> std::result::Result<(), Retry> {
    // Refused: QEMU is not listening yet (it binds the forward as it starts).
    let mut stream =
        TcpStream::connect_timeout(&addr, Duration::from_secs(2)).map_err(|_| Retry::NotYet)?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| Retry::Failed(e.to_string()))?;
    stream.write_all(b"GET / HTTP/1.1\r\nHost: atoll\r\n\r\n").map_err(|_| Retry::NotYet)?;
    let index = match read_response(&mut stream, true) {
        Ok(r) => r,
        Err(_) => return Err(Retry::NotYet),
    };
    let failed = |why: String| Retry::Failed(why);
    expect_status(&index, 200, "GET /").map_err(failed)?;
    if !index.head.contains("Connection: keep-alive")
        || !index.body.windows(5).any(|w| w == b"hello")
    {
        return Err(Retry::Failed(format!(
            "GET /: {} (no link to hello in the index)",
            index.head
        )));
    }
    stream
        .write_all(b"HEAD /hello HTTP/1.1\r\nHost: atoll\r\n\r\n")
        .map_err(|e| Retry::Failed(e.to_string()))?;
    let head = read_response(&mut stream, false).map_err(failed)?;
    expect_status(&head, 200, "HEAD /hello").map_err(failed)?;
    if head.length == 0 || !head.body.is_empty() {
        return Err(Retry::Failed(format!("HEAD /hello: {}", head.head)));
    }
    stream
        .write_all(b"GET /no-such-file HTTP/1.1\r\nHost: atoll\r\n\r\n")
        .map_err(|e| Retry::Failed(e.to_string()))?;
    let missing = read_response(&mut stream, true).map_err(failed)?;
    expect_status(&missing, 404, "GET /no-such-file").map_err(failed)?;
    // The server closes after an error: the next read is the end.
    let mut rest = Vec::new();
    let _ = stream.read_to_end(&mut rest);
    if !rest.is_empty() {
        return Err(Retry::Failed(format!("{} bytes after the 404's close", rest.len())));
    }
    Ok(())
}

/// One response: its head, its `Content-Length` and the body read.
struct Response {
    head: String,
    length: usize,
    body: Vec<u8>,
}

/// Sends `request` on a new connection and reads the response to the server's close.
fn http(addr: SocketAddr, request: &[u8]) -> Result<Response> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))
        .map_err(|e| format!("connect: {e}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).map_err(|e| e.to_string())?;
    stream.write_all(request).map_err(|e| format!("write: {e}"))?;
    read_response(&mut stream, true)
}

/// Reads one response from `stream`: the head, then `Content-Length` bytes of body if
/// `has_body`.
fn read_response(stream: &mut TcpStream, has_body: bool) -> Result<Response> {
    let mut bytes = Vec::new();
    let mut one = [0u8; 1];
    while !bytes.ends_with(b"\r\n\r\n") {
        match stream.read(&mut one) {
            Ok(0) => return Err(format!("closed after {} bytes of head", bytes.len())),
            Ok(_) => bytes.push(one[0]),
            Err(e) => return Err(format!("read: {e}")),
        }
        if bytes.len() > 8192 {
            return Err(String::from("a head of more than 8 KiB"));
        }
    }
    let head = String::from_utf8_lossy(&bytes).into_owned();
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .and_then(|v| v.trim().parse().ok())
        .ok_or(format!("no Content-Length in {head:?}"))?;
    let mut body = vec![0u8; if has_body { length } else { 0 }];
    stream.read_exact(&mut body).map_err(|e| format!("body: {e}"))?;
    Ok(Response { head, length, body })
}

/// The response's status is `want`.
fn expect_status(r: &Response, want: u16, what: &str) -> Result {
    if r.head.starts_with(&format!("HTTP/1.1 {want} ")) {
        Ok(())
    } else {
        Err(format!("{what}: {:?}, expected {want}", r.head.lines().next().unwrap_or("")))
    }
}

/// `sockecho`'s TCP client (issue M12's sockets): one connection echoed first (tried
/// again every 100 ms, at most 3,000 times, until the server listens), then two at once;
/// each sends two lines in two writes, must read both back, then half-closes and must see
/// the server's close. Three connections in all.
pub fn sockecho_clients(addr: SocketAddr, stop: &AtomicBool, deadline: Instant) -> Result {
    let mut tries = 0;
    loop {
        if stop.load(Ordering::Relaxed) || Instant::now() > deadline || tries >= 3000 {
            return Err(format!("sockecho never echoed ({tries} tries)"));
        }
        tries += 1;
        match echo_conversation(addr, 0) {
            Ok(()) => break,
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
    std::thread::scope(|scope| {
        let two: Vec<_> =
            (1..=2).map(|i| scope.spawn(move || echo_conversation(addr, i))).collect();
        two.into_iter().try_for_each(|t| t.join().unwrap_or(Err("panicked".into())))
    })
}

/// One echoed connection: two lines in two writes, both read back, then the close.
fn echo_conversation(addr: SocketAddr, i: u32) -> Result {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))
        .map_err(|e| format!("connect: {e}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).map_err(|e| e.to_string())?;
    let lines = format!("connection {i}: first line\nconnection {i}: second line\n");
    let (first, second) = lines.as_bytes().split_at(lines.find('\n').unwrap_or(0) + 1);
    stream.write_all(first).map_err(|e| format!("write: {e}"))?;
    std::thread::sleep(Duration::from_millis(20));
    stream.write_all(second).map_err(|e| format!("write: {e}"))?;
    let mut back = vec![0u8; lines.len()];
    stream.read_exact(&mut back).map_err(|e| format!("connection {i}: read: {e}"))?;
    if back != lines.as_bytes() {
        return Err(format!("connection {i}: echoed {:?}", String::from_utf8_lossy(&back)));
    }
    stream.shutdown(std::net::Shutdown::Write).map_err(|e| e.to_string())?;
    let mut rest = Vec::new();
    stream.read_to_end(&mut rest).map_err(|e| format!("connection {i}: the close: {e}"))?;
    if rest.is_empty() {
        Ok(())
    } else {
        Err(format!("connection {i}: {} bytes after the echo", rest.len()))
    }
}

/// `udpecho`'s client: a datagram every 50 ms (at most 2,000) until told to stop. The
/// guest counts what arrives; no echo can come back (see the module comment).
pub fn udp_datagrams(addr: SocketAddr, stop: &AtomicBool, deadline: Instant) -> Result {
    let socket = UdpSocket::bind("127.0.0.1:0").map_err(|e| format!("bind: {e}"))?;
    for i in 0..2000u32 {
        if stop.load(Ordering::Relaxed) || Instant::now() > deadline {
            break;
        }
        let _ = socket.send_to(format!("datagram {i}").as_bytes(), addr);
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// A free port on 127.0.0.1 for `proto` (the OS picks it; QEMU binds it a moment later).
pub fn free_port(proto: Proto) -> std::result::Result<u16, String> {
    let port = match proto {
        Proto::Tcp => std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()),
        Proto::Udp => UdpSocket::bind("127.0.0.1:0").and_then(|s| s.local_addr()),
    };
    port.map(|a| a.port()).map_err(|e| format!("no free port on 127.0.0.1: {e}"))
}

/// One forward of the VM's NIC: from 127.0.0.1:`host` to the guest's `guest_port`, at
/// `guest_address` (`None`: QEMU's guest, 10.0.2.15; another address of the guest's
/// network reaches a second stack, Corey §5.2's address per stack).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Forward {
    /// Its transport.
    pub proto: Proto,
    /// The port on the host's 127.0.0.1.
    pub host: u16,
    /// The guest address it reaches, if not the default.
    pub guest_address: Option<[u8; 4]>,
    /// The guest's port.
    pub guest_port: u16,
}

impl Forward {
    /// A forward from 127.0.0.1:`host` to the guest's default address, port `guest_port`.
    pub fn to(proto: Proto, host: u16, guest_port: u16) -> Forward {
        Forward { proto, host, guest_address: None, guest_port }
    }
}

/// The QEMU NIC for `forwards`: virtio-net on user networking with `restrict=on`, each
/// forward bound to 127.0.0.1.
pub fn nic_args(forwards: &[Forward]) -> [String; 2] {
    let mut nic = String::from("user,model=virtio-net-pci,restrict=on");
    for f in forwards {
        let proto = if f.proto == Proto::Tcp { "tcp" } else { "udp" };
        let guest =
            f.guest_address.map_or(String::new(), |[a, b, c, d]| format!("{a}.{b}.{c}.{d}"));
        nic.push_str(&format!(",hostfwd={proto}:127.0.0.1:{}-{guest}:{}", f.host, f.guest_port));
    }
    [String::from("-nic"), nic]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forwards_bind_to_loopback_only() {
        let second =
            Forward { guest_address: Some([10, 0, 2, 16]), ..Forward::to(Proto::Tcp, 5002, 84) };
        let [flag, nic] = nic_args(&[
            Forward::to(Proto::Tcp, 5000, 80),
            Forward::to(Proto::Udp, 5001, 7),
            second,
        ]);
        assert_eq!(flag, "-nic");
        assert_eq!(
            nic,
            "user,model=virtio-net-pci,restrict=on,hostfwd=tcp:127.0.0.1:5000-:80,\
             hostfwd=udp:127.0.0.1:5001-:7,hostfwd=tcp:127.0.0.1:5002-10.0.2.16:84"
        );
    }

    #[test]
    fn a_closed_port_fails_within_its_bounds() {
        let port = free_port(Proto::Tcp).unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let stop = AtomicBool::new(false);
        let deadline = Instant::now() + Duration::from_millis(300);
        let got = tcpsvc_replies(addr, &stop, deadline);
        assert!(got.is_err_and(|e| e.contains("0 of 3")));
    }
}
