//! Layer 7 tests of Metis on Atoll (issue 24): `metis` computes the same output in both of
//! Corey's Figure 4 layouts as a sequential reference, refuses bad arguments, and ends
//! cleanly when memory runs out, leaving the kernel as it was.

use super::balance::balanced;
use super::skip;
use super::user::{expect, BorrowedFrames};
use crate::kernel_test;
use crate::thread::ExitStatus;
use crate::user;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

kernel_test!(METIS, "user.metis_matches_the_reference", 2, Shared, matches_the_reference);
kernel_test!(METIS_OOM, "user.metis_out_of_memory_ends_cleanly", 1, Shared, out_of_memory);

/// A job's time limit: a 1 MiB run takes a few seconds under TCG on 2 host CPUs.
const METIS_LIMIT_US: u64 = 120_000_000;
/// Free frames each core needs for the 1 MiB runs (16 MiB: input, rows, reduce's
/// buffers, McRT's stacks); a VM with less (64 MiB over 16 cores) skips the check.
const NEEDS_FRAMES: u64 = 4096;

/// `metis wri|wc --mb 1 --layout shared|corey --cores 0-(k-1) --check` with k = the
/// online cores up to 4 (smp2: 2, smp4 and up: 4): each exits 0 having found its
/// checksum equal to the sequential reference's (a `BTreeMap`, computed by the program
/// after the run), and both layouts print the same checksum; `wc --file hello` (an ELF:
/// binary bytes, from the initrd) matches its reference too; bad arguments get the usage
/// (exit 2), a missing file exit 1; every core's frames, heap bytes and objects balance
/// (the arenas' slot ranges go with the program).
fn matches_the_reference() -> Result<(), String> {
    let k = crate::smp::online_cores().len().min(4);
    let short = crate::percpu::all_cores().take(k).find(|c| c.free_frames() < NEEDS_FRAMES);
    if let Some(c) = short {
        let free = c.free_frames() * 4;
        return skip(format!("core {} has {free} KiB free; metis needs 16 MiB a core", c.index));
    }
    balanced(|| {
        for bad in ["", "nope", "wri --mb 0", "wri --mb x", "wri --layout flat", "wc --mb"] {
            expect("metis", bad, ExitStatus::Exited(2))?;
        }
        for bad in ["wri --cores 0-99", "wc --mb 1 --file hello", "wc --bogus"] {
            expect("metis", bad, ExitStatus::Exited(2))?;
        }
        expect("metis", "--help", ExitStatus::Exited(0))?;
        expect("metis", "wc --file no-such-file", ExitStatus::Exited(1))?;
        let cores = format!("--cores 0-{}", k - 1);
        for app in ["wri", "wc"] {
            let mut sums = Vec::new();
            for layout in ["shared", "corey"] {
                let args = format!("{app} --mb 1 --layout {layout} {cores} --check");
                sums.push(checked_run(&args, k)?);
            }
            if sums[0] != sums[1] {
                return Err(format!(
                    "metis {app}: checksum {} (shared), {} (corey)",
                    sums[0], sums[1]
                ));
            }
        }
        checked_run(&format!("wc --file hello --layout corey {cores} --check"), k).map(|_| ())
    })
}

/// Runs `metis args` here; it must exit 0, say its checksum equals the reference's, and
/// print a `keys` record for `cores` cores; returns that checksum.
fn checked_run(args: &str, cores: usize) -> Result<String, String> {
    let (status, text) = user::run_capturing("metis", args, METIS_LIMIT_US)
        .map_err(|e| format!("metis: could not run: {e:?}"))?;
    if status != ExitStatus::Exited(0) || !text.contains("equals the sequential reference") {
        return Err(format!("metis {args}: ended {status:?}: {}", last_line(&text)));
    }
    let keys = text
        .lines()
        .filter(|l| l.starts_with(record::MARKER))
        .find(|l| record::field(l, "metric") == Some("keys"))
        .ok_or_else(|| format!("metis {args}: no keys record"))?;
    let want = format!("{cores}");
    if record::field(keys, "cores") != Some(want.as_str())
        || record::field(keys, "system") != Some("atoll")
    {
        return Err(format!("metis {args}: `{keys}`: not atoll on {cores} cores"));
    }
    let sum = record::field(keys, "checksum").ok_or_else(|| format!("`{keys}`: no checksum"))?;
    Ok(String::from(sum))
}

/// The last line of `text` (or a note that there was none).
fn last_line(text: &str) -> &str {
    text.lines().last().unwrap_or("(no output)")
}

/// The exit status of a program whose McRT processor died (`libatoll::thread`'s
/// `PEER_ENDED_EXIT`, sysexits' `EX_SOFTWARE`).
const PEER_ENDED_EXIT: i32 = 70;

/// Free frames left to this core while `metis wri --mb 4` runs out of memory (10 MiB):
/// the 4 MiB input fits, its million positions (8 MiB) and their rows do not.
const OOM_LEFT_FRAMES: u64 = 2560;

