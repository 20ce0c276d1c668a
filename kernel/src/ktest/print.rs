//! Tests of kernel output (`print`): every core's lines reach the serial port, through
//! the port's core, with no lock between the cores.

use super::{all_ok, JOB_TIMEOUT_US};
use crate::print::{self, SERIAL_CORE};
use crate::{kernel_test, println, smp};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

kernel_test!(
    EVERY_LINE,
    "print.every_line_reaches_the_port",
    1,
    Shared,
    every_line_reaches_the_port
);

/// Lines each core prints: more than its ring holds, so a core waits for the port's core
/// to drain it.
const LINES: usize = 300;

/// Every core prints `LINES` numbered lines at once. Each line goes through its core's
/// ring (the port's core writes its own): afterwards the port's core has drained every one
/// of them and no core had to write to the port itself. The host checks the log too (the
/// `smp4` run's `print_lines_in_order`): each core's lines are all there, in order.
fn every_line_reaches_the_port() -> Result<(), String> {
    let cores = smp::online_cores();
    let before: Vec<print::RingStats> = cores.iter().map(|&c| print::stats(c)).collect();
    let work = |core: usize| -> Result<(), String> {
        for n in 0..LINES {
            println!("print test: core {core} line {n}");
        }
        Ok(())
    };
    all_ok(&cores, &smp::run_on(&cores, JOB_TIMEOUT_US, &work))?;
    print::flush();
    for (i, &c) in cores.iter().enumerate() {
        let after = print::stats(c);
        let appended = after.appended - before[i].appended;
        let drained = after.drained - before[i].drained;
        let direct = after.direct - before[i].direct;
        if c == SERIAL_CORE {
            continue; // the port's core writes its own lines itself
        }
        // At least the test's lines (a core may print others meanwhile, as its monitor does).
        if appended < LINES as u64 || drained < LINES as u64 || direct != 0 {
            return Err(format!(
                "core {c}: {appended} lines appended, {drained} drained, {direct} written directly"
            ));
        }
    }
    Ok(())
}
