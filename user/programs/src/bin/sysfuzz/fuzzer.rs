//! One core's fuzzer: its generator, its memory (a scratch mapping the kernel may write,
//! the zone of its root range it may edit), the objects it made (passed back while valid,
//! and after they are gone), what it started, its parkers and its counts. What it does
//! with them, one step at a time, is in `step.rs`.

use crate::call::{Call, Kind, Made};
use crate::park::Parkers;
use crate::rng::Rng;
use crate::started::{Started, STARTED_MAX};
use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};
use libatoll::abi::{nr, Error, SysResult};
use libatoll::obj::{self, ObjRef};
use libatoll::println;

pub const PAGE: u64 = 4096;
pub const GIB: u64 = 1 << 30;
/// The scratch mapping: where the kernel writes what the fuzzer asks for. A fresh
/// private mapping, unmapped pages on either side, so a length that runs past it is
/// refused as a whole (the kernel checks every page before it copies a byte).
pub const SCRATCH_BYTES: u64 = 64 * 1024;
/// The zone: the part of its own root range the fuzzer maps and splices into (64 TiB, far
/// from the image, stack, heap, private mappings and libatoll's slots). Calls may write
/// here; the fuzzer itself never touches it.
pub const ZONE: u64 = 0x4000_0000_0000;
/// Slots (1 GiB each) in the zone.
pub const ZONE_SLOTS: u64 = 4;
pub const ZONE_END: u64 = ZONE + ZONE_SLOTS * GIB;
/// Most bytes one call may fill in the zone (a page filled there holds a frame as long as
/// its segment lives: see [`ZONE_BUDGET`]).
pub const ZONE_TOUCH_MAX: u64 = 64 * 1024;
/// Objects made in its root share and kept to pass back (the oldest is deleted when full).
pub const POOL: usize = 24;
/// Ids of objects it deleted, passed back as stale references.
pub const GRAVE: usize = 16;
/// `by_number`'s slot for calls past the last.
pub const PAST: usize = nr::LAST as usize + 1;
/// Shares it added to its share set (taken out again at a purge).
pub const IN_SET: usize = 32;
/// Pages calls may have filled in the zone before the pool is purged (1 MiB).
pub const ZONE_BUDGET: u64 = 256;
/// Fewest steps between two console lines sent with the machine capability.
pub const ARMED_EVERY: u64 = 1000;
/// Steps a pooled pcore is kept.
pub const PCORE_HOLD: u64 = 128;
/// Pcore ids remembered (a few thousand per million calls; past this, every id counts as
/// one that might be a pcore, and none it does not know may be started on).
pub const PCORES_MAX: usize = 32768;
/// Mappings of its root range read at once.
pub const MAPPINGS_MAX: usize = 512;
/// Most mappings its root range can hold (the kernel's cap a range): the room it makes
/// to read them all when more than [`MAPPINGS_MAX`] are there.
pub const MAPPINGS_ALL: u64 = 16_384;

/// The scratch mapping's address, for `cfork` children (theirs is a copy at the same
/// place).
static SCRATCH: AtomicU64 = AtomicU64::new(0);

/// A fuzzer of its own (`Main`), one of the further threads of its program (`Worker`,
/// `--threads`: no `cfork`, which copies the root share a thread does not have, and no
/// machine device), or a `cfork` child's short burst (`Child`): no scenarios and no
/// pcores, so it starts nothing it would have to wait for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Main,
    Worker,
    Child,
}

/// What a run counted.
pub struct Stats {
    /// Calls by number; the last slot counts the numbers past the last call.
    pub by_number: [u64; PAST + 1],
    pub errors: u64,
    /// Answers the kernel must never give; each was printed when it came.
    pub wrong: u64,
    /// Programs run on its own core (`program_run` waited for them).
    pub programs_here: u64,
    /// Started elsewhere, by [`crate::started::What`].
    pub started: [u64; 4],
    /// How what it started ended: exited, faulted, halted, timed out, failed, let go of
    /// while still queued or running.
    pub ended: [u64; 6],
    /// Console lines sent with the machine capability.
    pub console_lines: u64,
    /// Of those, lines a busy core did not answer in time (`TimedOut`: not a wrong answer,
    /// with 16 vCPUs on 2 host CPUs a core may sit in one call for tens of seconds).
    pub console_timeouts: u64,
}

impl Default for Stats {
    fn default() -> Stats {
        Stats {
            by_number: [0; PAST + 1],
            errors: 0,
            wrong: 0,
            programs_here: 0,
            started: [0; 4],
            ended: [0; 6],
            console_lines: 0,
            console_timeouts: 0,
        }
    }
}

