//! webd on Linux served on 127.0.0.1 (a port the kernel chooses) and asked by std
//! `TcpStream`s: files, GET and HEAD, errors, keep-alive, pipelining, large responses that
//! need `EPOLLOUT`, the idle reset and the deadline.

use super::*;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// The page of `web_static` (Multikernel §5.4): about 4.1 kB of HTML.
fn page() -> Vec<u8> {
    let mut page = b"<!DOCTYPE html>\n<html><body>\n".to_vec();
    while page.len() < 4100 {
        page.extend_from_slice(b"<p>static</p>\n");
    }
    page.extend_from_slice(b"</body></html>\n");
    page
}

/// A large file, so a response outgrows the socket's buffer.
fn big() -> Vec<u8> {
    (0..1 << 20).map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect()
}

/// A fresh document root for test `name`: `static.html`, `index.html`, `fs/big`, and a
/// name no request can reach.
fn docroot(name: &str) -> PathBuf {
    let root = std::env::temp_dir().join(format!("webd-test-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&root);
    fs::create_dir_all(root.join("fs")).unwrap();
    fs::write(root.join("static.html"), page()).unwrap();
    fs::write(root.join("index.html"), b"<p>index</p>\n").unwrap();
    fs::write(root.join("fs/big"), big()).unwrap();
    fs::write(root.join("has space"), b"never served").unwrap();
    root
}

/// webd on 127.0.0.1 for `test`, serving on a thread until the returned flag is set.
fn start(
    test: &str,
    idle: Duration,
) -> (SocketAddrV4, Arc<AtomicBool>, thread::JoinHandle<Result<u64, String>>, PathBuf) {
    let root = docroot(test);
    let webd =
        Webd::bind(&root, SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)).unwrap().with_idle(idle);
    assert!(webd.threads() >= 1 && webd.addr().port() != 0);
    let addr = webd.addr();
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let deadline = Instant::now() + Duration::from_secs(60);
    let server = thread::spawn(move || webd.serve_until(deadline, &flag));
    (addr, stop, server, root)
}

/// Stops the server; the responses it sent.
fn finish(
    stop: Arc<AtomicBool>,
    server: thread::JoinHandle<Result<u64, String>>,
    root: PathBuf,
) -> u64 {
    stop.store(true, Ordering::Relaxed);
    let sent = server.join().unwrap().unwrap();
    let _ = fs::remove_dir_all(root);
    sent
}

fn connect(addr: SocketAddrV4) -> TcpStream {
    let stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream
}

/// One response read from `stream`: the status, the head, the body (none for HEAD).
fn response(stream: &mut TcpStream, head_only: bool) -> (u16, String, Vec<u8>) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert!(head.len() < 4096, "no end of head");
        stream.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).unwrap();
    let status = head[9..12].parse().unwrap();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .expect("a Content-Length")
        .parse()
        .unwrap();
    let mut body = vec![0u8; if head_only { 0 } else { length }];
    stream.read_exact(&mut body).unwrap();
    (status, head, body)
}

/// Whether the server has closed `stream` (it reads the end, not a timeout).
fn closed(stream: &mut TcpStream) -> bool {
    matches!(stream.read(&mut [0u8; 16]), Ok(0))
}

#[test]
fn files_are_read_once_under_names_a_request_reaches() {
    let root = docroot("files");
    fs::create_dir_all(root.join("a/b")).unwrap();
    fs::write(root.join("a/b/c.txt"), b"deep").unwrap();
    let files = Files::load(&root).unwrap();
    assert_eq!(files.len(), 4, "static.html, index.html, fs/big, a/b/c.txt");
    assert_eq!(files.get("static.html"), Some(page().as_slice()));
    assert_eq!(files.get("a/b/c.txt"), Some(&b"deep"[..]));
    assert_eq!(files.get("has space"), None);
    assert_eq!(files.bytes(), page().len() + 13 + (1 << 20) + 4);
    assert!(Files::load(&root.join("nothing")).is_err());
    fs::remove_dir_all(root).unwrap();
}

