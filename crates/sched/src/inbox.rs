//! One core's scheduler inbox and what reading it decides, as a pure state machine.
//!
//! Other cores reach a core's scheduler only by message (a multikernel shares no run
//! queue). The kernel's monitor hands each scheduler message to the core's [`Inbox`],
//! which only files it; the scheduler reads the inbox between threads and at every tick
//! ([`read`]): arrivals join the run queue, wake-ups and joins release parked threads,
//! load reports update the replica (AMPS §2.2, one [`LoadTable`] per core), and pulls are
//! answered (AMPS §2.3: the source alone decides which thread goes, so two pullers never
//! both win). Reading changes only the state it is given ([`Here`]) and returns what the
//! kernel must then do ([`Action`]): ship threads, send messages, pass load reports on,
//! end threads. No I/O, no clock. The messages themselves are declared in [`crate::message`].

use alloc::vec::Vec;

use crate::load::LoadTable;
use crate::message::{Message, Note, Report};
use crate::policy::Policy;
use crate::runqueue::RunQueue;
use crate::thread::Thread;
use crate::wait::{WaitKey, WaitQueues, SLEEP_SPACE};

/// A message the inbox refuses: from or about a core beyond its `N`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refused;

/// Messages filed for one core's scheduler, for cores `0..N`. Load reports keep the latest
/// per reporting core (by sequence number) and pulls the latest per sender, in place: no
/// allocation, as they come and go while no thread exists.
#[derive(Debug)]
pub struct Inbox<T, const N: usize> {
    arrivals: Vec<T>,
    wakes: Vec<(WaitKey, u64, u64)>,
    joined: Vec<u64>,
    /// Per reporting core: its latest report, and whether to pass it on.
    loads: [Option<(Report, bool)>; N],
    /// Per sender: its pull, and whether it may take the running thread.
    pulls: [Option<bool>; N],
    reap: bool,
    any: bool,
}

impl<T, const N: usize> Default for Inbox<T, N> {
    fn default() -> Self {
        Inbox::new()
    }
}

impl<T, const N: usize> Inbox<T, N> {
    /// An empty inbox.
    pub const fn new() -> Inbox<T, N> {
        Inbox {
            arrivals: Vec::new(),
            wakes: Vec::new(),
            joined: Vec::new(),
            loads: [None; N],
            pulls: [None; N],
            reap: false,
            any: false,
        }
    }

    /// Files message `m` from core `from`. A load report replaces the one filed for its
    /// core only if its sequence number is higher; a pull replaces its sender's.
    pub fn file(&mut self, from: usize, m: Message<T>) -> Result<(), Refused> {
        if from >= N {
            return Err(Refused);
        }
        self.any = true;
        match m {
            Message::Arrive { thread } => self.arrivals.push(thread),
            Message::Wake { space, addr, n, cores } => self.wakes.push(((space, addr), n, cores)),
            Message::Joined { uid } => self.joined.push(uid),
            Message::Load { length, seq, online, origin, forward } => {
                let report = Report { origin, length, seq, online };
                let slot = self.loads.get_mut(report.origin).ok_or(Refused)?;
                if slot.is_none_or(|(held, _)| held.seq < report.seq) {
                    *slot = Some((report, forward));
                }
            }
            Message::Pull { may_take_running } => self.pulls[from] = Some(may_take_running),
            Message::NoneToGive {} => {}
            Message::Reap {} => self.reap = true,
        }
        Ok(())
    }

    /// True when nothing was filed since it was last taken.
    pub fn is_empty(&self) -> bool {
        !self.any
    }

    /// How many threads arrived.
    pub fn arrivals(&self) -> usize {
        self.arrivals.len()
    }

    /// Takes what is filed, leaving the inbox empty.
    pub fn take(&mut self) -> Inbox<T, N> {
        core::mem::take(self)
    }
}

/// The part of one core's scheduler state that reading its inbox sees and changes.
pub struct Here<'a, T> {
    /// This core.
    pub me: usize,
    /// The placement policy in force.
    pub policy: Policy,
    /// Whether this core is dedicated to one context (it takes no threads).
    pub dedicated: bool,
    /// Its run queue.
    pub queue: &'a mut RunQueue<T>,
    /// Its parked threads.
    pub waits: &'a mut WaitQueues<T>,
    /// Its replica of every core's load.
    pub table: &'a mut LoadTable,
    /// The puller its running thread is promised to (it goes at the next tick).
    pub ship_running: &'a mut Option<usize>,
}

/// What the kernel does after reading an inbox, in the order given.
#[derive(Debug)]
pub enum Action<T: Thread> {
    /// No thread of this address space waits here any more (its waiter bit for this core
    /// can go).
    NoWaiters(T::Space),
    /// Pass this load report on within this core's package.
    Forward(Report),
    /// Send the thread to the core (a migration).
    Ship(T, usize),
    /// Send the message to the core.
    Send(usize, Note),
    /// End the thread: its program was stopped.
    End(T),
}

