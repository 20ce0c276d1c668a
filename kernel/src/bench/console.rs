//! `bench console` (issue M10 item 7): what a line of kernel output costs the core that
//! prints it, and how long the lines take to reach the serial port, with one core to all
//! of them printing at once. The serial port belongs to one core (`print::SERIAL_CORE`);
//! every other core appends its lines to a ring of its own, which the port's core drains.

use super::{result, try_vec, Deadline, JOB_TIMEOUT_US};
use crate::arch::cpu;
use crate::print::SERIAL_CORE;
use crate::println;
use crate::smp::{self, all_ok};
use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};
use record::median;

/// A 64-byte tail on every line, so a line is about 100 bytes, as a test's lines are.
const FILLER: &str = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789..";

/// For 1, 2, 4, … and all online cores printing at once (the port's core among them), each
/// prints `lines` lines: the median cycles one `println!` takes on the cores that do not
/// own the port (`print_cycles`), on the port's core (`port_core_print_cycles`: it writes
/// every other core's lines too), and the cycles per line from the first line until every
/// line is on the wire (`wire_cycles_per_line`).
pub(super) fn console(lines: usize, deadline: Deadline) -> Result<(), String> {
    let cores = smp::online_cores();
    let mut counts: Vec<usize> =
        (0..).map(|s| 1usize << s).take_while(|&k| k < cores.len()).collect();
    counts.push(cores.len());
    for k in counts {
        deadline.check()?;
        // The port's core prints too: it is first in `online_cores`.
        let printers = &cores[..k];
        let cycles = try_vec(k, || AtomicU64::new(0))?;
        let print = |core: usize| -> Result<(), String> {
            let start = cpu::rdtsc();
            for n in 0..lines {
                println!("console bench: core {core} line {n}/{lines} {FILLER}");
            }
            let slot = printers.iter().position(|&c| c == core).ok_or("not a printer")?;
            cycles[slot].store(cpu::rdtsc() - start, Ordering::Relaxed);
            deadline.check()
        };
        let start = cpu::rdtsc();
        all_ok(printers, &smp::run_on(printers, JOB_TIMEOUT_US, &print))?;
        crate::print::flush();
        let wire = cpu::rdtsc() - start;
        let per_line = |slot: usize| cycles[slot].load(Ordering::Relaxed) / lines as u64;
        let mut others: Vec<u64> =
            (0..k).filter(|&s| printers[s] != SERIAL_CORE).map(per_line).collect();
        if let Some(port) = printers.iter().position(|&c| c == SERIAL_CORE) {
            result("console", k, "port_core_print_cycles", per_line(port), "cycles", "");
        }
        if let Some(m) = median(&mut others) {
            result("console", k, "print_cycles", m, "cycles", "");
        }
        result("console", k, "wire_cycles_per_line", wire / (k * lines) as u64, "cycles", "");
    }
    Ok(())
}
