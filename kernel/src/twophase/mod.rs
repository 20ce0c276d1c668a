//! Two-phase commit between the cores' monitors (Multikernel §4.7–§4.8): an operation that
//! needs one global order on every core that holds the state it changes. The coordinator
//! sends *prepare* to every participant; each locks the objects the operation names (or
//! votes No if another operation holds one: conflicting operations are serialised, one
//! aborts and may retry) and votes; the coordinator decides (Commit only if all voted Yes),
//! sends the decision, and the operation is over when every live participant has
//! acknowledged. The protocol is `agreement::TwoPhase` (coordinator) and
//! `agreement::Participant` (the per-object locks); this module carries their messages
//! (the monitor's `TWO_PHASE` kind, handed here by the handler the boot installs) and keeps
//! each core's replicas.
//!
//! What an operation changes is an [`Operation`]:
//! - a **register**: a replicated object whose state is the number of operations applied
//!   and an order-sensitive digest of their values. Every replica of a register ends the
//!   same only if every core applied the same operations in the same order, which is what
//!   the tests check, and the `twophase` experiment measures (Figure 8);
//! - a **retype** (`crate::retype`): blocks of frames change owner in every core's replica
//!   of the frame owner table;
//! - a **revoke** (`crate::corey::revocation`): an object is taken back from every share.
//!
//! Failure: a participant found `Faulted` while votes are collected makes the operation
//! abort (a faulted core cannot vote Yes); one found faulted later is not waited for. A
//! live participant that does not answer by the deadline counts as a No, and so never
//! makes the coordinator wait forever.

mod termination;

use crate::arch::{cpu, timer};
use crate::monitor;
use crate::param::{TWO_PHASE_REMEMBERED, TWO_PHASE_TIMEOUT_US};
use crate::percpu::{self, this_core};
use crate::transport;
use agreement::{
    op_id, CoreSet, Decision, Knowledge, OpId, Participant, Termination, TwoPhase, TwoPhaseStatus,
    Vote,
};
use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU32, Ordering};
pub use termination::resolve_orphans;
use termination::{on_know, on_query};
use urpc::PAYLOAD_WORDS;

/// One register's replica on one core.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Register {
    /// Operations applied.
    pub applied: u64,
    /// Order-sensitive digest of their values.
    pub digest: u64,
}

impl Register {
    fn apply(&mut self, value: u64) {
        self.applied += 1;
        self.digest = (self.digest.rotate_left(7) ^ value).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// What a two-phase operation changes on every participant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// Applies `value` to register `register`.
    Register {
        /// Which register.
        register: u64,
        /// The value applied.
        value: u64,
    },
    /// Retype: `blocks` blocks of frames from `first` move from core `from` to core `to`
    /// (the giver has taken them off its list already).
    Retype {
        /// The first block's address (aligned to `physmem::BLOCK_SIZE`).
        first: u64,
        /// How many contiguous blocks (at most `physmem::MAX_ADOPTED_BLOCKS`).
        blocks: u64,
        /// The giving core (the coordinator).
        from: usize,
        /// The receiving core.
        to: usize,
    },
    /// Revoke: object `object` leaves every share except entry ⟨`share`, `entry`⟩
    /// (`objects::revoke`).
    Revoke {
        /// The object's id.
        object: u64,
        /// The share of the entry that stays.
        share: u64,
        /// The entry that stays (the object's id, or a descriptor's).
        entry: u64,
    },
}

/// What a participant locks for an operation: conflicting operations lock the same key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Key {
    Register(u64),
    /// A retype block, by address.
    Block(u64),
    /// Every revocation: they are serialised machine-wide, so every core's log numbers
    /// them alike (`objects::revoke`).
    Revocations,
}

impl Operation {
    /// Word 2 of a prepare: which kind.
    const REGISTER: u64 = 1;
    const RETYPE: u64 = 2;
    const REVOKE: u64 = 3;

    /// The operation as the four words a prepare carries: its kind and three more.
    fn encode(self) -> [u64; 4] {
        match self {
            Operation::Register { register, value } => [Self::REGISTER, register, value, 0],
            Operation::Retype { first, blocks, from, to } => {
                [Self::RETYPE, first, blocks, (from as u64) << 32 | to as u64]
            }
            Operation::Revoke { object, share, entry } => [Self::REVOKE, object, share, entry],
        }
    }

