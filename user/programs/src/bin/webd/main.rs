//! `webd [--port P] [--count N] [--seconds S] [--idle I] [--backlog B] [--apps LIST [--mode
//! random|locality]]`: the web server of Corey §6.2 (issue M12): a front end on this core
//! with a TCP/IP stack of its own (smoltcp over the
//! network device, `libatoll::net`), at QEMU's user-network address 10.0.2.15/24. It
//! serves the disk's `/www` when the disk has one (issue M13), else the initrd's files
//! (GET and HEAD; `/` is `index.html`, or a list of the files) over HTTP/1.1 with
//! keep-alive and HTTP/1.0, parsed by `workloads::http` (`httparse`); every bad request
//! gets its status (400, 404, 405, 408, 414, 431, 505) and the connection closes. B sockets
//! listen at once (a backlog; default 32), a connection silent for 10 s is reset, and a
//! request head still incomplete 10 s after its first byte gets 408 (slowloris), so idle,
//! half-sent or trickled requests cannot hold every socket. Stops after N responses (default 100, at most
//! 1,000,000,000) or S seconds (default 60, at most 3600), or, with `--idle I`, once I seconds
//! (1 to 600) pass without a response after the first (a load that has ended): `webd: N
//! responses`. From the host through a forward QEMU binds to 127.0.0.1
//! (`hostfwd=tcp:127.0.0.1:8080-:80`). Exit 0 when N were sent or the load ended, 1 when
//! the time ran out first or there is no network device, 2 for bad arguments.
//!
//! `GET /filesum/NAME` answers with the sum of the bytes of the disk's `/www/NAME` (Corey
//! §6.2's filesum application): on the front end, or with `--apps LIST` on application
//! cores (`apps`), each a thread on one of the listed cores that maps the files it is asked
//! for, chosen by `--mode`: `locality` (the default: a file always to the same core) or
//! `random`. With a kernel core (`--kernel-core C`), `--stacks K` runs K front ends (Corey
//! Figure 6), each a thread with a TCP/IP stack of its own on a core of its own (this
//! core, then the others but the kernel core's and the application cores'), sharing
//! 10.0.2.15: the kernel core steers each connection to one by a hash of its flow.
#![no_std]
#![no_main]

extern crate alloc;

mod apps;
mod files;

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use apps::{Answer, AppThreads, Apps, Mode};
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use files::Files;
use libatoll::net::smoltcp::iface::{SocketHandle, SocketSet};
use libatoll::net::smoltcp::socket::tcp;
use libatoll::net::{Listener, ServerOptions, Stack, QEMU_GUEST_ADDRESS};
use libatoll::println;
use libatoll::thread::Builder;
use locks::TtsLock;
use workloads::http::{self, Parsed};

const USAGE: &str =
    "usage: webd [--port P] [--count N] [--seconds S] [--idle I] [--backlog B] [--kernel-core C | --polling-core C] [--stacks K] [--apps LIST [--mode random|locality]]   \
     (P 1-65535, default 80; N 1-1000000000, default 100; S 1-3600, default 60; I 1-600 seconds without a response; B 1-64, default 32; K 1-7 front ends, more than 1 with a kernel core; LIST: up to 8 other cores for filesum's application cores)";

/// Most application cores.
const APPS_MAX: usize = 8;

/// Takes `--apps LIST` and `--mode M` out of `args`: (the cores, the mode, the rest for
/// `ServerOptions`), or `None` for a bad value (a core that is this one or not online, a
/// mode without `--apps`).
fn app_options(args: &str) -> Option<(Vec<usize>, Mode, String)> {
    let (mut cores, mut mode, mut rest) = (Vec::new(), None, String::new());
    let mut words = args.split_whitespace();
    while let Some(w) = words.next() {
        match w {
            "--apps" => {
                let list = libatoll::cores::parse_cores(words.next()?, libatoll::cores_online())?;
                let me = libatoll::pcore_current();
                if list.is_empty() || list.len() > APPS_MAX || list.contains(&me) {
                    return None;
                }
                cores = list;
            }
            "--mode" => {
                mode = Some(match words.next()? {
                    "random" => Mode::Random,
                    "locality" => Mode::Locality,
                    _ => return None,
                })
            }
            other => {
                rest.push_str(other);
                rest.push(' ');
            }
        }
    }
    if mode.is_some() && cores.is_empty() {
        return None;
    }
    Some((cores, mode.unwrap_or(Mode::Locality), rest))
}

