//! The engine: N cores stepping through time, each with the kernel's per-core scheduler
//! state made of `crates/sched`'s own pieces ([`RunQueue`], [`WaitQueues`], [`LoadTable`],
//! [`Inbox`] and [`sched::inbox::read`], [`Policy::place`], [`Policy::pull_from`],
//! [`sched::choose`]). What the kernel does around them (`kernel/src/sched/`) is mirrored
//! here, step for step:
//! - **the tick** (`run::on_tick`): read the inbox, report the load, balance every
//!   `BALANCE_EVERY_TICKS`, count the slice, ship the running thread if a puller was
//!   promised it, preempt when the slice is over;
//! - **load reports** (`balance::report_load`): on a change (at most once a tick, except
//!   to or from empty) and every `REPORT_EVERY_TICKS`, to every other core by message;
//! - **pulls** (`balance::balance`): on the tick and whenever a core goes idle, at most one
//!   per `PULL_PATIENCE_TICKS`; a pull that may take the running thread kicks its source
//!   (AMPS §3: "an IPI such that it immediately switches thread T out");
//! - **messages** wake a halted core (`transport::try_send`); a busy core reads them at
//!   its next tick, kick or switch;
//! - **the idle loop** (`idle::idle_work`): read the inbox, run the next thread, or balance
//!   and halt.
//!
//! Time advances in fixed steps of `Params::step_cycles`; each core runs its thread at its
//! speed. A throttled core's 50 % duty (on for half of every millisecond) is modelled as
//! a continuous half speed: its periods are a tenth of a tick.

use record::median;
use sched::message::Message;
use sched::wait::WaitKey;
use sched::{
    inbox, Action, Choice, Here, Inbox, LoadTable, Policy, RunQueue, ScaledLoad, Thread, WaitQueues,
};

use crate::machine::{Machine, Params};
use crate::thread::{SimThread, SPACE};
use crate::workload::{Workload, SERVER_BUDGET};

/// Most cores the inbox has slots for.
pub const MAX_CORES: usize = 64;

/// The barrier's futex word (`workloads::amps::Barrier::generation`).
const BARRIER: WaitKey = (SPACE, 0x1000);

/// What one run gave.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// The experiment's metric: makespan (cycles) for `amps_jobs`, `amps_omp` and
    /// `amps_numa`, median first completion (cycles) for `amps_fairness`, transactions
    /// per Gcycle for `amps_server`; NaN for a run that did not finish.
    pub metric: f64,
    /// When the last worker ended (cycles from the start).
    pub makespan: u64,
    /// Threads shipped by pulls (not counting creations): AMPS Table 3's migrations.
    pub migrations: u64,
    /// Pulls sent.
    pub pulls: u64,
    /// Load reports sent.
    pub reports: u64,
    /// Whether every worker ended within the time limit.
    pub finished: bool,
}

/// Where a thread goes when it leaves its core (`kernel/src/sched/running.rs`'s `After`,
/// and its end).
enum After {
    Ready,
    Park(WaitKey),
    Ship(usize),
    End,
}

/// Something travelling between cores.
enum Flight {
    Message(Message<SimThread>),
    /// The wake-up IPI that makes a busy core read its messages now.
    Kick,
}

struct InFlight {
    at: u64,
    from: usize,
    to: usize,
    what: Flight,
}

/// One core's scheduler (`kernel/src/sched/mod.rs`'s `Scheduler`) and its clock.
struct Core {
    speed: u64,
    queue: RunQueue<SimThread>,
    waits: WaitQueues<SimThread>,
    table: LoadTable,
    inbox: Inbox<SimThread, MAX_CORES>,
    reported: Option<(u64, u64)>,
    seq: u64,
    pull_until: u64,
    ship_running: Option<usize>,
    ticks: u64,
    next_tick: u64,
    asleep: bool,
    /// The running thread makes no progress before this (a switch's cost).
    busy_until: u64,
}

