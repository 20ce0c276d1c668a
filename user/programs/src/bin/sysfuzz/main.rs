//! `sysfuzz [--seed S] [--calls N] [--cores LIST] [--others LIST] [--threads T] [--trace
//! FROM] [--without GROUPS]`: random system calls until the kernel has answered N of them
//! in each fuzzing thread (default 10000; T threads per core in `--cores`, the further ones
//! started on the next cores and free to move, so one thread's revocation, halt or exit
//! races another's use), then
//! `sysfuzz: N calls, kernel alive`. Every call must come back with a result; none may take
//! a core down, and the kernel test that runs it (`user.sysfuzz_every_core`,
//! `user.sysfuzz_million`) then checks that every core is back to its frames, heap bytes and
//! objects. Each core's fuzzer prints its seed first (S plus its index in `--cores`); the
//! same seed makes the same choices again, so `sysfuzz --seed S --calls N` reproduces a
//! failure. Exactly so alone, starting nothing elsewhere (`--others` naming its own core);
//! otherwise what it started on other cores ends sooner or later, other fuzzers take
//! pcores, and later choices drift. `--trace FROM` prints every call from call FROM on, to
//! find the one that failed. `--without GROUPS` (a comma list of [`GROUPS`]) leaves those
//! scenario groups out, to find which one a leak or a slow run comes from.
//!
//! What it calls: every number of `abi::nr` (0..=40) and numbers past the last, with
//! arguments drawn two ways: raw (the values that break kernels: 0, small numbers, its own
//! ids, stale ids, pointers into its scratch memory, its code, the kernel half,
//! non-canonical and huge values) and typed (a reference to an object it made, of the right
//! kind or not, through its root share or another share, a stale or a random reference; a
//! size near a page boundary or far too big; a console or program line). Now and then it
//! runs a scenario that needs several calls in a row: a program or context started on a
//! core, a `cfork` child, a console line with the machine capability.
//!
//! What it never does, and how the dangerous calls are still made (`guard.rs` holds the
//! rules; each says why):
//! - `exit` and `pcore_halt` of one's own pcore end the caller: the fuzzer makes them in
//!   contexts it starts. `cfork` children run a short burst of random calls and end with
//!   `exit` (a random code), by returning, or by a fault; contexts it starts with
//!   `pcore_run` on its own root range run two instructions: `exit`, or `pcore_halt` of the
//!   pcore they run on. `program_run` starts `hello` (which exits) and `fault`.
//! - `poweroff` is called only with references that are not the machine device (wrong kind,
//!   stale, random, none): never with the real one, which it holds when it was given it
//!   (`init` and `user::run_with_machine` give it). It never puts the machine device into
//!   another share, so the one reference that works is the one it never passes.
//! - `kernel_command` with the capability gets lines built from every console word but
//!   `poweroff` (it would end the machine) with hostile arguments, and garbage, at most one
//!   per 1000 calls so the console stays readable; a random line that would change the
//!   machine (`asym` with a duty, `retype` with numbers, `tlb protocol` but `auto`, a
//!   long `bench`, or one that needs idle cores) is replaced. Those changes come from a
//!   scenario that undoes each at once (`launch.rs`): a protocol then `auto`, a duty then
//!   100 %, a block retyped to another core and back (the fuzzer moves there to give it
//!   back), `bench shootdown|twophase|polling` of 1 or 2 on up to 4 cores (`urpc`, `shm`
//!   and `multicast` spin on several cores at once and wait seconds for cores that run
//!   fuzzers: `text::BENCH_FUZZED`); `sched` and the reports too. Without the capability
//!   any line goes.
//! - `sleep` and `wait` go as drawn; one that may park for long (over 1 ms, or no timeout)
//!   is made by a parker thread (`park.rs`), whose words the fuzzer wakes; those it lets go
//!   of end with the program.
//! - `program_run` lines name `hello`, `fault`, or no program at all: never `init` (it
//!   would wait for a keyboard), `spin`, `sysfuzz` or a benchmark (they run long). Its line
//!   and the console line always come from a buffer the fuzzer fills and checks, or from
//!   an address no program can read, never from memory the kernel wrote.
//! - `pcore_run` starts a context elsewhere only on a fresh root range with nothing
//!   executable mapped (the context faults at its first instruction), or on its own root
//!   range at one of the two entries above: never a random entry in its own memory.
//! - Its own root range is read (`ar_get`, `ar_mappings`) and edited only between
//!   [`fuzzer::ZONE`] and [`fuzzer::ZONE_END`], where nothing of it lives; its own segments
//!   grow (put back at the next poll) but never shrink, are never deleted from its root
//!   share, revoked, or mapped writable anywhere. The threads' home share (through which
//!   every thread of the program names its range, stacks and thread objects) is never
//!   dropped from a set, deleted or revoked, nor is a fuzzing thread's object (its joiner
//!   would lose how it ended).
//! - The kernel writes only into its scratch mapping (guard pages around it), the zone,
//!   read-only pages, or addresses it cannot write at all.
//!
//! Starting programs and contexts on other cores: each core has one pcore object, and in
//! the kernel test every core runs a fuzzer, so `pcore_alloc` is often `NotPermitted` and a
//! context sent to a busy core waits there until that core's program ends (holding that
//! core's pcore meanwhile). The fuzzer never waits for one: it polls what it started every
//! few calls, halts whatever still runs after [`started::HALT_AFTER`] calls, and before it
//! ends halts everything, waits a bounded time, and lets go of every pcore (a context
//! still queued on a busy core starts later, halted, and ends at its first tick).
//! `--others LIST` names the cores it may start things on (default: every other core);
//! the long kernel test keeps two cores free for them, so what starts there runs.
//!
//! Without `--cores` it runs on this core only (the kernel's tests start one per core).
#![no_std]
#![no_main]

