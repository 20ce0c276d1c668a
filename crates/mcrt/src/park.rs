//! How idle processors sleep without missing work (McRT §2.5: the host adaptor parks an
//! idle processor). A processor about to sleep announces itself, then looks for work once
//! more, then sleeps on the epoch word it read while announcing; whoever adds work (or
//! makes a predicate true) then looks for sleepers and, if any, moves the epoch on and
//! wakes them. The two sides form Dekker's pattern, so at least one sees the other: either
//! the sleeper's second look finds the work, or the waker sees the sleeper and its epoch
//! change makes the sleep return at once. The loom model below checks it.

use crate::atomics::{fence, AtomicU32, Ordering};

/// The parking state of one runtime.
pub(crate) struct Parking {
    /// Moved on by every wake; sleepers sleep while it holds the value they read.
    epoch: AtomicU32,
    /// Processors between announcing a sleep and leaving it.
    sleepers: AtomicU32,
    /// Processors awake and looking for work: while one is, new work needs no wake-up
    /// (it will be found), and a spinner that finds work wakes one sleeper in turn, so
    /// a burst of work wakes processors one after another, not all at once (Go's
    /// scheduler does the same with its spinning threads).
    spinning: AtomicU32,
}

impl Parking {
    pub(crate) fn new() -> Parking {
        Parking {
            epoch: AtomicU32::new(0),
            sleepers: AtomicU32::new(0),
            spinning: AtomicU32::new(0),
        }
    }

    /// A processor starts looking for work, if fewer than `most` already are (a few
    /// spinners find new work as soon as many would; more only contend for the queues'
    /// locks, and where the host has fewer CPUs than processors they take CPU from the
    /// processors working, or hold up a lock whose holder the host has descheduled).
    /// False: the processor should sleep instead.
    pub(crate) fn start_spinning(&self, most: u32) -> bool {
        let mut now = self.spinning.load(Ordering::Relaxed);
        while now < most {
            match self.spinning.compare_exchange(now, now + 1, Ordering::SeqCst, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(seen) => now = seen,
            }
        }
        false
    }

    /// It stops looking: it found work (then it calls [`Parking::must_wake`] for the rest),
    /// or it is about to sleep (then it announces itself and looks once more).
    pub(crate) fn stop_spinning(&self) {
        self.spinning.fetch_sub(1, Ordering::SeqCst);
    }

    /// A processor is about to sleep: it counts itself, and gets the epoch to sleep on.
    /// It must look for work once more before it sleeps.
    pub(crate) fn announce(&self) -> u32 {
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        // Our count before our second look for work (the fence pairs with `must_wake`'s;
        // the model fails without it: the count alone does not order the look).
        fence(Ordering::SeqCst);
        self.epoch.load(Ordering::SeqCst)
    }

    /// The processor is awake again (or did not sleep after all).
    pub(crate) fn retract(&self) {
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
    }

    /// After adding work: true (and the epoch moved on) if a processor may be asleep and
    /// none is awake looking, so one must be woken ([`Parking::wake`]).
    pub(crate) fn must_wake(&self) -> bool {
        // Our store (a queued thread, a released lock) before our read of `sleepers`.
        fence(Ordering::SeqCst);
        if self.sleepers.load(Ordering::Relaxed) == 0 || self.spinning.load(Ordering::Relaxed) > 0 {
            return false;
        }
        self.epoch.fetch_add(1, Ordering::SeqCst);
        true
    }

    /// Moves the epoch on unconditionally (the runtime stops: every sleeper must wake).
    pub(crate) fn move_on(&self) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
    }

    /// Sleeps on the host while the epoch is still `epoch`, at most `timeout_us`.
    pub(crate) fn sleep(&self, host: &dyn crate::Host, epoch: u32, timeout_us: u64) {
        #[cfg(not(loom))]
        host.wait(&self.epoch, epoch, timeout_us);
        #[cfg(loom)]
        let _ = (host, epoch, timeout_us); // loom builds only run the models
    }

    /// Wakes one processor sleeping on the host (after [`Parking::must_wake`]: one unit of
    /// new work needs one processor; waking all would make every sleeper look, and on a
    /// host with fewer CPUs than processors each look takes CPU from the one working), or
    /// all of them (`all`: the runtime stops).
    pub(crate) fn wake(&self, host: &dyn crate::Host, all: bool) {
        #[cfg(not(loom))]
        host.wake(&self.epoch, if all { u32::MAX } else { 1 });
        #[cfg(loom)]
        let _ = (host, all);
    }

    #[cfg(all(test, loom))]
    fn epoch_now(&self) -> u32 {
        self.epoch.load(Ordering::SeqCst)
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::atomics::AtomicUsize;
    use loom::sync::Arc;

    // The processor looks for the work with loads: with `swap` loom 0.7.2 produced
    // executions where a store before a thread's join was lost (a store, two swaps and a
    // load after the join all reading 0), which C11 coherence forbids.

    /// A waker queues one unit of work and wakes; a processor parks. The processor never
    /// goes to sleep (epoch unchanged at the end, so the futex wait would not return)
    /// while the work it missed sits queued.
    #[test]
    fn no_processor_sleeps_through_new_work() {
        loom::model(|| {
            let park = Arc::new(Parking::new());
            let work = Arc::new(AtomicUsize::new(0));
            let (p2, w2) = (park.clone(), work.clone());
            let waker = loom::thread::spawn(move || {
                w2.store(1, Ordering::Relaxed);
                p2.must_wake();
            });
            let epoch = park.announce();
            let found = work.load(Ordering::Relaxed) == 1;
            let slept = !found && park.epoch_now() == epoch;
            waker.join().unwrap();
            if slept {
                // The futex wait returns when the epoch moves; it must have.
                assert_ne!(park.epoch_now(), epoch, "slept through queued work");
            }
            park.retract();
        });
    }

    /// As above, for a processor that was spinning when the work came: the waker may
    /// skip the wake-up (a spinner will find the work), so the spinner, on its way to
    /// sleep, must find the work itself.
    #[test]
    fn a_spinner_going_to_sleep_finds_work_a_waker_left_to_it() {
        loom::model(|| {
            let park = Arc::new(Parking::new());
            assert!(park.start_spinning(1));
            let work = Arc::new(AtomicUsize::new(0));
            let (p2, w2) = (park.clone(), work.clone());
            let waker = loom::thread::spawn(move || {
                w2.store(1, Ordering::Relaxed);
                p2.must_wake();
            });
            let mut found = work.load(Ordering::Relaxed) == 1;
            let mut slept = false;
            park.stop_spinning();
            if !found {
                let epoch = park.announce();
                found = work.load(Ordering::Relaxed) == 1;
                slept = !found && park.epoch_now() == epoch;
                waker.join().unwrap();
                if slept {
                    assert_ne!(park.epoch_now(), epoch, "slept through queued work");
                }
                park.retract();
            } else {
                waker.join().unwrap();
            }
            let _ = slept;
        });
    }
}
