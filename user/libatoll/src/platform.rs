//! The benchmark platform (`workloads::Platform`, feature `workloads`): the workloads
//! written once (`workloads/`, the same code the Linux guest runs) on Atoll's library OS.
//! How each call maps (see also `docs/bench.md`):
//!
//! - `run_on`: [`threads`], one address space: a context per core on the caller's root
//!   range (the caller's own core runs its part itself).
//! - `run_separate`: `cfork` per core, an address space each. Before its work, each child
//!   maps every `Shared` region through slot ranges of its own (the same segment, so the
//!   same pages, but its own page tables): as a forked Linux process maps `MAP_SHARED`
//!   memory, it faults those pages in itself.
//! - `Placement::Shared`: a segment mapped through slot ranges spliced into the root range
//!   (Corey §3.1), so threads share its page tables and `cfork` children its pages; each
//!   starts at a different page offset in its first slot ([`next_colour`]).
//! - `Placement::Local`: a segment mapped in the root range ([`private`]); its frames come
//!   from the core that touches them first, and `cfork` children get copy-on-write copies.
//! - `alloc` touches every page; `reserve` maps them only, so each first touch is a soft
//!   fault.
//! - `package`: the core's package from `locality_get` (the SKB's topology).
//! - `set_writable` (`Shared` regions only): `ar_set_seg` maps the region's segment over
//!   the same pages of its slot ranges with or without `map::WRITE`; the kernel replaces
//!   the mapping and shoots down every core running the ranges by message before it
//!   returns (Multikernel §5.1, Figure 7's unmap).
//!
//! Workload core `k` is core `cores[k]` of the list the platform was made with.

use crate::cfork::{cfork, CforkOptions, Child};
use crate::obj::{self, ar_alloc, ar_set_ar, ar_set_seg, root_ar_ref, root_share, share_addobj};
use crate::obj::{home_share, segment_alloc, share_delobj, Status};
use crate::shared::{self, SLOT_BYTES};
use crate::{private, threads};
use abi::{ar_kind, map, ArSetAr, ArSetSeg, Error};
use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use locks::TtsLock;
use workloads::{Placement, Platform, Region};

const PAGE: u64 = 4096;

/// Atoll, running the workloads on a list of cores.
#[derive(Debug)]
pub struct Atoll {
    cores: Vec<usize>,
}

impl Atoll {
    /// The platform on `cores` (workload core `k` runs on `cores[k]`).
    pub fn new(cores: Vec<usize>) -> Atoll {
        Atoll { cores }
    }

    /// The cores it runs on.
    pub fn core_list(&self) -> &[usize] {
        &self.cores
    }

    /// The real cores of workload cores `cores`.
    fn real(&self, cores: &[usize]) -> Result<Vec<usize>, String> {
        cores
            .iter()
            .map(|&k| self.cores.get(k).copied().ok_or_else(|| format!("no core {k}")))
            .collect()
    }
}

/// A `Shared` region: a segment mapped from page `colour` of consecutive slot ranges,
/// spliced into the root range from `base` (all in `share`, the home share when it was
/// made); its data starts at `va` = `base` + `colour` pages.
#[derive(Debug)]
struct SharedRegion {
    base: u64,
    va: u64,
    colour: u64,
    pages: u64,
    segment: u64,
    ranges: Vec<u64>,
    share: u64,
}

impl SharedRegion {
    /// The window pages `[from, to)` that slot `j` maps (page `colour + p` of the window
    /// is page `p` of the segment).
    fn pages_in_slot(&self, j: usize) -> (u64, u64) {
        let per_slot = SLOT_BYTES / PAGE;
        let end = self.colour + self.pages;
        ((j as u64 * per_slot).max(self.colour), ((j as u64 + 1) * per_slot).min(end))
    }

