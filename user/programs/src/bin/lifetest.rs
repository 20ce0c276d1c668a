//! `lifetest MODE`: programs whose threads would outlive them if the kernel let them
//! (issue M14, "threads that can never be stopped"). Each mode sets up the situation and
//! leaves it to the kernel to end; the kernel test that runs it checks the outcome and
//! that every core's threads, objects and frames came back.
//!
//! - `orphans`: the main thread starts threads that park with no time limit (a `wait`
//!   with no timeout on a word nobody wakes, a `join` of such a thread, a long `sleep`),
//!   one on every core, then exits 0. Ending the program must end them.
//! - `successors`: a chain of threads, each starting its successor and exiting; the main
//!   thread waits with no timeout. Only the program's time limit, which every thread
//!   inherits, can end it: it must end `TimedOut`.
//! - `halt`: starts `lifetest parked` on another core with `program_run`, lets it park,
//!   halts its pcore, and checks that its status becomes `Halted` within 2 s; prints
//!   `lifetest: ok` or `lifetest: FAIL why`. (1 core: `lifetest: skipped (1 core)`, exit
//!   `EXIT_SKIPPED`, 77.)
//! - `parked`: a main thread and a spawned one, both waiting with no timeout.
#![no_std]
#![no_main]

use core::sync::atomic::AtomicU32;
use libatoll::cfork::patiently;
use libatoll::obj::{self, pcore_alloc, pcore_halt, pcore_status, program_run, share_delobj};
use libatoll::thread::{self, Builder};
use libatoll::{args, cores_online, pcore_current, println, ObjRef, Status};

/// The word every parked thread waits on: nobody ever wakes it.
static NEVER: AtomicU32 = AtomicU32::new(0);

/// Parks the caller for good (as far as it is concerned): a wait with no timeout.
fn park_forever() -> i32 {
    loop {
        let _ = thread::wait(&NEVER, 0, 0);
    }
}

fn main() -> i32 {
    let line = args::arg_string();
    match line.trim() {
        "orphans" => orphans(),
        "successors" => successors(),
        "parked" => parked(),
        "halt" => match halt() {
            Ok(true) => ok(),
            Ok(false) => {
                println!("lifetest: skipped (1 core)");
                libatoll::abi::EXIT_SKIPPED
            }
            Err(why) => {
                println!("lifetest: FAIL {why}");
                1
            }
        },
        other => {
            println!("lifetest: unknown mode {other:?} (orphans, successors, halt, parked)");
            2
        }
    }
}

fn ok() -> i32 {
    println!("lifetest: ok");
    0
}

/// Threads parked in `wait`, `join` and `sleep` on every core; the main thread exits.
fn orphans() -> i32 {
    for core in 0..cores_online() {
        let waiter = Builder::new().core(core).affinity(1 << core).spawn(park_forever);
        let Ok(waiter) = waiter else { continue };
        // A joiner of a thread that never ends.
        let _ = Builder::new().core(core).affinity(1 << core).spawn(move || {
            let _ = waiter.join();
            0
        });
        let _ = Builder::new().core(core).affinity(1 << core).spawn(|| {
            let _ = thread::sleep_us(60_000_000);
            0
        });
    }
    // Let them park.
    let _ = thread::sleep_us(20_000);
    0
}

/// A thread that starts its successor and exits, for ever.
fn successor() -> i32 {
    let _ = thread::sleep_us(1000);
    let _ = thread::spawn(successor);
    0
}

/// A chain of successors; the main thread waits with no timeout.
fn successors() -> i32 {
    let _ = thread::spawn(successor);
    park_forever()
}

/// A spawned thread and the main thread, both parked.
fn parked() -> i32 {
    let _ = thread::spawn(park_forever);
    park_forever()
}

/// `lifetest parked` on another core, halted through its pcore while it is parked.
fn halt() -> Result<bool, &'static str> {
    let me = pcore_current();
    let Some(other) = (0..cores_online()).find(|&c| c != me) else { return Ok(false) };
    let root = obj::root_share();
    let pcore =
        ObjRef::new(root, patiently(|| pcore_alloc(root, other)).map_err(|_| "pcore_alloc")?);
    let result = halt_on(pcore);
    let _ = share_delobj(pcore);
    result.map(|_| true)
}

fn halt_on(pcore: ObjRef) -> Result<(), &'static str> {
    patiently(|| program_run(pcore, "lifetest parked").map(|_| 0))
        .map_err(|_| "program_run failed")?;
    let _ = thread::sleep_us(50_000);
    if pcore_status(pcore) != Ok(Status::Running) {
        return Err("lifetest parked is not running");
    }
    pcore_halt(pcore).map_err(|_| "pcore_halt failed")?;
    // About 2 s: 2,000 sleeps of a millisecond.
    for _ in 0..2000 {
        match pcore_status(pcore) {
            Ok(Status::Running) => {
                let _ = thread::sleep_us(1000);
            }
            Ok(Status::Halted) => return Ok(()),
            _ => return Err("the halted program ended otherwise"),
        }
    }
    Err("pcore_halt did not reach a parked program in 2 s")
}

libatoll::main!(main);