/// How long a connection may stay silent, neither sending nor taking anything (10 s).
const IDLE_US: u64 = 10_000_000;
/// The longest a request head may take to arrive from its first byte: a client that
/// trickles it (slowloris: a byte a second is never idle) gets `408` and the close.
const HEAD_US: u64 = 10_000_000;
/// Bytes of each socket's send buffer (a response larger streams through it).
const SEND_BUFFER: usize = 64 * 1024;

/// One listening socket and its connection's state.
struct Connection {
    handle: SocketHandle,
    /// Request bytes received and not yet answered.
    input: Vec<u8>,
    /// The response being sent, and how much of it has gone.
    output: Vec<u8>,
    sent: usize,
    /// Close once the response has gone.
    close_after: bool,
    /// When it last received or sent anything (the clock's microseconds).
    active_at: u64,
    /// When the request head being read began to arrive.
    head_since: Option<u64>,
    /// A filesum request an application core is answering: (its id, keep alive, HEAD,
    /// its file's size class).
    waiting: Option<(u64, bool, bool, Option<String>)>,
}

impl Connection {
    fn reset(&mut self) {
        self.input.clear();
        self.output.clear();
        self.sent = 0;
        self.close_after = false;
        self.head_since = None;
        self.waiting = None;
    }
}

/// Takes `--idle I` out of `args`: (I in microseconds, or 0 without it; the rest), or
/// `None` for a bad value.
fn idle_option(args: &str) -> Option<(u64, String)> {
    let (mut idle_us, mut rest) = (0, String::new());
    let mut words = args.split_whitespace();
    while let Some(w) = words.next() {
        if w == "--idle" {
            let seconds: u64 = words.next()?.parse().ok()?;
            if !(1..=600).contains(&seconds) {
                return None;
            }
            idle_us = seconds * 1_000_000;
        } else {
            rest.push_str(w);
            rest.push(' ');
        }
    }
    Some((idle_us, rest))
}

/// `--idle`: microseconds without a response after which the front ends stop (0: never).
static LOAD_IDLE_US: AtomicU64 = AtomicU64::new(0);
/// Set when a front end stopped because the load had ended (`--idle`).
static LOAD_ENDED: AtomicBool = AtomicBool::new(false);