/// One core's fuzzer.
pub struct Fuzzer {
    pub rng: Rng,
    pub mode: Mode,
    pub me: u64,
    pub cores: u64,
    pub root: u64,
    pub root_ar: u64,
    /// The machine device's id in the root share, if the program was given it.
    pub machine: Option<u64>,
    /// The hardware id of the machine device (`device_alloc` of it must be refused).
    pub machine_hwid: Option<u64>,
    /// The hardware id of the network device, if the machine has one: `device_alloc`
    /// draws it, so `device_send` and `device_receive` meet a real device (issue M12).
    pub nic_hwid: Option<u64>,
    pub scratch: u64,
    /// An empty segment mapped over the whole zone to reset it.
    pub cover: u64,
    /// Read-only mappings of its own (code, constants): the kernel can write none of it.
    pub readonly: [(u64, u64); 8],
    /// Everything its root range maps outside the zone, the range itself, and the cover.
    pub protected: Vec<u64>,
    pub pool: [Made; POOL],
    pub pooled: usize,
    pub grave: [u64; GRAVE],
    pub graves: usize,
    pub in_set: [u64; IN_SET],
    pub in_sets: usize,
    /// Every pcore it held, in any share: (id, core), in the order made. The ids come from
    /// this core's counter (the kernel makes an object on the core that asks), so they
    /// rise: the list is sorted.
    pub pcores: Vec<(u64, u64)>,
    /// Whether a pcore id went unremembered (the list was full).
    pub pcores_lost: bool,
    /// The cores it may start programs and contexts on (a bit per core).
    pub others: u64,
    /// The initrd's file names.
    pub files: Vec<String>,
    /// Programs and contexts it started and has not let go of.
    pub started: Vec<Started>,
    /// The fresh root range a scenario is about to start a context on (0: none).
    pub launch_range: u64,
    pub mappings: Vec<[u64; 6]>,
    /// How many of `mappings` the last read filled.
    pub mapped: usize,
    pub stats: Stats,
    pub steps: u64,
    /// The step of the last console line sent with the capability.
    pub armed_at: u64,
    /// Pages calls may have filled in the zone since the last purge.
    pub zone_pages: u64,
    pub trace: u64,
    /// Its own segments grown by a call, with the size to put back at the next poll.
    pub regrow: Vec<(u64, u64)>,
    /// Threads making its long parks (`park.rs`).
    pub parkers: Parkers,
    /// Console lines that undo a change and were refused every time so far (`asym`
    /// back to full speed while every core's speed measurement times out under load):
    /// tried again, patiently, when the run ends.
    pub undos: Vec<String>,
}

impl Fuzzer {
    /// A fuzzer for this context: its scratch mapping (a child uses its copy of the
    /// parent's), its objects, the zone reset.
    pub fn new(seed: u64, mode: Mode, others: u64, trace: u64) -> Result<Fuzzer, Error> {
        let scratch = match mode {
            Mode::Main | Mode::Worker => {
                let m = libatoll::private::map_new(SCRATCH_BYTES)?;
                SCRATCH.store(m.va, Ordering::Relaxed);
                m.va
            }
            Mode::Child => SCRATCH.load(Ordering::Relaxed),
        };
        let root = obj::root_share();
        let root_ar = obj::root_ar();
        if mode == Mode::Worker {
            // A thread's root share starts empty: it names its range through the share
            // the program's threads hold in common, as ⟨root, range⟩ from now on.
            obj::share_addobj(root, ObjRef::new(obj::home_share(), root_ar))?;
        }
        let cover = obj::segment_alloc(root, 0)?;
        let small = mode == Mode::Child;
        let me = libatoll::pcore_current() as u64;
        let mut f = Fuzzer {
            rng: Rng::new(seed),
            mode,
            me,
            cores: libatoll::cores_online() as u64,
            root,
            root_ar,
            machine: if mode == Mode::Worker {
                None
            } else {
                libatoll::machine().map(|m| m.object)
            },
            machine_hwid: machine_hwid(),
            nic_hwid: hwid_of(libatoll::abi::device_kind::NET),
            scratch,
            cover,
            readonly: [(0, 0); 8],
            protected: Vec::with_capacity(MAPPINGS_MAX),
            pool: [Made { id: 0, kind: Kind::Share, born: 0 }; POOL],
            pooled: 0,
            grave: [0; GRAVE],
            graves: 0,
            in_set: [0; IN_SET],
            in_sets: 0,
            pcores: Vec::with_capacity(if small { 16 } else { PCORES_MAX }),
            pcores_lost: false,
            others: others & !(1 << me) & online_mask(),
            files: file_names(),
            started: Vec::with_capacity(STARTED_MAX),
            launch_range: 0,
            mappings: alloc::vec![[0; 6]; if small { 128 } else { MAPPINGS_MAX }],
            mapped: 0,
            stats: Stats::default(),
            steps: 0,
            armed_at: 0,
            zone_pages: 0,
            trace,
            regrow: Vec::with_capacity(64),
            parkers: Parkers::default(),
            undos: Vec::new(),
        };
        match mode {
            Mode::Main | Mode::Worker => {
                f.zone_reset();
                f.refresh_protected();
            }
            // A child keeps the zone it was given: the slot ranges spliced there are its
            // parent's, and it takes them into its pool, so both edit and fill the same
            // objects from two cores at once.
            Mode::Child => {
                f.refresh_protected();
                f.adopt_zone();
            }
        }
        Ok(f)
    }

