//! The scheduler's inbox state machine ([`sched::inbox`]) and the loop's choice
//! ([`sched::choose`]) with plain threads: unit tests of each rule, then properties over
//! random sequences of messages: no thread is lost or duplicated (every arrival ends up
//! queued, shipped or ended exactly once), every pull is answered exactly once, a wake
//! never wakes more than it was asked to and passes the exact rest on, and a load report
//! never replaces a newer one.

use proptest::prelude::*;
use sched::{
    choose, inbox, Action, Choice, Here, Inbox, LoadTable, Message, Policy, Power, Report,
    RunQueue, Thread, WaitQueues, JOIN_SPACE,
};

/// A thread: an id, the cores it may run on (bit i: core i), whether its program is
/// stopping, whether the NUMA policy lets it move while running, its address space, and
/// what happened to it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct T {
    id: u32,
    allowed: u64,
    stopping: bool,
    movable: bool,
    space: u64,
    at: Option<usize>,
    woken: bool,
}

impl Thread for T {
    type Space = u64;
    fn allowed_on(&self, core: usize) -> bool {
        core < 64 && self.allowed & (1 << core) != 0
    }
    fn stopping(&self) -> bool {
        self.stopping
    }
    fn may_move_running(&self, _from: usize, _to: usize) -> bool {
        self.movable
    }
    fn arrived(&mut self, core: usize) {
        self.at = Some(core);
    }
    fn woken(&mut self) {
        self.woken = true;
    }
    fn space(&self) -> u64 {
        self.space
    }
}

fn t(id: u32, allowed: u64) -> T {
    T { id, allowed, stopping: false, movable: true, space: 7, at: None, woken: false }
}

const CORES: usize = 4;

/// One core's scheduler state, owned (the kernel's is in its per-core scheduler).
struct Core {
    me: usize,
    dedicated: bool,
    queue: RunQueue<T>,
    waits: WaitQueues<T>,
    table: LoadTable,
    ship_running: Option<usize>,
}

impl Core {
    fn new(me: usize) -> Core {
        Core {
            me,
            dedicated: false,
            queue: RunQueue::new(1),
            waits: WaitQueues::new(),
            table: LoadTable::new(&[Power::ONE; CORES], &[]),
            ship_running: None,
        }
    }

    fn read(&mut self, inbox: Inbox<T, CORES>) -> Vec<Action<T>> {
        let mut here = Here {
            me: self.me,
            policy: Policy::Amps,
            dedicated: self.dedicated,
            queue: &mut self.queue,
            waits: &mut self.waits,
            table: &mut self.table,
            ship_running: &mut self.ship_running,
        };
        inbox::read(&mut here, inbox)
    }

    /// Files `messages` (from, message) and reads them.
    fn deliver(&mut self, messages: Vec<(usize, Message<T>)>) -> Vec<Action<T>> {
        let mut inbox = Inbox::new();
        for (from, m) in messages {
            inbox.file(from, m).unwrap();
        }
        self.read(inbox)
    }

    /// The ids of the threads held here: running, ready, parked (the parked are taken).
    fn drain_ids(&mut self) -> Vec<u32> {
        let mut ids: Vec<u32> = self.queue.running().map(|t| t.id).into_iter().collect();
        ids.extend(self.queue.ready().map(|t| t.id));
        while let Some(t) = self.waits.remove(|_| true) {
            ids.push(t.id);
        }
        ids
    }
}

fn ready_ids(c: &Core) -> Vec<u32> {
    c.queue.ready().map(|t| t.id).collect()
}

fn wake(space: u64, addr: u64, n: u64, cores: u64) -> Message<T> {
    Message::Wake { space, addr, n, cores }
}

fn load(origin: usize, length: u64, seq: u64, forward: bool) -> Message<T> {
    Report { origin, length, seq, online: true }.message(forward).carrying()
}

// ---- unit tests ------------------------------------------------------------------------

#[test]
fn arrivals_join_the_queue_and_note_where_they_are() {
    let mut c = Core::new(1);
    let actions = c.deliver(vec![
        (0, Message::Arrive { thread: t(1, 0b10) }),
        (2, Message::Arrive { thread: t(2, 0xf) }),
    ]);
    assert!(actions.is_empty());
    assert_eq!(ready_ids(&c), [1, 2]);
    assert!(c.queue.ready().all(|t| t.at == Some(1)));
}