    /// The operation a prepare names, if it is well formed.
    fn decode(w: &[u64]) -> Option<Operation> {
        match w[0] {
            Self::REGISTER => Some(Operation::Register { register: w[1], value: w[2] }),
            Self::RETYPE => {
                let (first, blocks) = (w[1], w[2]);
                let (from, to) = ((w[3] >> 32) as usize, (w[3] & u64::from(u32::MAX)) as usize);
                let well_formed = first.is_multiple_of(physmem::BLOCK_SIZE)
                    && (1..=physmem::MAX_ADOPTED_BLOCKS as u64).contains(&blocks)
                    && from < percpu::MAX_CORES
                    && to < percpu::MAX_CORES;
                well_formed.then_some(Operation::Retype { first, blocks, from, to })
            }
            Self::REVOKE => Some(Operation::Revoke { object: w[1], share: w[2], entry: w[3] }),
            _ => None,
        }
    }

    /// The keys it locks.
    fn keys(self) -> Vec<Key> {
        match self {
            Operation::Register { register, .. } => alloc::vec![Key::Register(register)],
            Operation::Retype { first, blocks, .. } => {
                (0..blocks).map(|b| Key::Block(first + b * physmem::BLOCK_SIZE)).collect()
            }
            Operation::Revoke { .. } => alloc::vec![Key::Revocations],
        }
    }

    /// The local check a participant votes by. `prepared` are the operations this core
    /// voted Yes on and has not heard the decision of: their room is spoken for (two
    /// retypes to one receiver may both be prepared before either commits).
    fn can_apply(self, prepared: &[Operation]) -> bool {
        match self {
            Operation::Register { .. } => true,
            Operation::Retype { first, blocks, from, to } => {
                let mut pending = crate::mem::frames::RetypesPending::default();
                for &p in prepared {
                    if let Operation::Retype { blocks, to: receiver, .. } = p {
                        pending.blocks += blocks;
                        if receiver == to {
                            pending.to_same_receiver += blocks;
                        }
                    }
                }
                crate::mem::frames::can_retype(first, blocks, from, to, pending)
            }
            Operation::Revoke { .. } => REVOCATION.get().is_some_and(|h| (h.fits)()),
        }
    }
}

::protocol::messages! {
    /// Two-phase commit traffic between the monitors (Multikernel §4.7), and the
    /// termination protocol's questions when a coordinator faulted.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum TwoPhaseMessage {
        /// Lock for operation `op` (its kind and words: `Operation::encode`) among the
        /// cores in the mask `participants`, and vote.
        Prepare { op: u64, operation: [u64; 4], participants: u64 } = 24,
        /// A participant's vote on `op`.
        Vote { op: u64, yes: bool } = 25,
        /// The coordinator's decision on `op`.
        Decide { op: u64, commit: bool } = 26,
        /// A participant applied the decision on `op`.
        Ack { op: u64 } = 27,
        /// What do you know of `op`? (Its coordinator faulted.)
        Query { op: u64 } = 28,
        /// The answer to a query: an `agreement::Knowledge` code.
        Know { op: u64, knows: u64 } = 29,
    }
}

/// An operation this core coordinates, and whether its decision has been sent.
struct Coordinated {
    t: TwoPhase,
    told: bool,
}

/// This core's coordinated operations, participant locks and register replicas.
struct State {
    next_seq: u64,
    coordinating: Vec<Coordinated>,
    locks: Participant<Key>,
    /// Prepared operations, with their participants.
    prepared: Vec<(OpId, Operation, CoreSet)>,
    /// The last decisions applied here, newest last.
    decided: alloc::collections::VecDeque<(OpId, Decision)>,
    /// Prepared operations whose coordinator faulted, being terminated with the other
    /// participants, and when they were last asked.
    terminating: Vec<(Termination, u64)>,
    /// Decisions this core coordinated that found their participant's channel full: (the
    /// participant, the `DECIDE` message), sent again until there is room
    /// ([`deliver_decisions`]), so a participant behind on its messages for a while is
    /// not left holding its locks.
    undelivered: Vec<(usize, TwoPhaseMessage)>,
    registers: BTreeMap<u64, Register>,
}

