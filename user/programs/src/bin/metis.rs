//! `metis wri|wc [--mb N | --file NAME] [--layout shared|corey] [--cores LIST] [--check]`:
//! Metis MapReduce (issue 24; Corey §6.1, §8.5.1) on McRT, one processor on each listed
//! core (default: all), the code the Linux guest runs for `bench=metis_wri,N`
//! (`workloads::metis`). Prints the cycles and soft page faults of each phase (`RESULT`
//! lines and one summary line), the keys and the output's checksum; `--check` also
//! computes the sequential reference (a `BTreeMap`) and exits 1 unless the checksums
//! agree.
//!
//! The input is N MiB of Metis's `wrmem` (default 2), or a file: of the disk when NAME
//! starts with `/` (`--file /metis/words.txt`), else of the initrd. The memory
//! layout is Corey's Figure 4 (§3.1): `shared` (the default) keeps everything in the
//! program's heap in its root address range, as threads on Linux share one address
//! space; `corey` points each worker's allocations at its core's own arena in slot ranges
//! of its own (`libatoll::arena`) for the sample, map and reduce phases, so each core adds
//! mappings only to its own ranges and every core reads the others' map output through
//! the same page tables.
//!
//! Errors are one line and an exit status: 2 for bad arguments (with the usage), 1 for an
//! input that does not fit in memory, a missing file, a failed run or a checksum that
//! differs. Memory running out in the middle of a phase ends the program: a panic ("memory
//! allocation of N bytes failed", status 101) or a page fault the kernel reports as out of
//! memory; a worker's processor that dies so ends the program too (`mcrt_host`, status 70).
#![no_std]
#![no_main]

extern crate alloc;

use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use libatoll::mcrt_host::{move_to_core, AtollHostOn};
use libatoll::obj::{address_space_faults, file_open, root_share, segment_get_nbytes};
use libatoll::obj::{segment_read, share_delobj};
use libatoll::platform::Atoll;
use libatoll::{arena, args, pcore_current, println, ObjRef};
use metis::{Edge, Layout, Phase, SharedLayout};
use workloads::metis::{self as job, App, DEFAULT_MB, MAX_MB};

const HELP: &str = "usage: metis wri|wc [--mb N | --file NAME] [--layout shared|corey] \
[--cores LIST] [--check]
         N: MiB of wrmem input, 1..=65536, default 2; NAME: a file of the initrd;
         LIST: cores 0..=63, default all; --check: compare with the sequential reference
       metis phoenix [--scale S] [--cores LIST]
         the Phoenix applications, inputs S times the smallest (1..=64, default 1)";

/// Corey's Figure 4 layouts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Shared,
    Corey,
}

/// The command line.
struct Options {
    app: App,
    mb: usize,
    file: Option<String>,
    layout: Kind,
    cores: Vec<usize>,
    check: bool,
}

/// Every online core, up to the first [`arena::MAX_ARENAS`] (a processor's affinity and
/// an arena are per core, and both stop there).
fn default_cores() -> Vec<usize> {
    let mut cores = libatoll::cores::all_cores();
    cores.truncate(arena::MAX_ARENAS);
    cores
}

/// The options of `line`, or `None` if any is bad.
fn parse(line: &str) -> Option<Options> {
    let mut words = line.split_whitespace();
    let app = App::parse(words.next()?)?;
    let mut o = Options {
        app,
        mb: DEFAULT_MB,
        file: None,
        layout: Kind::Shared,
        cores: default_cores(),
        check: false,
    };
    let mut sized = false;
    while let Some(word) = words.next() {
        match word {
            "--mb" => {
                o.mb = args::number(words.next(), 1..=MAX_MB)?;
                sized = true;
            }
            "--file" => o.file = Some(String::from(words.next()?)),
            "--layout" => {
                o.layout = match words.next()? {
                    "shared" => Kind::Shared,
                    "corey" => Kind::Corey,
                    _ => return None,
                }
            }
            "--cores" => o.cores = args::cores_value(words.next())?,
            "--check" => o.check = true,
            _ => return None,
        }
    }
    // One input: a size and a file together are refused rather than one ignored.
    if (sized && o.file.is_some()) || o.cores.iter().any(|&c| c >= arena::MAX_ARENAS) {
        return None;
    }
    Some(o)
}

/// Figure 4(c) on Atoll: a worker of the sample, map and reduce phases allocates from
/// its core's arena (`libatoll::arena`, slot ranges only that core maps into), so what it
/// leaves for other cores to read (its rows, its reduce outputs) lies in its core's own
/// shared ranges; at the end of its part the thread's allocations go back to the
/// program's heap (the merge phase, the coordinator). McRT's processors are pinned to
/// their cores, so a worker's core at its start is its processor's.
struct CoreyLayout;

impl Layout for CoreyLayout {
    fn worker(&self, phase: Phase, _worker: usize, edge: Edge) {
        if phase == Phase::Merge {
            return;
        }
        match edge {
            Edge::Begin => arena::select(Some(pcore_current())),
            Edge::End => arena::select(None),
        }
    }
}

/// The input: `wrmem` of `mb` MiB, or the initrd file `name`; an error line if it does
/// not fit in memory (a heap segment may not exceed its core's free memory) or the file
/// is missing.
fn input(o: &Options) -> Result<(Vec<u8>, String), String> {
    if let Some(name) = &o.file {
        return read_file(name).map(|bytes| {
            let what = alloc::format!("file {name}, {} bytes", bytes.len());
            (bytes, what)
        });
    }
    let bytes = o.mb << 20;
    let mut probe: Vec<u8> = Vec::new();
    if probe.try_reserve_exact(bytes).is_err() {
        return Err(alloc::format!(
            "metis: an input of {} MiB is larger than this core's free memory",
            o.mb
        ));
    }
    drop(probe);
    Ok((metis::text::wrmem(o.mb), alloc::format!("wrmem {} MiB", o.mb)))
}

