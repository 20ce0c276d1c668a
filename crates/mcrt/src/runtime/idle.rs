//! A logical processor (McRT §2.2): its system thread ([`processor_main`]) switches into
//! its idle loop ([`idle_main`]), which takes threads (and futures) from the queues it
//! snoops, spins a while when there are none, then parks on the runtime's `epoch` word
//! until [`super::notify`] or a timeout; it switches back when the runtime stops.

use super::{
    current, find_work, free_task_on, make_task, notify_if_parked, shared, switch_to, Pending,
    Shared, PARK_US, SPIN_ROUNDS,
};
use crate::context;
use crate::hooks::ThreadHooks;
use crate::Subsystems;
use alloc::boxed::Box;
use core::sync::atomic::Ordering;

/// A processor's idle loop: runs threads whose predicates hold, else futures, else spins,
/// then parks; returns to the system thread when the runtime stops.
fn idle_main(index: usize, rt: &Shared) {
    let p = rt.processor(index);
    let me = current();
    let mut rounds = 0u32;
    let mut spinning = false;
    // At most a quarter of the processors spin (at least one).
    let most_spinning = (rt.config.processors as u32 / 4).max(1);
    // A spinner that found work stops spinning and wakes a sleeper to look for more.
    let found = |spinning: &mut bool| {
        if core::mem::take(spinning) {
            rt.parking.stop_spinning();
            notify_if_parked(rt);
        }
    };
    // Whether this processor counts in `idle_processors` (it is looking for work).
    let mut looking = false;
    let look = |on: bool, looking: &mut bool| {
        if on != core::mem::replace(looking, on) {
            if on {
                rt.idle_processors.fetch_add(1, Ordering::Relaxed);
            } else {
                rt.idle_processors.fetch_sub(1, Ordering::Relaxed);
            }
        }
    };
    loop {
        if rt.stopping.load(Ordering::Acquire) {
            break;
        }
        if let Some(t) = find_work(rt, p) {
            look(false, &mut looking);
            found(&mut spinning);
            rounds = 0;
            switch_to(me, t, Pending::None);
            continue;
        }
        look(true, &mut looking);
        if rt.futures.run_one(index) {
            // A thread may wait for its value (`read` yields until it is done): a parked
            // processor looks again.
            notify_if_parked(rt);
            found(&mut spinning);
            rounds = 0;
            continue;
        }
        if !spinning && rounds == 0 {
            spinning = rt.parking.start_spinning(most_spinning);
        }
        rounds += 1;
        if spinning && rounds < SPIN_ROUNDS {
            core::hint::spin_loop();
            continue;
        }
        rounds = 0;
        if core::mem::take(&mut spinning) {
            rt.parking.stop_spinning();
        }
        look(false, &mut looking);
        let epoch = rt.parking.announce();
        // Looked again after announcing the sleep: a notify from now on wakes us.
        let work = find_work(rt, p);
        if let Some(t) = work {
            rt.parking.retract();
            switch_to(me, t, Pending::None);
            continue;
        }
        if !rt.stopping.load(Ordering::Acquire) && !rt.futures.any_queued() {
            rt.stats.parks.fetch_add(1, Ordering::Relaxed);
            rt.parking.sleep(rt.host(), epoch, PARK_US);
        }
        rt.parking.retract();
    }
    look(false, &mut looking);
    if spinning {
        rt.parking.stop_spinning();
    }
    // Back to the system thread's stack (`processor_main`).
    // `host_sp` was saved by the switch into this loop, on a stack still live. (The
    // system thread's own context always keeps its FPU words: a saving switch.)
    context::switch_threads(&me.sp, p.host_sp.get(), true);
    unreachable!("mcrt: a stopped idle loop was resumed");
}

/// The body of processor `index`'s system thread: switch into the idle loop, come back
/// when the runtime stops.
pub(super) fn processor_main(rt: &Shared, index: usize) {
    let p = rt.processor(index);
    // The idle loop finds the runtime through its own header, as every thread does.
    let body: Box<dyn FnOnce() + Send> = Box::new(move || idle_main(index, shared()));
    let Some(idle) = make_task(rt, None, 0, body, true) else {
        rt.stopping.store(true, Ordering::Release);
        return;
    };
    p.idle.set(idle);
    let inside = crate::EnterRuntime::new();
    // The idle loop's stack was just prepared; it switches back here when it stops.
    let idle_header = context::header(idle);
    idle_header.processor.set(index);
    context::switch_threads(&p.host_sp, idle_header.sp.get(), true);
    drop(inside);
    // The idle loop has stopped; its header is ours. (Futures it ran allocated on its
    // heap: the blocks go to the pool as a thread's do.)
    Subsystems::release(idle_header);
    free_task_on(idle, None);
    // The processor has stopped; nothing else touches its cache.
    for stack in p.stacks.take() {
        context::give_to_pool(stack);
    }
}
