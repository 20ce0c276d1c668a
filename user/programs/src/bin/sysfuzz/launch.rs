//! What the fuzzer starts besides its own calls: programs (`program_run`), contexts
//! (`pcore_run`) and `cfork` children, which make the calls that end their caller (`exit`,
//! `pcore_halt` of their own pcore); and how it keeps track of them: polled every few
//! calls, halted once they run long, let go of before the fuzzer ends, never waited for
//! without bound (`main.rs` says why).

use crate::call::{Block, Call, Kind};
use crate::fuzzer::{Fuzzer, Mode, GIB, PAGE, ZONE};
use crate::started::{exit_entry, halt_entry, Started, What, HALT_AFTER, STARTED_MAX};
use crate::text::{self, BENCH_CORES_MAX, BENCH_FUZZED};
use alloc::format;
use alloc::string::String;
use core::sync::atomic::{AtomicU64, Ordering};
use libatoll::abi::{ar_kind, map, nr, Error, SysResult, USER_END};
use libatoll::obj::{self, share_delobj, ObjRef};
use libatoll::{cfork, CforkOptions, Child, Status};

/// A scenario starts something only while fewer than this many run.
const BUSY: usize = 4;
/// How long `finish` waits for what it started (cycles; about a fifth of a second): one queued
/// behind another core's program may not start before that program ends.
const DRAIN_CYCLES: u64 = 400_000_000;

/// ⟨share, pcore⟩ cells the self-halt entry reads (one per context in flight; reused in
/// turn: a context that reads a newer cell than its own halts nothing and exits).
static CELLS: [[AtomicU64; 2]; 8] = [const { [AtomicU64::new(0), AtomicU64::new(0)] }; 8];

impl Fuzzer {
    /// One scenario: a few calls that set up what a single random call never would.
    pub fn scenario(&mut self) {
        self.poll_started();
        match self.rng.below(16) {
            0..=2 => self.program_here(),
            3..=4 => self.program_there(),
            5..=6 => self.context_there(false),
            7 => self.context_there(true),
            8 => self.thread_there(false),
            9 => self.thread_there(true),
            // `cfork` copies the root share's objects: a worker thread's holds none.
            10..=11 if self.mode == Mode::Main => self.child_there(),
            10..=11 => self.thread_there(false),
            12..=13 => self.console_line(),
            14 => self.not_the_machine(),
            _ => self.zone_reset(),
        }
        // A `cfork` may have grown the heap by a segment: protect it too.
        self.refresh_protected();
    }

    /// A core it may start something on (`--others`), if there is one.
    fn other_core(&mut self) -> Option<u64> {
        let n = self.others.count_ones() as u64;
        if n == 0 {
            return None;
        }
        let pick = self.rng.below(n);
        (0..64).filter(|&c| self.others & (1 << c) != 0).nth(pick as usize)
    }

    /// A pcore of `core` in the root share, made through the usual path (`pcore_alloc`
    /// is `NotPermitted` while another holds it: in the kernel test, often).
    fn pcore_of(&mut self, core: u64) -> Option<u64> {
        self.make(Call::new(nr::PCORE_ALLOC, [self.root, core, 0, 0, 0])).ok()
    }

    /// `program_run` on its own core: the fuzzer waits while `hello` or `fault` runs.
    fn program_here(&mut self) {
        let Some(p) = self.pcore_of(self.me) else { return };
        let _ = self.program_run(p);
        self.forget(p);
    }

    /// `program_run` on another core: followed until it ends.
    fn program_there(&mut self) {
        let Some(core) = self.other_core().filter(|_| self.started.len() < BUSY) else {
            return;
        };
        let Some(p) = self.pcore_of(core) else { return };
        if self.program_run(p) != Ok(0) {
            self.forget(p);
        }
    }

    fn program_run(&mut self, p: u64) -> SysResult {
        let mut call = Call::new(nr::PROGRAM_RUN, [self.root, p, 0, 0, self.give()]);
        call.text = text::program_line(&mut self.rng);
        call.a[3] = call.text.len as u64;
        self.make(call)
    }