/// Reads `inbox` on the core `here` describes: files arrivals, releases woken threads,
/// applies load reports and answers pulls, changing only `here`; returns what is left to
/// do, in the order the kernel has always done it (pass reports on, ship, send, end).
pub fn read<T: Thread, const N: usize>(
    here: &mut Here<'_, T>,
    inbox: Inbox<T, N>,
) -> Vec<Action<T>> {
    let mut out = Vec::new();
    let stopped = if inbox.reap { take_stopped(here.queue, here.waits) } else { Vec::new() };
    let ships = arrive(here, inbox.arrivals);
    let mut sends = Vec::new();
    for ((space, addr), n, cores) in inbox.wakes {
        let (woken, emptied) = wake(here.queue, here.waits, (space, addr), n);
        out.extend(emptied.map(Action::NoWaiters));
        sends.extend(pass_on(here.me, (space, addr), n, woken, cores));
    }
    for uid in inbox.joined {
        let (_, emptied) = wake(here.queue, here.waits, (crate::wait::JOIN_SPACE, uid), u64::MAX);
        out.extend(emptied.map(Action::NoWaiters));
    }
    for (report, forward) in inbox.loads.into_iter().flatten() {
        if here.table.report(report.origin, report.length, report.seq) {
            here.table.set_online(report.origin, report.online);
        }
        if forward {
            out.push(Action::Forward(report));
        }
    }
    let mut ships: Vec<Action<T>> = ships.into_iter().map(|(t, to)| Action::Ship(t, to)).collect();
    for (puller, pull) in inbox.pulls.into_iter().enumerate() {
        match pull.and_then(|may_take_running| answer_pull(here, puller, may_take_running)) {
            Some(Action::Send(to, m)) => sends.push((to, m)),
            Some(action) => ships.push(action),
            None => {}
        }
    }
    out.extend(ships);
    out.extend(sends.into_iter().map(|(to, m)| Action::Send(to, m)));
    out.extend(stopped.into_iter().map(Action::End));
    out
}

/// Arrivals join the run queue, except that a dedicated core passes each on to where the
/// policy places it now, if anywhere else (it was sent before the sender heard that this
/// core takes no threads). Returns the threads to pass on, with their cores.
fn arrive<T: Thread>(here: &mut Here<'_, T>, arrivals: Vec<T>) -> Vec<(T, usize)> {
    let me = here.me;
    let mut ships = Vec::new();
    for mut t in arrivals {
        t.arrived(me);
        if here.dedicated {
            if let Some(to) = here.policy.place(here.table, |c| c != me && t.allowed_on(c)) {
                ships.push((t, to));
                continue;
            }
        }
        here.queue.push(t);
    }
    ships
}

/// Answers `puller`'s pull (AMPS §2.3): the most recently queued ready thread it may run
/// goes; failing that, if the puller may take the running thread and it may move while it
/// runs (AMPS §3.3: the NUMA policy decides), it is promised to the puller (it goes at the
/// next tick; `None` returned); otherwise the answer is [`Message::NoneToGive`].
fn answer_pull<T: Thread>(
    here: &mut Here<'_, T>,
    puller: usize,
    may_take_running: bool,
) -> Option<Action<T>> {
    if let Some(t) = here.queue.take_ready(|t| t.allowed_on(puller)) {
        return Some(Action::Ship(t, puller));
    }
    let me = here.me;
    let running_may_go = here
        .queue
        .running()
        .is_some_and(|t| t.allowed_on(puller) && t.may_move_running(me, puller));
    if may_take_running && here.ship_running.is_none() && running_may_go {
        *here.ship_running = Some(puller);
        return None;
    }
    Some(Action::Send(puller, Message::NoneToGive {}))
}

/// Wakes up to `n` threads parked on `key` (first parked first; each returns "woken" from
/// its call) onto the run queue; returns how many, and the address space if none of its
/// waiters is left here (join and sleep keys are no address space).
pub fn wake<T: Thread>(
    queue: &mut RunQueue<T>,
    waits: &mut WaitQueues<T>,
    key: WaitKey,
    n: u64,
) -> (u64, Option<T::Space>) {
    let woken = waits.wake(key, usize::try_from(n).unwrap_or(usize::MAX));
    let count = woken.len() as u64;
    let space = woken.first().map(T::space);
    for mut t in woken {
        t.woken();
        queue.push(t);
    }
    (count, space.filter(|_| key.0 < SLEEP_SPACE && !waits.has_space(key.0)))
}

/// The rest of a wake of `n` on `key` that woke `woken` here, passed on to the lowest
/// core other than `me` in `cores`, with `me` taken out of them; `None` when all are woken
/// or no core is left.
pub fn pass_on(me: usize, key: WaitKey, n: u64, woken: u64, cores: u64) -> Option<(usize, Note)> {
    if woken >= n {
        return None;
    }
    let rest = cores & !1u64.checked_shl(me as u32).unwrap_or(0);
    let next = (rest != 0).then(|| rest.trailing_zeros() as usize)?;
    Some((next, Message::Wake { space: key.0, addr: key.1, n: n - woken, cores: rest }))
}

/// Takes out every thread parked or queued (not running) whose program was stopped.
pub fn take_stopped<T: Thread>(queue: &mut RunQueue<T>, waits: &mut WaitQueues<T>) -> Vec<T> {
    let mut stopped = Vec::new();
    while let Some(t) = waits.remove(|t| t.stopping()) {
        stopped.push(t);
    }
    while let Some(t) = queue.remove(|t| t.stopping()) {
        stopped.push(t);
    }
    stopped
}