    /// Maps the segment over its own pages again, with rights `flags`, naming the slot
    /// ranges and the segment through `share` (`None`: through whichever share holds
    /// them, [`private::named`]). The kernel takes the old mapping out of each slot
    /// range's tables and shoots down every core that runs the range before it returns
    /// (Multikernel §5.1, Figure 7: what `set_writable` costs).
    fn remap(&self, share: Option<u64>, flags: u64) -> Result<(), Error> {
        let name = |id: u64| match share {
            Some(share) => Ok(crate::ObjRef::new(share, id)),
            None => private::named(id).ok_or(Error::NoSuchObject),
        };
        let seg = name(self.segment)?;
        let per_slot = SLOT_BYTES / PAGE;
        for (j, &range) in self.ranges.iter().enumerate() {
            let (from, to) = self.pages_in_slot(j);
            let range = name(range)?;
            let set = ArSetSeg {
                ar: [range.share, range.object],
                va: (from % per_slot) * PAGE,
                seg: [seg.share, seg.object],
                first_page: from - self.colour,
                pages: to - from,
                flags,
            };
            ar_set_seg(&set)?;
        }
        Ok(())
    }
}

/// How many `Shared` regions have been made (picks each one's colour).
static REGIONS_MADE: AtomicU64 = AtomicU64::new(0);

/// The page offset in its first slot at which the next `Shared` region starts
/// ([`abi::shared_colour`]): regions in different TLB sets, clear of the heap's first
/// pages (MSGn's server, touching a channel and its own state on the heap, took twice as
/// long as Linux's with the same code while every region started at offset 0).
fn next_colour() -> u64 {
    abi::shared_colour(REGIONS_MADE.fetch_add(1, Ordering::Relaxed))
}

/// Every live `Shared` region, so `run_separate` can give them to its children and
/// `set_writable` find one (each behind an `Arc`, so a lookup copies no list and never
/// calls the kernel under the lock).
static SHARED: TtsLock<Vec<Arc<SharedRegion>>> = TtsLock::new(Vec::new());

/// `bytes` of zero pages in slot ranges spliced into the root range, from a page offset
/// ([`next_colour`]) in the first.
fn shared_new(bytes: u64) -> Result<(u64, u64), Error> {
    let pages = bytes.max(1).div_ceil(PAGE);
    let colour = next_colour();
    let slots = ((colour + pages) * PAGE).div_ceil(SLOT_BYTES);
    let base = shared::slot_vas(slots)?;
    let home = home_share();
    let segment = segment_alloc(home, pages * PAGE)?;
    let va = base + colour * PAGE;
    let mut region =
        SharedRegion { base, va, colour, pages, segment, ranges: Vec::new(), share: home };
    let made = (|| {
        for j in 0..slots {
            let range = shared::slot_alloc()?;
            region.ranges.push(range);
            shared::splice(base + j * SLOT_BYTES, range)?;
        }
        shared::map_in_slots(&region.ranges, colour * PAGE, segment, pages)
    })();
    if let Err(e) = made {
        drop_shared(&region);
        return Err(e);
    }
    let region = Arc::new(region);
    SHARED.with(|list| list.push(region));
    Ok((va, pages * PAGE))
}

/// Takes a `Shared` region out of the root range and lets go of its objects.
fn drop_shared(region: &SharedRegion) {
    for j in 0..region.ranges.len() as u64 {
        let _ = shared::unsplice(region.base + j * SLOT_BYTES);
    }
    for &id in region.ranges.iter().chain([&region.segment]) {
        if let Some(r) = private::named(id) {
            let _ = share_delobj(r);
        }
    }
}

/// `Region`'s free for `Shared` memory.
unsafe fn free_shared(ptr: NonNull<u8>, _len: usize) {
    let va = ptr.as_ptr() as u64;
    let region = SHARED.with(|list| {
        let i = list.iter().position(|r| r.va == va)?;
        Some(list.swap_remove(i))
    });
    if let Some(region) = region {
        drop_shared(&region);
    }
}

/// `Region`'s free for `Local` memory.
unsafe fn free_local(ptr: NonNull<u8>, len: usize) {
    private::free(ptr.as_ptr() as u64, len as u64);
}

