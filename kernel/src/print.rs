//! Kernel output on the serial console, one whole line at a time, with no lock that
//! cores share (issue M10 item 7; Multikernel §3.2: nothing shared by default).
//!
//! The serial port belongs to one core, [`SERIAL_CORE`]. Every other core formats a line
//! on its stack and appends it, stamped with the TSC, to its own [`Ring`] (only that core
//! writes it); the port's core drains every ring, oldest stamp first, whenever it prints
//! and at every tick and idle pass (not at every poll: in a wait's loop even the drain's
//! check cost half a message's latency). So a printing core never waits for
//! the port or for another core, lines never interleave, and each core's lines keep their
//! order. (Output by message to the port's core was the other choice: a 1 KiB line is 19
//! channel slots of 32, and a core that prints would wait for the port's core to read its
//! channel, which a ring of its own lets it skip; `bench console` measures the rings
//! against the lock they replaced.)
//!
//! Before a core's ring is open (early boot), the port's core writes directly; a core
//! whose ring is full, or stays undrained because the port's core has stopped, waits a
//! bounded time and then writes directly, so output is late rather than lost.

use crate::arch::{cpu, serial, timer};
use crate::param::{PRINT_RING_WORDS, PRINT_WAIT_US};
use crate::percpu::{self, CoreState, MAX_CORES};
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt::{self, Write};
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The core that owns the serial port and drains every core's ring into it.
pub const SERIAL_CORE: usize = 0;

/// Longest output of one `print!` call; longer output is cut and marked with `...`.
const LINE_MAX: usize = 1024;

/// Words a line's header takes: its TSC stamp and its length in bytes.
const HEADER_WORDS: u64 = 2;

/// One core's ring of lines (Multikernel §3.3: a producer and a consumer, each with lines
/// of its own). Records are `[stamp][length][bytes, 8 a word]`; `head` and `tail` count
/// words written and words read since boot, so `head - tail` is what waits.
pub struct Ring {
    /// Written by the core that owns the ring.
    head: Padded,
    /// Written by the port's core as it drains.
    tail: Padded,
    words: Box<[AtomicU64]>,
    /// Lines appended, and lines that went straight to the port (the owner writes both).
    appended: AtomicU64,
    direct: AtomicU64,
    /// Lines the port's core wrote out of this ring (it alone writes this).
    drained: AtomicU64,
}

/// What one core's ring has carried.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingStats {
    /// Lines appended to it.
    pub appended: u64,
    /// Lines the port's core wrote out of it.
    pub drained: u64,
    /// Lines its core wrote to the port itself (its ring stayed full, or no one drained).
    pub direct: u64,
}

/// Core `core`'s ring counters (zero if it has no ring).
pub fn stats(core: usize) -> RingStats {
    RINGS.get(core).and_then(|r| r.get()).map_or(RingStats::default(), |r| RingStats {
        appended: r.appended.load(Ordering::Relaxed),
        drained: r.drained.load(Ordering::Relaxed),
        direct: r.direct.load(Ordering::Relaxed),
    })
}

/// A counter on a cache line of its own.
#[repr(align(64))]
struct Padded(AtomicU64);

/// Each core's ring, opened by that core after its heap ([`open_this_core`]).
static RINGS: [spin::Once<Ring>; MAX_CORES] = [const { spin::Once::new() }; MAX_CORES];

/// Set once the port's core has opened its ring: from then on every printing core runs
/// with its per-core block entered (before, only the boot core runs, without one).
static OPEN: AtomicBool = AtomicBool::new(false);

struct LineBuffer {
    bytes: [u8; LINE_MAX],
    len: usize,
    truncated: bool,
}

impl Write for LineBuffer {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for &b in s.as_bytes() {
            if self.len == LINE_MAX {
                self.truncated = true;
                return Ok(());
            }
            self.bytes[self.len] = b;
            self.len += 1;
        }
        Ok(())
    }
}

