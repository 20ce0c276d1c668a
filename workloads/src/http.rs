//! HTTP for `webd` (Corey §6.2; issue M12), the part that is not about sockets: parsing a
//! request (with `httparse`), deciding the response, and writing its head. HTTP/1.1 with
//! keep-alive and HTTP/1.0; GET and HEAD of static files; every other request gets its
//! error status, never a panic. The server loop (`user/programs/src/bin/webd.rs`) feeds
//! bytes in and sends what comes out.

use alloc::format;
use alloc::string::String;

/// Longest request head (request line and headers) a connection may send: longer is
/// `431 Request Header Fields Too Large`.
pub const MAX_HEAD: usize = 4096;
/// Longest path: longer is `414 URI Too Long`.
pub const MAX_PATH: usize = 256;
/// Most headers parsed in one request.
const MAX_HEADERS: usize = 32;

/// What a request asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// `HEAD` (the head only) or `GET`.
    pub head_only: bool,
    /// The file asked for, resolved (`/` is `index.html`; no leading `/`, no query).
    pub file: String,
    /// Whether the connection stays open after the response.
    pub keep_alive: bool,
    /// The minor version: 0 (HTTP/1.0) or 1 (HTTP/1.1).
    pub minor: u8,
}

/// The outcome of parsing the bytes a connection has sent so far.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parsed {
    /// A whole request, and the bytes it took (a pipelined next one may follow).
    Request(Request, usize),
    /// Not a whole request head yet.
    Partial,
    /// A request to answer with this error status, then close.
    Error(u16),
}

/// Parses the start of `bytes` as one request.
pub fn parse(bytes: &[u8]) -> Parsed {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    let used = match request.parse(bytes) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if bytes.len() >= MAX_HEAD => return Parsed::Error(431),
        Ok(httparse::Status::Partial) => return Parsed::Partial,
        Err(httparse::Error::TooManyHeaders) => return Parsed::Error(431),
        Err(httparse::Error::Version) => return Parsed::Error(505),
        Err(_) => return Parsed::Error(400),
    };
    if used > MAX_HEAD {
        return Parsed::Error(431);
    }
    let (Some(method), Some(path), Some(minor)) = (request.method, request.path, request.version)
    else {
        return Parsed::Error(400);
    };
    let head_only = match method {
        "GET" => false,
        "HEAD" => true,
        _ => return Parsed::Error(405),
    };
    if path.len() > MAX_PATH {
        return Parsed::Error(414);
    }
    let Some(file) = resolve(path) else { return Parsed::Error(400) };
    // A request with a body is not one we serve (GET and HEAD have none).
    let has_body = request.headers.iter().any(|h| {
        h.name.eq_ignore_ascii_case("content-length") && h.value != b"0"
            || h.name.eq_ignore_ascii_case("transfer-encoding")
    });
    if has_body {
        return Parsed::Error(400);
    }
    let connection = request.headers.iter().find(|h| h.name.eq_ignore_ascii_case("connection"));
    let says = |word: &str| connection.is_some_and(|h| contains_token(h.value, word));
    // HTTP/1.1 keeps the connection unless told to close; HTTP/1.0 closes unless told to
    // keep it (RFC 9112 §9.3).
    let keep_alive = if minor >= 1 { !says("close") } else { says("keep-alive") };
    Parsed::Request(Request { head_only, file, keep_alive, minor }, used)
}

/// Whether a comma-separated header value holds `token` (case-insensitive).
fn contains_token(value: &[u8], token: &str) -> bool {
    value.split(|&b| b == b',').any(|part| part.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

/// The file a path names: `/` is `index.html`, a query or fragment is dropped, and the
/// path must be plain names separated by single `/` (a directory of the disk's `/www`,
/// `fs/64k-0`): printable ASCII, no `\\`, no empty, `.` or `..` component, so it can never
/// leave the served directory; `None` if not.
pub fn resolve(path: &str) -> Option<String> {
    let path = path.split(['?', '#']).next()?;
    let name = path.strip_prefix('/')?;
    let name = if name.is_empty() { "index.html" } else { name };
    let plain = |part: &str| {
        !part.is_empty()
            && part != "."
            && part != ".."
            && part.bytes().all(|b| b.is_ascii_graphic() && b != b'\\')
    };
    name.split('/').all(plain).then(|| String::from(name))
}

/// The `Content-Type` of a file, by its name's ending.
pub fn content_type(file: &str) -> &'static str {
    let ending = file.rsplit('.').next().unwrap_or("");
    match ending {
        "html" | "htm" => "text/html; charset=utf-8",
        "txt" | "md" => "text/plain; charset=utf-8",
        "css" => "text/css",
        "js" => "text/javascript",
        "json" => "application/json",
        "png" => "image/png",
        _ => "application/octet-stream",
    }
}

/// The reason phrase of a status this server sends.
pub fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        414 => "URI Too Long",
        431 => "Request Header Fields Too Large",
        505 => "HTTP Version Not Supported",
        _ => "Internal Server Error",
    }
}