/// Maps `bytes` as `placement` asks; touches every page if `touch`.
fn map(bytes: usize, placement: Placement, touch: bool) -> Result<Region, String> {
    let (va, len, free): (u64, u64, unsafe fn(NonNull<u8>, usize)) = match placement {
        Placement::Shared => {
            let (va, len) = shared_new(bytes as u64).map_err(|e| format!("shared: {e:?}"))?;
            (va, len, free_shared)
        }
        Placement::Local(_) => {
            let m = private::map_new(bytes as u64).map_err(|e| format!("local: {e:?}"))?;
            (m.va, m.bytes, free_local)
        }
    };
    if touch {
        for page in 0..len / PAGE {
            // SAFETY: [va, va + len) was just mapped read-write and is ours; its pages
            // are zero, and writing a zero keeps them so.
            unsafe { ((va + page * PAGE) as *mut u8).write_volatile(0) };
        }
    }
    let ptr = NonNull::new(va as *mut u8).ok_or("mapped at 0")?;
    // SAFETY: page-aligned, `len` zero bytes mapped read-write in the root range (so for
    // every thread and, if `Shared`, every later `cfork` child) until `free` runs.
    Ok(unsafe { Region::from_raw(ptr, len as usize, free) })
}

/// Moves between cores of the threads of the last `run_threads`.
static MIGRATIONS: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0);

impl Platform for Atoll {
    fn system(&self) -> &'static str {
        "atoll"
    }

    fn cores(&self) -> usize {
        self.cores.len()
    }

    fn cycles(&self) -> u64 {
        crate::rdtsc()
    }

    fn null_call(&self) {
        let _ = crate::null();
    }

    fn soft_faults(&self) -> Option<u64> {
        Some(crate::obj::page_faults())
    }

    fn process_faults(&self) -> Option<u64> {
        Some(crate::obj::address_space_faults())
    }

    fn package(&self, core: usize) -> Option<u32> {
        // The SKB's place of the core (`locality_get`, Corey §4.4): its package by CPUID.
        let real = *self.cores.get(core)?;
        crate::locality_get(real).ok().map(|l| l.package as u32)
    }

    fn run_on(&self, cores: &[usize], work: &(dyn Fn(usize) + Sync)) -> Result<(), String> {
        let real = self.real(cores)?;
        threads::run(&real, &|i| work(cores[i])).map_err(|e| format!("threads: {e:?}"))
    }

    fn alloc(&self, bytes: usize, placement: Placement) -> Result<Region, String> {
        map(bytes, placement, true)
    }

    fn reserve(&self, bytes: usize, placement: Placement) -> Result<Region, String> {
        map(bytes, placement, false)
    }

    fn set_writable(&self, region: &Region, writable: bool) -> Result<(), String> {
        let va = region.addr() as u64;
        let Some(shared) = SHARED.with(|list| list.iter().find(|r| r.va == va).cloned()) else {
            return Err(format!("atoll changes the rights of Shared regions only ({region:?})"));
        };
        let flags = if writable { map::WRITE } else { 0 };
        // Through the share the region was made in, with no lookup call in the timed path;
        // if threads made it and have ended, its objects moved to the root share: find them.
        // (Mapping the same pages again with the same rights changes nothing, so trying
        // twice after a first try that failed part way is safe.)
        shared
            .remap(Some(shared.share), flags)
            .or_else(|_| shared.remap(None, flags))
            .map_err(|e| format!("ar_set_seg: {e:?}"))
    }

    fn run_separate(&self, cores: &[usize], work: &(dyn Fn(usize) + Sync)) -> Result<(), String> {
        let real = self.real(cores)?;
        separate(&real, &|i| work(cores[i])).map_err(|e| format!("cfork: {e:?}"))
    }

    fn run_threads(
        &self,
        n: usize,
        pin: Option<usize>,
        work: &(dyn Fn(usize) + Sync),
    ) -> Result<(), String> {
        let pin = match pin {
            Some(core) => Some(*self.real(&[core])?.first().ok_or("no core")?),
            None => None,
        };
        MIGRATIONS.store(0, core::sync::atomic::Ordering::Relaxed);
        crate::thread::run_scoped(n, pin, &|i| {
            work(i);
            // Counted by each thread at its end: all its moves are behind it.
            let moved = crate::thread::my_stat().map_or(0, |s| s.migrations);
            MIGRATIONS.fetch_add(moved, core::sync::atomic::Ordering::Relaxed);
        })
        .map_err(|e| format!("threads: {e:?}"))
    }

    fn move_to(&self, core: usize) -> Result<(), String> {
        let real = *self.real(&[core])?.first().ok_or("no core")?;
        crate::thread::set_my_affinity(1 << real).map_err(|e| format!("affinity: {e:?}"))?;
        // The call returns on the new core (the thread left at once), but be sure.
        while crate::pcore_current() != real {
            crate::thread::yield_now();
        }
        Ok(())
    }

    fn migrations(&self) -> Option<u64> {
        Some(MIGRATIONS.load(core::sync::atomic::Ordering::Relaxed))
    }

    fn yield_now(&self) {
        crate::thread::yield_now();
    }

    /// Waits for peers ([`crate::thread::wait_for_peers`]): if one ended badly (a fault
    /// ends only the thread that faulted), the caller will never be woken, so it says so
    /// and ends with [`crate::thread::PEER_ENDED_EXIT`] (a spawned thread ends alone and
    /// its joiner sees the code; the main thread ends the program).
    fn wait_word(&self, word: &core::sync::atomic::AtomicU32, expected: u32) {
        if let Err(peer) = crate::thread::wait_for_peers(word, expected) {
            crate::println!("libatoll: {peer} while this thread waited for it; giving up");
            crate::exit(crate::thread::PEER_ENDED_EXIT);
        }
    }

    fn wake_word(&self, word: &core::sync::atomic::AtomicU32, n: u32) {
        let _ = crate::thread::wake(word, u64::from(n));
    }
}