#[test]
fn get_head_errors_keep_alive_and_pipelining() {
    let (addr, stop, server, root) = start("protocol", IDLE);
    // GET, then HEAD and `/` on the same connection (keep-alive).
    let mut c = connect(addr);
    c.write_all(b"GET /static.html HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let (status, head, body) = response(&mut c, false);
    assert_eq!((status, body), (200, page()));
    assert!(head.contains("Content-Type: text/html") && head.contains("Connection: keep-alive"));
    c.write_all(b"HEAD /static.html HTTP/1.1\r\n\r\n").unwrap();
    let (status, head, _) = response(&mut c, true);
    assert_eq!(status, 200);
    assert!(head.contains(&format!("Content-Length: {}\r\n", page().len())));
    c.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    assert_eq!(response(&mut c, false), (200, response_head_of(13), b"<p>index</p>\n".to_vec()));
    // Two requests in one write, answered in order; the second in two pieces.
    c.write_all(b"GET /index.html HTTP/1.1\r\n\r\nGET /static.html HT").unwrap();
    assert_eq!(response(&mut c, false).2, b"<p>index</p>\n");
    c.write_all(b"TP/1.1\r\n\r\n").unwrap();
    assert_eq!(response(&mut c, false).2, page());
    // A missing file: 404, then the connection closes.
    c.write_all(b"GET /missing.html HTTP/1.1\r\n\r\n").unwrap();
    let (status, _, body) = response(&mut c, false);
    assert_eq!((status, body), (404, b"404 Not Found\n".to_vec()));
    assert!(closed(&mut c));
    // Closing requests and bad ones.
    for (request, want) in [
        (&b"GET /static.html HTTP/1.0\r\n\r\n"[..], 200),
        (b"GET /static.html HTTP/1.1\r\nConnection: close\r\n\r\n", 200),
        (b"POST / HTTP/1.1\r\n\r\n", 405),
        (b"GET /../etc/passwd HTTP/1.1\r\n\r\n", 400),
        (b"GET /has%20space HTTP/1.1\r\n\r\n", 404),
    ] {
        let mut c = connect(addr);
        c.write_all(request).unwrap();
        assert_eq!(response(&mut c, false).0, want, "{}", String::from_utf8_lossy(request));
        assert!(closed(&mut c), "{}", String::from_utf8_lossy(request));
    }
    // HTTP/1.0 with keep-alive stays open.
    let mut c = connect(addr);
    for _ in 0..2 {
        c.write_all(b"GET /static.html HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").unwrap();
        assert_eq!(response(&mut c, false).0, 200);
    }
    // Pipelined requests, then the client's end: all answered, then closed.
    let mut c = connect(addr);
    c.write_all(b"GET / HTTP/1.1\r\n\r\nHEAD / HTTP/1.1\r\n\r\nGET /static.html HTTP/1.1\r\n\r\n")
        .unwrap();
    c.shutdown(std::net::Shutdown::Write).unwrap();
    assert_eq!(response(&mut c, false).0, 200);
    assert_eq!(response(&mut c, true).0, 200);
    assert_eq!(response(&mut c, false).2, page());
    assert!(closed(&mut c));
    assert_eq!(finish(stop, server, root), 16);
}

/// The head webd sends for a 200 of `index.html` of `length` bytes, kept alive.
fn response_head_of(length: usize) -> String {
    http::response_head(200, http::content_type("index.html"), length, true)
}

#[test]
fn large_responses_and_many_pipelined_ones_all_arrive() {
    let (addr, stop, server, root) = start("large", IDLE);
    let mut c = connect(addr);
    // Three 1 MiB answers asked at once: more than the socket and OUTPUT_HIGH hold.
    c.write_all(&b"GET /fs/big HTTP/1.1\r\n\r\n".repeat(3)).unwrap();
    for _ in 0..3 {
        let (status, _, body) = response(&mut c, false);
        assert!(status == 200 && body == big());
    }
    // Two hundred small ones in one write.
    c.write_all(&b"GET /static.html HTTP/1.1\r\n\r\n".repeat(200)).unwrap();
    for _ in 0..200 {
        assert_eq!(response(&mut c, false).2.len(), page().len());
    }
    // Many connections at once, each with a request.
    let mut many: Vec<TcpStream> = (0..100).map(|_| connect(addr)).collect();
    for c in &mut many {
        c.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    }
    for c in &mut many {
        assert_eq!(response(c, false).0, 200);
    }
    assert_eq!(finish(stop, server, root), 303);
}

#[test]
fn a_silent_connection_is_reset_and_a_busy_one_is_not() {
    let idle = Duration::from_millis(400);
    let (addr, stop, server, root) = start("idle", idle);
    let mut silent = connect(addr);
    silent.write_all(b"GET / HTTP/1.1\r\n").unwrap();
    let mut busy = connect(addr);
    let start = Instant::now();
    while start.elapsed() < idle * 3 {
        busy.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!(response(&mut busy, false).0, 200);
        thread::sleep(idle / 8);
    }
    let err = silent.read(&mut [0u8; 16]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ConnectionReset);
    finish(stop, server, root);
}

#[test]
fn serving_ends_at_the_deadline() {
    let root = docroot("deadline");
    let webd = Webd::bind(&root, SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)).unwrap();
    let start = Instant::now();
    assert_eq!(webd.serve(Duration::from_millis(300)), Ok(0));
    let took = start.elapsed();
    assert!(took >= Duration::from_millis(300) && took < Duration::from_secs(5), "{took:?}");
    fs::remove_dir_all(root).unwrap();
}

#[test]
fn a_taken_port_is_an_error() {
    let root = docroot("taken");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let std::net::SocketAddr::V4(addr) = taken.local_addr().unwrap() else { panic!() };
    let Err(e) = Webd::bind(&root, addr) else { panic!("bound a taken port") };
    assert!(e.contains("listen on"), "{e}");
    fs::remove_dir_all(root).unwrap();
}