/// The head of a response: status line and headers, ending in the blank line. An error
/// response (status other than 200) always closes the connection.
pub fn response_head(status: u16, content_type: &str, length: usize, keep_alive: bool) -> String {
    let connection = if keep_alive && status == 200 { "keep-alive" } else { "close" };
    let allow = if status == 405 { "Allow: GET, HEAD\r\n" } else { "" };
    format!(
        "HTTP/1.1 {status} {}\r\nServer: webd (Atoll)\r\nContent-Type: {content_type}\r\n\
         Content-Length: {length}\r\nConnection: {connection}\r\n{allow}\r\n",
        reason(status)
    )
}

/// The body of an error response: one line saying the status.
pub fn error_body(status: u16) -> String {
    format!("{status} {}\n", reason(status))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(bytes: &[u8]) -> Request {
        match parse(bytes) {
            Parsed::Request(r, n) => {
                assert_eq!(n, bytes.len());
                r
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn get_and_head_of_files() {
        let r = request(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(
            (r.head_only, r.file.as_str(), r.keep_alive, r.minor),
            (false, "index.html", true, 1)
        );
        let r = request(b"HEAD /hello?x=1 HTTP/1.1\r\n\r\n");
        assert_eq!((r.head_only, r.file.as_str()), (true, "hello"));
    }

    #[test]
    fn keep_alive_follows_the_version_and_the_connection_header() {
        assert!(!request(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n").keep_alive);
        assert!(!request(b"GET / HTTP/1.0\r\n\r\n").keep_alive);
        assert!(request(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").keep_alive);
        assert!(!request(b"GET / HTTP/1.1\r\nConnection: upgrade, close\r\n\r\n").keep_alive);
    }

    #[test]
    fn partial_then_pipelined() {
        assert_eq!(parse(b"GET / HTTP/1.1\r\nHost:"), Parsed::Partial);
        let two = b"GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\n";
        let Parsed::Request(first, n) = parse(two) else { panic!() };
        assert_eq!(first.file, "a");
        let Parsed::Request(second, _) = parse(&two[n..]) else { panic!() };
        assert_eq!(second.file, "b");
    }

    #[test]
    fn bad_requests_get_their_status() {
        assert_eq!(parse(b"POST / HTTP/1.1\r\n\r\n"), Parsed::Error(405));
        assert_eq!(parse(b"GET /../etc HTTP/1.1\r\n\r\n"), Parsed::Error(400));
        assert_eq!(parse(b"GET /a/./b HTTP/1.1\r\n\r\n"), Parsed::Error(400));
        assert_eq!(parse(b"GET /a//b HTTP/1.1\r\n\r\n"), Parsed::Error(400));
        assert_eq!(parse(b"GET /a/b/ HTTP/1.1\r\n\r\n"), Parsed::Error(400));
        assert_eq!(parse(b"GET /a/../../etc HTTP/1.1\r\n\r\n"), Parsed::Error(400));
        assert_eq!(parse(b"GET /a\\..\\b HTTP/1.1\r\n\r\n"), Parsed::Error(400));
        assert_eq!(resolve("/fs/64k-0").as_deref(), Some("fs/64k-0"));
        assert_eq!(parse(b"GET nothing HTTP/1.1\r\n\r\n"), Parsed::Error(400));
        assert_eq!(parse(b"GET / HTTP/2.0\r\n\r\n"), Parsed::Error(505));
        assert_eq!(parse(b"\x00\x01\x02 garbage\r\n\r\n"), Parsed::Error(400));
        assert_eq!(parse(b"GET / HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello"), Parsed::Error(400));
        let long = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(MAX_PATH + 1));
        assert_eq!(parse(long.as_bytes()), Parsed::Error(414));
        let mut huge = String::from("GET / HTTP/1.1\r\n");
        while huge.len() < MAX_HEAD {
            huge.push_str("X-Filler: 0123456789abcdef\r\n");
        }
        assert_eq!(parse(huge.as_bytes()), Parsed::Error(431));
        let many: String = (0..40).map(|i| format!("H{i}: v\r\n")).collect();
        assert_eq!(parse(format!("GET / HTTP/1.1\r\n{many}\r\n").as_bytes()), Parsed::Error(431));
    }

    #[test]
    fn heads_say_length_type_and_connection() {
        let head = response_head(200, content_type("index.html"), 42, true);
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"));
        assert!(
            head.contains("Content-Length: 42\r\n") && head.contains("Connection: keep-alive\r\n")
        );
        assert!(head.contains("text/html") && head.ends_with("\r\n\r\n"));
        let refused = response_head(405, "text/plain", 3, true);
        assert!(
            refused.contains("Connection: close\r\n") && refused.contains("Allow: GET, HEAD\r\n")
        );
        assert_eq!(content_type("hello"), "application/octet-stream");
    }

    proptest::proptest! {
        /// Any bytes at all: a request, a partial one or an error status; never a panic.
        #[test]
        fn any_bytes_are_answered(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600)) {
            match parse(&bytes) {
                Parsed::Request(r, n) => {
                    proptest::prop_assert!(n <= bytes.len());
                    let path = format!("/{}", r.file);
                    proptest::prop_assert!(resolve(&path).is_some());
                }
                Parsed::Partial => proptest::prop_assert!(bytes.len() < MAX_HEAD),
                Parsed::Error(status) => proptest::prop_assert!(reason(status) != "Internal Server Error"),
            }
        }
    }
}