static STATE: percpu::PerCoreState<State> = crate::per_core_state!(State {
    next_seq: 1,
    coordinating: Vec::new(),
    locks: Participant::new(),
    prepared: Vec::new(),
    decided: alloc::collections::VecDeque::new(),
    terminating: Vec::new(),
    undelivered: Vec::new(),
    registers: BTreeMap::new(),
});

/// Registers each core's `bench twophase` runs use ([`bench_register`]).
pub const BENCH_REGISTERS: u64 = 9;

/// Register `i` (below [`BENCH_REGISTERS`]) of core `core`'s `bench twophase`: every
/// core's replica holds them from start-up, so a run grows no replica (a register, once
/// seen, is kept for good).
pub fn bench_register(core: usize, i: u64) -> u64 {
    1 << 40 | (core as u64) << 32 | i
}

/// Sizes this core's tables at start-up (see `tlb::init_this_core`: a table that first
/// grows during a burst pins the heap's top), and makes every core's benchmark registers.
pub fn init_this_core() {
    STATE.with(|s| {
        s.coordinating.reserve(16);
        s.prepared.reserve(16);
        s.decided.reserve(TWO_PHASE_REMEMBERED);
        s.terminating.reserve(4);
        s.undelivered.reserve(16);
        for core in 0..percpu::core_count() {
            for i in 0..BENCH_REGISTERS {
                s.registers.insert(bench_register(core, i), Register::default());
            }
        }
    });
}

/// This core's replica of register `register`.
pub fn register(register: u64) -> Register {
    STATE.with(|s| s.registers.get(&register).copied().unwrap_or_default())
}

/// Operations this core holds prepared (locked) right now: 0 once every operation it took
/// part in has ended.
pub fn prepared_here() -> usize {
    STATE.with(|s| s.locks.prepared())
}

fn send(to: usize, message: TwoPhaseMessage) -> bool {
    let sent = transport::send(to, message).is_ok();
    if sent {
        transport::notify(to);
    }
    sent
}

// ---------------------------------------------------------------------------------------
// The coordinator.

/// Starts two-phase operation `operation` on every core in `participants` (this one
/// included if listed); returns its id at once.
pub fn start(participants: CoreSet, operation: Operation) -> OpId {
    let me = this_core().index;
    let now = cpu::rdtsc();
    let op = STATE.with(|s| {
        let op = op_id(me, s.next_seq);
        s.next_seq += 1;
        let t = TwoPhase::new(op, participants, now, timer::us_to_tsc(TWO_PHASE_TIMEOUT_US));
        s.coordinating.push(Coordinated { t, told: false });
        op
    });
    // Decisions still kept go first where they can (a participant holding an earlier
    // operation's locks would vote No on a conflicting one).
    deliver_decisions();
    let w = operation.encode();
    for p in participants.iter() {
        if p == me {
            let vote = on_prepare(op, operation, participants);
            let _ = coordinator_vote(op, me, vote);
        } else if !send(
            p,
            TwoPhaseMessage::Prepare { op, operation: w, participants: participants.0 },
        ) {
            // Its channel stayed full for seconds: it will not answer.
            STATE.with(|s| {
                s.coordinating.iter_mut().filter(|c| c.t.op() == op).for_each(|c| c.t.fail(p))
            });
        }
    }
    op
}

/// Advances operation `op` (declares faulted participants failed, applies deadlines,
/// sends the decision once made); its decision once it is over.
pub fn poll(op: OpId) -> Option<Decision> {
    poll_outcome(op).map(|(decision, _)| decision)
}