/// The start gate's states (in a `Shared` page): children wait until all are started.
const WAIT: u8 = 0;
const GO: u8 = 1;
const ABORT: u8 = 2;

/// What a `cfork` child runs, in the caller's heap (so in the child's copy of it).
struct SepJob<'a> {
    work: *const (dyn Fn(usize) + Sync + 'a),
    index: usize,
    gate: *const AtomicU8,
    /// Holds every `Shared` segment, so the child can map them.
    segments: u64,
}

/// `run_separate`: `work(i)` on core `cores[i]`, each other core in an address space of
/// its own made by `cfork` (on a stack of its own, so its copy of this stack, which holds
/// `work`, stays intact); the caller's core runs its part itself.
fn separate(cores: &[usize], work: &(dyn Fn(usize) + Sync)) -> Result<(), Error> {
    let me = crate::pcore_current();
    let online = crate::cores_online();
    for (i, &core) in cores.iter().enumerate() {
        if core >= online || cores[..i].contains(&core) {
            return Err(Error::InvalidArgument);
        }
    }
    let gate_region = map(1, Placement::Shared, true).map_err(|_| Error::NoResources)?;
    let gate = gate_region.addr() as *const AtomicU8;
    let segments = obj::share_new()?;
    for region in SHARED.with(|list| list.clone()) {
        let added = private::named(region.segment)
            .ok_or(Error::NoSuchObject)
            .and_then(|seg| share_addobj(segments, seg));
        if let Err(e) = added {
            obj::share_free(segments);
            return Err(e);
        }
    }
    let stack = match private::map_new(threads::STACK_BYTES) {
        Ok(s) => s,
        Err(e) => {
            obj::share_free(segments);
            return Err(e);
        }
    };
    let opts =
        CforkOptions { share_segments: &[], shares: &[segments], stack: stack.va + stack.bytes };
    let mut children: Vec<Child> = Vec::new();
    let mut failed = None;
    let mine = cores.iter().position(|&c| c == me);
    for (index, &core) in cores.iter().enumerate() {
        if Some(index) == mine {
            continue;
        }
        let job = Box::into_raw(Box::new(SepJob { work, index, gate, segments }));
        let started = cfork(core, &opts, separate_child, job as u64);
        // SAFETY: from `Box::into_raw` above; the child has its own copy.
        drop(unsafe { Box::from_raw(job) });
        match started {
            Ok(child) => children.push(child),
            Err(e) => {
                crate::println!("run_separate: cfork to core {core} failed: {e:?}");
                failed = Some(e);
                break;
            }
        }
    }
    // SAFETY: the gate is a live `Shared` page (zero: a valid AtomicU8).
    let gate = unsafe { &*gate };
    gate.store(if failed.is_some() { ABORT } else { GO }, Ordering::Release);
    if failed.is_none() {
        if let Some(i) = mine {
            work(i);
        }
    }
    let mut bad = false;
    for child in children {
        let (core, status) = (child.core, child.join());
        if status != Status::Exited(0) {
            crate::println!("run_separate: core {core}: {status:?}");
            bad = true;
        }
    }
    private::free(stack.va, stack.bytes);
    obj::share_free(segments);
    drop(gate_region);
    match failed {
        Some(e) => Err(e),
        None if bad => Err(Error::Busy),
        None => Ok(()),
    }
}