fn main() -> i32 {
    let mut buf = [0u8; 256];
    let defaults = ServerOptions::new(80, 100, 60, 32);
    let Some((idle_us, rest)) = idle_option(libatoll::args(&mut buf)) else {
        println!("{USAGE}");
        return 2;
    };
    LOAD_IDLE_US.store(idle_us, Ordering::Relaxed);
    let Some((app_cores, mode, rest)) = app_options(&rest) else {
        println!("{USAGE}");
        return 2;
    };
    let Some(opts) = ServerOptions::parse(&rest, defaults, 3600, true) else {
        println!("{USAGE}");
        return 2;
    };
    let kernel_core = opts.device.kernel_core();
    // The front ends: this core, then the others but the kernel core's and the
    // application cores', round robin.
    let me = libatoll::pcore_current();
    let others: Vec<usize> = (0..libatoll::cores_online())
        .filter(|&c| c != me && Some(c) != kernel_core && !app_cores.contains(&c))
        .collect();
    if kernel_core.is_some_and(|k| app_cores.contains(&k))
        || opts.stacks > 1 && others.len() < opts.stacks - 1
    {
        println!("{USAGE}");
        return 2;
    }
    let (mut views, threads) = if app_cores.is_empty() {
        ((0..opts.stacks).map(|_| None).collect::<Vec<_>>(), None)
    } else {
        match apps::start(&app_cores, mode, opts.stacks) {
            Ok((views, threads)) => (views.into_iter().map(Some).collect(), Some(threads)),
            Err(e) => {
                println!("webd: {e}");
                return 1;
            }
        }
    };
    let first_view = views.remove(0);
    let served = if opts.stacks == 1 {
        match Stack::open_with(Some(QEMU_GUEST_ADDRESS), opts.device) {
            Ok(stack) => front_end(stack, &opts, 0, first_view, threads.as_ref()),
            Err(e) => {
                println!("webd: {e}");
                if let Some(v) = first_view {
                    v.stop(threads.as_ref());
                }
                let _ = threads.map(AppThreads::join);
                return 1;
            }
        }
    } else {
        front_ends_on_threads(&opts, &others, first_view, views, threads.as_ref())
    };
    let Some(served) = served else {
        let _ = threads.map(AppThreads::join);
        return 1;
    };
    let responses = RESPONSES.load(Ordering::Relaxed);
    println!("webd: {responses} responses");
    let apps_ended_well = threads.is_none_or(AppThreads::join);
    if !apps_ended_well {
        println!("webd: an application core ended badly");
    }
    // Corey Figure 12: filesum throughput by file size, for this mode, all front ends.
    for (class, &(count, first, last)) in &served.classes {
        if count >= 2 && last > first {
            let rate = count * 1_000_000 * served.cycles_per_us / (last - first);
            let extra = alloc::format!(
                ",\"config\":\"{}\",\"file_size\":\"{class}\",\"app_cores\":{},\"front_ends\":{},\"answered\":{count}",
                if mode == Mode::Random { "random" } else { "locality" },
                app_cores.len(),
                opts.stacks
            );
            let cores = libatoll::cores_online();
            let line = workloads::result::line(
                "atoll",
                "webd_filesum",
                cores,
                "requests",
                rate,
                "requests/s",
                &extra,
            );
            println!("{line}");
        }
    }
    if (responses >= opts.count || LOAD_ENDED.load(Ordering::Relaxed)) && apps_ended_well {
        0
    } else {
        1
    }
}

/// Responses sent by every front end of this program.
static RESPONSES: AtomicU64 = AtomicU64::new(0);

/// What a front end leaves: filesum answers by size class, (count, first, last answer's
/// time-stamp counter) since the last that had to map its file, and the counter's rate.
struct Served {
    classes: BTreeMap<String, (u64, u64, u64)>,
    cycles_per_us: u64,
}

impl Served {
    /// Adds another front end's classes: counts add up, the span widens.
    fn merge(&mut self, other: Served) {
        for (class, (count, first, last)) in other.classes {
            let seen = self.classes.entry(class).or_insert((0, first, last));
            *seen = (seen.0 + count, seen.1.min(first), seen.2.max(last));
        }
    }
}

/// Front ends 1..K on threads of their own on `others` (round robin), their stacks made
/// after the threads started (so the stacks' objects go to the share all threads hold),
/// front end 0 on this thread; their classes merged.
fn front_ends_on_threads(
    opts: &ServerOptions,
    others: &[usize],
    first_view: Option<Apps>,
    views: Vec<Option<Apps>>,
    threads: Option<&AppThreads>,
) -> Option<Served> {
    let slots: Vec<Arc<TtsLock<Option<Option<Stack>>>>> =
        (1..opts.stacks).map(|_| Arc::new(TtsLock::new(None))).collect();
    let results: Arc<TtsLock<Vec<Served>>> = Arc::new(TtsLock::new(Vec::new()));
    let mut spawned = Vec::new();
    for ((i, view), slot) in views.into_iter().enumerate().zip(&slots) {
        let (slot, results, o) = (slot.clone(), results.clone(), *opts);
        let thread = Builder::new().core(others[i % others.len()]).spawn(move || {
            let stack = loop {
                match slot.with(|s| s.take()) {
                    Some(Some(stack)) => break stack,
                    Some(None) => {
                        if let Some(v) = view {
                            v.stop(None);
                        }
                        return 1;
                    }
                    None => libatoll::thread::yield_now(),
                }
            };
            match front_end(stack, &o, i + 1, view, None) {
                Some(served) => {
                    results.with(|r| r.push(served));
                    0
                }
                None => 1,
            }
        });
        match thread {
            Ok(t) => spawned.push(t),
            Err(e) => println!("webd: no thread for front end {}: {e:?}", i + 1),
        }
    }
    let stacks =
        Stack::open_many(Some(QEMU_GUEST_ADDRESS), opts.device, opts.stacks, opts.addressing);
    let (first, rest) = match stacks {
        Ok(mut stacks) => {
            let first = stacks.remove(0);
            (Some(first), stacks.into_iter().map(Some).collect::<Vec<_>>())
        }
        Err(e) => {
            println!("webd: {e}");
            (None, (1..opts.stacks).map(|_| None).collect())
        }
    };
    for (slot, stack) in slots.iter().zip(rest) {
        slot.with(|s| *s = Some(stack));
    }
    let mine = match first {
        Some(stack) => front_end(stack, opts, 0, first_view, threads),
        None => {
            if let Some(v) = first_view {
                v.stop(threads);
            }
            None
        }
    };
    // Every thread is joined, even after one that ended badly.
    let ended: Vec<bool> = spawned.into_iter().map(|t| t.join().ok()).collect();
    let ok = ended.into_iter().all(|ok| ok);
    let mut served = mine?;
    for other in results.with(core::mem::take) {
        served.merge(other);
    }
    ok.then_some(served)
}