    /// `pcore_run` on another core on a fresh root range: empty, or mapping pooled
    /// segments and slot ranges without execute permission. Whatever the entry, the
    /// context faults at its first instruction; the range goes with the context.
    fn context_there(&mut self, mapped: bool) {
        let Some(core) = self.other_core().filter(|_| self.started.len() < BUSY) else {
            return;
        };
        let Some(p) = self.pcore_of(core) else { return };
        let root = self.root;
        let Ok(ar) = self.make(Call::new(nr::AR_ALLOC, [root, ar_kind::ROOT, 0, 0, 0])) else {
            self.forget(p);
            return;
        };
        self.launch_range = ar;
        for _ in 0..if mapped { 1 + self.rng.below(4) } else { 0 } {
            self.map_into(ar);
        }
        let share = if self.rng.one_in(2) { obj::share_new().ok() } else { None };
        let mut call = Call::new(nr::PCORE_RUN, [0; 5]);
        let entry = match self.rng.below(3) {
            0 => libatoll::abi::USER_BASE + self.rng.below(0x10000),
            1 => self.rng.below(USER_END),
            _ => self.argument(),
        };
        let shares = [share.unwrap_or(0), self.set_share().unwrap_or(root), self.argument()];
        let nshares = if share.is_some() { 1 } else { self.rng.below(4) };
        call.words[..8].copy_from_slice(&[root, p, entry, self.argument(), root, ar, 0, nshares]);
        call.words[6] = self.rng.next();
        call.words[8..11].copy_from_slice(&shares);
        if self.make(call).is_err() {
            self.forget(p);
        }
        self.launch_range = 0;
        // The context holds the range (and the share) while it runs; nobody else may.
        self.forget(ar);
        if let Some(s) = share {
            obj::share_free(s);
        }
    }

    /// Maps a pooled segment, or splices a pooled slot range, into the fresh range `ar`
    /// (`guard` strips execute permission from both).
    fn map_into(&mut self, ar: u64) {
        let root = self.root;
        let mut call = if self.rng.one_in(3) {
            let Some(slot) = self.pooled_of(Some(Kind::Slot)) else { return };
            let mut call = Call::new(nr::AR_SET_AR, [0; 5]);
            let va = GIB * self.rng.below(8);
            call.words[..6].copy_from_slice(&[root, ar, va, root, slot, self.rng.below(4)]);
            call
        } else {
            let Some(seg) = self.pooled_of(Some(Kind::Segment)) else { return };
            let mut call = Call::new(nr::AR_SET_SEG, [0; 5]);
            let va = libatoll::abi::USER_BASE + PAGE * self.rng.below(1 << 16);
            let pages = 1 + self.rng.below(16);
            let w = [root, ar, va, root, seg, self.rng.below(4), pages, self.rng.below(4)];
            call.words[..8].copy_from_slice(&w);
            call
        };
        call.block = Block::Composed;
        let _ = self.make(call);
    }

    /// `pcore_run` on another core on its own root range, at the `exit` entry (a random
    /// exit code) or the self-halt entry (given the share that holds its pcore).
    fn thread_there(&mut self, halt: bool) {
        let Some(core) = self.other_core().filter(|_| self.started.len() < BUSY) else {
            return;
        };
        let Some(p) = self.pcore_of(core) else { return };
        let root = self.root;
        let mut call = Call::new(nr::PCORE_RUN, [0; 5]);
        let mut share = None;
        let (entry, arg) = if halt {
            let Ok(s) = obj::share_new() else {
                self.forget(p);
                return;
            };
            share = Some(s);
            let _ = obj::share_addobj(s, ObjRef::new(root, p));
            let cell = &CELLS[(self.steps % CELLS.len() as u64) as usize];
            cell[0].store(s, Ordering::Release);
            cell[1].store(p, Ordering::Release);
            (halt_entry(), cell.as_ptr() as u64)
        } else {
            (exit_entry(), self.rng.next())
        };
        let w = [root, p, entry, self.rng.next(), root, self.root_ar, arg, share.is_some() as u64];
        call.words[..8].copy_from_slice(&w);
        call.words[8] = share.unwrap_or(0);
        if self.make(call).is_err() {
            self.forget(p);
        }
        if let Some(s) = share {
            obj::share_free(s);
        }
    }