/// A `cfork` child of [`separate`]: maps the `Shared` regions through slot ranges of its
/// own, waits at the gate, runs its part.
fn separate_child(arg: u64) -> i32 {
    // SAFETY: the parent's job, in this child's copy of the heap (the parent frees only
    // its own copy).
    let job = unsafe { Box::from_raw(arg as *mut SepJob<'_>) };
    for region in SHARED.with(|list| list.clone()) {
        if let Err(e) = own_tables(&region, job.segments) {
            crate::println!("run_separate: cannot map shared memory: {e:?}");
            return 1;
        }
    }
    // SAFETY: the gate is a `Shared` page the parent keeps until this child has ended.
    let gate = unsafe { &*job.gate };
    loop {
        match gate.load(Ordering::Acquire) {
            WAIT => core::hint::spin_loop(),
            GO => break,
            _ => return 0,
        }
    }
    // SAFETY: `work` is in this child's copy of the parent's stack, which it no longer
    // runs on (it has a stack of its own), so the closure and its captures are intact;
    // what they lead to is a copy too, or shared memory.
    let work = unsafe { &*job.work };
    work(job.index);
    0
}

/// Splices new slot ranges of this context's own over `region`, mapping the same segment
/// (reached through `segments`) at the same offsets: the same pages, in page tables of
/// this address space.
fn own_tables(region: &SharedRegion, segments: u64) -> Result<(), Error> {
    let root = root_share();
    let per_slot = SLOT_BYTES / PAGE;
    for j in 0..region.ranges.len() {
        let (from, to) = region.pages_in_slot(j);
        let range = ar_alloc(root, ar_kind::SLOT)?;
        let set = ArSetSeg {
            ar: [root, range],
            va: (from % per_slot) * PAGE,
            seg: [segments, region.segment],
            first_page: from - region.colour,
            pages: to - from,
            flags: map::WRITE,
        };
        ar_set_seg(&set)?;
        let ar = root_ar_ref();
        let splice = ArSetAr {
            ar: [ar.share, ar.object],
            va: region.base + j as u64 * SLOT_BYTES,
            child: [root, range],
            flags: map::WRITE,
        };
        ar_set_ar(&splice)?;
    }
    Ok(())
}

/// Where Figure 7's programs (`memclone`, `mempass`) put their memory (Corey §8.2; the
/// `config` of their `RESULT` lines).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Config {
    /// One address space: contexts on one root range (`workloads::Spaces::Shared`).
    SharedAs,
    /// An address space per core, made with `cfork` (`workloads::Spaces::Separate`).
    SeparateAs,
    /// Corey's own: memory in slot ranges every core's root range splices (Atoll only).
    SharedRanges,
}

impl Config {
    /// All three, in the order the programs run them.
    pub const ALL: [Config; 3] = [Config::SharedAs, Config::SharedRanges, Config::SeparateAs];

    /// The `config` name.
    pub fn name(self) -> &'static str {
        match self {
            Config::SharedAs => "shared-as",
            Config::SeparateAs => "separate-as",
            Config::SharedRanges => "shared-ranges",
        }
    }

    /// The workload's address spaces, for the configurations the shared workload code runs.
    pub fn spaces(self) -> Option<workloads::Spaces> {
        match self {
            Config::SharedAs => Some(workloads::Spaces::Shared),
            Config::SeparateAs => Some(workloads::Spaces::Separate),
            Config::SharedRanges => None,
        }
    }
}

