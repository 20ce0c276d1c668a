//! Texts the fuzzer hands the kernel to read: console lines for `kernel_command` (the
//! console's own words with hostile arguments, near misses, garbage), program lines for
//! `program_run` (short programs only), file names for `file_open`, bytes for `write`;
//! and the tests that a line about to reach the console or the program loader is
//! harmless (see `guard.rs`).

use crate::rng::Rng;
use alloc::string::String;

/// Bytes in a text buffer: more than the kernel reads of a line (256), so whatever
/// length a call names, every byte the kernel could read is one the fuzzer wrote.
pub const TEXT_BYTES: usize = 320;

/// Experiments the console's `bench` knows (a random line naming one with a count is
/// replaced: see `text::harmless_console`).
pub const BENCH: &[&str] =
    &["urpc", "multicast", "shootdown", "twophase", "polling", "shm", "console"];
/// Experiments the fuzzer runs with `bench` (each sweeps every core: with at most
/// [`BENCH_CORES_MAX`] cores and a count of 1 or 2, a fraction of a second under TCG).
/// Not `urpc`, `shm` and `multicast`: they run ring-0 jobs that spin on several cores at
/// once (a pair, a server and its clients, a broadcast line's listeners), and here every
/// core runs fuzzing threads, which give a core to a kernel job only between slices; the
/// first job waits for the last to start, and every thread on those cores waits for them.
/// In `fuzz4` a `bench urpc` reached its 60 s time limit four times in a million calls,
/// `bench shm` took 13 G cycles (about 5 s) per update, and a `bench multicast 2` took
/// 19 s while yields, revocations and affinity changes on other cores waited 10-19 s:
/// most of that run's 8 minutes. `console.hostile_arguments` runs them on an idle machine.
pub const BENCH_FUZZED: &[&str] = &["shootdown", "twophase", "polling"];
/// Most cores on which a fuzzer sends `bench` lines: past this each sweep takes seconds
/// under TCG while every other core runs a fuzzer.
pub const BENCH_CORES_MAX: u64 = 4;
/// A text and its length; the rest of the buffer is spaces.
#[derive(Clone, Copy)]
pub struct Text {
    pub bytes: [u8; TEXT_BYTES],
    pub len: usize,
}

impl Text {
    pub fn new() -> Text {
        Text { bytes: [b' '; TEXT_BYTES], len: 0 }
    }

    /// `line` as a text (cut at [`TEXT_BYTES`]).
    pub fn of(line: &str) -> Text {
        let mut t = Text::new();
        t.push_str(line);
        t
    }

    fn push(&mut self, piece: &[u8]) {
        let n = piece.len().min(TEXT_BYTES - self.len);
        self.bytes[self.len..self.len + n].copy_from_slice(&piece[..n]);
        self.len += n;
    }

    fn push_str(&mut self, piece: &str) {
        self.push(piece.as_bytes());
    }

    /// The text for a trace line.
    pub fn shown(&self) -> &str {
        core::str::from_utf8(&self.bytes[..self.len]).unwrap_or("<not UTF-8>")
    }
}

/// The kernel console's commands (kernel/src/console.rs) that may be sent: every one but
/// `poweroff`, which ends the machine. `run` the kernel refuses from a program; a random
/// line that `asym`, `retype`, `tlb protocol` or `bench` would accept and act on is
/// replaced (`harmless_console`): those lines come from a scenario that undoes them
/// (`launch.rs`).
const CONSOLE_WORDS: &[&str] = &[
    "help", "cores", "mem", "skb", "monitor", "ls", "run", "tests", "uptime", "sched", "tlb",
    "asym", "retype", "bench",
];
/// Words that are almost commands.
const NEAR_WORDS: &[&str] =
    &["HELP", "Mem", "memo", "he", "xyzzy", "uptime2", "ls-l", "mon", "?", "-", "--help", "core"];
