//! Multikernel Figure 3: cycles per update of 1, 2, 4 or 8 cache lines, by client cores
//! updating one shared array directly (SHMn: an atomic add on each line) or by sending each
//! update to a server core that owns the array and waiting for its acknowledgement (MSGn: a
//! URPC channel each way per client; the server spins on its channels). The server is the
//! last core; for k = 1 .. cores-1 the first k cores are clients. All meet at a barrier,
//! then each client makes a tenth as many untimed updates as it times
//! ([`pingpong::warmup`](crate::pingpong::warmup)), so that what happens once per run (a
//! thread's first touch of its code and data) is not counted as per-update cost, and
//! times its own; the result is the median over clients. The first configuration runs
//! once unreported, to warm caches (and an emulator's translations).

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};

use urpc::{ChannelMemory, Receiver, Sender, PAYLOAD_WORDS};

use crate::memory::{alloc_slice, CacheLine, Placement, SpinBarrier, Zeroable};
use crate::pingpong::{warmup, QUEUE};
use crate::result::{self, median};
use crate::Platform;

/// Most cache lines one update touches.
pub const MAX_LINES: usize = 8;

/// Updates per client and configuration when none are asked for (the kernel's default).
pub const DEFAULT_UPDATES: usize = 500;

/// How a client updates the array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// Directly, with an atomic add on each shared line.
    Shm,
    /// By a message to the server and a wait for its acknowledgement.
    Msg,
}

impl Protocol {
    /// `shm` or `msg`, as in the result lines (`shm4`, `msg8`).
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Shm => "shm",
            Protocol::Msg => "msg",
        }
    }
}

/// One point of Figure 3.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Point {
    /// Client cores.
    pub clients: usize,
    /// How they update.
    pub protocol: Protocol,
    /// Cache lines per update.
    pub lines: usize,
    /// Median over clients of each client's cycles per update.
    pub cycles_per_update: u64,
}

/// The channels between one client and the server.
#[derive(Debug, Default)]
#[repr(C)]
struct ClientChannels {
    request: ChannelMemory<QUEUE>,
    reply: ChannelMemory<QUEUE>,
}

// SAFETY: two URPC channels, valid when zero.
unsafe impl Zeroable for ClientChannels {}

/// Measures one configuration: `clients` client cores (0..clients) and the server (the last
/// core) doing `updates` updates of `lines` lines each, by `protocol`.
pub fn measure<P: Platform + ?Sized>(
    p: &P,
    clients: usize,
    protocol: Protocol,
    lines: usize,
    updates: usize,
) -> Result<Point, String> {
    let server = p.cores().checked_sub(1).ok_or("no cores")?;
    if clients == 0 || clients > server || lines == 0 || lines > MAX_LINES {
        return Err(format!("{clients} clients and {lines} lines do not fit {} cores", p.cores()));
    }
    let shared = alloc_slice::<CacheLine, P>(p, MAX_LINES, Placement::Shared)?;
    let owned = alloc_slice::<CacheLine, P>(p, MAX_LINES, Placement::Local(server))?;
    let channels = alloc_slice::<ClientChannels, P>(p, clients, Placement::Shared)?;
    let barrier = alloc_slice::<SpinBarrier, P>(p, 1, Placement::Shared)?;
    let per_update: Vec<AtomicU64> = (0..clients).map(|_| AtomicU64::new(0)).collect();
    let warm = warmup(updates) as u64;
    let mut cores: Vec<usize> = (0..clients).collect();
    let parties = match protocol {
        Protocol::Shm => clients,
        Protocol::Msg => {
            cores.push(server);
            clients + 1
        }
    };

    let serve = || {
        let mut ends: Vec<_> =
            channels.iter().map(|c| (Receiver::new(&c.request), Sender::new(&c.reply))).collect();
        barrier[0].wait(parties);
        let mut left = clients as u64 * (warm + updates as u64);
        while left > 0 {
            for (rx, tx) in ends.iter_mut() {
                if let Some(msg) = rx.try_recv() {
                    let n = (msg.payload[1] as usize).min(MAX_LINES);
                    // The server owns these lines: a plain add, no locked instruction.
                    for line in &owned[..n] {
                        line.0.store(line.0.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
                    }
                    while tx.try_send(2, &[msg.payload[0]; PAYLOAD_WORDS]).is_err() {}
                    left -= 1;
                }
            }
        }
    };
    let client = |slot: usize| {
        let mut ends = (Sender::new(&channels[slot].request), Receiver::new(&channels[slot].reply));
        barrier[0].wait(parties);
        let mut start = p.cycles();
        for round in 0..warm + updates as u64 {
            if round == warm {
                start = p.cycles();
            }
            match protocol {
                Protocol::Shm => {
                    for line in &shared[..lines] {
                        line.0.fetch_add(1, Ordering::AcqRel);
                    }
                }
                Protocol::Msg => {
                    let mut payload = [0; PAYLOAD_WORDS];
                    (payload[0], payload[1]) = (round, lines as u64);
                    while ends.0.try_send(1, &payload).is_err() {}
                    while ends.1.try_recv().is_none() {}
                }
            }
        }
        per_update[slot].store((p.cycles() - start) / updates.max(1) as u64, Ordering::Relaxed);
    };
    p.run_on(&cores, &|core| if core == server { serve() } else { client(core) })?;
    let mut values: Vec<u64> = per_update.iter().map(|v| v.load(Ordering::Relaxed)).collect();
    Ok(Point { clients, protocol, lines, cycles_per_update: median(&mut values).unwrap_or(0) })
}

/// Every point for 1 .. cores-1 clients, as `experiment":"shm_vs_msg"` result lines (the
/// `cores` field is the number of clients, as in the kernel's lines).
pub fn run<P: Platform + ?Sized>(p: &P, updates: usize) -> Result<Vec<String>, String> {
    if p.cores() < 2 {
        return Err("needs 2 cores".into());
    }
    let mut lines = Vec::new();
    for k in 1..p.cores() {
        measure(p, k, Protocol::Shm, 1, updates)?;
        measure(p, k, Protocol::Msg, 1, updates)?;
        for n in [1, 2, 4, 8] {
            for protocol in [Protocol::Shm, Protocol::Msg] {
                let point = measure(p, k, protocol, n, updates)?;
                let extra = format!(",\"protocol\":\"{}{n}\",\"lines\":{n}", protocol.name());
                lines.push(result::line(
                    p.system(),
                    "shm_vs_msg",
                    k,
                    "cycles_per_update",
                    point.cycles_per_update,
                    "cycles",
                    &extra,
                ));
            }
        }
    }
    Ok(lines)
}