/// The bytes of file `name`: on the disk when it starts with `/` (issue M13), else in the
/// initrd.
fn read_file(name: &str) -> Result<Vec<u8>, String> {
    if name.starts_with('/') {
        let size =
            libatoll::fs::stat(name).map_err(|e| alloc::format!("metis: {name}: {e:?}"))?.size;
        let mut probe: Vec<u8> = Vec::new();
        if probe.try_reserve_exact(size as usize).is_err() {
            return Err(alloc::format!("metis: {name} ({size} bytes) does not fit in memory"));
        }
        drop(probe);
        return libatoll::fs::read(name)
            .map_err(|e| alloc::format!("metis: reading {name}: {e:?}"));
    }
    let root = root_share();
    let seg = file_open(root, name).map_err(|e| alloc::format!("metis: {name}: {e:?}"))?;
    let seg = ObjRef::new(root, seg);
    let read = || -> Result<Vec<u8>, String> {
        let len = segment_get_nbytes(seg).map_err(|e| alloc::format!("metis: {name}: {e:?}"))?;
        let mut bytes = Vec::new();
        if bytes.try_reserve_exact(len as usize).is_err() {
            return Err(alloc::format!("metis: {name} ({len} bytes) does not fit in memory"));
        }
        bytes.resize(len as usize, 0);
        let mut done = 0;
        while done < bytes.len() {
            match segment_read(seg, done as u64, &mut bytes[done..]) {
                Ok(0) => break,
                Ok(n) => done += n as usize,
                Err(e) => return Err(alloc::format!("metis: reading {name}: {e:?}")),
            }
        }
        bytes.truncate(done);
        Ok(bytes)
    };
    let result = read();
    let _ = share_delobj(seg);
    result
}

fn main() -> i32 {
    let line = args::arg_string();
    if line.trim() == "--help" {
        println!("{HELP}");
        return 0;
    }
    if line.split_whitespace().next() == Some("phoenix") {
        return phoenix(&line);
    }
    let Some(o) = parse(&line) else {
        println!("{HELP}");
        return 2;
    };
    // Processor 0 is this thread: it runs on the first listed core, as each other
    // processor runs on its own, and makes the input there.
    if let Err(e) = move_to_core(o.cores[0]) {
        println!("metis: cannot move to core {}: {e:?}", o.cores[0]);
        return 1;
    }
    let (bytes, what) = match input(&o) {
        Ok(got) => got,
        Err(line) => {
            println!("{line}");
            return 1;
        }
    };
    if o.layout == Kind::Corey {
        if let Err(e) = arena::enable() {
            println!("metis: no address space for the arenas: {e:?}");
            return 1;
        }
    }
    let (layout, name): (Arc<dyn Layout + Send>, &str) = match o.layout {
        Kind::Shared => (Arc::new(SharedLayout), "shared"),
        Kind::Corey => (Arc::new(CoreyLayout), "corey"),
    };
    let input = Arc::new(bytes);
    let host = AtollHostOn { cores: &o.cores };
    let faults = address_space_faults;
    let report = match job::run_job(&host, o.app, input.clone(), o.cores.len(), layout, faults) {
        Ok(r) => r,
        Err(e) => {
            println!("metis: {e}");
            return 1;
        }
    };
    let mb = if o.file.is_some() { 0 } else { o.mb };
    for l in job::lines(&Atoll::new(o.cores.clone()), o.app, name, mb, &report) {
        println!("{l}");
    }
    for l in job::summary(o.app, name, &what, &report) {
        println!("{l}");
    }
    if o.check {
        let reference = job::reference_checksum(o.app, &input);
        if reference != report.checksum {
            println!(
                "metis: checksum {:016x}, reference {reference:016x}: DIFFER",
                report.checksum
            );
            return 1;
        }
        println!("metis: checksum {reference:016x} equals the sequential reference's");
    }
    0
}

/// `metis phoenix [--scale S] [--cores LIST]`: the Phoenix applications
/// (`workloads::phoenix`), each one's cycles and result.
fn phoenix(line: &str) -> i32 {
    let mut words = line.split_whitespace().skip(1);
    let (mut scale, mut cores) = (Some(1), Some(default_cores()));
    while let Some(word) = words.next() {
        match word {
            "--scale" => scale = args::number(words.next(), 1..=64),
            "--cores" => cores = args::cores_value(words.next()),
            _ => scale = None,
        }
    }
    let cores = cores.filter(|c| c.iter().all(|&c| c < arena::MAX_ARENAS));
    let (Some(scale), Some(cores)) = (scale, cores) else {
        println!("{HELP}");
        return 2;
    };
    if let Err(e) = move_to_core(cores[0]) {
        println!("metis: cannot move to core {}: {e:?}", cores[0]);
        return 1;
    }
    let host = AtollHostOn { cores: &cores };
    match workloads::phoenix::run_apps(&host, cores.len(), scale) {
        Ok(outcomes) => {
            for l in workloads::phoenix::lines(&Atoll::new(cores.clone()), cores.len(), &outcomes) {
                println!("{l}");
            }
            for (app, cycles, note) in &outcomes {
                println!("metis {app}: {:.2} Mcycles; {note}", *cycles as f64 / 1e6);
            }
            0
        }
        Err(e) => {
            println!("metis: {e}");
            1
        }
    }
}

libatoll::main!(main);
