//! The `web_static` runner on 127.0.0.1: its arguments, the configurations, the table of
//! listening sockets, and each server run for a few seconds and asked for the page. The
//! lighttpd and nginx runs need their binaries in [`sbin`] (`/usr/sbin`, or the directory
//! `WEB_STATIC_SBIN` names, such as the Debian packages unpacked with `dpkg -x`); without
//! them they say so and check nothing.

use super::*;
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};

fn words(text: &str) -> Vec<String> {
    text.split(',').filter(|w| !w.is_empty()).map(String::from).collect()
}

#[test]
fn arguments_name_a_server_and_the_seconds() {
    assert_eq!(parse_args(&words("webd")), Ok((Server::Webd, DEFAULT_SECONDS)));
    assert_eq!(parse_args(&words("nginx,60")), Ok((Server::Nginx, 60)));
    assert_eq!(parse_args(&words("lighttpd,3600")), Ok((Server::Lighttpd, 3600)));
    for bad in ["", "apache", "webd,0", "webd,3601", "webd,x", "webd,10,20", "Webd"] {
        assert!(parse_args(&words(bad)).is_err(), "{bad:?}");
    }
    assert!(parse_args(&words("httpd")).unwrap_err().contains("webd, lighttpd or nginx"));
}

#[test]
fn configurations_are_tuned_and_name_nothing_outside_their_directories() {
    let (root, dir) = (Path::new("/mnt/www"), Path::new("/tmp/web_static-x-1"));
    let addr = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80);
    let nginx = nginx_conf(root, addr, 4, dir);
    for line in [
        "daemon off;",
        "master_process on;",
        "worker_processes 4;",
        "use epoll;",
        "worker_connections 4096;",
        "multi_accept on;",
        "access_log off;",
        "error_log stderr crit;",
        "sendfile on;",
        "tcp_nodelay on;",
        "listen 0.0.0.0:80;",
        "root \"/mnt/www\";",
        "pid \"/tmp/web_static-x-1/nginx.pid\";",
        "text/html html htm;",
    ] {
        assert!(nginx.contains(line), "nginx: {line}");
    }
    let lighttpd = lighttpd_conf(root, addr, dir);
    for line in [
        "server.document-root = \"/mnt/www\"",
        "server.bind = \"0.0.0.0\"",
        "server.port = 80",
        "server.event-handler = \"linux-sysepoll\"",
        "server.max-fds = 16384",
        "server.max-keep-alive-requests = 65535",
        "server.compat-module-load = \"disable\"",
        "server.pid-file = \"/tmp/web_static-x-1/lighttpd.pid\"",
        "\".html\" => \"text/html\"",
    ] {
        assert!(lighttpd.contains(line), "lighttpd: {line}");
    }
    // Every absolute path either configuration names is in the document root or `dir`.
    for conf in [&nginx, &lighttpd] {
        for path in conf.split(['"', ' ', ';']).filter(|w| w.starts_with('/')) {
            assert!(path.starts_with("/mnt/www") || path.starts_with(dir.to_str().unwrap()));
        }
    }
    assert!(plain(root) && plain(dir));
    for bad in ["/a\"b", "/a;b", "/$x", "/a b\n", "/a{b}", "/a\\b", ""] {
        assert!(!plain(Path::new(bad)), "{bad:?}");
    }
}

#[test]
fn the_socket_table_says_who_listens() {
    let header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n";
    let row = |local: &str, state: &str| {
        format!("   0: {local} 00000000:0000 {state} 00000000:00000000 00:00000000 00000000     0        0 1 1\n")
    };
    let any80 = format!("{header}{}", row("00000000:0050", "0A"));
    let local8080 = format!("{header}{}", row("0100007F:1F90", "0A"));
    let connected = format!("{header}{}", row("0100007F:1F90", "01"));
    let at = |ip: [u8; 4], port| SocketAddrV4::new(Ipv4Addr::from(ip), port);
    assert!(listening(&any80, at([0, 0, 0, 0], 80)));
    assert!(listening(&any80, at([127, 0, 0, 1], 80)));
    assert!(!listening(&any80, at([0, 0, 0, 0], 8080)));
    assert!(listening(&local8080, at([127, 0, 0, 1], 8080)));
    assert!(!listening(&local8080, at([10, 0, 2, 15], 8080)));
    assert!(!listening(&connected, at([127, 0, 0, 1], 8080)));
    assert!(!listening("garbage\n1 2 3 4\n", at([0, 0, 0, 0], 80)));
    // And this machine's, with a socket of ours in it.
    let ours = TcpListener::bind("127.0.0.1:0").unwrap();
    let SocketAddr::V4(addr) = ours.local_addr().unwrap() else { panic!() };
    assert!(listening(&fs::read_to_string("/proc/net/tcp").unwrap(), addr));
}

/// A document root with the page, under this test's name.
fn docroot(test: &str) -> (PathBuf, Vec<u8>) {
    let root = std::env::temp_dir().join(format!("web_static-test-{}-{test}", std::process::id()));
    let _ = fs::remove_dir_all(&root);
    fs::create_dir_all(&root).unwrap();
    let page: Vec<u8> = b"<html><p>web_static</p>\n".repeat(170);
    fs::write(root.join("static.html"), &page).unwrap();
    (root, page)
}