/// [`poll`], with the participants declared failed that never acknowledged the decision
/// (they may apply it later, or never: `obj_revoke` reports them).
pub fn poll_outcome(op: OpId) -> Option<(Decision, CoreSet)> {
    let me = this_core().index;
    let now = cpu::rdtsc();
    let (status, tell) = STATE.with(|s| {
        let c = s.coordinating.iter_mut().find(|c| c.t.op() == op)?;
        let t = &mut c.t;
        let waiting = t.stragglers();
        for c in t.participants().iter() {
            if percpu::has_faulted(c) && (waiting.contains(c) || t.decision().is_none()) {
                t.fail(c);
            }
        }
        t.tick(now);
        // The decision goes out once (channels are FIFO, so it follows the prepare).
        let tell = if t.decision().is_some() && !c.told {
            c.told = true;
            t.to_tell()
        } else {
            CoreSet::EMPTY
        };
        Some((c.t.status(), tell))
    })?;
    match status {
        TwoPhaseStatus::Preparing => None,
        TwoPhaseStatus::Decided(d) | TwoPhaseStatus::Finished { decision: d, .. }
            if !tell.is_empty() =>
        {
            for p in tell.iter() {
                if p == me {
                    on_decide(op, d);
                    let _ = coordinator_ack(op, me);
                } else {
                    tell_decision(p, TwoPhaseMessage::Decide { op, commit: d == Decision::Commit });
                }
            }
            None
        }
        TwoPhaseStatus::Decided(_) => None,
        TwoPhaseStatus::Finished { decision, failed } => {
            STATE.with(|s| s.coordinating.retain(|c| c.t.op() != op));
            Some((decision, failed))
        }
    }
}

/// Sends a decision to participant `to` if its channel has room now; otherwise keeps it
/// for [`deliver_decisions`]. (Not a blocking send: a participant that reads no messages
/// for longer than a send waits would otherwise never hear it, and hold its locks forever.)
fn tell_decision(to: usize, decide: TwoPhaseMessage) {
    // Behind any decision still kept for it: each participant hears them in order.
    let behind = STATE.with(|s| {
        let kept = s.undelivered.iter().any(|&(t, _)| t == to);
        if kept {
            s.undelivered.push((to, decide));
        }
        kept
    });
    if behind {
        return;
    }
    match transport::try_send(to, decide) {
        Ok(()) => transport::notify(to),
        Err(transport::Unsent { error: transport::SendError::Full, .. }) => {
            STATE.with(|s| s.undelivered.push((to, decide)))
        }
        Err(_) => {} // no channel to it: it takes part in nothing
    }
}

/// Sends again the decisions that found their participant's channel full, each
/// participant's in order, while its channel has room (a full one holds back only its
/// own; those to a core that faulted are dropped). The coordinator's wait, ticks in user
/// mode, the idle loop and calls waiting on a revocation run it.
pub fn deliver_decisions() {
    let mut i = 0;
    let mut full = CoreSet::EMPTY;
    loop {
        let Some((to, decide)) = STATE.with(|s| s.undelivered.get(i).copied()) else {
            return;
        };
        if full.contains(to) {
            i += 1;
            continue;
        }
        let faulted = percpu::has_faulted(to);
        let sent = !faulted && transport::try_send(to, decide).is_ok();
        if sent {
            transport::notify(to);
        }
        if faulted || sent {
            // Nothing here runs this layer again: entry `i` is still this one.
            STATE.with(|s| {
                s.undelivered.remove(i);
            });
        } else {
            full.insert(to);
            i += 1;
        }
    }
}

/// Decisions waiting for room in a participant's channel here (tests).
pub fn undelivered_here() -> usize {
    STATE.with(|s| s.undelivered.len())
}

/// Waits (serving this core's channels) until operation `op` is over; its decision. Poll,
/// then block (`transport::PollThenBlock`): votes and acknowledgements are messages. The
/// channels are read *before* the operation is looked at: a vote read after the look
/// would be in hand when the core halts, and nothing would wake it to act on it.
pub fn finish(op: OpId) -> Decision {
    let mut patience = crate::transport::PollThenBlock::new();
    loop {
        deliver_decisions();
        monitor::poll();
        if let Some(d) = poll(op) {
            return d;
        }
        patience.pause(&crate::tlb::broadcast_pending);
    }
}

/// Runs one operation to its end ([`start`], then [`finish`]).
pub fn commit(participants: CoreSet, operation: Operation) -> Decision {
    finish(start(participants, operation))
}