/// One front end (Corey §6.2): serves on `stack` until the program's front ends sent
/// `opts.count` responses in all or `opts.seconds` passed; filesum requests go to the
/// application cores (`apps`) or are summed here.
fn front_end(
    mut stack: Stack,
    opts: &ServerOptions,
    index: usize,
    mut apps: Option<Apps>,
    threads: Option<&AppThreads>,
) -> Option<Served> {
    let mut sockets = SocketSet::new(Vec::new());
    let listener =
        match Listener::new(&mut sockets, opts.port, opts.backlog, http::MAX_HEAD, SEND_BUFFER) {
            Ok(l) => l,
            Err(e) => {
                println!("webd: {e}");
                if let Some(a) = apps {
                    a.stop(threads);
                }
                return None;
            }
        };
    let mut connections: Vec<Connection> = listener
        .handles()
        .iter()
        .map(|&handle| Connection {
            handle,
            input: Vec::new(),
            output: Vec::new(),
            sent: 0,
            close_after: false,
            active_at: 0,
            head_since: None,
            waiting: None,
        })
        .collect();
    let mut files = Files::new();
    if index == 0 {
        println!(
            "webd: serving {} on 10.0.2.15:{} ({} sockets{}) for {} responses, {} s; filesum on {}",
            files.describe(),
            opts.port,
            opts.backlog,
            if opts.stacks > 1 {
                alloc::format!(" a front end, {} front ends", opts.stacks)
            } else {
                String::new()
            },
            opts.count,
            opts.seconds,
            if apps.is_some() { "application cores" } else { "the front end" }
        );
    }
    let mut classes = BTreeMap::new();
    let mut sent = 0u64;
    // `--idle`: the responses seen last, and since when.
    let (idle_us, mut seen, mut quiet_since) = (LOAD_IDLE_US.load(Ordering::Relaxed), 0, 0);
    while RESPONSES.load(Ordering::Relaxed) < opts.count
        && stack.clock.micros() < opts.seconds * 1_000_000
        && !LOAD_ENDED.load(Ordering::Relaxed)
    {
        let (responses, now) = (RESPONSES.load(Ordering::Relaxed), stack.clock.micros());
        if responses != seen {
            (seen, quiet_since) = (responses, now);
        } else if idle_us > 0 && seen > 0 && now - quiet_since > idle_us {
            LOAD_ENDED.store(true, Ordering::Relaxed);
        }
        stack.poll(&mut sockets);
        if let Some(apps) = apps.as_mut() {
            apps.poll();
        }
        let mut busy = false;
        for c in &mut connections {
            let socket = sockets.get_mut::<tcp::Socket>(c.handle);
            let now = stack.clock.micros();
            let mut server = Server {
                files: &mut files,
                apps: apps.as_mut(),
                classes: &mut classes,
                sent: &mut sent,
            };
            busy |= serve(c, socket, &listener, now, &mut server);
        }
        if !busy {
            libatoll::thread::yield_now();
        }
    }
    // The last responses leave with a few more polls (at most a second).
    let drain_until = stack.clock.micros() + 1_000_000;
    while stack.clock.micros() < drain_until {
        stack.poll(&mut sockets);
        let mut pending = false;
        for c in &mut connections {
            let socket = sockets.get_mut::<tcp::Socket>(c.handle);
            if c.sent < c.output.len() {
                send_some(c, socket);
                pending = true;
            }
        }
        if !pending {
            break;
        }
        libatoll::thread::yield_now();
    }
    if let Some(apps) = apps {
        apps.stop(threads);
    }
    let core = libatoll::pcore_current();
    if opts.stacks > 1 {
        println!("webd: front end {index} on core {core} sent {sent} responses");
    }
    // None, unless the device refused a frame for good (`Nic::dropped`): the tests check.
    println!("webd: the stack on core {core} dropped {} frames", stack.nic.dropped());
    Some(Served { classes, cycles_per_us: stack.clock.cycles_per_us() })
}

