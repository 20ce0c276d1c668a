//! The disk of the file experiments (issue M13: `file_read`, `file_write`,
//! `filesum_disk`; M12: `webd_filesum`): one ext2 image holding `bench/seq.bin` and
//! `bench/rand.bin` (4 MiB each, the bytes `workloads::fileio::input_byte` gives, which
//! both systems check) and webd's filesum files `www/fs/<size>-<k>` ([`FILESUM_CLASSES`],
//! [`FILESUM_FILES`] of each), and `web_static`'s page `www/static.html` (Multikernel
//! §5.4's 4.1 kB page, [`static_page`]), built once in `target/bench/disk/`. Every job
//! boots a fresh copy of it, so Atoll and the Linux guest start from the same bytes on
//! the disk and nothing in memory.

use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::qemu::Vm;
use crate::{build, disk, Result};

/// Bytes of each input file (`workloads::fileio::FILE_BYTES`).
const FILE_BYTES: usize = 4 << 20;

/// Corey Figure 12's file sizes (16 KB to 4 MB), as webd's filesum files name them.
pub const FILESUM_CLASSES: [(&str, usize); 5] =
    [("16k", 16 << 10), ("64k", 64 << 10), ("256k", 256 << 10), ("1m", 1 << 20), ("4m", 4 << 20)];
/// Files of each size (`www/fs/<size>-0` to `-3`).
pub const FILESUM_FILES: usize = 4;

/// `web_static`'s page, in `www/` (every server's document root).
pub const STATIC_PAGE: &str = "static.html";
/// Its size: Multikernel §5.4's "4.1 kB static web page".
pub const STATIC_PAGE_BYTES: usize = 4100;

/// Whether experiment `name` needs the bench disk.
pub fn needs_disk(name: &str) -> bool {
    matches!(name, "file_read" | "file_write" | "filesum_disk" | "webd_filesum" | "web_static")
}

/// `web_static`'s page: [`STATIC_PAGE_BYTES`] of HTML, numbered lines of text.
pub fn static_page() -> Vec<u8> {
    let head = "<!DOCTYPE html>\n<html><head><title>Atoll web_static</title></head><body>\n";
    let tail = "</body></html>\n";
    let mut page = String::from(head);
    let mut n = 0;
    while page.len() + tail.len() < STATIC_PAGE_BYTES {
        n += 1;
        page.push_str(&format!("<p>Line {n} of the page Multikernel section 5.4 serves.</p>\n"));
    }
    page.truncate(STATIC_PAGE_BYTES - tail.len() - 1);
    page.push('\n');
    page.push_str(tail);
    page.into_bytes()
}

/// Byte `i` of the input files: `workloads::fileio::input_byte` (the benchmarks check the
/// bytes they read against it, so a difference fails them rather than skewing them).
fn input_byte(i: usize) -> u8 {
    (i.wrapping_mul(2_654_435_761) >> 13) as u8
}

/// Where the image and the jobs' copies live.
fn dir() -> PathBuf {
    build::target_dir().join("bench").join("disk")
}