/// Runs an operation until it commits, backing off between aborts; the number of attempts
/// it took, or `None` if `attempts` all aborted. The wait is `agreement::retry_backoff`
/// (exponential, different on every core, so cores that keep colliding drift apart) in
/// units of how long the aborted attempt took: an operation's cost depends on the machine
/// (a 16-vCPU VM under TCG takes milliseconds), and a shorter wait cannot separate the
/// colliders.
pub fn commit_retrying(participants: CoreSet, operation: Operation, attempts: u32) -> Option<u32> {
    let me = this_core().index;
    for attempt in 0..attempts {
        let start = cpu::rdtsc();
        if commit(participants, operation) == Decision::Commit {
            return Some(attempt + 1);
        }
        let took = cpu::rdtsc() - start;
        // `retry_backoff` starts at 4096 cycles and doubles per attempt (capped).
        let wait = took.saturating_mul(agreement::retry_backoff(me, attempt) / 4096);
        let until = cpu::rdtsc() + wait.min(timer::us_to_tsc(TWO_PHASE_TIMEOUT_US));
        // A timed back-off, not a wait for a message: it spins (a halt would end only at
        // the next tick, and stretch the back-off to it).
        while cpu::rdtsc() < until {
            monitor::poll();
            cpu::pause();
        }
    }
    None
}

/// Why a `TWO_PHASE` message was refused (the monitor counts it as rejected).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MessageError {
    /// Not a message of the protocol, or a field out of range.
    Malformed,
    /// A vote or acknowledgement naming an operation this core never coordinated (not one
    /// that is over: a late message for one of those is expected, and ignored).
    UnknownOperation,
    /// The operation refused it: the sender is not a participant, or answered twice.
    Refused(agreement::ProtocolError),
}

impl From<MessageError> for monitor::protocol::Rejection {
    fn from(e: MessageError) -> Self {
        match e {
            MessageError::UnknownOperation => monitor::protocol::Rejection::UnknownOperation,
            MessageError::Malformed | MessageError::Refused(_) => {
                monitor::protocol::Rejection::Malformed
            }
        }
    }
}

/// A vote or acknowledgement for `op` that names no operation this core coordinates now:
/// one it coordinated that is over (a late message, fine) or `UnknownOperation`.
fn over_or_unknown(s: &State, op: OpId) -> Result<(), MessageError> {
    if agreement::op_started_by(op, this_core().index, s.next_seq) {
        Ok(())
    } else {
        Err(MessageError::UnknownOperation)
    }
}

fn coordinator_vote(op: OpId, from: usize, vote: Vote) -> Result<(), MessageError> {
    STATE.with(|s| match s.coordinating.iter_mut().find(|c| c.t.op() == op) {
        // A vote after an early abort is expected (WrongPhase): ignored.
        Some(c) => match c.t.vote(from, vote) {
            Ok(()) | Err(agreement::ProtocolError::WrongPhase) => Ok(()),
            Err(e) => Err(MessageError::Refused(e)),
        },
        None => over_or_unknown(s, op),
    })
}

fn coordinator_ack(op: OpId, from: usize) -> Result<(), MessageError> {
    STATE.with(|s| match s.coordinating.iter_mut().find(|c| c.t.op() == op) {
        Some(c) => c.t.ack(from).map_err(MessageError::Refused),
        None => over_or_unknown(s, op),
    })
}

// ---------------------------------------------------------------------------------------
// The participants.

/// What a revocation does on a participant: the user layer (above this one) keeps the
/// revocation logs, and installs this at boot.
pub struct RevocationHooks {
    /// Whether this core's log has room for another (its vote).
    pub fits: fn() -> bool,
    /// Records a committed revocation: object, kept share, kept entry.
    pub apply: fn(u64, u64, u64),
}

static REVOCATION: spin::Once<RevocationHooks> = spin::Once::new();

/// Installs what revocations do (once, at boot). Before it, a revocation's prepare is
/// voted No.
pub fn set_revocation_hooks(hooks: RevocationHooks) {
    REVOCATION.call_once(|| hooks);
}

/// Revocations prepared on each core (read by its system calls: while one is prepared,
/// calls wait for its decision; `objects::revoke`). Each core writes only its own.
static REVOCATIONS_PREPARED: [AtomicU32; percpu::MAX_CORES] =
    [const { AtomicU32::new(0) }; percpu::MAX_CORES];

/// Whether a revocation is prepared on this core (its decision not yet here).
pub fn revocation_prepared_here() -> bool {
    REVOCATIONS_PREPARED[this_core().index].load(Ordering::Relaxed) != 0
}