struct Engine<'a> {
    params: &'a Params,
    policy: Policy,
    workload: Workload,
    now: u64,
    cores: Vec<Core>,
    flights: Vec<InFlight>,
    /// Cores with a thread parked on the barrier (the kernel's per-address-space waiter
    /// mask, `corey::range_waiters`).
    waiters: u64,
    workers: usize,
    created: usize,
    segment: u64,
    barrier_arrived: usize,
    fair_started: u64,
    ended: usize,
    last_end: u64,
    firsts: Vec<u64>,
    transactions: u64,
    migrations: u64,
    pulls: u64,
    reports: u64,
}

/// Tick phase variants [`run`] knows (`phase` is taken modulo this).
pub const PHASES: u64 = 16;

/// Runs `workload` on `machine` under `policy` with the kernel tunables `params`.
/// `phase` shifts each core's timer against the others' and against the start (the
/// boots of a real run differ in that; every phase is deterministic).
pub fn run(
    machine: &Machine,
    policy: Policy,
    workload: Workload,
    params: &Params,
    phase: u64,
) -> Outcome {
    let n = machine.cores().clamp(1, MAX_CORES);
    let tick = params.tick_cycles().max(1);
    let powers = machine.powers();
    let cores = (0..n)
        .map(|i| Core {
            speed: machine.speeds[i],
            queue: RunQueue::new(params.slice_ticks),
            waits: WaitQueues::new(),
            table: LoadTable::new(&powers[..n], &[]),
            inbox: Inbox::new(),
            reported: None,
            seq: 0,
            pull_until: 0,
            ship_running: None,
            ticks: 0,
            // Spread over the tick, differently for each phase.
            next_tick: tick / PHASES * ((5 * i as u64 + 3 * (phase % PHASES) + 1) % PHASES) + 1,
            asleep: true,
            busy_until: 0,
        })
        .collect();
    let workers = workload.threads(n);
    let mut e = Engine {
        params,
        policy,
        workload,
        now: 0,
        cores,
        flights: Vec::new(),
        waiters: 0,
        workers,
        created: 0,
        segment: workload.segment_cycles(n, params.unit_cycles) * 1000,
        barrier_arrived: 0,
        fair_started: workers as u64,
        ended: 0,
        last_end: 0,
        firsts: vec![0; workers],
        transactions: 0,
        migrations: 0,
        pulls: 0,
        reports: 0,
    };
    e.start();
    let limit =
        400 * workload.segment_cycles(n, params.unit_cycles) * workers as u64 + 4 * SERVER_BUDGET;
    // A guard, not a model: a run whose messages pile up (pulls answering pulls with no
    // patience) stops, unfinished, rather than run for ever.
    while e.ended < e.workers && e.now < limit && e.flights.len() < 100_000 {
        e.step();
    }
    e.outcome()
}

