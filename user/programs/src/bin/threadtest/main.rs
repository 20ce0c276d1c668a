//! `threadtest`: checks kernel threads and the per-core schedulers (issue M7).
//!
//! - `oversubscribe`: three threads per core, each a CPU-bound loop; all finish with the
//!   right sum, and each was switched in (each got CPU).
//! - `starve`: a thread spinning on a flag and a worker that sets it, both on one core:
//!   the spinner's slices end at the tick, so the worker runs and both finish.
//! - `registers`: threads run a long loop in integer and SSE registers (inline assembly)
//!   while another moves them between cores; every result matches the sum computed in
//!   ordinary code, so preemption and migration kept every register and the FPU state.
//! - `waitwake`: a ping-pong of wake-ups across threads (no wake-up lost: every wait has
//!   a timeout, and one that passes fails the test); a wake on one word wakes no waiter of
//!   another; `wake(n)` wakes n; `wait` returns Changed and TimedOut when it should.
//! - `errors`: bad arguments to every thread call are refused with the right error.
//! - `many`: 200 threads created and joined.
//! - `tls` (issue M15): FS bases outside the user half are refused and change nothing;
//!   threads on one core, then threads moving between two cores, each set a base of their
//!   own and find it loaded (`fs:[0]`) after every switch and move, and keep their own
//!   `thread_local!` values; each thread's destructors run when it ends; and McRT-Malloc
//!   gives each kernel thread a heap of its own (two threads allocating at once share no
//!   block; their blocks go to the pool when they end).
//! - `dedicated` (2 cores or more): a `pcore_run` context has its core to itself (Corey
//!   §4.4): threads already there move off, a thread created on that core is refused
//!   (`Busy`), placed threads never run there, the context is never switched out; once
//!   it ends, the core takes threads again.
//!
//! - `peerdeath` (not in the default set: a thread of it faults on purpose; issue M14):
//!   3 threads meet at a barrier (`workloads::amps::Barrier` over the Atoll platform's
//!   `wait_word`), then one faults and the other two wait at the barrier for it again, the
//!   last one 200 ms late (after the main thread joined the first and the faulted one).
//!   The library's wait must see the dead peer: the two give up and `run_threads` fails
//!   (before, they waited until the program's time limit).
//! - `placement` (not in the default set: it needs slow cores, `asym=`): the SKB measures
//!   the slowed cores slower (under 0.7 of the fastest), and a new thread the scheduler
//!   places (AMPS) starts on the fastest core.
//! - `numa-small`, `numa-big` (not in the default set: they need core 1 on a node of its
//!   own and slower than core 0, and report rather than judge; AMPS §2.4.3, Table 4): a
//!   thread started on core 1 touches 1 MiB (`numa-small`) or twice the last-level cache
//!   the SKB reports (`numa-big`, at least 2 MiB) of memory of its own, charged to core 1's
//!   node, then runs without allocating for 1.5 s while the main thread sleeps on core 0,
//!   which AMPS then asks for it; the line `threadtest: numa: N KiB resident, moved to core
//!   C` or `..., stayed on core 1` says what the NUMA policy in force decided. The kernel
//!   test sets the policy and judges the line (`user.rss_moves_what_same_node_keeps`).
//!
//! `threadtest [TEST...] [-TEST...]` runs the named tests (all but `placement` by default),
//! less those named with a `-`; prints `threadtest: ok` or `threadtest: FAIL <why>` and
//! exits 0 or 1. A chosen test that cannot run on this machine (`dedicated` on one core)
//! says `skipped`, and the program then exits `EXIT_SKIPPED` (77) instead of 0, so the
//! kernel test that ran it reports a skip, not a pass.
#![no_std]
#![no_main]

extern crate alloc;

mod dedicated;
mod errors;
mod peerdeath;
mod placement;
mod registers;
mod scheduling;
mod tls;
mod waitwake;

use alloc::vec::Vec;
use libatoll::abi::EXIT_SKIPPED;
use libatoll::thread::{self};
use libatoll::{cores_online, println, Status};

fn main() -> i32 {
    let mut buf = [0u8; 256];
    let args = libatoll::args(&mut buf);
    let all = [
        "oversubscribe",
        "starve",
        "registers",
        "waitwake",
        "errors",
        "resident",
        "many",
        "tls",
        "dedicated",
    ];
    let (left_out, chosen): (Vec<&str>, Vec<&str>) =
        args.split_whitespace().partition(|word| word.starts_with('-'));
    let left_out: Vec<&str> = left_out.iter().map(|word| &word[1..]).collect();
    let on_request = ["placement", "peerdeath", "numa-small", "numa-big"];
    for name in chosen.iter().chain(&left_out) {
        if !all.contains(name) && !on_request.contains(name) {
            println!(
                "threadtest: unknown test {name}; tests: {all:?}, and when named: {on_request:?}"
            );
            return 2;
        }
    }
    let run: Vec<&str> = if chosen.is_empty() { all.to_vec() } else { chosen };
    let mut skipped = 0;
    for name in run.into_iter().filter(|name| !left_out.contains(name)) {
        if name == "dedicated" && cores_online() < 2 {
            println!("threadtest: dedicated needs 2 cores; skipped");
            skipped += 1;
            continue;
        }
        let result = match name {
            "oversubscribe" => scheduling::oversubscribe(),
            "starve" => scheduling::starve(),
            "registers" => registers::registers(),
            "waitwake" => waitwake::waitwake(),
            "errors" => errors::errors(),
            "placement" => placement::placement(),
            "numa-small" => placement::numa_move(1 << 20),
            "numa-big" => {
                let llc = libatoll::locality_get(1).map_or(0, |l| l.llc_bytes);
                placement::numa_move((2 * llc).max(2 << 20))
            }
            "peerdeath" => peerdeath::peer_death(),
            "resident" => placement::resident(),
            "dedicated" => dedicated::dedicated(),
            "tls" => tls::tls(),
            _ => scheduling::many(),
        };
        if let Err(why) = result {
            println!("threadtest: FAIL {name}: {why}");
            return 1;
        }
        println!("threadtest: {name} passed");
    }
    if skipped > 0 {
        println!("threadtest: ok, {skipped} skipped");
        return EXIT_SKIPPED;
    }
    println!("threadtest: ok");
    0
}

type Check = Result<(), &'static str>;

fn joined_ok(t: thread::Thread) -> Check {
    match t.join() {
        Status::Exited(0) => Ok(()),
        _ => Err("a thread did not exit 0"),
    }
}

libatoll::main!(main);