/// Prepare: lock what `operation` changes, keep it; the vote.
fn on_prepare(op: OpId, operation: Operation, participants: CoreSet) -> Vote {
    // Outside STATE: the checks read other layers' state. (This core alone prepares here,
    // one operation at a time, so `prepared` cannot change before the vote is recorded.)
    let keys = operation.keys();
    let prepared: Vec<Operation> = STATE.with(|s| s.prepared.iter().map(|p| p.1).collect());
    // A retype's giver is its coordinator: no other core took its blocks off its list.
    let own_giver = match operation {
        Operation::Retype { from, .. } => from == agreement::op_initiator(op),
        _ => true,
    };
    let can_apply = own_giver && operation.can_apply(&prepared);
    STATE.with(|s| {
        let vote = s.locks.prepare(op, &keys, can_apply);
        if vote == Vote::Yes && !s.prepared.iter().any(|p| p.0 == op) {
            s.prepared.push((op, operation, participants));
            if let Operation::Revoke { .. } = operation {
                REVOCATIONS_PREPARED[this_core().index].fetch_add(1, Ordering::Relaxed);
            }
        }
        vote
    })
}

/// The decision: apply a commit to this core's replica, release the locks.
fn on_decide(op: OpId, decision: Decision) {
    let operation = STATE.with(|s| {
        s.locks.decide(op, decision);
        let i = s.prepared.iter().position(|p| p.0 == op)?;
        let (_, operation, _) = s.prepared.swap_remove(i);
        s.terminating.retain(|(t, _)| t.op() != op);
        if s.decided.len() == TWO_PHASE_REMEMBERED {
            s.decided.pop_front();
        }
        s.decided.push_back((op, decision));
        if let Operation::Revoke { .. } = operation {
            REVOCATIONS_PREPARED[this_core().index].fetch_sub(1, Ordering::Relaxed);
        }
        if decision == Decision::Abort {
            return None;
        }
        if let Operation::Register { register, value } = operation {
            s.registers.entry(register).or_default().apply(value);
        }
        Some(operation)
    });
    // Other layers' replicas, outside STATE.
    match operation {
        Some(Operation::Retype { first, blocks, from, to }) => {
            crate::mem::frames::apply_retype(first, blocks, from, to)
        }
        Some(Operation::Revoke { object, share, entry }) => {
            if let Some(h) = REVOCATION.get() {
                (h.apply)(object, share, entry)
            }
        }
        _ => {}
    }
}

/// A two-phase message from core `from` (the monitor's handler table routes its tags
/// here): decoded, then handled; one that makes no sense is rejected, with its reason, for
/// the monitor to count.
pub fn on_message(
    from: usize,
    tag: u32,
    words: &[u64; PAYLOAD_WORDS],
) -> Result<(), monitor::protocol::Rejection> {
    use ::protocol::Protocol as _;
    // SAFETY: the monitor hands over each message it read once, as the sender's `encode`
    // wrote it (a `TwoPhaseMessage` carries no handle).
    let message = unsafe { TwoPhaseMessage::decode(tag, words) }?;
    handle(from, message).map_err(Into::into)
}

/// Handles a two-phase message from core `from`; `Err` if it makes no sense.
pub fn handle(from: usize, message: TwoPhaseMessage) -> Result<(), MessageError> {
    match message {
        TwoPhaseMessage::Prepare { op, operation, participants } => {
            let operation = Operation::decode(&operation);
            let vote = operation.map_or(Vote::No, |o| on_prepare(op, o, CoreSet(participants)));
            send(from, TwoPhaseMessage::Vote { op, yes: vote == Vote::Yes });
            operation.map(|_| ()).ok_or(MessageError::Malformed)
        }
        TwoPhaseMessage::Vote { op, yes } => {
            coordinator_vote(op, from, if yes { Vote::Yes } else { Vote::No })
        }
        TwoPhaseMessage::Decide { op, commit } => {
            on_decide(op, if commit { Decision::Commit } else { Decision::Abort });
            send(from, TwoPhaseMessage::Ack { op });
            Ok(())
        }
        TwoPhaseMessage::Ack { op } => coordinator_ack(op, from),
        TwoPhaseMessage::Query { op } => {
            on_query(from, op);
            Ok(())
        }
        TwoPhaseMessage::Know { op, knows } => match Knowledge::from_code(knows) {
            Some(knows) => {
                on_know(op, from, knows);
                Ok(())
            }
            None => Err(MessageError::Malformed),
        },
    }
}