    /// A `cfork` child on another core: a short burst of random calls of its own, then
    /// an end chosen by its seed (see [`child_main`]).
    fn child_there(&mut self) {
        let Some(core) = self.other_core().filter(|_| self.started.len() < BUSY) else {
            return;
        };
        // `cfork` asks for the pcore patiently (a tenth of a second): ask once first.
        let Some(p) = self.pcore_of(core) else { return };
        self.forget(p);
        // `cfork` copies every mapping of the root range by its id in the root share: a
        // zone mapping of a segment held elsewhere would make it fail. Then up to two
        // pooled slot ranges go into the zone: the child gets them as they are (shared).
        self.zone_reset();
        for slot in 0..self.rng.below(3) {
            let Some(range) = self.pooled_of(Some(Kind::Slot)) else { break };
            let mut call = Call::new(nr::AR_SET_AR, [0; 5]);
            let (root, va) = (self.root, ZONE + slot * GIB);
            call.words[..6].copy_from_slice(&[root, self.root_ar, va, root, range, map::WRITE]);
            let _ = self.make(call);
        }
        let share = if self.rng.one_in(2) { obj::share_new().ok() } else { None };
        let shares = share.as_slice();
        let opts = CforkOptions { shares, ..CforkOptions::default() };
        let seed = self.rng.next();
        match cfork::cfork(core as usize, &opts, child_main, seed) {
            Ok(child) => {
                let pcore = child.pcore.object;
                self.note_pcore(pcore, core);
                self.track(pcore, Some(child), What::Child);
            }
            // Another fuzzer took the core meanwhile, or memory is short; or, while its
            // parkers or worker threads live, a heap segment or stack is in the threads'
            // home share, which `cfork` does not copy from.
            Err(Error::NotPermitted | Error::Busy | Error::NoResources | Error::NoSuchObject) => {}
            Err(e) => libatoll::println!("sysfuzz: core {}: cfork to core {core}: {e:?}", self.me),
        }
        if let Some(s) = share {
            obj::share_free(s);
        }
    }

    /// A console line: with the machine capability if it holds it (`guard` rations
    /// them), else a refused one. Half of those with the capability are lines the console
    /// accepts that change the machine, each undone at once ([`Fuzzer::accepted_lines`]).
    fn console_line(&mut self) {
        if self.machine.is_some() && self.rng.one_in(2) {
            self.accepted_lines();
            return;
        }
        let (share, object) = match self.machine {
            Some(m) => (self.root, m),
            None => (self.root, self.pooled_of(None).unwrap_or(0)),
        };
        let mut call = Call::new(nr::KERNEL_COMMAND, [share, object, 0, 0, 0]);
        call.text = text::console_line(&mut self.rng);
        call.a[3] = call.text.len as u64;
        let _ = self.make(call);
    }

    /// The machine calls with a device that is not the machine: `NotPermitted`, checked
    /// by the oracle in `after`.
    fn not_the_machine(&mut self) {
        let root = self.root;
        let hwid = self.rng.below(4);
        let Ok(dev) = self.make(Call::new(nr::DEVICE_ALLOC, [root, hwid, 0, 0, 0])) else {
            return;
        };
        let _ = self.make(Call::new(nr::POWEROFF, [root, dev, 0, 0, 0]));
        let mut call = Call::new(nr::KERNEL_COMMAND, [root, dev, 0, 0, 0]);
        call.text = text::console_line(&mut self.rng);
        call.a[3] = call.text.len as u64;
        let _ = self.make(call);
        self.forget(dev);
    }

    /// Follows what was started on ⟨share, pcore⟩ (after a `program_run` or `pcore_run`
    /// succeeded): keeps the pcore in the root share, out of the pool.
    pub fn pin(&mut self, share: u64, pcore: u64, what: What) {
        let root = self.root;
        if share != root && obj::share_addobj(root, ObjRef::new(share, pcore)).is_err() {
            // Not in the root share and cannot be put there: stop it now.
            if obj::obj_get_name(ObjRef::new(root, pcore)).is_err() {
                let _ = obj::pcore_halt(ObjRef::new(share, pcore));
                self.stats.ended[5] += 1;
                return;
            }
        }
        self.unpool(pcore);
        self.track(pcore, None, what);
    }

