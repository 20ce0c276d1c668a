//! Corey §1, Figure 1: throughput of `dup` and `close` on Linux. Every core opens a
//! descriptor of its own (an eventfd), then duplicates it and closes the copy `ops` times;
//! one operation is a `dup` and its `close`. With one descriptor table shared by all cores
//! (threads of one process) every `dup` and `close` takes the table's lock and writes its
//! bitmap, so the total throughput falls as cores are added; with a table per core (a
//! process per core) nothing is shared and it grows with the cores. Atoll's `fdbench`
//! prints the same lines (its descriptor tables live in shares, shared or per core).

use std::format;
use std::string::String;
use std::sync::atomic::Ordering;
use std::vec::Vec;

use crate::memory::{alloc_slice, CacheLine, Placement, SpinBarrier};
use crate::{result, Platform, Spaces};

use super::Linux;

/// `dup`+`close` pairs per core when none are asked for.
pub const DEFAULT_OPS: usize = 20000;

/// Who shares the descriptor table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    /// One table for all cores: threads of one process.
    Shared,
    /// A table per core: a process per core.
    Private,
}

impl Table {
    /// Both, in the order they run.
    pub const ALL: [Table; 2] = [Table::Shared, Table::Private];

    /// The `config` of the result lines (Atoll's `fdbench` prints the same names).
    pub fn name(self) -> &'static str {
        match self {
            Table::Shared => "shared",
            Table::Private => "private",
        }
    }

    /// The address spaces that give this table: threads share theirs, processes do not.
    fn spaces(self) -> Spaces {
        match self {
            Table::Shared => Spaces::Shared,
            Table::Private => Spaces::Separate,
        }
    }
}

/// `dup`+`close` pairs per thousand cycles, summed over cores `0..cores`, each doing `ops`
/// pairs on its own descriptor at the same time and timing them itself (as Atoll's
/// `fdbench` counts).
pub fn measure(p: &Linux, table: Table, cores: usize, ops: usize) -> Result<f64, String> {
    // Per core: its cycles; then one line that says a call failed.
    let cycles = alloc_slice::<CacheLine, Linux>(p, cores + 1, Placement::Shared)?;
    let barrier = alloc_slice::<SpinBarrier, Linux>(p, 1, Placement::Shared)?;
    let list: Vec<usize> = (0..cores).collect();
    table.spaces().run(p, &list, &|core| {
        // SAFETY: eventfd takes no pointers.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        barrier[0].wait(cores);
        let start = p.cycles();
        for _ in 0..ops {
            // SAFETY: duplicates and closes descriptors this core owns; a failed dup (-1)
            // is not closed.
            let copy = unsafe { libc::dup(fd) };
            if copy < 0 || unsafe { libc::close(copy) } != 0 {
                cycles[cores].0.store(1, Ordering::Relaxed);
                break;
            }
        }
        cycles[core].0.store(p.cycles() - start, Ordering::Relaxed);
        // Everyone's timing is over before any descriptor table changes again.
        barrier[0].wait(cores);
        if fd >= 0 {
            // SAFETY: this core's own descriptor, closed once.
            unsafe { libc::close(fd) };
        }
    })?;
    if cycles[cores].0.load(Ordering::Relaxed) != 0 {
        return Err("dup or close failed".into());
    }
    let rate = |c: &CacheLine| ops as f64 * 1000.0 / c.0.load(Ordering::Relaxed).max(1) as f64;
    Ok(cycles[..cores].iter().map(rate).sum())
}

/// Both tables on all the platform's cores, `ops` pairs per core, as
/// `"experiment":"fdbench"` lines (`config`: `shared`, `private`). A first pass of a tenth
/// of the work with a shared table is not reported (it warms caches and an emulator's
/// translations).
pub fn run(p: &Linux, ops: usize) -> Result<Vec<String>, String> {
    let cores = p.cores();
    measure(p, Table::Shared, cores, ops.div_ceil(10))?;
    let mut lines = Vec::new();
    for table in Table::ALL {
        let rate = measure(p, table, cores, ops)?;
        let extra = format!(
            ",\"config\":\"{}\",\"per_core\":{},\"ops\":{ops}",
            table.name(),
            result::Fixed2(rate / cores.max(1) as f64)
        );
        lines.push(result::line(
            "linux",
            "fdbench",
            cores,
            "ops_per_kcycle",
            result::Fixed2(rate),
            "ops/kcycle",
            &extra,
        ));
    }
    Ok(lines)
}