#[test]
fn a_dedicated_core_passes_arrivals_on_unless_only_it_is_allowed() {
    let mut c = Core::new(0);
    c.dedicated = true;
    c.table.set_length(1, 3);
    let actions = c.deliver(vec![
        (1, Message::Arrive { thread: t(1, 0b1111) }),
        (1, Message::Arrive { thread: t(2, 0b1) }),
    ]);
    // Placed on the least loaded other core it allows (2, tied with 3: the lower index).
    assert!(matches!(&actions[..], [Action::Ship(x, 2)] if x.id == 1 && x.at == Some(0)));
    assert_eq!(ready_ids(&c), [2]);
}

#[test]
fn a_pull_takes_the_most_recently_queued_thread_the_puller_may_run() {
    let mut c = Core::new(0);
    for (id, allowed) in [(1, 0b11), (2, 0b11), (3, 0b01)] {
        c.queue.push(t(id, allowed));
    }
    c.queue.switch(); // 1 runs
    let actions = c.deliver(vec![(1, Message::Pull { may_take_running: true })]);
    assert!(matches!(&actions[..], [Action::Ship(x, 1)] if x.id == 2));
    // Only 3 is ready, and it is pinned here: the running thread is promised instead.
    let actions = c.deliver(vec![(1, Message::Pull { may_take_running: true })]);
    assert!(actions.is_empty());
    assert_eq!(c.ship_running, Some(1));
    // A second puller, while the running thread is promised, gets nothing.
    let actions = c.deliver(vec![(1, Message::Pull { may_take_running: true })]);
    assert!(matches!(&actions[..], [Action::Send(1, Message::NoneToGive {})]));
}

#[test]
fn the_running_thread_goes_only_if_the_puller_and_the_numa_policy_allow() {
    for (may_take_running, movable, allowed, promised) in [
        (true, true, 0b11, true),
        (false, true, 0b11, false),
        (true, false, 0b11, false),
        (true, true, 0b01, false),
    ] {
        let mut c = Core::new(0);
        c.queue.push(T { movable, ..t(1, allowed) });
        c.queue.switch();
        let actions = c.deliver(vec![(1, Message::Pull { may_take_running })]);
        assert_eq!(c.ship_running.is_some(), promised);
        assert_eq!(actions.is_empty(), promised);
    }
}

#[test]
fn a_wake_passes_the_rest_on_to_the_lowest_other_core() {
    let mut c = Core::new(1);
    c.waits.park((7, 8), t(1, 1), None);
    let actions = c.deliver(vec![(0, wake(7, 8, 3, 0b1011))]);
    let rest = Message::Wake { space: 7, addr: 8, n: 2, cores: 0b1001 };
    assert!(matches!(&actions[..], [Action::NoWaiters(7), Action::Send(0, m)] if *m == rest));
    assert!(c.queue.ready().all(|t| t.woken));
    // All woken here: nothing goes on; no core left: nothing goes on.
    c.waits.park((7, 8), t(2, 1), None);
    c.waits.park((7, 16), t(3, 1), None);
    let actions = c.deliver(vec![(0, wake(7, 8, 1, 0b1011)), (0, wake(7, 16, 5, 0b10))]);
    assert!(matches!(&actions[..], [Action::NoWaiters(7)]), "{actions:?}");
}

#[test]
fn a_join_wakes_every_joiner_and_frees_no_address_space() {
    let mut c = Core::new(0);
    for id in 1..=3 {
        c.waits.park((JOIN_SPACE, 42), t(id, 1), None);
    }
    c.waits.park((JOIN_SPACE, 43), t(4, 1), None);
    let actions = c.deliver(vec![(2, Message::Joined { uid: 42 })]);
    assert!(actions.is_empty());
    assert_eq!(ready_ids(&c), [1, 2, 3]);
    assert_eq!(c.waits.len(), 1);
}