/// The image, built if it is not there yet.
fn template() -> Result<PathBuf> {
    // Named for its contents: an image of an older layout is never taken for this one.
    let image = dir().join("template-3.img");
    if image.is_file() {
        return Ok(image);
    }
    let content = dir().join("content");
    let files = content.join("bench");
    fs::create_dir_all(&files).map_err(|e| format!("{}: {e}", files.display()))?;
    let bytes: Vec<u8> = (0..FILE_BYTES).map(input_byte).collect();
    for name in ["seq.bin", "rand.bin"] {
        let path = files.join(name);
        fs::write(&path, &bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    let www = content.join("www").join("fs");
    fs::create_dir_all(&www).map_err(|e| format!("{}: {e}", www.display()))?;
    for (class, size) in FILESUM_CLASSES {
        for k in 0..FILESUM_FILES {
            let path = www.join(format!("{class}-{k}"));
            let bytes: Vec<u8> = (0..size).map(|i| input_byte(i + k)).collect();
            fs::write(&path, &bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        }
    }
    let page = content.join("www").join(STATIC_PAGE);
    fs::write(&page, static_page()).map_err(|e| format!("{}: {e}", page.display()))?;
    disk::build_image(&content, &image)?;
    Ok(image)
}

/// Gives `vm` a fresh copy of the bench image, named after the job's `log`.
pub fn attach(vm: &mut Vm, log: &Path) -> Result {
    let template = template()?;
    let name = log.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let copy = dir().join(format!("{name}.img"));
    fs::copy(&template, &copy).map_err(|e| format!("{}: {e}", copy.display()))?;
    vm.extra.extend(disk::qemu_args(&copy));
    Ok(())
}

/// Requests [`filesum_load`] makes of each size (webd times those whose file its core
/// had mapped already: the steady state).
const FILESUM_REQUESTS: usize = 96;
/// Connections it keeps busy at once (keep-alive, one request at a time each).
const FILESUM_CONNECTIONS: usize = 4;

/// The load of `webd_filesum` (Corey Figure 12): for each size of [`FILESUM_CLASSES`] in
/// turn, [`FILESUM_REQUESTS`] `GET /filesum/fs/<size>-<k>` over [`FILESUM_CONNECTIONS`]
/// kept-alive connections, `k` going round the size's files, until `stop` or the
/// deadline. webd measures the rate of each size; this counts the answers. Until webd
/// listens, QEMU's forward closes a connection empty: tried again 100 ms later.
pub fn filesum_load(addr: SocketAddr, stop: &AtomicBool, deadline: Instant) -> Result<String> {
    let answered = AtomicU64::new(0);
    let failed = AtomicU64::new(0);
    for (class, _) in FILESUM_CLASSES {
        let next = AtomicU64::new(0);
        std::thread::scope(|scope| {
            for _ in 0..FILESUM_CONNECTIONS {
                scope.spawn(|| {
                    let mut stream: Option<TcpStream> = None;
                    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                        let n = next.fetch_add(1, Ordering::Relaxed) as usize;
                        if n >= FILESUM_REQUESTS {
                            break;
                        }
                        let path = format!("/filesum/fs/{class}-{}", n % FILESUM_FILES);
                        match filesum_request(&mut stream, addr, &path) {
                            Ok(()) => answered.fetch_add(1, Ordering::Relaxed),
                            Err(_) => {
                                stream = None;
                                next.fetch_sub(1, Ordering::Relaxed);
                                std::thread::sleep(Duration::from_millis(100));
                                failed.fetch_add(1, Ordering::Relaxed)
                            }
                        };
                    }
                });
            }
        });
    }
    let (answered, failed) = (answered.into_inner(), failed.into_inner());
    Ok(format!("{answered} filesum requests answered, {failed} tries failed (webd not yet listening, or stopped)"))
}

/// One filesum request on `stream` (connecting first if there is none): a 200 with a
/// body, read whole.
fn filesum_request(stream: &mut Option<TcpStream>, addr: SocketAddr, path: &str) -> Result {
    if stream.is_none() {
        let s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))
            .map_err(|e| format!("connect: {e}"))?;
        s.set_read_timeout(Some(Duration::from_secs(30))).map_err(|e| e.to_string())?;
        // Request/response: no request waits for the last one's acknowledgement (Nagle).
        s.set_nodelay(true).map_err(|e| e.to_string())?;
        *stream = Some(s);
    }
    let s = stream.as_mut().ok_or("no connection")?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: atoll\r\n\r\n").as_bytes())
        .map_err(|e| format!("write: {e}"))?;
    let mut head = Vec::new();
    let mut one = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut one) {
            Ok(1) => head.push(one[0]),
            _ => return Err("closed".into()),
        }
        if head.len() > 4096 {
            return Err("a head of more than 4 KiB".into());
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    if !head.starts_with("HTTP/1.1 200 ") {
        return Err(format!("{path}: {}", head.lines().next().unwrap_or("")));
    }
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .and_then(|v| v.trim().parse().ok())
        .ok_or("no Content-Length")?;
    let mut body = vec![0u8; length];
    s.read_exact(&mut body).map_err(|e| format!("body: {e}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_static_page_is_html_of_its_size() {
        let page = static_page();
        assert_eq!(page.len(), STATIC_PAGE_BYTES);
        assert!(page.starts_with(b"<!DOCTYPE html>"));
        assert!(page.ends_with(b"</body></html>\n"));
    }

    #[test]
    fn only_the_file_experiments_get_the_disk() {
        assert!(needs_disk("file_read") && needs_disk("file_write"));
        assert!(!needs_disk("tcp_conn") && !needs_disk("nullsys"));
    }

    #[test]
    fn the_input_is_not_constant() {
        let distinct: std::collections::BTreeSet<u8> = (0..4096).map(input_byte).collect();
        assert!(distinct.len() > 200);
    }
}