/// Hostile arguments: huge and negative numbers, bad core lists, other commands' words,
/// control characters, non-ASCII.
const ARGS: &[&str] = &[
    "0",
    "1",
    "-1",
    "-c",
    "0-1",
    "0-99999",
    "3-1",
    ",",
    "0,,1",
    "hello",
    "fault",
    "urpc",
    "multicast",
    "shm",
    "99999999999999999999999",
    "18446744073709551615",
    "0x10",
    "+1",
    "1e9",
    "\u{e9}t\u{e9}",
    "\u{2028}",
    "\0",
    "\t",
    "\u{7}",
    "\u{7f}",
    "%s%n",
    "../..",
    "x=y",
    "protocol",
    "auto",
    "unicast",
    "1:50",
    "0:100",
    "9:50",
    "0-1:0",
    "1:101",
    "1:50/1:50",
];
/// The programs `program_run` may start: short ones (`hello` exits, `fault` faults).
pub const PROGRAMS: &[&str] = &["hello", "fault"];
/// Lines that name no program.
const NOT_PROGRAMS: &[&str] =
    &["", "hellO", "hello2", "/hello", "./fault", "faul", "nosuch", "HELLO", "hello\0", "\u{e9}"];

/// A console line for `kernel_command`.
pub fn console_line(rng: &mut Rng) -> Text {
    let mut t = Text::new();
    match rng.below(8) {
        0 => return garbage(rng),
        1 => t.push_str(rng.pick(NEAR_WORDS)),
        _ => {
            if rng.one_in(6) {
                t.push_str(rng.pick(&[" ", "\t", "  "]));
            }
            t.push_str(rng.pick(CONSOLE_WORDS));
        }
    }
    for _ in 0..rng.below(4) {
        t.push_str(rng.pick(&[" ", " ", "\t", "   "]));
        t.push_str(rng.pick(ARGS));
    }
    if rng.one_in(16) {
        // A long argument: past the console's line length.
        for _ in 0..rng.below(300) {
            t.push(b"a");
        }
    }
    t
}

/// A line for `program_run`: `hello` (with arguments) or `fault` mostly.
pub fn program_line(rng: &mut Rng) -> Text {
    let mut t = Text::new();
    match rng.below(10) {
        0..=4 => {
            t.push_str(rng.pick(&["hello", "hello", " hello", "\thello", "hello  "]));
            for _ in 0..rng.below(4) {
                t.push_str(" ");
                t.push_str(rng.pick(ARGS));
            }
        }
        5..=6 => t.push_str("fault"),
        7..=8 => t.push_str(rng.pick(NOT_PROGRAMS)),
        _ => return garbage(rng),
    }
    t
}

/// A path for the disk's file calls (`fs_open`, `fs_mkdir`, ...): under `/fz` mostly
/// (so a fuzzer on a disk never touches another test's files), with `.` and `..`
/// components, doubled and trailing slashes, a name of 256 bytes; sometimes `/` alone, a
/// relative path, or garbage.
pub fn path(rng: &mut Rng) -> Text {
    const PARTS: &[&str] = &["a", "b", "dir", "f.txt", ".", "..", "", "x y", "%00"];
    let mut t = Text::new();
    match rng.below(10) {
        0 => t.push_str("/"),
        1 => t.push_str("fz/relative"),
        2 => return garbage(rng),
        _ => {
            t.push_str("/fz");
            for _ in 0..rng.below(4) {
                t.push_str("/");
                if rng.one_in(16) {
                    t.push_str(&"n".repeat(256));
                } else {
                    t.push_str(rng.pick(PARTS));
                }
            }
        }
    }
    t
}

/// A file name for `file_open`: a real one a third of the time (opening one copies the
/// whole file).
pub fn file_name(rng: &mut Rng, files: &[String]) -> Text {
    let mut t = Text::new();
    match rng.below(6) {
        0..=1 if !files.is_empty() => t.push_str(&files[rng.below(files.len() as u64) as usize]),
        4 => t.push_str(rng.pick(NOT_PROGRAMS)),
        _ => return garbage(rng),
    }
    t
}

