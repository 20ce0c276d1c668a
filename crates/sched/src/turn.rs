//! The scheduler's choice for the thread it is about to switch in: run it, end it (its
//! program was stopped while it was queued, parked or on its way here), or move it (its
//! affinity changed and excludes this core). The kernel's loop does what this says, with
//! the switch mechanics (tables, FPU state, the jump to user mode) its own.

use crate::load::LoadTable;
use crate::policy::Policy;
use crate::thread::Thread;

/// What to do with the thread at the front of the run queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    /// Switch to it.
    Run,
    /// End it: its program is stopping.
    End,
    /// Its affinity excludes this core, but no other core takes it: back to the end of
    /// this core's queue.
    Stay,
    /// Its affinity excludes this core: ship it to this core.
    Move(usize),
}

/// The choice for thread `t` on core `me`: a stopped program's thread ends; a thread
/// whose affinity excludes `me` goes where `policy` places it among its allowed cores by
/// this core's replica `table` (AMPS §2.3.2, as a new thread would be placed), or, with
/// none there (its cores became dedicated since), to the first of the `online` cores it
/// allows, where it shares the core with the context as a thread pinned there does,
/// rather than waiting here for ever. `online` is only asked in that last case.
pub fn choose<T: Thread, I: IntoIterator<Item = usize>>(
    t: &T,
    me: usize,
    policy: Policy,
    table: &LoadTable,
    online: impl FnOnce() -> I,
) -> Choice {
    if t.stopping() {
        return Choice::End;
    }
    if t.allowed_on(me) {
        return Choice::Run;
    }
    let to = policy
        .place(table, |c| t.allowed_on(c))
        .or_else(|| online().into_iter().find(|&c| t.allowed_on(c)));
    match to {
        Some(to) if to != me => Choice::Move(to),
        _ => Choice::Stay,
    }
}