extern crate alloc;

mod call;
mod draw;
mod fuzzer;
mod guard;
mod launch;
mod park;
mod pool;
mod rng;
mod started;
mod step;
mod text;

use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};
use fuzzer::{Fuzzer, Mode};
use libatoll::{args, cfork, println, CforkOptions, Status};

const HELP: &str = "usage: sysfuzz [--seed S] [--calls N] [--cores LIST] [--others LIST] \
                    [--threads T] [--trace FROM] [--without GROUPS]   (N calls per fuzzing \
                    thread, default 10000; fuzz on --cores, default this core, with T threads \
                    each, default 1; start programs and contexts on --others, default every \
                    core; leave out the comma-listed GROUPS of \
                    tlb,asym,retype,bench,reports,console,park)";

/// The plan, set before any cfork so every core reads it from its copy.
static SEED: AtomicU64 = AtomicU64::new(0);
static CALLS: AtomicU64 = AtomicU64::new(10_000);
static TRACE_FROM: AtomicU64 = AtomicU64::new(u64::MAX);
/// Fuzzing threads per fuzzer (`--threads`), the first its main thread.
static THREADS: AtomicU64 = AtomicU64::new(1);
/// Most threads per fuzzer.
const THREADS_MAX: u64 = 16;
/// The cores it may start programs and contexts on (a bit per core; `--others`).
static OTHERS: AtomicU64 = AtomicU64::new(u64::MAX);

/// Scenario groups `--without` may leave out, by bit: the accepted console lines of
/// `launch.rs` (`tlb protocol`, `asym`, `retype`, `bench`, the reports), the random console
/// lines sent with the machine capability, and the long parks (made short, in place,
/// instead). To bisect a leak or a slow run, not a guard: `fuzz4` runs every group.
pub const GROUPS: &[&str] = &["tlb", "asym", "retype", "bench", "reports", "console", "park"];
/// The groups left out (a bit per [`GROUPS`] entry).
static WITHOUT: AtomicU64 = AtomicU64::new(0);

/// Whether scenario group `name` (one of [`GROUPS`]) runs.
pub fn with(name: &str) -> bool {
    let bit = GROUPS.iter().position(|&g| g == name).expect("a known group");
    WITHOUT.load(Ordering::Relaxed) & (1 << bit) == 0
}

/// The mask of the comma list `word` of [`GROUPS`], if every name is one.
fn groups_mask(word: Option<&str>) -> Option<u64> {
    word?
        .split(',')
        .try_fold(0, |mask, name| GROUPS.iter().position(|&g| g == name).map(|bit| mask | 1 << bit))
}

/// Pcores of the fuzzers this program spread to other cores (`--cores`): the fuzzer on
/// this core never halts or deletes them. 0 marks a free slot.
pub static SIBLINGS: [AtomicU64; 64] = [const { AtomicU64::new(0) }; 64];

/// The thread objects of this program's fuzzing threads (`--threads`), in the home share
/// every thread reaches: no fuzzer deletes or revokes one, or the thread that joins it
/// would lose how it ended (the 100 M run's seeds 20, 40 and 60 ended "a fuzzing thread
/// ended Failed": a join of an object another fuzzing thread had taken away).
pub static WORKERS: [AtomicU64; 64] = [const { AtomicU64::new(0) }; 64];

