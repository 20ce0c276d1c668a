//! Model checking of `FpuControl::Auto`'s flip (issue M15; `src/fpu.rs`, `src/context.rs`):
//! switches read the runtime's flag relaxed and pick the sharing or the saving switch; a
//! thread's first call of the setter sets the flag, then changes its words. The model
//! keeps each processor's control words in a local (the register), moves contexts
//! between processors through a locked queue (as the runtime's task queues do), and
//! follows the switches' rules: the saving switch stores the words in the suspended
//! context's frame and the resumed side of it reloads them; the resumed side of a sharing
//! switch loads the initial words if a saving switch resumed it, else nothing. It checks
//! that every context resumes with its own words, however late a processor reads the flag.
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p mcrt --release --test loom_fpu`.
#![cfg(loom)]

use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::{Arc, Mutex};

/// The initial words, and the words the setter sets (abstracted to one number).
const INITIAL: u32 = 0;
const SET: u32 = 1;

/// A suspended or running context.
struct Ctx {
    /// The words its own switch stored (`Some`: the saving switch suspended it; `None`: the
    /// sharing switch did, or it is new: a new thread's first run loads the initial words,
    /// which the model gives it as a frame).
    frame: Option<u32>,
    /// The words it must run with: its own.
    own: u32,
    /// True for the thread that calls the setter on its first run.
    calls_setter: bool,
}

struct Runtime {
    /// Whether switches keep each thread's words (`Shared::fpu_saving`).
    saving: AtomicBool,
    queue: Mutex<Vec<Ctx>>,
}

/// One processor: runs `current`, then switches `rounds` times to the first queued
/// context, queueing the one it leaves; checks each resumed context's words.
fn processor(rt: &Runtime, mut current: Ctx, rounds: usize) {
    let mut register = INITIAL;
    for _ in 0..rounds {
        // The running thread's turn: the setter flips, then changes the words.
        if current.calls_setter {
            current.calls_setter = false;
            rt.saving.store(true, Ordering::Relaxed);
            register = SET;
            current.own = SET;
        }
        assert_eq!(register, current.own, "a context runs with words not its own");
        // Switch: suspend `current` as the flag says, resume the next one.
        let saving = rt.saving.load(Ordering::Relaxed);
        current.frame = saving.then_some(register);
        let mut q = rt.queue.lock().unwrap();
        if q.is_empty() {
            continue;
        }
        let mut next = q.remove(0);
        q.push(current);
        drop(q);
        match next.frame.take() {
            Some(words) => register = words,
            None if saving => register = INITIAL,
            None => {}
        }
        current = next;
    }
    assert_eq!(register, current.own, "a context runs with words not its own");
}

#[test]
fn every_context_resumes_with_its_own_words() {
    loom::model(|| {
        let new = |calls_setter| Ctx { frame: Some(INITIAL), own: INITIAL, calls_setter };
        let rt = Arc::new(Runtime {
            saving: AtomicBool::new(false),
            queue: Mutex::new(vec![new(false), new(true), new(false)]),
        });
        let other = {
            let rt = rt.clone();
            loom::thread::spawn(move || processor(&rt, new(false), 4))
        };
        processor(&rt, new(false), 4);
        other.join().unwrap();
    });
}