    fn track(&mut self, pcore: u64, child: Option<Child>, what: What) {
        self.stats.started[what as usize] += 1;
        let started = Started { pcore, child, halt_at: self.steps + HALT_AFTER, halted: false };
        if self.started.len() == STARTED_MAX {
            self.let_go(started);
        } else {
            self.started.push(started);
        }
    }

    /// Looks at what it started: collects what ended, halts what ran too long.
    pub fn poll_started(&mut self) {
        let root = self.root;
        let mut i = 0;
        while i < self.started.len() {
            let s = &mut self.started[i];
            match obj::pcore_status(ObjRef::new(root, s.pcore)) {
                Ok(Status::Running) => {
                    if !s.halted && self.steps >= s.halt_at {
                        let _ = obj::pcore_halt(ObjRef::new(root, s.pcore));
                        s.halted = true;
                    }
                    i += 1;
                }
                status => {
                    let s = self.started.swap_remove(i);
                    let slot = match status {
                        Ok(Status::Exited(_)) => 0,
                        Ok(Status::Faulted(_)) => 1,
                        Ok(Status::Halted) => 2,
                        Ok(Status::TimedOut) => 3,
                        _ => 4,
                    };
                    self.stats.ended[slot] += 1;
                    match s.child {
                        // Ended: `join` returns at once, and frees the pcore.
                        Some(child) => {
                            child.join();
                        }
                        None => self.forget(s.pcore),
                    }
                }
            }
        }
    }

    /// Halts and lets go of something it started that still runs (or waits on a busy
    /// core): it ends at its next tick there.
    fn let_go(&mut self, s: Started) {
        let pcore = ObjRef::new(self.root, s.pcore);
        let _ = obj::pcore_halt(pcore);
        self.stats.ended[5] += 1;
        let _ = share_delobj(pcore);
    }

    /// Before the fuzzer ends: its grown segments get their sizes back, its parkers are
    /// woken and joined or let go of; it halts everything it started, waits a bounded time
    /// for it all to end, and lets go of the rest; then it sends the undo lines refused
    /// during the run.
    pub fn finish(&mut self) {
        self.restore_sizes();
        self.parkers.finish();
        for s in &mut self.started {
            let _ = obj::pcore_halt(ObjRef::new(self.root, s.pcore));
            s.halted = true;
        }
        let start = libatoll::rdtsc();
        while !self.started.is_empty() && libatoll::rdtsc() - start < DRAIN_CYCLES {
            self.poll_started();
            for _ in 0..10_000 {
                core::hint::spin_loop();
            }
            let _ = libatoll::null();
        }
        while let Some(s) = self.started.pop() {
            self.let_go(s);
        }
        // Last, once what it started has ended and its pool of objects is deleted, so
        // the memory they held here is back: at 64 MiB and 16 cores a `retype` give-back
        // at the end was refused for want of this core's frames (571 free, 576 needed).
        self.purge();
        if libatoll::pcore_current() as u64 != self.me {
            let _ = libatoll::thread::set_my_affinity(1 << (self.me % 64));
        }
        // On its own core again: an undo line gives this core's memory back (`retype`).
        if libatoll::pcore_current() as u64 == self.me {
            self.finish_undos();
        } else {
            let lines = core::mem::take(&mut self.undos);
            for line in lines {
                let call = Call::new(nr::KERNEL_COMMAND, [0; 5]);
                self.wrong(
                    &format!("`{line}` left undone: not back on its core"),
                    &call,
                    Err(Error::Busy),
                );
            }
        }
    }
}

