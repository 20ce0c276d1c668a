//! One step of a fuzzer: now and then a scenario (`launch.rs`), otherwise one call with
//! raw or typed arguments (`draw.rs`), made safe by `guard`, made (a long park by a parker,
//! `park.rs`), its result counted, judged and kept.

use crate::call::{block_words, composed_arg, Block, Call, Kind};
use crate::fuzzer::{Fuzzer, Mode, IN_SET, PAST, ZONE_BUDGET};
use crate::guard;
use crate::park::parks;
use crate::started::What;
use libatoll::abi::{ar_kind, nr, Error, SysResult};
use libatoll::obj;
use libatoll::{println, syscall5};

/// One step in this many is a scenario (`launch.rs`) rather than one call.
const SCENARIO_ODDS: u64 = 256;
/// A call that takes longer than this (cycles; about a second) is reported.
const SLOW_CALL_CYCLES: u64 = 1 << 31;
/// Steps between polls of what it started.
const POLL_EVERY: u64 = 64;
/// Steps between resets of the zone (its mappings keep segments and slot ranges the pool
/// let go of, and their pages, until then).
const ZONE_RESET_EVERY: u64 = 4096;
/// Steps between purges of the pool and the shares it added to its set.
const PURGE_EVERY: u64 = 32768;
impl Fuzzer {
    /// One step: a scenario now and then, otherwise one call.
    pub fn step(&mut self) {
        self.steps += 1;
        if self.zone_pages > ZONE_BUDGET {
            self.purge();
        }
        if self.steps.is_multiple_of(POLL_EVERY) {
            self.restore_sizes();
            if self.uses_parkers() {
                self.parkers.poll();
            }
        }
        if self.mode != Mode::Child {
            if self.steps.is_multiple_of(POLL_EVERY) {
                self.poll_started();
                self.release_pcores();
                // A call may have moved it (`thread_set_affinity` of ⟨0, 0⟩): back to its
                // core, where its pcore ids and `--others` make sense.
                if libatoll::pcore_current() as u64 != self.me {
                    let _ = libatoll::thread::set_my_affinity(1 << (self.me % 64));
                }
            }
            if self.steps.is_multiple_of(ZONE_RESET_EVERY) {
                self.zone_reset();
            }
            if self.steps.is_multiple_of(PURGE_EVERY) {
                self.purge();
            }
            if self.rng.one_in(SCENARIO_ODDS) {
                self.scenario();
                return;
            }
        }
        let number = self.pick_number();
        let call = if self.rng.one_in(4) { self.raw_call(number) } else { self.typed_call(number) };
        let _ = self.make(call);
    }

    /// A call number: mostly one of the calls, sometimes one past the last or any word.
    fn pick_number(&mut self) -> u64 {
        loop {
            let number = match self.rng.below(16) {
                0 => self.rng.next(),
                1 => nr::LAST + 1 + self.rng.below(24),
                _ => self.rng.below(nr::LAST + 1),
            };
            // `exit` ends the caller: only a child's burst makes it (see `launch.rs`).
            if number != nr::EXIT || self.mode == Mode::Child {
                return number;
            }
        }
    }

    /// Makes `call` after `guard` made it safe; keeps what it made; returns the result.
    pub fn make(&mut self, mut call: Call) -> SysResult {
        guard::check(self, &mut call);
        if let Some(pos) = composed_arg(call.number) {
            call.a[pos] = match call.block {
                Block::Raw(p) => p,
                Block::Composed if block_words(call.number) > 0 => call.words.as_ptr() as u64,
                Block::Composed => call.text.bytes.as_ptr() as u64,
            };
        }
        let traced = self.steps >= self.trace;
        if traced {
            self.print_call(&call);
        }
        if !crate::with("park") && parks(&call) {
            // `--without park`: a park made short, in place (to bisect, not a guard).
            match call.number {
                nr::SLEEP => call.a[0] = 1000,
                _ => call.a[2] = 1000,
            }
        }
        let a = call.a;
        let start = libatoll::rdtsc();
        let result = if self.uses_parkers() && parks(&call) {
            self.parkers.park(&call)
        } else {
            syscall5(call.number, a[0], a[1], a[2], a[3], a[4])
        };
        let took = libatoll::rdtsc() - start;
        if took > SLOW_CALL_CYCLES {
            // Where a slow run's time goes (the test's time budget is the fuzzer's too).
            println!(
                "sysfuzz: core {}: #{} call {} took {} M cycles: {}",
                self.me,
                self.steps,
                call.number,
                took >> 20,
                if call.number == nr::KERNEL_COMMAND { call.text.shown() } else { "" }
            );
        }
        // The kernel read the block or text during the call: keep them alive until here.
        core::hint::black_box((&call.words, &call.text));
        if traced {
            println!("sysfuzz:   -> {result:?}");
        }
        self.after(&call, result);
        result
    }