impl Engine<'_> {
    /// The main thread starts on core 0 and creates the workers one by one.
    fn start(&mut self) {
        let main = SimThread {
            id: usize::MAX,
            main: true,
            left: self.params.create_cycles.max(1) * 1000,
            step: 0,
            after_barrier: false,
            first_done: false,
        };
        self.cores[0].queue.push(main);
        self.cores[0].table.set_length(0, 1);
        self.core_loop(0);
    }

    fn outcome(&self) -> Outcome {
        let finished = self.ended >= self.workers;
        let metric = match self.workload {
            // An unfinished run has no metric.
            _ if !finished => f64::NAN,
            Workload::Fairness => {
                median(&mut self.firsts.clone()).map_or(f64::INFINITY, |m| m as f64)
            }
            Workload::Server { .. } => self.transactions as f64 * 1e9 / SERVER_BUDGET.max(1) as f64,
            _ => self.last_end as f64,
        };
        Outcome {
            metric,
            makespan: self.last_end,
            migrations: self.migrations,
            pulls: self.pulls,
            reports: self.reports,
            finished,
        }
    }

    /// One time step: threads run, then what arrived is delivered and due ticks fire.
    fn step(&mut self) {
        let start = self.now;
        self.now += self.params.step_cycles.max(1);
        for c in 0..self.cores.len() {
            let core = &mut self.cores[c];
            if core.asleep {
                continue;
            }
            let ran = self.now.saturating_sub(start.max(core.busy_until));
            let Some(t) = core.queue.running_mut() else { continue };
            t.left = t.left.saturating_sub(ran * core.speed);
            if t.left == 0 {
                self.segment_done(c);
            }
        }
        let now = self.now;
        let (due, rest): (Vec<InFlight>, Vec<InFlight>) =
            core::mem::take(&mut self.flights).into_iter().partition(|f| f.at <= now);
        self.flights = rest;
        for f in due {
            self.deliver(f);
        }
        for c in 0..self.cores.len() {
            if self.cores[c].next_tick <= self.now {
                self.on_tick(c);
            }
        }
    }

    /// The running thread of core `c` finished its segment: what the workload's code does
    /// next (`workloads/src/amps.rs`).
    fn segment_done(&mut self, c: usize) {
        let seg = self.segment;
        let steps = self.workload.steps();
        let Some(t) = self.cores[c].queue.running_mut() else { return };
        let (main, after_barrier, id, first_done) = (t.main, t.after_barrier, t.id, t.first_done);
        if main {
            // One `thread_create` done.
            let more = self.created + 1 < self.workers;
            self.set_left(c, self.params.create_cycles.max(1) * 1000);
            self.create(c);
            if !more {
                // It joins the workers: parked until the end.
                self.leave(c, After::Park((sched::JOIN_SPACE, 0)));
            }
            return;
        }
        if after_barrier {
            t.after_barrier = false;
            if t.step >= steps {
                return self.leave(c, After::End);
            }
            t.left = seg;
            return;
        }
        match self.workload {
            Workload::Jobs => self.leave(c, After::End),
            Workload::Omp | Workload::Numa => {
                t.step += 1;
                let step = t.step;
                self.barrier_arrived += 1;
                if self.barrier_arrived < self.workers {
                    if let Some(t) = self.cores[c].queue.running_mut() {
                        t.after_barrier = true;
                    }
                    return self.leave(c, After::Park(BARRIER));
                }
                // The last to arrive wakes the others and goes on.
                self.barrier_arrived = 0;
                self.wake_barrier(c);
                if step >= steps {
                    self.leave(c, After::End);
                } else {
                    self.set_left(c, seg);
                }
            }
            Workload::Fairness => {
                if !first_done {
                    t.first_done = true;
                    self.firsts[id] = self.now;
                }
                // `while started.fetch_add(1) < 2N { job }`.
                let started = self.fair_started;
                self.fair_started += 1;
                if started < 2 * self.workers as u64 {
                    self.set_left(c, seg);
                } else {
                    self.leave(c, After::End);
                }
            }
            Workload::Server { .. } => {
                self.transactions += 1;
                if self.now < SERVER_BUDGET {
                    t.left = seg;
                } else {
                    self.leave(c, After::End);
                }
            }
        }
    }

    /// The running thread of core `c` starts a segment of `left` (thousandths of cycles).
    fn set_left(&mut self, c: usize, left: u64) {
        if let Some(t) = self.cores[c].queue.running_mut() {
            t.left = left;
        }
    }

    /// `wake(generation, MAX)` on core `c` (`kernel/src/sched/calls.rs`): the waiters
    /// here first, then the rest by message along the cores with waiters.
    fn wake_barrier(&mut self, c: usize) {
        let core = &mut self.cores[c];
        let (woken, emptied) = inbox::wake(&mut core.queue, &mut core.waits, BARRIER, u64::MAX);
        if emptied.is_some() {
            self.waiters &= !(1 << c);
        }
        if let Some((next, note)) = inbox::pass_on(c, BARRIER, u64::MAX, woken, self.waiters) {
            self.send(c, next, note.carrying(), self.params.message_cycles);
        }
        if self.params.place_woken && woken > 0 {
            self.place_ready(c);
        }
        if self.params.eager_reports && woken > 0 {
            self.report_load(c);
        }
    }

    /// `thread_create` on core `c`: the policy places the worker by `c`'s replica
    /// (`balance::place`, `balance::start_on`).
    fn create(&mut self, c: usize) {
        let t = SimThread {
            id: self.created,
            main: false,
            left: self.segment,
            step: 0,
            after_barrier: false,
            first_done: false,
        };
        self.created += 1;
        self.refresh(c);
        let core = &mut self.cores[c];
        let to = self.policy.place(&core.table, |x| t.allowed_on(x)).unwrap_or(c);
        if to == c {
            core.queue.push(t);
            core.table.set_length(c, core.queue.len() as u64);
        } else {
            let length = core.table.get(to).map_or(0, |l| l.length);
            core.table.set_length(to, length + 1);
            self.send(c, to, Message::Arrive { thread: t }, self.params.message_cycles);
        }
    }

    /// Writes one event of the trace (`Params::trace`).
    fn trace(&self, c: usize, what: &str) {
        if self.params.trace {
            let lengths: Vec<usize> = self.cores.iter().map(|k| k.queue.len()).collect();
            eprintln!("{:>7.2}M core {c}: {what} {lengths:?}", self.now as f64 / 1e6);
        }
    }

    /// The running thread of core `c` leaves it (`run::file_after`); the core goes on.
    fn leave(&mut self, c: usize, after: After) {
        if self.params.trace {
            let id = self.cores[c].queue.running().map_or(usize::MAX, |t| t.id);
            let how = match after {
                After::Ready => "preempted".to_string(),
                After::Park(_) => "parks".to_string(),
                After::Ship(to) => format!("ships to {to}"),
                After::End => "ends".to_string(),
            };
            self.trace(c, &format!("thread {id} {how}"));
        }
        let core = &mut self.cores[c];
        let Some(t) = core.queue.take_running() else { return };
        core.ship_running = None;
        match after {
            After::Ready => core.queue.push(t),
            After::Park(key) => {
                core.waits.park(key, t, None);
                if key.0 == SPACE {
                    self.waiters |= 1 << c;
                }
            }
            After::Ship(to) => self.ship(c, t, to),
            After::End => {
                self.ended += 1;
                self.last_end = self.now;
            }
        }
        self.core_loop(c);
    }

    /// The scheduler loop between threads (`idle::idle_work`): the inbox and the load
    /// report, then the next thread, or a balancing pass and a halt.
    fn core_loop(&mut self, c: usize) {
        self.housekeeping(c);
        if self.run_next(c) {
            return;
        }
        self.balance(c);
        self.cores[c].asleep = true;
    }

    /// `run::run_next`: the front thread runs, unless `sched::choose` says otherwise.
    fn run_next(&mut self, c: usize) -> bool {
        let n = self.cores.len();
        loop {
            let core = &mut self.cores[c];
            let Some(t) = core.queue.switch() else { return false };
            match sched::choose(&*t, c, self.policy, &core.table, || 0..n) {
                Choice::Run => {
                    core.asleep = false;
                    core.busy_until = self.now + self.params.switch_cycles;
                    return true;
                }
                Choice::Move(to) => {
                    if let Some(t) = core.queue.take_running() {
                        self.ship(c, t, to);
                    }
                }
                Choice::Stay | Choice::End => {
                    if let Some(t) = core.queue.take_running() {
                        core.queue.push(t);
                    }
                    return false;
                }
            }
        }
    }

    /// `run::housekeeping`: read the inbox, then report the load.
    fn housekeeping(&mut self, c: usize) {
        self.read_inbox(c);
        self.report_load(c);
    }

    /// `run::read_inbox`: `sched::inbox::read` decides, the kernel carries it out.
    fn read_inbox(&mut self, c: usize) {
        if self.cores[c].inbox.is_empty() {
            return;
        }
        let filed = self.cores[c].inbox.take();
        let actions = {
            let core = &mut self.cores[c];
            let mut here = Here {
                me: c,
                policy: self.policy,
                dedicated: false,
                queue: &mut core.queue,
                waits: &mut core.waits,
                table: &mut core.table,
                ship_running: &mut core.ship_running,
            };
            inbox::read(&mut here, filed)
        };
        if self.params.place_woken {
            self.place_ready(c);
        }
        for action in actions {
            match action {
                Action::NoWaiters(_) => self.waiters &= !(1 << c),
                Action::Ship(t, to) => self.ship(c, t, to),
                Action::Send(to, note) => {
                    self.send(c, to, note.carrying(), self.params.message_cycles)
                }
                // Reports go to every core directly (one package: no aggregators), and
                // no program is stopped.
                Action::Forward(_) | Action::End(_) => {}
            }
        }
    }

    /// With `place_woken`: core `c`'s ready threads go where the policy places them, each
    /// weighed as a new thread against this core without it.
    fn place_ready(&mut self, c: usize) {
        self.refresh(c);
        let ready = self.cores[c].queue.ready().count();
        for _ in 0..ready {
            let core = &mut self.cores[c];
            let here = core.queue.len() as u64;
            core.table.set_length(c, here - 1);
            let to = self.policy.place(&core.table, |_| true);
            core.table.set_length(c, here);
            match to {
                Some(to) if to != c => {
                    let Some(t) = core.queue.take_ready(|t| t.allowed_on(to)) else { break };
                    core.table.set_length(c, here - 1);
                    self.ship(c, t, to);
                }
                _ => break,
            }
        }
    }

    /// `balance::report_load`, as the kernel has it.
    fn report_load(&mut self, c: usize) {
        let every = self.params.report_every_ticks;
        let core = &mut self.cores[c];
        let now = core.ticks;
        let length = core.queue.len() as u64;
        core.table.set_length(c, length);
        let eager = self.params.eager_reports;
        let due = match core.reported {
            None => true,
            Some((last, at)) => {
                (last != length && (eager || at != now || (last == 0) != (length == 0)))
                    || (length > 0 && now >= at + every)
            }
        };
        if !due {
            return;
        }
        core.reported = Some((length, now));
        core.seq += 1;
        let seq = core.seq;
        self.reports += 1;
        for to in (0..self.cores.len()).filter(|&to| to != c) {
            let report = Message::Load { length, seq, online: true, origin: c, forward: false };
            self.send(c, to, report, self.params.message_cycles);
        }
    }

    /// `balance::balance`: one pull, if the policy names a source and patience allows.
    fn balance(&mut self, c: usize) {
        let now = self.cores[c].ticks;
        if now < self.cores[c].pull_until {
            return;
        }
        self.refresh(c);
        let core = &mut self.cores[c];
        let Some(m) = self.policy.pull_from(&core.table, c) else { return };
        core.pull_until = now + self.params.pull_patience_ticks;
        self.pulls += 1;
        self.trace(c, &format!("pulls from {} (running: {})", m.from, m.may_take_running));
        let pull = Message::Pull { may_take_running: m.may_take_running };
        self.send(c, m.from, pull, self.params.message_cycles);
        if m.may_take_running {
            let at = self.now + self.params.message_cycles;
            self.flights.push(InFlight { at, from: c, to: m.from, what: Flight::Kick });
        }
    }

    /// With `oracle_table`, core `c`'s replica is made true before it decides.
    fn refresh(&mut self, c: usize) {
        if !self.params.oracle_table {
            return;
        }
        let lengths: Vec<u64> = self.cores.iter().map(|k| k.queue.len() as u64).collect();
        for (i, l) in lengths.into_iter().enumerate() {
            self.cores[c].table.set_length(i, l);
        }
    }

    /// `balance::ship`: thread `t` goes from `c` to `to`, arriving after the migration's
    /// cost; `c` counts it there until `to` reports.
    fn ship(&mut self, c: usize, t: SimThread, to: usize) {
        self.trace(c, &format!("thread {} goes to {to}", t.id));
        self.migrations += 1;
        let table = &mut self.cores[c].table;
        let length = table.get(to).map_or(0, |l| l.length);
        table.set_length(to, length + 1);
        self.send(c, to, Message::Arrive { thread: t }, self.params.migration_cycles);
    }

    fn send(&mut self, from: usize, to: usize, m: Message<SimThread>, latency: u64) {
        let at = self.now + latency;
        self.flights.push(InFlight { at, from, to, what: Flight::Message(m) });
    }

    /// A message or a kick reaches its core: a message is filed (a halted core wakes and
    /// runs its loop); a kick makes a busy core read its inbox now (`run::on_kick`).
    fn deliver(&mut self, f: InFlight) {
        let core = &mut self.cores[f.to];
        match f.what {
            Flight::Message(m) => {
                if self.params.answer_ends_patience
                    && matches!(m, Message::Arrive { .. } | Message::NoneToGive {})
                {
                    core.pull_until = 0;
                }
                if let Message::Pull { .. } = m {
                    if self.params.recheck_pulls && !self.pull_still_holds(f.from, f.to) {
                        self.trace(f.to, &format!("refuses core {}'s pull", f.from));
                        let none = Message::NoneToGive {};
                        self.send(f.to, f.from, none, self.params.message_cycles);
                        return;
                    }
                }
                let core = &mut self.cores[f.to];
                // Every sender is below MAX_CORES.
                let _ = core.inbox.file(f.from, m);
                if core.asleep {
                    self.core_loop(f.to);
                }
            }
            Flight::Kick => {
                if core.asleep {
                    // Its message woke it already (the two travel together); a halted
                    // core the kick finds with nothing new halts again.
                    if !core.inbox.is_empty() {
                        self.core_loop(f.to);
                    }
                } else {
                    self.housekeeping(f.to);
                    self.switch_if_due(f.to, false);
                }
            }
        }
    }

    /// With `recheck_pulls`: whether `puller`'s pull from `source` still follows AMPS's
    /// rule (`sched::policy`) by both cores' true lengths (the pull would carry the
    /// puller's).
    fn pull_still_holds(&self, puller: usize, source: usize) -> bool {
        let core = &self.cores[source];
        let (Some(s), Some(d)) = (core.table.get(source), core.table.get(puller)) else {
            return true;
        };
        let s = ScaledLoad::new(core.queue.len() as u64, s.power);
        let d = ScaledLoad::new(self.cores[puller].queue.len() as u64, d.power);
        match self.policy {
            Policy::Amps => {
                let within = !d.plus_one().cmp_load(s).is_gt();
                within && (s.exceeds_by_more_than_one(d) || d.power > s.power)
            }
            Policy::Symmetric => s.length >= d.length + 2,
        }
    }

    /// `run::on_tick` (a halted core's tick runs its idle loop instead).
    fn on_tick(&mut self, c: usize) {
        let tick = self.params.tick_cycles().max(1);
        let core = &mut self.cores[c];
        core.ticks += 1;
        core.next_tick += tick;
        if core.asleep {
            return self.core_loop(c);
        }
        self.housekeeping(c);
        if self.cores[c].ticks.is_multiple_of(self.params.balance_every_ticks.max(1)) {
            self.balance(c);
        }
        let over = self.cores[c].queue.tick();
        self.switch_if_due(c, over);
    }

    /// `run::switch_if_due`: the running thread goes to its puller, or to the back of the
    /// queue when its slice is over.
    fn switch_if_due(&mut self, c: usize, over: bool) {
        let core = &mut self.cores[c];
        let Some(t) = core.queue.running() else { return };
        if let Some(to) = core.ship_running.take() {
            if t.allowed_on(to) {
                return self.leave(c, After::Ship(to));
            }
        }
        if over {
            self.leave(c, After::Ready);
        }
    }
}