#[test]
fn a_reap_ends_stopped_threads_off_the_cpu_only() {
    let mut c = Core::new(0);
    let stopped = |id| T { stopping: true, ..t(id, 1) };
    c.queue.push(stopped(1));
    c.queue.switch(); // running: the loop's choice ends it, not the reap
    c.queue.push(stopped(2));
    c.queue.push(t(3, 1));
    c.waits.park((7, 8), stopped(4), None);
    let actions = c.deliver(vec![(1, Message::Reap {})]);
    let ended: Vec<u32> = actions
        .iter()
        .map(|a| match a {
            Action::End(x) => x.id,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(ended, [4, 2]);
    assert_eq!(c.drain_ids(), [1, 3]);
}

#[test]
fn load_reports_update_the_replica_and_are_passed_on_when_asked() {
    let mut c = Core::new(0);
    let mut offline = load(2, 5, 3, true);
    if let Message::Load { online, .. } = &mut offline {
        *online = false;
    }
    let actions = c.deliver(vec![(1, load(1, 4, 2, false)), (1, offline)]);
    assert!(matches!(&actions[..], [Action::Forward(r)] if r.origin == 2 && r.seq == 3));
    assert_eq!(c.table.get(1).map(|l| (l.length, l.online)), Some((4, true)));
    assert_eq!(c.table.get(2).map(|l| (l.length, l.online)), Some((5, false)));
}

#[test]
fn the_inbox_refuses_cores_beyond_its_size_and_knows_when_it_is_empty() {
    let mut inbox: Inbox<T, CORES> = Inbox::new();
    assert!(inbox.is_empty());
    assert!(inbox.file(CORES, Message::Reap {}).is_err());
    assert!(inbox.file(0, load(CORES, 1, 1, false)).is_err());
    inbox.file(0, Message::NoneToGive {}).unwrap();
    assert!(!inbox.is_empty());
    inbox.file(3, Message::Arrive { thread: t(1, 1) }).unwrap();
    let taken = inbox.take();
    assert!(inbox.is_empty() && taken.arrivals() == 1);
}

#[test]
fn the_loop_ends_a_stopped_thread_before_moving_it() {
    let table = LoadTable::new(&[Power::ONE; CORES], &[]);
    let none = Vec::<usize>::new;
    let stopped = T { stopping: true, ..t(1, 0b10) };
    assert_eq!(choose(&stopped, 0, Policy::Amps, &table, none), Choice::End);
    assert_eq!(choose(&t(1, 0b01), 0, Policy::Amps, &table, none), Choice::Run);
    assert_eq!(choose(&t(1, 0b10), 0, Policy::Amps, &table, none), Choice::Move(1));
}

#[test]
fn a_misplaced_thread_with_no_core_to_take_it_goes_to_an_online_one_or_stays() {
    let mut table = LoadTable::new(&[Power::ONE; CORES], &[]);
    table.set_online(2, false); // dedicated
    let thread = t(1, 0b100);
    assert_eq!(choose(&thread, 0, Policy::Amps, &table, || [0, 1, 2]), Choice::Move(2));
    assert_eq!(choose(&thread, 0, Policy::Amps, &table, || [0, 1]), Choice::Stay);
    // The online cores are asked only when placement finds nothing.
    let asked = core::cell::Cell::new(false);
    let online = || {
        asked.set(true);
        [3]
    };
    assert_eq!(choose(&t(1, 0b1000), 0, Policy::Symmetric, &table, online), Choice::Move(3));
    assert!(!asked.get());
}

// ---- properties ------------------------------------------------------------------------

/// A message as generated: threads are made when the message is filed.
#[derive(Clone, Debug)]
enum Gen {
    Arrive { allowed: u64, stopping: bool, movable: bool },
    Wake { addr: u64, n: u64, cores: u64 },
    Joined(u64),
    Load { origin: usize, length: u64, seq: u64, forward: bool },
    Pull(bool),
    NoneToGive,
    Reap,
}

fn gen() -> impl Strategy<Value = (usize, Gen)> {
    let g = prop_oneof![
        4 => (1u64..16, prop::bool::weighted(0.2), any::<bool>())
            .prop_map(|(allowed, stopping, movable)| Gen::Arrive { allowed, stopping, movable }),
        2 => (0u64..3, 0u64..4, 0u64..16).prop_map(|(addr, n, cores)| Gen::Wake { addr, n, cores }),
        1 => (0u64..3).prop_map(Gen::Joined),
        2 => (0..CORES, 0u64..8, 0u64..6, any::<bool>())
            .prop_map(|(origin, length, seq, forward)| Gen::Load { origin, length, seq, forward }),
        3 => any::<bool>().prop_map(Gen::Pull),
        1 => Just(Gen::NoneToGive),
        1 => Just(Gen::Reap),
    ];
    (0..CORES, g)
}

/// A core's starting threads: (allowed, stopping, parked on (addr, or a join when addr
/// is 3)), the first one running if `running`.
fn start() -> impl Strategy<Value = (Vec<(u64, bool, Option<u64>)>, bool)> {
    let thread = (1u64..16, prop::bool::weighted(0.2), prop::option::of(0u64..4));
    (prop::collection::vec(thread, 0..8), any::<bool>())
}

/// Makes the starting threads on `c`; returns the next free id.
fn populate(c: &mut Core, threads: &[(u64, bool, Option<u64>)], running: bool) -> u32 {
    let mut id = 0;
    for &(allowed, stopping, parked) in threads {
        let x = T { stopping, ..t(id, allowed) };
        match parked {
            Some(3) => c.waits.park((JOIN_SPACE, 1), x, None),
            Some(addr) => c.waits.park((7, addr), x, None),
            None => c.queue.push(x),
        }
        id += 1;
    }
    if running {
        c.queue.switch();
    }
    id
}

/// Turns generated messages into real ones, making arriving threads from `next` on.
fn realize(round: Vec<(usize, Gen)>, next: &mut u32) -> Vec<(usize, Message<T>)> {
    round
        .into_iter()
        .map(|(from, g)| {
            let m = match g {
                Gen::Arrive { allowed, stopping, movable } => {
                    *next += 1;
                    Message::Arrive { thread: T { stopping, movable, ..t(*next - 1, allowed) } }
                }
                Gen::Wake { addr, n, cores } => wake(7, addr, n, cores),
                Gen::Joined(uid) => Message::Joined { uid },
                Gen::Load { origin, length, seq, forward } => load(origin, length, seq, forward),
                Gen::Pull(may_take_running) => Message::Pull { may_take_running },
                Gen::NoneToGive => Message::NoneToGive {},
                Gen::Reap => Message::Reap {},
            };
            (from, m)
        })
        .collect()
}

type Rounds = Vec<Vec<(usize, Gen)>>;

fn rounds() -> impl Strategy<Value = Rounds> {
    prop::collection::vec(prop::collection::vec(gen(), 0..10), 1..8)
}

proptest! {
    /// Every thread, there at the start or arriving, ends up exactly once: still held
    /// here (queued, running, parked), shipped, or ended.
    #[test]
    fn no_thread_is_lost_or_duplicated(
        me in 0..CORES,
        dedicated in any::<bool>(),
        (threads, running) in start(),
        rounds in rounds(),
    ) {
        let mut c = Core::new(me);
        c.dedicated = dedicated;
        let mut next = populate(&mut c, &threads, running);
        let mut out: Vec<u32> = Vec::new();
        for round in rounds {
            // A core never pulls from itself.
            let round = round
                .into_iter()
                .map(|(from, g)| match g {
                    Gen::Pull(_) if from == me => ((me + 1) % CORES, g),
                    _ => (from, g),
                })
                .collect();
            let messages = realize(round, &mut next);
            for action in c.deliver(messages) {
                match action {
                    Action::Ship(x, to) => {
                        prop_assert_ne!(to, me);
                        prop_assert!(x.allowed_on(to));
                        out.push(x.id);
                    }
                    Action::End(x) => {
                        prop_assert!(x.stopping);
                        out.push(x.id);
                    }
                    _ => {}
                }
            }
            // A promise of the running thread lapses when it leaves (the kernel's tick).
            c.ship_running = None;
        }
        let mut all = c.drain_ids();
        all.extend(out);
        all.sort_unstable();
        prop_assert_eq!(all, (0..next).collect::<Vec<u32>>());
    }

    /// Every pull is answered by exactly one of: a ready thread shipped to the puller, the
    /// running thread promised to it, or "none to give"; no one else gets an answer.
    #[test]
    fn every_pull_is_answered_exactly_once(
        me in 0..CORES,
        (threads, running) in start(),
        rounds in rounds(),
        lapse in any::<bool>(),
    ) {
        let mut c = Core::new(me);
        let mut next = populate(&mut c, &threads, running);
        for round in rounds {
            let pullers: Vec<usize> = (0..CORES)
                .filter(|&p| round.iter().any(|(from, g)| *from == p && matches!(g, Gen::Pull(_))))
                .collect();
            let promised_before = c.ship_running;
            let actions = c.deliver(realize(round, &mut next));
            for p in 0..CORES {
                let ships = actions.iter().filter(|a| matches!(a, Action::Ship(_, to) if *to == p)).count();
                let nones = actions
                    .iter()
                    .filter(|a| matches!(a, Action::Send(to, Message::NoneToGive {}) if *to == p))
                    .count();
                let promised = usize::from(promised_before.is_none() && c.ship_running == Some(p));
                let want = usize::from(pullers.contains(&p));
                prop_assert_eq!(ships + nones + promised, want, "puller {}", p);
            }
            if lapse {
                c.ship_running = None;
            }
        }
    }

    /// A wake of `n` on a word wakes min(n, its waiters here), never more; the rest goes on
    /// to the lowest other core it names, with this core taken out of them.
    #[test]
    fn wakes_never_exceed_n_and_pass_the_exact_rest_on(
        me in 0..CORES,
        parked in prop::collection::vec(0u64..3, 0..12),
        wakes in prop::collection::vec((0u64..3, 0u64..6, 0u64..16), 1..8),
    ) {
        let mut c = Core::new(me);
        let mut waiting = [0u64; 3];
        for (id, &addr) in parked.iter().enumerate() {
            c.waits.park((7, addr), t(id as u32, 1), None);
            waiting[addr as usize] += 1;
        }
        for (addr, n, cores) in wakes {
            let before = c.queue.len() as u64;
            let actions = c.deliver(vec![(0, wake(7, addr, n, cores))]);
            let woken = c.queue.len() as u64 - before;
            prop_assert!(woken <= n);
            prop_assert_eq!(woken, n.min(waiting[addr as usize]));
            waiting[addr as usize] -= woken;
            let sent: Vec<_> = actions.iter().filter_map(|a| match a {
                Action::Send(to, m) => Some((*to, *m)),
                _ => None,
            }).collect();
            let rest = cores & !(1 << me);
            if woken < n && rest != 0 {
                let to = rest.trailing_zeros() as usize;
                let m = Message::Wake { space: 7, addr, n: n - woken, cores: rest };
                prop_assert_eq!(sent, vec![(to, m)]);
            } else {
                prop_assert!(sent.is_empty());
            }
            let freed = actions.iter().any(|a| matches!(a, Action::NoWaiters(7)));
            prop_assert_eq!(freed, woken > 0 && waiting.iter().all(|&w| w == 0));
        }
        prop_assert_eq!(c.waits.len() as u64, waiting.iter().sum::<u64>());
    }

    /// However reports are batched into inbox reads, the replica holds for each core the
    /// first report of the highest sequence number (a lower or equal one never replaces
    /// it), and only a batch's latest report of a core is passed on.
    #[test]
    fn a_load_report_never_replaces_a_newer_one(
        reports in prop::collection::vec((0..CORES, 0u64..100, 0u64..8, any::<bool>()), 0..30),
        cuts in prop::collection::vec(0usize..30, 0..5),
    ) {
        let mut c = Core::new(0);
        let mut cuts = cuts;
        cuts.push(reports.len());
        cuts.sort_unstable();
        let mut from = 0;
        for cut in cuts {
            let cut = cut.min(reports.len()).max(from);
            let batch = &reports[from..cut];
            let messages =
                batch.iter().map(|&(o, len, seq, fw)| (1, load(o, len, seq, fw))).collect();
            for action in c.deliver(messages) {
                let Action::Forward(r) = action else { continue };
                let latest = batch
                    .iter()
                    .filter(|(o, ..)| *o == r.origin)
                    .fold(None::<(u64, u64, bool)>, |best, &(_, len, seq, fw)| match best {
                        Some((_, s, _)) if s >= seq => best,
                        _ => Some((len, seq, fw)),
                    });
                prop_assert_eq!(latest, Some((r.length, r.seq, true)));
            }
            from = cut;
        }
        for core in 0..CORES {
            let first_newest = reports
                .iter()
                .filter(|(o, ..)| *o == core)
                .fold((0, 0), |(len, s), &(_, l, seq, _)| if seq > s { (l, seq) } else { (len, s) });
            let held = c.table.get(core).map(|l| (l.length, l.seq));
            prop_assert_eq!(held, Some(first_newest));
        }
    }
}