/// `metis` running out of memory: an input larger than this core's free memory is
/// refused before anything runs (exit 1, saying so); with 10 MiB left to this core, `wri
/// --mb 4` on it (alone, then with a second worker on another core) gets its input and
/// then runs out in the middle of a phase, which ends the program (a panic on a failed
/// allocation, status 101, or a page fault the kernel reports as out of memory), never
/// the kernel: the core then runs another program, and every frame, heap byte and object
/// comes back.
fn out_of_memory() -> Result<(), String> {
    let me = crate::percpu::this_core().index;
    let free = crate::percpu::this_core().free_frames();
    if free < NEEDS_FRAMES {
        return skip(format!("this core has {} KiB free; the check needs 16 MiB", free * 4));
    }
    balanced(|| {
        let too_big = crate::percpu::this_core().free_frames() / 256 + 1;
        let args = format!("wc --mb {too_big} --cores {me}");
        let (status, text) = user::run_capturing("metis", &args, METIS_LIMIT_US)
            .map_err(|e| format!("metis: could not run: {e:?}"))?;
        if status != ExitStatus::Exited(1) || !text.contains("larger than") {
            return Err(format!("metis {args}: ended {status:?}: {}", last_line(&text)));
        }
        // On this core alone it must run out: all the work is here.
        let alone = format!("wri --mb 4 --layout corey --cores {me}");
        run_out(&alone, OOM_LEFT_FRAMES, Ending::OutOfMemory)?;
        // With 2 cores and more: a worker on the next core too, whose thread the program's
        // end must stop wherever it is; then the main thread on the next core and a worker
        // here, whose thread dies while the main one lives, which must see it and end the
        // program (exit 70). How much work lands here depends on timing (the workers take
        // tasks from one counter: under TCG on a busy host the other core's may take
        // nearly all), so these may also finish, correctly; they must never hang.
        if let Some(n) = crate::smp::online_cores().into_iter().find(|&c| c != me) {
            // (The main thread makes the input on its core: with it elsewhere, 4 MiB left
            // here is short for a worker's half of the rows.)
            for (cores, left) in
                [(format!("{me},{n}"), OOM_LEFT_FRAMES), (format!("{n},{me}"), 1024)]
            {
                let args = format!("wri --mb 4 --layout corey --cores {cores}");
                run_out(&args, left, Ending::OutOfMemoryOrDone)?;
            }
            // (Not on 8 and 16 vCPUs under TCG: three more Metis runs there outlast the
            // run's time limit, and the case is about two cores.)
            if crate::smp::online_cores().len() <= 4 {
                shell_outlives_it(me, n)?;
            }
        }
        expect("hello", "after metis ran out of memory", ExitStatus::Exited(0))
    })
}

/// How a run short of memory may end.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// Out of memory (a panic naming memory, an out-of-memory fault, a dead processor).
    OutOfMemory,
    /// That, or a whole run (exit 0) when little of the work landed on the short core.
    OutOfMemoryOrDone,
}

/// Runs `metis args` here with `left` frames left to this core: it must get its input
/// and end as `ending` allows (see [`out_of_memory`]).
fn run_out(args: &str, left: u64, ending: Ending) -> Result<(), String> {
    let borrowed = BorrowedFrames::leaving(left);
    let run = user::run_capturing("metis", args, METIS_LIMIT_US);
    drop(borrowed);
    let (status, text) = run.map_err(|e| format!("metis: could not run: {e:?}"))?;
    let page_fault = ExitStatus::Faulted(crate::arch::trap::VECTOR_PAGE_FAULT);
    // A panic that names memory: Rust's "memory allocation of N bytes failed", or McRT's
    // own when its allocator came back empty.
    let panicked = status == ExitStatus::Exited(101) && text.contains("memory");
    // Or a processor's thread died so and the main thread, elsewhere, saw it (its line
    // is printed there, not captured here).
    let peer_died = status == ExitStatus::Exited(PEER_ENDED_EXIT);
    let done = ending == Ending::OutOfMemoryOrDone && status == ExitStatus::Exited(0);
    if text.contains("larger than") || !(panicked || peer_died || done || status == page_fault) {
        return Err(format!("metis {args}: ended {status:?}: {}", last_line(&text)));
    }
    Ok(())
}

/// The shell's case: `init` lends its core to `metis`, which runs out of memory with a
/// worker on core `n`, and then `init` faults in a page of its own (the code that prints
/// the result) at once, while the ended program's frames are still on their way home (its
/// worker is stopped at core `n`'s next tick, which frees them): the fault waits for them
/// (`user::wait_for_frames`) rather than stopping the shell as out of memory. Before, the
/// shell died so (`make run MEM=64M CORES=2 CMD="run metis wri --mb 12 --layout corey"`).
/// (How soon the worker is stopped is timing: before the fix most tries showed it, so the
/// test makes [`SHELL_TRIES`].)
fn shell_outlives_it(me: usize, n: usize) -> Result<(), String> {
    let line = format!("run metis wri --mb 4 --layout corey --cores {me},{n}; run hello");
    for _ in 0..SHELL_TRIES {
        let borrowed = BorrowedFrames::leaving(OOM_LEFT_FRAMES);
        let run = user::run_capturing("init", &line, METIS_LIMIT_US);
        drop(borrowed);
        // The shell lived through both lines if it exited 0 (a fault is `Faulted(14)`);
        // its output may be cut (the capture is bounded, and a Metis that finished prints
        // much), so only the status is read.
        let (status, text) = run.map_err(|e| format!("init: could not run: {e:?}"))?;
        if status != ExitStatus::Exited(0) {
            return Err(format!("init `{line}`: ended {status:?}: {}", last_line(&text)));
        }
    }
    Ok(())
}

/// Tries of [`shell_outlives_it`].
const SHELL_TRIES: usize = 3;