/// The command line of Figure 7's programs:
/// `[--mb N] [--cores LIST] [--config shared-as|separate-as|shared-ranges|all]`.
pub struct Options {
    /// MiB (per core for memclone, in all for mempass); default 100.
    pub mb: u64,
    /// The cores to use; default all.
    pub cores: Vec<usize>,
    /// The configurations to run; default all.
    pub configs: Vec<Config>,
}

/// Parses the program's arguments; prints `help` and returns the exit code for `--help`
/// (0) or a bad argument (2), or when more than `max_cores` cores are listed (2).
pub fn options(name: &str, help: &str, max_cores: usize) -> Result<Options, i32> {
    let line = crate::args::arg_string();
    let mut words = line.split_whitespace();
    let mut o =
        Options { mb: 100, cores: crate::cores::all_cores(), configs: Config::ALL.to_vec() };
    while let Some(word) = words.next() {
        let ok = match word {
            "--mb" => crate::args::number(words.next(), 1..=4096).map(|v| o.mb = v).is_some(),
            "--cores" => crate::args::cores_value(words.next()).map(|c| o.cores = c).is_some(),
            "--config" => match words.next() {
                Some("all") => Some(Config::ALL.to_vec()),
                Some(n) => Config::ALL.iter().find(|c| c.name() == n).map(|&c| alloc::vec![c]),
                None => None,
            }
            .map(|c| o.configs = c)
            .is_some(),
            _ => false,
        };
        if !ok {
            crate::println!("{help}");
            return Err(if word == "--help" { 0 } else { 2 });
        }
    }
    if o.cores.len() > max_cores {
        crate::println!("{name}: at most {max_cores} cores");
        return Err(2);
    }
    Ok(o)
}

/// A program that runs one workload written once (`workloads::pingpong`, `shm`,
/// `multicast`): its name, usage text and count argument.
pub struct WorkloadProgram {
    /// The program's name, the prefix of its error line.
    pub name: &'static str,
    /// The `--help` text.
    pub help: &'static str,
    /// N when none is given (iterations, updates, rounds).
    pub default_count: usize,
    /// The counts accepted.
    pub counts: core::ops::RangeInclusive<usize>,
}

impl WorkloadProgram {
    /// `NAME [N] [--cores LIST]` (default cores: all; N at most once): parses the arguments, runs
    /// `workload(platform, N)` on the listed cores and prints its `RESULT` lines, the Linux
    /// guest's field for field. The exit code: 0; 2 with the usage for a bad argument (0
    /// for `--help`); 1 if the workload failed (e.g. too few cores), with why.
    pub fn main(&self, workload: fn(&Atoll, usize) -> Result<Vec<String>, String>) -> i32 {
        let line = crate::args::arg_string();
        let mut words = line.split_whitespace();
        let mut cores = crate::cores::all_cores();
        let mut count = None;
        while let Some(word) = words.next() {
            let ok = match word {
                "--cores" => crate::args::cores_value(words.next()).map(|c| cores = c).is_some(),
                _ if count.is_some() => false,
                _ => crate::args::number(Some(word), self.counts.clone())
                    .map(|n| count = Some(n))
                    .is_some(),
            };
            if !ok {
                crate::println!("{}", self.help);
                return if word == "--help" { 0 } else { 2 };
            }
        }
        match workload(&Atoll::new(cores), count.unwrap_or(self.default_count)) {
            Ok(lines) => {
                for line in lines {
                    crate::println!("{line}");
                }
                0
            }
            Err(why) => {
                crate::println!("{}: {why}", self.name);
                1
            }
        }
    }
}
