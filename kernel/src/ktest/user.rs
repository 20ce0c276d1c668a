//! Layer 7 tests: user programs from the initrd in ring 3, their system calls, and faults
//! that stop only the program.

use super::{all_ok, JOB_TIMEOUT_US};
use crate::user::{self, ExitStatus};
use crate::{kernel_test, smp};
use alloc::format;
use alloc::string::String;

kernel_test!(ON_EVERY_CORE, "user.program_on_every_core", 1, false, program_on_every_core);
kernel_test!(BAD_POINTERS, "user.bad_pointers_are_errors", 1, false, bad_pointers_are_errors);
kernel_test!(FAULT, "user.fault_stops_only_the_program", 1, false, fault_stops_only_the_program);
kernel_test!(SYSFUZZ, "user.sysfuzz_every_core", 1, false, sysfuzz_every_core);
kernel_test!(OBJECTS, "user.corey_objects", 1, false, corey_objects);
kernel_test!(SPIN, "user.time_limit_stops_a_spinning_program", 1, false, time_limit);
kernel_test!(EXHAUST, "user.exhausting_objects_is_an_error", 1, false, exhausting_objects);
kernel_test!(MEMCLONE, "user.corey_memclone_every_page", 1, false, memclone);
kernel_test!(COW, "user.corey_cfork_copy_on_write", 2, false, cfork_copy_on_write);
kernel_test!(SHARED_RANGE, "user.corey_shared_range_no_fault", 2, false, shared_range);
kernel_test!(PCORES, "user.corey_pcores_run_and_halt", 2, false, pcores_run_and_halt);

fn expect(name: &str, args: &str, want: ExitStatus) -> Result<(), String> {
    match user::run(name, args) {
        Ok(got) if got == want => Ok(()),
        Ok(got) => Err(format!("{name}: ended {got:?}, expected {want:?}")),
        Err(e) => Err(format!("{name}: could not run: {e:?}")),
    }
}

/// `hello` runs on every core at once and exits 0 everywhere; each core gets back every
/// frame the program used (free frames plus those its heap holds are the same after).
fn program_on_every_core() -> Result<(), String> {
    let cores = smp::online_cores();
    let frames_in_hand = || {
        let me = crate::percpu::this_core();
        me.free_frames() + me.heap.with(|h| h.frames_taken())
    };
    let work = |_| -> Result<(), String> {
        let before = frames_in_hand();
        expect("hello", "from the test", ExitStatus::Exited(0))?;
        let after = frames_in_hand();
        if after != before {
            return Err(format!("frames in hand before {before}, after {after}"));
        }
        Ok(())
    };
    all_ok(&cores, &smp::run_on(&cores, JOB_TIMEOUT_US, &work))
}

/// `badptr` passes wild pointers and lengths: each is an error code; it exits 0.
fn bad_pointers_are_errors() -> Result<(), String> {
    expect("badptr", "", ExitStatus::Exited(0))
}

/// `fault` writes to an unmapped page: the program is stopped with a page fault, and the
/// same core then runs another program normally.
fn fault_stops_only_the_program() -> Result<(), String> {
    let cores = smp::online_cores();
    let work = |_| -> Result<(), String> {
        expect("fault", "", ExitStatus::Faulted(crate::arch::trap::VECTOR_PAGE_FAULT))?;
        expect("hello", "after a fault", ExitStatus::Exited(0))
    };
    all_ok(&cores, &smp::run_on(&cores, JOB_TIMEOUT_US, &work))
}

/// Random system calls on every core at once (20,000 each); the kernel answers them all,
/// and afterwards every core still runs a program normally.
fn sysfuzz_every_core() -> Result<(), String> {
    let cores = smp::online_cores();
    let work = |core: usize| -> Result<(), String> {
        expect("sysfuzz", &format!("--seed {} --calls 20000", 1000 + core), ExitStatus::Exited(0))?;
        expect("hello", "after the fuzzer", ExitStatus::Exited(0))
    };
    all_ok(&cores, &smp::run_on(&cores, JOB_TIMEOUT_US, &work))
}