/// One turn of connection `c`: reads what came, answers a whole request, sends what it
/// can, closes or listens again. Whether there was anything to do.
fn serve(
    c: &mut Connection,
    socket: &mut tcp::Socket,
    listener: &Listener,
    now: u64,
    server: &mut Server,
) -> bool {
    match socket.state() {
        tcp::State::Listen => {
            c.active_at = now;
            return false;
        }
        _ if listener.recycle(socket) => {
            c.reset();
            return false;
        }
        _ => {}
    }
    // A connection that sends nothing and takes nothing for IDLE_US holds a listening
    // socket from everyone else (a half-sent request, a forgotten keep-alive): reset it.
    if now.saturating_sub(c.active_at) > IDLE_US {
        socket.abort();
        c.reset();
        return false;
    }
    let mut busy = false;
    let progress = (c.input.len(), c.sent);
    if socket.can_recv() && c.input.len() < http::MAX_HEAD {
        let room = http::MAX_HEAD - c.input.len();
        let _ = socket.recv(|bytes| {
            let n = bytes.len().min(room);
            c.input.extend_from_slice(&bytes[..n]);
            (n, ())
        });
        busy = true;
    }
    // An application core's answer to the request waiting for it.
    if let Some((id, keep_alive, head_only, class)) = c.waiting.clone() {
        if let Some(answer) = server.apps.as_mut().and_then(|a| a.take(id)) {
            // Figure 12 is the steady state: timing starts over after each request of the
            // size that mapped its file (an application core's first sight of it), so it
            // covers only answers from files mapped already.
            if let (Some(class), Answer::Sum { fresh, .. }) = (class, answer) {
                let at = libatoll::rdtsc();
                let seen = server.classes.entry(class).or_insert((0, at, at));
                *seen = if fresh { (0, at, at) } else { (seen.0 + 1, seen.1, at) };
            }
            let (output, keep_alive) = filesum_response(Some(answer), keep_alive, head_only);
            c.output = output;
            c.sent = 0;
            c.close_after = !keep_alive;
            c.waiting = None;
            RESPONSES.fetch_add(1, Ordering::Relaxed);
            *server.sent += 1;
            busy = true;
        }
    }
    // A new request once the last response has gone (pipelined ones wait their turn).
    if c.waiting.is_none() && c.sent == c.output.len() && !c.close_after && !c.input.is_empty() {
        let head_since = *c.head_since.get_or_insert(now);
        let parsed = http::parse(&c.input);
        if !matches!(parsed, Parsed::Partial) {
            c.head_since = None;
        }
        let answer = match parsed {
            Parsed::Request(request, used) => {
                c.input.drain(..used);
                match request.file.strip_prefix("filesum/") {
                    Some(name) if server.apps.is_some() => {
                        let apps = server.apps.as_mut().expect("checked above");
                        match apps.submit(name) {
                            Some(id) => {
                                let class = size_class(name);
                                c.waiting =
                                    Some((id, request.keep_alive, request.head_only, class));
                                None
                            }
                            None if name.len() > apps::NAME_MAX => Some(error(414)),
                            None => Some(error(503)),
                        }
                    }
                    Some(name) => {
                        let answer = server.files.sum(name);
                        Some(filesum_response(answer, request.keep_alive, request.head_only))
                    }
                    None => Some(respond(&request, server.files)),
                }
            }
            Parsed::Error(status) => {
                c.input.clear();
                Some(error(status))
            }
            Parsed::Partial if now.saturating_sub(head_since) > HEAD_US => {
                c.input.clear();
                Some(error(408))
            }
            Parsed::Partial => None,
        };
        if let Some((output, keep_alive)) = answer {
            c.output = output;
            c.sent = 0;
            c.close_after = !keep_alive;
            RESPONSES.fetch_add(1, Ordering::Relaxed);
            *server.sent += 1;
            busy = true;
        }
    }
    if c.sent < c.output.len() {
        send_some(c, socket);
        busy = true;
    }
    // Close once the last response has gone: after an error or an HTTP/1.0 request, or
    // when the client has closed its side (CLOSE_WAIT): what it left unanswered is a
    // request it cut short, which can never be completed.
    if c.sent == c.output.len() && c.waiting.is_none() {
        let state = socket.state();
        let peer_done =
            state == tcp::State::CloseWait && !matches!(http::parse(&c.input), Parsed::Request(..));
        let answered = c.close_after && state == tcp::State::Established;
        if answered || peer_done {
            c.input.clear();
            socket.close();
        }
    }
    if (c.input.len(), c.sent) != progress {
        c.active_at = now;
    }
    busy
}

