//! Choosing cores and spreading a program over them with `cfork` (Corey §5.1): the
//! `--cores LIST` argument every benchmark takes, and [`spread`].

use crate::cfork::{cfork, CforkOptions, Child};
use crate::obj::Status;
use crate::sys::{cores_online, pcore_current};
use abi::Error;
use alloc::vec::Vec;

/// Parses a core list such as `0-3,5` (the kernel console's syntax, one parser for both):
/// indices below `online`, none twice, in the order given.
pub use cmdline::core_list as parse_cores;

/// Every online core, `0..cores_online()`.
pub fn all_cores() -> Vec<usize> {
    (0..cores_online()).collect()
}

/// Runs `f(i)` for each index `i` of `cores`, on core `cores[i]`: the caller's own core
/// (if listed) runs its `f(i)` itself, after the others were cforked with `opts`; then
/// waits for them all. Returns each one's end status, in the order of `cores`. If a
/// `cfork` fails, the children already started are halted (they may be waiting for the
/// missing one) and the error returned.
pub fn spread(
    cores: &[usize],
    opts: &CforkOptions,
    f: fn(u64) -> i32,
) -> Result<Vec<Status>, Error> {
    let me = pcore_current();
    let mut children: Vec<(usize, Child)> = Vec::with_capacity(cores.len());
    let mut failed = None;
    for (i, &core) in cores.iter().enumerate() {
        if core == me {
            continue;
        }
        match cfork(core, opts, f, i as u64) {
            Ok(child) => children.push((i, child)),
            Err(e) => {
                crate::println!("spread: cfork to core {core} failed: {e:?}");
                failed = Some(e);
                break;
            }
        }
    }
    let mut statuses = alloc::vec![Status::Idle; cores.len()];
    if failed.is_none() {
        if let Some(i) = cores.iter().position(|&c| c == me) {
            statuses[i] = Status::Exited(f(i as u64));
        }
    }
    for (i, child) in children {
        if failed.is_some() {
            let _ = crate::obj::pcore_halt(child.pcore);
        }
        statuses[i] = child.join();
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(statuses),
    }
}

/// The `main` of a test program that needs two cores: refuses any argument (`--help`
/// prints `help` and exits 0, anything else prints it and exits 2; `help: None` takes
/// arguments as given), skips on one core, runs `test` and prints `NAME: ok`,
/// `NAME: FAIL <why>` or `NAME: skipped (1 core)`, which the kernel's tests look for.
pub fn two_core_test<E: core::fmt::Display>(
    name: &str,
    help: Option<&str>,
    test: impl FnOnce() -> Result<(), E>,
) -> i32 {
    if let Some(help) = help {
        let line = crate::args::arg_string();
        if let Some(word) = line.split_whitespace().next() {
            crate::println!("{help}");
            return if word == "--help" { 0 } else { 2 };
        }
    }
    if cores_online() < 2 {
        crate::println!("{name}: skipped (1 core)");
        return 0;
    }
    match test() {
        Ok(()) => {
            crate::println!("{name}: ok");
            0
        }
        Err(why) => {
            crate::println!("{name}: FAIL {why}");
            1
        }
    }
}
