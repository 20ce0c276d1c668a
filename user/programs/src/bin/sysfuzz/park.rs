//! Calls that may park their caller for long (`sleep` up to 60 s, `wait` with a long
//! timeout or none), made as drawn, but not by the fuzzing thread: each goes to a thread of
//! its own (a *parker*, any core, so the scheduler may move it) and the fuzzer goes on. The
//! fuzzer wakes every parker's word at each poll and joins the parkers that ended; at its
//! end it wakes them once more and lets go of the ones still asleep. Those, and a `wait`
//! on a word a wake never reaches, end with the program: the kernel ends every thread of a
//! program when its main thread ends, and no park outlasts the program's time limit
//! (`docs/syscalls.md`, *Programs and their threads*). So the kernel's long parks are
//! fuzzed, and the fuzzer never waits for one.

use crate::call::Call;
use alloc::vec::Vec;
use libatoll::abi::{nr, SysResult};
use libatoll::thread::{Builder, Thread};
use libatoll::{syscall5, Status};

/// Parkers followed at once; past this the oldest is let go (the program's end reaps it).
pub const PARKERS_MAX: usize = 8;
/// A park shorter than this (µs) the fuzzing thread makes itself.
const SHORT_US: u64 = 1000;

/// One parker: its thread and the word it may wait on (0: a sleep).
pub struct Parker {
    thread: Thread,
    word: u64,
}

/// The parkers of one fuzzer.
#[derive(Default)]
pub struct Parkers {
    list: Vec<Parker>,
    /// Parks handed to a parker.
    pub made: u64,
    /// Parkers let go of while still parked (ended by the program's end).
    pub let_go: u64,
    /// Parks not made: no thread could be started (`NoResources`, `Busy`).
    pub no_thread: u64,
}

/// Whether `call` may park its caller longer than [`SHORT_US`]: a `sleep` or a `wait`
/// with a timeout of 0 (none) or above it. One the kernel refuses (over 60 s) returns at
/// once, and is made in place.
pub fn parks(call: &Call) -> bool {
    let long = |us: u64| us > SHORT_US && us <= 60_000_000;
    match call.number {
        nr::SLEEP => long(call.a[0]),
        nr::WAIT => call.a[2] == 0 || long(call.a[2]),
        _ => false,
    }
}

impl Parkers {
    /// Makes the parking `call` in a parker; the result the fuzzer sees is `Ok(0)` (the
    /// parker's own result is its exit code, not checked: no answer of these is wrong).
    pub fn park(&mut self, call: &Call) -> SysResult {
        if self.list.len() == PARKERS_MAX {
            let oldest = self.list.remove(0);
            self.let_go(oldest);
        }
        let (n, a) = (call.number, call.a);
        let started = Builder::new().spawn(move || {
            let _ = syscall5(n, a[0], a[1], a[2], a[3], a[4]);
            0
        });
        match started {
            Ok(thread) => {
                let word = if n == nr::WAIT { a[0] } else { 0 };
                self.list.push(Parker { thread, word });
                self.made += 1;
                Ok(0)
            }
            Err(e) => {
                self.no_thread += 1;
                Err(e)
            }
        }
    }

    /// Wakes every parker's word and joins those that ended.
    pub fn poll(&mut self) {
        let mut i = 0;
        while i < self.list.len() {
            let p = &self.list[i];
            if p.word != 0 {
                let _ = syscall5(nr::WAKE, p.word, u64::MAX, 0, 0, 0);
            }
            if p.thread.status() == Status::Running {
                i += 1;
            } else {
                let p = self.list.swap_remove(i);
                p.thread.join();
            }
        }
    }

    /// Before the fuzzer ends: wakes the waiters, gives them a moment, joins what ended
    /// and lets go of the rest (sleeps, waits a wake missed).
    pub fn finish(&mut self) {
        for _ in 0..4 {
            self.poll();
            libatoll::thread::yield_now();
        }
        while let Some(p) = self.list.pop() {
            self.let_go(p);
        }
    }

    /// Lets a parker go without joining it: it ends when its park does or with the
    /// program (its stack and thread slot are the program's until then).
    fn let_go(&mut self, p: Parker) {
        if p.word != 0 {
            let _ = syscall5(nr::WAKE, p.word, u64::MAX, 0, 0, 0);
        }
        self.let_go += 1;
        // Not joined: the handle (`p`) goes, the thread lives on until its park or the
        // program ends (its stack stays mapped until then).
        let _ = p;
    }
}