/// Sends as much of `c`'s response as the socket takes.
fn send_some(c: &mut Connection, socket: &mut tcp::Socket) {
    if let Ok(n) = socket.send_slice(&c.output[c.sent..]) {
        c.sent += n;
    }
}

/// The response to `request`, and whether the connection stays open.
fn respond(request: &http::Request, files: &mut Files) -> (Vec<u8>, bool) {
    let Some(body) = files.get(&request.file) else { return error(404) };
    let kind = http::content_type(&request.file);
    let mut out = http::response_head(200, kind, body.len(), request.keep_alive).into_bytes();
    if !request.head_only {
        out.extend_from_slice(body);
    }
    (out, request.keep_alive)
}

/// What a connection's requests are served from: the files, and the application cores
/// when there are some.
struct Server<'a> {
    files: &'a mut Files,
    apps: Option<&'a mut Apps>,
    /// Filesum answers by size class since the last that mapped its file: (count, when
    /// the count started, the last answer's time; time-stamp counter).
    classes: &'a mut BTreeMap<String, (u64, u64, u64)>,
    /// Responses this front end sent.
    sent: &'a mut u64,
}

/// The size class of a filesum name `fs/CLASS-K` (`make bench`'s files: `fs/64k-3`).
fn size_class(name: &str) -> Option<String> {
    let rest = name.strip_prefix("fs/")?;
    Some(String::from(rest.split_once('-')?.0))
}

/// The response to a filesum request: the sum and the size in a line of text, or 404.
fn filesum_response(answer: Option<Answer>, keep_alive: bool, head_only: bool) -> (Vec<u8>, bool) {
    let Some(Answer::Sum { size, sum, .. }) = answer else { return error(404) };
    let body = alloc::format!("{sum} {size}\n");
    let mut out =
        http::response_head(200, "text/plain; charset=utf-8", body.len(), keep_alive).into_bytes();
    if !head_only {
        out.extend_from_slice(body.as_bytes());
    }
    (out, keep_alive)
}

/// An error response (the connection closes after it).
fn error(status: u16) -> (Vec<u8>, bool) {
    let body = http::error_body(status);
    let mut out =
        http::response_head(status, "text/plain; charset=utf-8", body.len(), false).into_bytes();
    out.extend_from_slice(body.as_bytes());
    (out, false)
}

libatoll::main!(main);