fn main() -> i32 {
    let line = args::arg_string();
    let mut words = line.split_whitespace();
    let mut cores = alloc::vec![libatoll::pcore_current()];
    SEED.store(0x5eed + libatoll::pcore_current() as u64, Ordering::Relaxed);
    while let Some(word) = words.next() {
        let value = |w: Option<&str>, cell: &AtomicU64| {
            args::number(w, 0..=u64::MAX).map(|v| cell.store(v, Ordering::Relaxed)).is_some()
        };
        let ok = match word {
            "--seed" => value(words.next(), &SEED),
            "--calls" => value(words.next(), &CALLS),
            "--trace" => value(words.next(), &TRACE_FROM),
            "--threads" => args::number(words.next(), 1..=THREADS_MAX)
                .map(|v| THREADS.store(v, Ordering::Relaxed))
                .is_some(),
            "--without" => {
                groups_mask(words.next()).map(|m| WITHOUT.store(m, Ordering::Relaxed)).is_some()
            }
            "--cores" => args::cores_value(words.next()).map(|c| cores = c).is_some(),
            "--others" => args::cores_value(words.next())
                .map(|list| {
                    let mask = list.iter().filter(|&&c| c < 64).fold(0, |m, &c| m | 1 << c);
                    OTHERS.store(mask, Ordering::Relaxed)
                })
                .is_some(),
            _ => false,
        };
        if !ok {
            println!("{HELP}");
            return if word == "--help" { 0 } else { 2 };
        }
    }
    let me = libatoll::pcore_current();
    // Spread by hand rather than with `cores::spread`: the fuzzer on this core must know
    // its siblings' pcores before it starts, so that it never halts one.
    let mut children = Vec::new();
    for (i, &core) in cores.iter().enumerate() {
        if core == me {
            continue;
        }
        match cfork::cfork(core, &CforkOptions::default(), fuzz, i as u64) {
            Ok(child) => {
                if let Some(slot) = SIBLINGS.iter().find(|s| s.load(Ordering::Relaxed) == 0) {
                    slot.store(child.pcore.object, Ordering::Relaxed);
                }
                children.push((core, child));
            }
            Err(e) => {
                println!("sysfuzz: cfork to core {core} failed: {e:?}");
                for (_, child) in children {
                    let _ = libatoll::obj::pcore_halt(child.pcore);
                    child.join();
                }
                return 1;
            }
        }
    }
    let mut failed = false;
    if let Some(i) = cores.iter().position(|&c| c == me) {
        failed |= fuzz(i as u64) != 0;
    }
    for (core, child) in children {
        let status = child.join();
        if status != Status::Exited(0) {
            println!("sysfuzz: the fuzzer on core {core} ended {status:?}");
            failed = true;
        }
    }
    if failed {
        return 1;
    }
    let threads = THREADS.load(Ordering::Relaxed);
    let total = CALLS.load(Ordering::Relaxed) * cores.len() as u64 * threads;
    println!("sysfuzz: {total} calls, kernel alive");
    0
}

/// Fuzzes on this core (`i`: its index in the list, added to the seed), with the further
/// threads `--threads` asks for; 0 if every answer was one the kernel may give.
fn fuzz(i: u64) -> i32 {
    let threads = THREADS.load(Ordering::Relaxed);
    let me = libatoll::pcore_current();
    let cores = libatoll::cores_online();
    // Each further thread starts on the next core (a different seed each): threads of one
    // program fuzz on several cores at once, so one's revocation, halt or exit races
    // another's use, and the scheduler may move them.
    let mut workers = Vec::new();
    for t in 1..threads {
        let seed = SEED.load(Ordering::Relaxed).wrapping_add(i).wrapping_add(t * 1_000_003);
        let core = (me + t as usize) % cores;
        match libatoll::thread::Builder::new()
            .core(core)
            .spawn(move || fuzz_thread(seed, Mode::Worker))
        {
            Ok(w) => {
                if let Some(slot) = WORKERS.iter().find(|s| s.load(Ordering::Relaxed) == 0) {
                    slot.store(w.object().object, Ordering::Relaxed);
                }
                workers.push(w)
            }
            Err(e) => println!("sysfuzz: core {me}: thread {t} not started: {e:?}"),
        }
    }
    let seed = SEED.load(Ordering::Relaxed).wrapping_add(i);
    let mut failed = fuzz_thread(seed, Mode::Main) != 0;
    for w in workers {
        let status = w.join();
        if status != Status::Exited(0) {
            println!("sysfuzz: core {me}: a fuzzing thread ended {status:?}");
            failed = true;
        }
    }
    failed as i32
}

/// One fuzzing thread: `--calls` calls from `seed`.
fn fuzz_thread(seed: u64, mode: Mode) -> i32 {
    let calls = CALLS.load(Ordering::Relaxed);
    let trace = TRACE_FROM.load(Ordering::Relaxed);
    let me = libatoll::pcore_current();
    println!("sysfuzz: core {me} seed {seed} calls {calls}");
    let others = OTHERS.load(Ordering::Relaxed);
    let mut f = match Fuzzer::new(seed, mode, others, trace) {
        Ok(f) => f,
        Err(e) => {
            println!("sysfuzz: core {me}: cannot set up: {e:?}");
            return 1;
        }
    };
    let start = libatoll::rdtsc();
    for done in 0..calls {
        f.step();
        if done > 0 && done % 100_000 == 0 {
            let cycles = (libatoll::rdtsc() - start) / done;
            println!("sysfuzz: core {me}: {done} calls, {cycles} cycles a call so far");
        }
    }
    f.finish();
    f.report(calls, libatoll::rdtsc() - start);
    if f.stats.wrong > 0 {
        1
    } else {
        0
    }
}

libatoll::main!(main);