/// Protocols `tlb protocol` takes (then `auto` gives the SKB's choice back).
const TLB_PROTOCOLS: &[&str] = &["broadcast", "unicast", "multicast", "numa-multicast"];
/// Duty percentages for `asym` (then 100 puts the core back): an eighth, half, seven
/// eighths.
const DUTIES: &[&str] = &["12.5", "50", "87.5"];
/// Tries to give back a retyped block (another two-phase operation may abort it).
const GIVE_BACK_TRIES: u32 = 20;
/// Tries [`Fuzzer::finish_undos`] gives the refused undo lines, all together.
const UNDO_TRIES: u32 = 150;
/// How often a scenario's console line is tried again while another's runs (1 ms apart).
const CONSOLE_BUSY_TRIES: u32 = 60_000;

impl Fuzzer {
    /// Sends `line` with the machine capability (not vetted: the caller composed it).
    fn console(&mut self, line: &str) -> (Call, SysResult) {
        let m = self.machine.unwrap_or(0);
        let mut call = Call::new(nr::KERNEL_COMMAND, [self.root, m, 0, 0, 0]);
        call.text = text::Text::of(line);
        call.a[3] = call.text.len as u64;
        call.trusted = true;
        self.stats.console_lines += 1;
        // The kernel runs one program's console line at a time, machine-wide: `Busy`
        // while another fuzzer's runs (a bench, a speed measurement: seconds at most).
        let mut result = self.make(call);
        for _ in 0..CONSOLE_BUSY_TRIES {
            if result != Err(Error::Busy) {
                break;
            }
            let _ = libatoll::thread::sleep_us(1000);
            result = self.make(call);
        }
        if result == Err(Error::TimedOut) {
            self.stats.console_timeouts += 1;
        }
        (call, result)
    }

    /// Sends `line`, which the console must accept.
    fn console_ok(&mut self, line: &str) {
        let (call, result) = self.console(line);
        // A core that did not answer in time is an answer (`TimedOut`), not a refusal.
        if result.is_err() && result != Err(Error::TimedOut) {
            self.wrong("an ordinary console line was refused", &call, result);
        }
    }

    /// Console lines the kernel accepts that change the machine, with hostile values, each
    /// undone before the scenario ends: a TLB protocol forced, then `auto`; a core slowed,
    /// then back to 100 %; a block of memory retyped to another core and back; a short
    /// `bench`; and the reports (`sched`, `mem`, `monitor`, ...). A change that cannot be
    /// undone is a wrong answer.
    fn accepted_lines(&mut self) {
        let other =
            (self.cores > 1).then(|| (self.me + 1 + self.rng.below(self.cores - 1)) % self.cores);
        let group = self.rng.below(6);
        let name = ["tlb", "asym", "retype", "bench", "reports", "reports"][group as usize];
        if !crate::with(name) {
            return;
        }
        match group {
            0 => {
                let p = self.rng.pick(TLB_PROTOCOLS);
                self.console_ok(&format!("tlb protocol {p}"));
                self.console_ok("tlb protocol auto");
            }
            1 => {
                let core = self.rng.below(self.cores);
                let duty = self.rng.pick(DUTIES);
                // A second core, never the first (a core named twice is refused).
                let other = (self.cores > 1)
                    .then(|| (core + 1 + self.rng.below(self.cores - 1)) % self.cores);
                let line = match other {
                    Some(o) if self.rng.one_in(2) => format!("asym {core}:{duty}/{o}:50"),
                    _ => format!("asym {core}:{duty}"),
                };
                // May be refused under load (a speed measurement timed out): either way
                // every listed core goes back to full speed.
                let _ = self.console(&line);
                let back = match other {
                    Some(o) => format!("asym {core}:100/{o}:100"),
                    None => format!("asym {core}:100"),
                };
                self.undo(&back);
            }
            2 => {
                if let Some(o) = other {
                    self.retype_there_and_back(o);
                }
            }
            3 if (2..=BENCH_CORES_MAX).contains(&self.cores) => {
                let experiment = self.rng.pick(BENCH_FUZZED);
                let count = 1 + self.rng.below(2);
                // A time limit or a busy core may refuse it: nothing to undo.
                let _ = self.console(&format!("bench {experiment} {count}"));
            }
            _ => {
                let line = self.rng.pick(&["sched", "mem", "monitor", "skb", "uptime", "tlb"]);
                self.console_ok(line);
            }
        }
    }