    /// Whether this fuzzer hands parks to parkers: a `cfork` child makes them itself (the
    /// fuzzer that started it halts it after a while, which ends any park of it).
    pub fn uses_parkers(&self) -> bool {
        self.mode != Mode::Child
    }

    /// Reports an answer the kernel must never give.
    pub fn wrong(&mut self, why: &str, call: &Call, result: SysResult) {
        self.stats.wrong += 1;
        println!(
            "sysfuzz: core {}: WRONG at call #{}: {why}: call {} {:#x?} -> {result:?}",
            self.me, self.steps, call.number, call.a
        );
    }

    /// Prints the run's counts (and a call never made, if one was).
    pub fn report(&mut self, calls: u64, cycles: u64) {
        let s = &self.stats;
        let made: u64 = s.by_number.iter().sum();
        let missing: Vec<u64> =
            (0..=nr::LAST).filter(|&n| n != nr::EXIT && s.by_number[n as usize] == 0).collect();
        println!(
            "sysfuzz: core {}: {calls} calls, {made} system calls ({} errors, {} past the last), {} cycles a call",
            self.me, s.errors, s.by_number[PAST], cycles / calls.max(1)
        );
        println!("sysfuzz: core {}: calls never made: {missing:?}", self.me);
        println!(
            "sysfuzz: core {}: ran here {}; started {} programs, {} contexts, {} on its range, {} children",
            self.me, s.programs_here, s.started[0], s.started[1], s.started[2], s.started[3]
        );
        println!(
            "sysfuzz: core {}: they ended: exit {}, fault {}, halt {}, timeout {}, failed {}, let go {}",
            self.me, s.ended[0], s.ended[1], s.ended[2], s.ended[3], s.ended[4], s.ended[5]
        );
        println!(
            "sysfuzz: core {}: console lines with the machine: {} ({} not answered in time)",
            self.me, s.console_lines, s.console_timeouts
        );
        let p = &self.parkers;
        println!(
            "sysfuzz: core {}: long parks {} (parkers let go {}, not started {})",
            self.me, p.made, p.let_go, p.no_thread
        );
        // A long run that never made some call did not cover it: a failure of the fuzzer.
        if calls >= 20_000 && !missing.is_empty() {
            self.stats.wrong += 1;
        }
    }
}

/// A bit for every online core.
fn online_mask() -> u64 {
    match libatoll::cores_online() {
        n if n >= 64 => u64::MAX,
        n => (1 << n) - 1,
    }
}

/// The initrd's file names.
fn file_names() -> Vec<String> {
    let mut buf = alloc::vec![0u8; 2048];
    let n = libatoll::file_list(&mut buf).unwrap_or(0) as usize;
    let text = core::str::from_utf8(&buf[..n.min(buf.len())]).unwrap_or("");
    text.lines().map(String::from).collect()
}

/// The hardware id of the machine device, from `device_list`.
fn machine_hwid() -> Option<u64> {
    hwid_of(libatoll::abi::device_kind::MACHINE)
}

/// The hardware id of the first device of `kind`, from `device_list`.
fn hwid_of(kind: u64) -> Option<u64> {
    let mut list = [libatoll::abi::DeviceInfo::default(); 64];
    let n = obj::device_list(&mut list).ok()?;
    list[..n.min(64)].iter().find(|d| d.kind == kind).map(|d| d.hwid)
}

impl Fuzzer {
    /// The size of its own segment `id`, found through its root share or the threads'
    /// home share.
    pub fn own_size(&self, id: u64) -> Option<u64> {
        [self.root, obj::home_share()]
            .into_iter()
            .find_map(|share| obj::segment_get_nbytes(ObjRef::new(share, id)).ok())
    }

    /// Puts its own segments that a call grew back to their sizes.
    pub fn restore_sizes(&mut self) {
        while let Some((id, size)) = self.regrow.pop() {
            for share in [self.root, obj::home_share()] {
                if obj::segment_set_nbytes(ObjRef::new(share, id), size).is_ok() {
                    break;
                }
            }
        }
    }
}
