//! `pcoretest`: checks pcore objects (Corey §4.4). One pcore object per core at a time;
//! `program_run` starts a program on another core (reporting its exit status or fault)
//! and, on the caller's own core, runs it while the caller waits; `pcore_halt` stops a
//! spinning program; `pcore_run` on the caller's own core is refused. Prints
//! `pcoretest: ok`, `pcoretest: FAIL <why>`, or `pcoretest: skipped (1 core)`.
#![no_std]
#![no_main]

use libatoll::abi::{ar_kind, Error, PcoreRun};
use libatoll::cfork::patiently;
use libatoll::obj::{
    self, ar_alloc, pcore_alloc, pcore_halt, pcore_status, program_run, share_delobj,
};
use libatoll::{cores_online, pcore_current, println, ObjRef, Status};

/// The page-fault vector, which `fault` ends with.
const PAGE_FAULT: u32 = 14;

fn main() -> i32 {
    libatoll::cores::two_core_test("pcoretest", None, test)
}

fn test() -> Result<(), &'static str> {
    let root = obj::root_share();
    let me = pcore_current();
    let other = (0..cores_online()).find(|&c| c != me).ok_or("no other core")?;
    // `patiently`: a pcore an earlier test just let go may take a moment to be free.
    let pcore = ObjRef::new(
        root,
        patiently(|| pcore_alloc(root, other)).map_err(|_| "pcore_alloc failed")?,
    );
    if pcore_alloc(root, other) != Err(Error::NotPermitted) {
        return Err("a second pcore object for the same core was not refused");
    }
    if pcore_alloc(root, usize::MAX).is_ok() {
        return Err("a pcore object for a core that does not exist");
    }

    // Programs on another core: an exit status, a fault, a halt.
    start(pcore, "hello from pcoretest")?;
    if wait(pcore) != Status::Exited(0) {
        return Err("hello on another core did not exit 0");
    }
    start(pcore, "fault")?;
    if wait(pcore) != Status::Faulted(PAGE_FAULT) {
        return Err("fault on another core did not end with a page fault");
    }
    start(pcore, "spin")?;
    if pcore_status(pcore) != Ok(Status::Running) {
        return Err("spin is not running");
    }
    pcore_halt(pcore).map_err(|_| "pcore_halt failed")?;
    if wait(pcore) != Status::Halted {
        return Err("pcore_halt did not stop spin");
    }
    share_delobj(pcore).map_err(|_| "share_delobj(pcore) failed")?;
    // Freed: the core can be named again.
    let again = patiently(|| pcore_alloc(root, other))
        .map_err(|_| "the freed pcore could not be allocated again")?;
    let again = ObjRef::new(root, again);
    let twice = same_share_twice(again);
    let _ = share_delobj(again);
    twice?;

    // The caller's own core: `pcore_run` is refused, `program_run` lends the core. Run
    // from the shell, the shell holds this core's pcore object (it lent us the core).
    let own = match pcore_alloc(root, me) {
        Ok(id) => ObjRef::new(root, id),
        Err(Error::NotPermitted) => {
            println!("pcoretest: core {me}'s pcore object is held (by the shell?): own-core checks skipped");
            return Ok(());
        }
        Err(_) => return Err("pcore_alloc(own core) failed"),
    };
    let ar = ar_alloc(root, ar_kind::ROOT).map_err(|_| "ar_alloc(ROOT) failed")?;
    let run = PcoreRun {
        pcore: [own.share, own.object],
        entry: abi_entry(),
        stack: libatoll::abi::USER_STACK_TOP - 24,
        ar: [root, ar],
        ..PcoreRun::default()
    };
    if obj::pcore_run(&run) != Err(Error::NotPermitted) {
        return Err("pcore_run on the caller's own core was not refused");
    }
    let _ = share_delobj(ObjRef::new(root, ar));
    let status =
        program_run(own, "hello on the shell's core").map_err(|_| "program_run(own) failed")?;
    let _ = share_delobj(own);
    if status != Status::Exited(0) {
        return Err("hello on the caller's own core did not exit 0");
    }
    Ok(())
}

/// `pcore_run` with a share list naming one share twice is refused at once (the context
/// could not be built on the target core; the sysfuzz run found the call accepted it).
fn same_share_twice(pcore: ObjRef) -> Result<(), &'static str> {
    let root = obj::root_share();
    let share = obj::share_alloc(root).map_err(|_| "share_alloc failed")?;
    let share = ObjRef::new(root, share);
    let in_set = obj::set_add_share(share).map_err(|_| "set_add_share failed")?;
    let ar = ar_alloc(root, ar_kind::ROOT).map_err(|_| "ar_alloc(ROOT) failed")?;
    let mut run = PcoreRun {
        pcore: [pcore.share, pcore.object],
        entry: abi_entry(),
        stack: libatoll::abi::USER_STACK_TOP - 24,
        ar: [root, ar],
        nshares: 2,
        ..PcoreRun::default()
    };
    run.shares[0] = in_set;
    run.shares[1] = in_set;
    let result = obj::pcore_run(&run);
    let _ = share_delobj(ObjRef::new(root, ar));
    let _ = obj::self_drop(in_set);
    let _ = share_delobj(share);
    if result != Err(Error::InvalidArgument) {
        return Err("pcore_run with one share named twice was not refused");
    }
    Ok(())
}

/// Some address in this program's code (the refused `pcore_run` never jumps to it).
fn abi_entry() -> u64 {
    main as *const () as u64
}

/// Starts `line` on another core's pcore (waiting out the moment after the pcore's last
/// program ended, while its core still holds it).
fn start(pcore: ObjRef, line: &str) -> Result<(), &'static str> {
    patiently(|| program_run(pcore, line).map(|_| 0)).map(|_| ()).map_err(|_| "program_run failed")
}

/// Polls the pcore until its program has ended.
fn wait(pcore: ObjRef) -> Status {
    loop {
        match pcore_status(pcore) {
            Ok(Status::Running) => core::hint::spin_loop(),
            Ok(status) => return status,
            Err(_) => return Status::Failed,
        }
    }
}

libatoll::main!(main);