    fn print_call(&self, call: &Call) {
        let a = call.a;
        println!(
            "sysfuzz: #{} call {} ({:#x}, {:#x}, {:#x}, {:#x}, {:#x})",
            self.steps, call.number, a[0], a[1], a[2], a[3], a[4]
        );
        if call.block == Block::Composed {
            let n = block_words(call.number);
            if n > 0 {
                println!("sysfuzz:   block {:x?}", &call.words[..n]);
            } else if composed_arg(call.number).is_some() {
                println!("sysfuzz:   text {:?}", call.text.shown());
            }
        }
    }

    /// Counts the result, checks it against what the kernel must answer, and keeps what
    /// the call made.
    fn after(&mut self, call: &Call, result: SysResult) {
        let (number, a) = (call.number, call.a);
        self.stats.by_number[number.min(PAST as u64) as usize] += 1;
        if result.is_err() {
            self.stats.errors += 1;
        }
        self.oracle(call, result);
        let Ok(value) = result else {
            return;
        };
        match number {
            nr::SHARE_ALLOC => self.keep(a[0], value, Kind::Share),
            nr::SEGMENT_ALLOC | nr::SEGMENT_COPY | nr::FILE_OPEN => {
                self.keep(a[0], value, Kind::Segment)
            }
            nr::AR_ALLOC if a[1] == ar_kind::ROOT => self.keep(a[0], value, Kind::Root),
            nr::AR_ALLOC => self.keep(a[0], value, Kind::Slot),
            nr::DEVICE_ALLOC => self.keep(a[0], value, Kind::Device),
            nr::THREAD_CREATE => self.keep(call.words[0], value, Kind::Thread),
            nr::PCORE_ALLOC => {
                self.note_pcore(value, a[1]);
                self.keep(a[0], value, Kind::Pcore);
            }
            nr::SET_ADD_SHARE => {
                if self.in_sets == IN_SET {
                    let _ = obj::self_drop(self.in_set[0]);
                    self.in_set.copy_within(1.., 0);
                    self.in_sets -= 1;
                }
                self.in_set[self.in_sets] = value;
                self.in_sets += 1;
            }
            nr::SHARE_DELOBJ => self.bury(a[1]),
            // A descriptor: another id for the object, of its kind.
            nr::SHARE_DUPOBJ => {
                if let Some(kind) = self.kind_of(a[2]) {
                    self.keep(a[0], value, kind)
                }
            }
            // 0: started on another core; a status word: ran here and ended.
            nr::PROGRAM_RUN if value == 0 => self.pin(a[0], a[1], What::Program),
            nr::PROGRAM_RUN => self.stats.programs_here += 1,
            nr::PCORE_RUN => {
                let what = if call.words[5] == self.root_ar { What::Thread } else { What::Context };
                self.pin(call.words[0], call.words[1], what);
            }
            _ => {}
        }
    }

    /// The answers the kernel must give whatever the rest of the call: the machine calls
    /// without the machine device are `NotPermitted`, and nobody gets a machine device
    /// from `device_alloc`.
    fn oracle(&mut self, call: &Call, result: SysResult) {
        let a = call.a;
        let holds_machine = self.machine.is_some_and(|m| m == a[1]);
        let why = match call.number {
            nr::KERNEL_COMMAND | nr::POWEROFF
                if !holds_machine && result != Err(Error::NotPermitted) =>
            {
                "a machine call without the machine device was not refused"
            }
            nr::DEVICE_ALLOC if Some(a[1]) == self.machine_hwid && result.is_ok() => {
                "device_alloc made a machine device"
            }
            // A frame's length is checked before anything else of it.
            nr::DEVICE_SEND if result.is_ok() && !(14..=1514).contains(&a[3]) => {
                "device_send took a frame of a length outside 14..=1514"
            }
            _ => return,
        };
        self.wrong(why, call, result);
    }
}