/// Bytes for `write`: printable mostly, with control characters, bytes past ASCII and
/// newlines. No capital letters: the test runner reads markers (`TEST FAIL`, `PANIC`)
/// only in capitals at the start of a line, and a fuzzer's noise must never look like one.
pub fn junk(rng: &mut Rng) -> Text {
    let mut t = Text::new();
    // Short mostly: a long run's console stays readable.
    let n = if rng.one_in(16) { rng.below(65) } else { rng.below(8) };
    for _ in 0..n {
        let b = match rng.below(32) {
            0 => rng.below(32) as u8,
            1 => 0x80 + rng.below(128) as u8,
            2 => b'\n',
            _ => b"abcdefghijklmnopqrstuvwxyz0123456789 .,;:-_"[rng.below(43) as usize],
        };
        t.push(&[b]);
    }
    t
}

/// Random bytes (often not UTF-8), of any length the buffer holds.
fn garbage(rng: &mut Rng) -> Text {
    let mut t = Text::new();
    let n = rng.below(TEXT_BYTES as u64 + 1) as usize;
    for b in t.bytes[..n].iter_mut() {
        *b = if rng.one_in(2) { b'a' + rng.below(26) as u8 } else { rng.next() as u8 };
    }
    t.len = n;
    t
}

/// A length for a text: its own mostly, sometimes shorter, longer (the spaces after it)
/// or past what the kernel reads.
pub fn length_for(rng: &mut Rng, t: &Text) -> u64 {
    match rng.below(10) {
        0 => rng.below(t.len as u64 + 1),
        1 => rng.below(TEXT_BYTES as u64 + 1),
        2 => 257 + rng.below(64),
        _ => t.len as u64,
    }
}

/// Whether a `program_run` line can only start `hello` or `fault`, or nothing: every
/// word of it that is a file of the initrd is one of those two. (The kernel takes the
/// trimmed line up to its first space as the name; every such name is one of its
/// words.) A line that is not UTF-8 the kernel refuses.
pub fn harmless_program(bytes: &[u8], files: &[String]) -> bool {
    let Ok(line) = core::str::from_utf8(bytes) else { return true };
    line.split_whitespace().all(|w| PROGRAMS.contains(&w) || !files.iter().any(|f| f == w))
}

/// Whether a console line is harmless: nowhere `poweroff` (in any case); no program but
/// `hello` and `fault` named (for `run`, which the kernel refuses today); and no change
/// the fuzzer would not undo. Erring on the safe side (the console splits and matches at
/// least as strictly), a line is replaced that reads as `asym` with a `CORE:PERCENT`,
/// `retype` with two numbers, `tlb protocol` with anything but `auto`, or `bench` with a
/// known experiment and no count, a count over 2, more than [`BENCH_CORES_MAX`] cores
/// (each sweep over every core then takes seconds under TCG), or one not in
/// [`BENCH_FUZZED`].
pub fn harmless_console(bytes: &[u8], files: &[String], cores: u64) -> bool {
    let Ok(line) = core::str::from_utf8(bytes) else { return true };
    let has = |word: &str| {
        line.as_bytes().windows(word.len()).any(|w| w.eq_ignore_ascii_case(word.as_bytes()))
    };
    if has("poweroff") || !harmless_program(bytes, files) {
        return false;
    }
    let mut words = line.split_whitespace();
    let command = words.next().unwrap_or("");
    let rest: alloc::vec::Vec<&str> = words.collect();
    let is = |name: &str| command.eq_ignore_ascii_case(name);
    let digits = |w: &str| w.bytes().any(|b| b.is_ascii_digit());
    if is("asym") {
        !line.contains(':')
    } else if is("retype") {
        !(rest.len() == 2 && digits(rest[0]) && digits(rest[1]))
    } else if is("tlb") {
        !(rest.len() == 2 && rest[0].eq_ignore_ascii_case("protocol") && rest[1] != "auto")
    } else if is("bench") {
        let known = |w: &str| BENCH.iter().any(|e| w.eq_ignore_ascii_case(e));
        match rest.as_slice() {
            [e, ..] if !known(e) => true,
            [_] => false,
            // Known, but too slow while every core fuzzes (see `BENCH_FUZZED`).
            [e, _] if !BENCH_FUZZED.iter().any(|f| e.eq_ignore_ascii_case(f)) => false,
            [_, n] => match n.parse::<u64>() {
                Ok(n) => n <= 2 && (2..=BENCH_CORES_MAX).contains(&cores),
                Err(_) => !digits(n),
            },
            _ => true,
        }
    } else {
        true
    }
}