    /// Sends `line` until the console accepts it (a few tries); else keeps it for
    /// [`Fuzzer::finish_undos`], when the run ends.
    fn undo(&mut self, line: &str) {
        for _ in 0..GIVE_BACK_TRIES {
            let (_, result) = self.console(line);
            if result.is_ok() {
                return;
            }
            if self.steps >= self.trace {
                libatoll::println!("sysfuzz: `{line}` refused, again");
            }
            let _ = libatoll::thread::sleep_us(1000);
        }
        self.undos.push(String::from(line));
    }

    /// Sends the undo lines refused during the run until the console takes each, at most
    /// [`UNDO_TRIES`] times 200 ms apart in all: at 16 vCPUs on 2 host CPUs every speed
    /// measurement `asym` makes can time out while 16 fuzzers run, and succeed once they
    /// end. A line still refused then is a wrong answer: the machine stays changed.
    pub fn finish_undos(&mut self) {
        let mut tries = 0;
        while let Some(line) = self.undos.first().cloned() {
            let (call, result) = self.console(&line);
            tries += 1;
            if result.is_ok() {
                self.undos.remove(0);
            } else if tries >= UNDO_TRIES {
                self.wrong("a console change could not be undone", &call, result);
                self.undos.remove(0);
            } else {
                let _ = libatoll::thread::sleep_us(200_000);
            }
        }
    }

    /// `retype 1 ME` run on core `other` (the fuzzer moves there for the line: a console
    /// line gives this core's memory), then `retype 1 OTHER` here: a block goes over and
    /// comes back, so every core's frames balance.
    fn retype_there_and_back(&mut self, other: u64) {
        let me = self.me;
        let moved = libatoll::thread::set_my_affinity(1 << (other % 64)).is_ok()
            && libatoll::pcore_current() as u64 == other;
        let given = moved && self.console(&format!("retype 1 {me}")).1.is_ok();
        let back = come_back(me);
        if !given {
            return;
        }
        if back.is_err() || libatoll::pcore_current() as u64 != me {
            let call = Call::new(nr::THREAD_SET_AFFINITY, [0, 0, 1 << (me % 64), 0, 0]);
            self.wrong("could not come back to its core", &call, back.map(|_| 0));
            return;
        }
        self.undo(&format!("retype 1 {other}"));
    }
}

/// Tries for this long (1 ms apart) to come back to a core another fuzzer's `pcore_run`
/// context holds (`Busy`: a dedicated core, Corey §4.4); that context ends when its
/// fuzzer halts it.
const COME_BACK_TRIES: u32 = 30_000;

/// Moves the calling thread back to core `me`, waiting out `Busy` (see
/// [`COME_BACK_TRIES`]). In `smp4` a fuzzer that had moved away for a `retype` line once
/// found its core dedicated to another fuzzer's context, and counted the refusal wrong.
fn come_back(me: u64) -> Result<(), Error> {
    let mut result = libatoll::thread::set_my_affinity(1 << (me % 64));
    for _ in 0..COME_BACK_TRIES {
        if result != Err(Error::Busy) {
            break;
        }
        let _ = libatoll::thread::sleep_us(1000);
        result = libatoll::thread::set_my_affinity(1 << (me % 64));
    }
    result
}

/// A `cfork` child's life: a burst of random calls (`Mode::Child`: no pcores, so nothing
/// it starts), then an end its seed picks: returning a code (`cfork`'s entry `exit`s
/// with it), a raw `exit` with a random code, or a page fault.
fn child_main(seed: u64) -> i32 {
    let Ok(mut f) = Fuzzer::new(seed, Mode::Child, 0, u64::MAX) else {
        return 125;
    };
    for _ in 0..64 + seed % 448 {
        f.step();
    }
    match (seed >> 16) % 3 {
        0 => (seed >> 24) as u8 as i32,
        1 => {
            let _ = libatoll::syscall3(nr::EXIT, f.rng.next(), 0, 0);
            124
        }
        _ => {
            // SAFETY: deliberately not: the point is the page fault that ends the child.
            unsafe { core::ptr::write_volatile(0x10 as *mut u64, 1) };
            123
        }
    }
}