impl LineBuffer {
    /// The bytes to send: the line, and `...` with a new line if it was cut.
    fn finish(&mut self) -> &[u8] {
        if self.truncated {
            let cut = LINE_MAX - 4;
            self.bytes[cut..cut + 4].copy_from_slice(b"...\n");
            self.len = cut + 4;
        }
        &self.bytes[..self.len]
    }
}

/// Opens this core's ring (each core, once, after its heap).
pub fn open_this_core() {
    let me = percpu::this_core().index;
    let words: Vec<AtomicU64> = (0..PRINT_RING_WORDS).map(|_| AtomicU64::new(0)).collect();
    RINGS[me].call_once(|| Ring {
        head: Padded(AtomicU64::new(0)),
        tail: Padded(AtomicU64::new(0)),
        words: words.into_boxed_slice(),
        appended: AtomicU64::new(0),
        direct: AtomicU64::new(0),
        drained: AtomicU64::new(0),
    });
    if me == SERIAL_CORE {
        OPEN.store(true, Ordering::Release);
    }
}

/// Formats `args` and sends them to the console as one piece. Used by the macros.
pub fn print_args(args: fmt::Arguments) {
    let mut line = LineBuffer { bytes: [0; LINE_MAX], len: 0, truncated: false };
    let _ = line.write_fmt(args);
    let bytes = line.finish();
    cpu::without_interrupts(|| {
        if !OPEN.load(Ordering::Acquire) {
            return write_port(bytes);
        }
        let me = percpu::this_core().index;
        if me == SERIAL_CORE {
            // Every line appended before this one has an older stamp: it goes first.
            drain();
            return write_port(bytes);
        }
        match RINGS[me].get() {
            Some(ring) => append(ring, bytes),
            None => write_port(bytes),
        }
    });
}

/// Appends a line to this core's ring, waiting (bounded) for room; past the wait, or if
/// the port's core no longer drains (faulted), the line goes straight to the port.
fn append(ring: &Ring, bytes: &[u8]) {
    let need = HEADER_WORDS + (bytes.len() as u64).div_ceil(8);
    let size = ring.words.len() as u64;
    let start = cpu::rdtsc();
    let head = ring.head.0.load(Ordering::Relaxed);
    while head + need - ring.tail.0.load(Ordering::Acquire) > size {
        if timer::us_since(start) > PRINT_WAIT_US || !port_core_drains() {
            ring.direct.fetch_add(1, Ordering::Relaxed);
            return write_port(bytes);
        }
        core::hint::spin_loop();
    }
    let word = |at: u64| &ring.words[(at % size) as usize];
    word(head).store(cpu::rdtsc(), Ordering::Relaxed);
    word(head + 1).store(bytes.len() as u64, Ordering::Relaxed);
    for (i, chunk) in bytes.chunks(8).enumerate() {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        word(head + HEADER_WORDS + i as u64).store(u64::from_le_bytes(w), Ordering::Relaxed);
    }
    // Release: the record's words before the head that shows them.
    ring.head.0.store(head + need, Ordering::Release);
    ring.appended.fetch_add(1, Ordering::Relaxed);
}

/// Whether the port's core is there to drain the rings.
fn port_core_drains() -> bool {
    percpu::core(SERIAL_CORE).is_some_and(|c| c.state() != CoreState::Faulted)
}

/// On the port's core: writes every line waiting in any core's ring to the port, oldest
/// stamp first (others do nothing). The tick and the idle loop call it.
pub fn drain() {
    if !OPEN.load(Ordering::Acquire) || percpu::this_core().index != SERIAL_CORE {
        return;
    }
    // The common case, at every poll of the port's core: nothing waits. Two loads a ring,
    // no interrupt flag change (this check at every turn of a wait for a message once
    // added half a message's latency, `bench polling`).
    let cores = percpu::core_count().clamp(1, MAX_CORES);
    let waiting = RINGS[..cores]
        .iter()
        .filter_map(spin::Once::get)
        .any(|r| r.tail.0.load(Ordering::Relaxed) != r.head.0.load(Ordering::Acquire));
    if !waiting {
        return;
    }
    cpu::without_interrupts(|| {
        // At most the lines there now: a core printing without pause cannot keep us here.
        let heads = heads();
        let cores = percpu::core_count().clamp(1, MAX_CORES);
        while let Some(i) = oldest(&heads[..cores]) {
            let Some(ring) = RINGS[i].get() else { break };
            write_record(ring);
        }
    });
}