/// An address on 127.0.0.1 with a port nothing listens on (likely to stay so for the
/// test's few seconds).
fn free_addr() -> SocketAddrV4 {
    let probe = TcpListener::bind("127.0.0.1:0").unwrap();
    let SocketAddr::V4(addr) = probe.local_addr().unwrap() else { panic!() };
    addr
}

/// One request on a new connection, or `None` if nothing answers; the raw response.
fn fetch(addr: SocketAddrV4, request: &str) -> Option<Vec<u8>> {
    let mut stream = TcpStream::connect(addr).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).ok()?;
    Some(response)
}

/// Whether `response` is a 200 with `body`.
fn is_ok_with(response: &[u8], body: &[u8]) -> bool {
    response.starts_with(b"HTTP/1.1 200") && response.ends_with(body)
}

/// Runs `server` for three seconds and asks it for the page, the head, a missing file and
/// two requests on one connection while it serves.
fn serves_the_page(server: Server) {
    if server != Server::Webd && !sbin().join(server.name()).is_file() {
        eprintln!("web_static: no {} in {}: not tried", server.name(), sbin().display());
        return;
    }
    let (root, page) = docroot(server.name());
    let addr = free_addr();
    let root_for_run = root.clone();
    let runner = thread::spawn(move || run(server, &root_for_run, addr, 3));
    let started = Instant::now();
    let mut first = None;
    while first.is_none() && started.elapsed() < Duration::from_secs(10) {
        first = fetch(addr, "GET /static.html HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        thread::sleep(Duration::from_millis(50));
    }
    assert!(is_ok_with(&first.expect("no answer"), &page), "{}", server.name());
    let head = fetch(addr, "HEAD /static.html HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let head = head.unwrap();
    let head = String::from_utf8(head).unwrap();
    assert!(head.starts_with("HTTP/1.1 200") && head.ends_with("\r\n\r\n"), "{head}");
    assert!(head.contains(&format!("Content-Length: {}\r\n", page.len())), "{head}");
    assert!(head.contains("Content-Type: text/html"), "{head}");
    let missing = fetch(addr, "GET /missing.html HTTP/1.0\r\n\r\n").unwrap();
    assert!(missing.starts_with(b"HTTP/1.1 404") || missing.starts_with(b"HTTP/1.0 404"));
    let two = "GET /static.html HTTP/1.1\r\nHost: x\r\n\r\nGET /static.html HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let both = fetch(addr, two).unwrap();
    let count = both.windows(12).filter(|w| w == b"HTTP/1.1 200").count();
    assert_eq!(count, 2, "{}", String::from_utf8_lossy(&both[..200]));
    let lines = runner.join().unwrap().unwrap();
    assert!(lines.iter().all(|l| l.starts_with("web_static: ")), "{lines:?}");
    // It stopped: nothing listens any more.
    assert!(!listening(&fs::read_to_string("/proc/net/tcp").unwrap(), addr));
    fs::remove_dir_all(root).unwrap();
}

#[test]
fn webd_serves_the_page() {
    serves_the_page(Server::Webd);
}

#[test]
fn lighttpd_serves_the_page() {
    serves_the_page(Server::Lighttpd);
}

#[test]
fn nginx_serves_the_page() {
    serves_the_page(Server::Nginx);
}

/// A server that cannot have its port ends early: an error with what it said.
fn a_taken_port_is_an_error(server: Server) {
    if !sbin().join(server.name()).is_file() {
        eprintln!("web_static: no {} in {}: not tried", server.name(), sbin().display());
        return;
    }
    let (root, _) = docroot(&format!("{}-taken", server.name()));
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let SocketAddr::V4(addr) = taken.local_addr().unwrap() else { panic!() };
    let err = run(server, &root, addr, 30).unwrap_err();
    assert!(err.contains("exited early") && err.contains("Address already in use"), "{err}");
    fs::remove_dir_all(root).unwrap();
}

#[test]
fn lighttpd_on_a_taken_port_is_an_error() {
    a_taken_port_is_an_error(Server::Lighttpd);
}

#[test]
fn nginx_on_a_taken_port_is_an_error() {
    a_taken_port_is_an_error(Server::Nginx);
}

#[test]
fn a_bad_configuration_or_binary_is_refused_with_the_reason() {
    let dir = std::env::temp_dir().join(format!("web_static-test-{}-bad", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("bad.conf");
    fs::write(&conf, "this is { not a configuration\n").unwrap();
    for server in [Server::Lighttpd, Server::Nginx] {
        let binary = sbin().join(server.name());
        if binary.is_file() {
            let err = check_config(server, &binary, &conf, &dir).unwrap_err();
            assert!(err.contains("refuses its configuration"), "{err}");
        }
        let nowhere = dir.join("no-such-binary");
        let err = check_config(server, &nowhere, &conf, &dir).unwrap_err();
        assert!(err.contains("cannot run"), "{err}");
    }
    assert!(run(Server::Webd, &dir.join("nothing"), free_addr(), 1).is_err());
    fs::remove_dir_all(dir).unwrap();
}