/// `objtest` uses segments, shares, address ranges and soft faults from user space on every
/// core; afterwards each core has every frame back (segments freed with their last
/// reference, page tables with the program).
fn corey_objects() -> Result<(), String> {
    let cores = smp::online_cores();
    let work = |_| -> Result<(), String> {
        let me = crate::percpu::this_core();
        let in_hand = || me.free_frames() + me.heap.with(|h| h.frames_taken());
        // The first run creates this core's object table (heap); count from the second.
        expect("objtest", "", ExitStatus::Exited(0))?;
        let before = in_hand();
        expect("objtest", "", ExitStatus::Exited(0))?;
        let after = in_hand();
        if after != before {
            return Err(format!("frames in hand before {before}, after {after}"));
        }
        Ok(())
    };
    all_ok(&cores, &smp::run_on(&cores, JOB_TIMEOUT_US, &work))
}

/// `spin` loops forever without a system call; its time limit stops it on every core, and
/// the cores go on to run another program.
fn time_limit() -> Result<(), String> {
    let cores = smp::online_cores();
    let work = |_| -> Result<(), String> {
        match user::run_with_limit("spin", "", 200_000) {
            Ok(ExitStatus::TimedOut) => expect("hello", "after a spinner", ExitStatus::Exited(0)),
            other => Err(format!("spin ended {other:?}, expected TimedOut")),
        }
    };
    all_ok(&cores, &smp::run_on(&cores, JOB_TIMEOUT_US, &work))
}

/// `exhaust` creates shares until the kernel refuses with `NoResources` (object cap or
/// memory reserve), on every core at once; the kernel stays up, frees them all at exit,
/// and every core has its frames back.
fn exhausting_objects() -> Result<(), String> {
    let cores = smp::online_cores();
    let work = |_| -> Result<(), String> {
        let me = crate::percpu::this_core();
        let in_hand = || me.free_frames() + me.heap.with(|h| h.frames_taken());
        let before = in_hand();
        expect("exhaust", "", ExitStatus::Exited(0))?;
        let after = in_hand();
        if after != before {
            return Err(format!("frames in hand before {before}, after {after}"));
        }
        Ok(())
    };
    all_ok(&cores, &smp::run_on(&cores, JOB_TIMEOUT_US, &work))
}

/// (Named to run before `user.exhausting_objects_is_an_error`: kernel heaps do not shrink,
/// and on a 64 MiB VM with 16 cores that test leaves each core only its reserve.)
/// `memclone --mb 1` started once and spread over up to four cores in each of Figure 7's
/// configurations: contexts on one root range (`shared-as`), `cfork`ed address spaces
/// (`separate-as`), and each core's array in a slot range of its own (`shared-ranges`,
/// where the program checks one soft fault per page). (More cores add nothing to the
/// check and, under TCG on a small host, a lot of time.)
fn memclone() -> Result<(), String> {
    let last = smp::online_cores().len().min(4) - 1;
    let args = format!("--mb 1 --config all --cores 0-{last}");
    with_frames_balanced(|| expect("memclone", &args, ExitStatus::Exited(0)))
}

/// `cowtest`: a child made with `cfork` on another core writes a global and a heap buffer;
/// neither side sees the other's writes (copy-on-write), and every frame comes back.
fn cfork_copy_on_write() -> Result<(), String> {
    with_frames_balanced(|| expect("cowtest", "", ExitStatus::Exited(0)))
}

/// `sharedrange`: pages one core faults in through a slot range are mapped on another core
/// sharing the range with no fault there; a privately mapped segment faults on each.
fn shared_range() -> Result<(), String> {
    with_frames_balanced(|| expect("sharedrange", "", ExitStatus::Exited(0)))
}

/// `pcoretest`: pcore objects are one per core, `program_run` starts a program on another
/// core and reports its exit status, `pcore_halt` stops a spinning one, `pcore_run` on the
/// caller's own core is refused.
fn pcores_run_and_halt() -> Result<(), String> {
    with_frames_balanced(|| expect("pcoretest", "", ExitStatus::Exited(0)))
}

/// Runs `f` (which may use every core), then checks that every core holds as many frames
/// as before (free, or in its kernel heap): objects freed with their last reference gave
/// every frame back to the core it came from. A warm-up run first, so heaps that grow once
/// (object tables, channels) do not count.
fn with_frames_balanced(f: impl Fn() -> Result<(), String>) -> Result<(), String> {
    f()?;
    let cores = smp::online_cores();
    let before = super::frames::frames_per_core(&cores)?;
    f()?;
    super::frames::check_balance(&cores, &before)
}