/// Where every core's ring ends now (0 for a core without one).
fn heads() -> [u64; MAX_CORES] {
    let mut heads = [0u64; MAX_CORES];
    for (i, ring) in RINGS.iter().enumerate() {
        heads[i] = ring.get().map_or(0, |r| r.head.0.load(Ordering::Acquire));
    }
    heads
}

/// The ring whose first waiting line (below its `heads` entry) is the oldest.
fn oldest(heads: &[u64]) -> Option<usize> {
    let mut best: Option<(u64, usize)> = None;
    for (i, ring) in RINGS[..heads.len()].iter().enumerate() {
        let Some(ring) = ring.get() else { continue };
        let tail = ring.tail.0.load(Ordering::Relaxed);
        if tail >= heads[i] {
            continue;
        }
        let stamp = ring.words[(tail % ring.words.len() as u64) as usize].load(Ordering::Relaxed);
        if best.is_none_or(|(s, _)| stamp < s) {
            best = Some((stamp, i));
        }
    }
    best.map(|(_, i)| i)
}

/// Writes a ring's first line to the port and lets its words go.
fn write_record(ring: &Ring) {
    let size = ring.words.len() as u64;
    let tail = ring.tail.0.load(Ordering::Relaxed);
    let word = |at: u64| ring.words[(at % size) as usize].load(Ordering::Relaxed);
    let len = word(tail + 1).min(LINE_MAX as u64);
    let mut line = [0u8; LINE_MAX];
    for i in 0..len.div_ceil(8) {
        let w = word(tail + HEADER_WORDS + i).to_le_bytes();
        let at = (i * 8) as usize;
        let n = (len as usize - at).min(8);
        line[at..at + n].copy_from_slice(&w[..n]);
    }
    // Release: the words are read before the producer may write over them.
    ring.tail.0.store(tail + HEADER_WORDS + len.div_ceil(8), Ordering::Release);
    ring.drained.fetch_add(1, Ordering::Relaxed);
    write_port(&line[..len as usize]);
}

/// Before the machine stops (power-off, a test's verdict): the port's core drains every
/// ring; another core waits, bounded, until the port's core has drained what every ring
/// holds now.
pub fn flush() {
    if !OPEN.load(Ordering::Acquire) {
        return;
    }
    if percpu::this_core().index == SERIAL_CORE {
        return drain();
    }
    let heads = heads();
    let drained = || {
        RINGS
            .iter()
            .zip(heads)
            .all(|(r, h)| r.get().is_none_or(|r| r.tail.0.load(Ordering::Acquire) >= h))
    };
    let start = cpu::rdtsc();
    while !drained() && timer::us_since(start) < PRINT_WAIT_US && port_core_drains() {
        core::hint::spin_loop();
    }
}

/// Writes bytes to the serial port, a carriage return before each new line.
fn write_port(bytes: &[u8]) {
    for &b in bytes {
        if b == b'\n' {
            serial::write_byte(b'\r');
        }
        serial::write_byte(b);
    }
}

/// Prints to the serial console (the whole call as one piece).
#[macro_export]
macro_rules! print {
    ($($arg:tt)*) => ($crate::print::print_args(format_args!($($arg)*)));
}

/// Prints a line to the serial console (as one piece).
#[macro_export]
macro_rules! println {
    () => ($crate::print!("\n"));
    ($($arg:tt)*) => ($crate::print::print_args(format_args!("{}\n", format_args!($($arg)*))));
}
