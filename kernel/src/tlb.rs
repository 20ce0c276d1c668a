//! TLB shootdown by message (Multikernel §4.7, §5.1): removing a mapping, or reducing its
//! rights, in a range that several cores' page tables include must invalidate their TLBs
//! (Corey §3.1). The initiator flushes its own TLB and sends an invalidation to every other
//! sharing core's monitor; each invalidates its own entries and acknowledges. That is a
//! one-phase commit (`agreement::OnePhase`): the operation is complete when every
//! participant has acknowledged, and only then are frames freed. No IPI carries a flush:
//! a participant reads the message when it polls (its idle loop, a tick, a system call's
//! step) or when the sender's notification ([`crate::transport::notify`]) wakes it.
//!
//! The four protocols of §5.1 (`skb::Protocol`) differ in how the invalidation reaches the
//! participants; the SKB picks one ([`Skb::pick_protocol`]), and `tlb protocol NAME` at the
//! console, or [`set_protocol`], overrides it:
//! - **unicast**: one message per participant on its own channel;
//! - **multicast**: one message per package to an aggregator (the package's lowest core),
//!   which forwards within its package and acknowledges once for all (`agreement::Aggregation`);
//! - **NUMA-aware multicast**: the SKB's tree: the aggregator nearest the initiator, the
//!   most distant package first. (Atoll's channels always live in the receiver's memory, so
//!   "buffers local to the aggregation node" holds for both multicasts.)
//! - **broadcast**: one shared line per initiating core ([`BroadcastLine`]) that every core
//!   checks when it polls; each participant acknowledges on its own channel.
//!
//! This layer sits below the heap (which shoots down its trimmed pages) and so below the
//! monitor: it sends and polls on the channel transport (`crate::transport`), as
//! `twophase` does above the monitor, and reads the protocol and trees from this core's
//! replica of the SKB (`crate::skb_replica`).
//!
//! A participant that has faulted is not waited for: it stopped with interrupts off and
//! never runs user code again, so its TLB can no longer be used. A live participant that
//! does not answer within [`TLB_TIMEOUT_US`] makes the shootdown fail (`Err` with the cores):
//! the caller must then keep the frames (they leak; nothing is reused while a stale entry
//! may reach it), and the console says so.

use crate::arch::{cpu, paging, timer};
use crate::param::{TLB_MOST_PAGES, TLB_PAUSE_AFTER_US, TLB_REPORT_US, TLB_TIMEOUT_US};
use crate::percpu::{self, this_core, CoreState, MAX_CORES};
use agreement::{Aggregation, CoreSet, OnePhase, OnePhaseStatus};
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use skb::Protocol;

/// What to invalidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flush {
    /// First page's virtual address (page-aligned).
    pub start: u64,
    /// Pages from `start`; 0 means the whole TLB.
    pub pages: u64,
    /// Global (kernel) entries too, which a CR3 reload keeps.
    pub global: bool,
}

impl Flush {
    /// The whole TLB (global entries too if `global`).
    pub const fn everything(global: bool) -> Flush {
        Flush { start: 0, pages: 0, global }
    }

    /// Invalidates this core's entries for it.
    fn apply(&self) {
        if self.global {
            paging::flush_everything();
        } else if self.pages == 0 || self.pages > TLB_MOST_PAGES {
            x86_64::instructions::tlb::flush_all();
        } else {
            for i in 0..self.pages {
                let va = self.start.wrapping_add(i * 4096);
                if let Ok(va) = x86_64::VirtAddr::try_new(va) {
                    x86_64::instructions::tlb::flush(va);
                }
            }
        }
        // Release: the flush happened before anyone sees the count move.
        this_core().tlb_flushes.fetch_add(1, Ordering::Release);
    }
}

// ---------------------------------------------------------------------------------------
// How messages travel.

::protocol::messages! {
    /// A shootdown's messages (Multikernel §4.7: a one-phase commit).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum TlbMessage {
        /// Invalidate `pages` pages from `start` (0 pages: all; `global`: kernel entries
        /// too) for operation `id`; aggregate for the cores in the mask `members` if not
        /// empty (§5.1 multicast).
        Invalidate { id: u64, start: u64, pages: u64, global: bool, members: u64 } = 13,
        /// The cores (masks) that invalidated for operation `id`, and those that faulted
        /// before they could.
        Ack { id: u64, acked: u64, failed: u64 } = 14,
    }
}

/// Serves this core's channels once, and the broadcasts that name it (a waiter for
/// acknowledgements polls this: two cores shooting down at once must answer each other).
pub fn poll_messages() {
    crate::transport::poll();
    poll_broadcasts();
}

// ---------------------------------------------------------------------------------------
// Which protocol.

/// 0: the SKB picks; otherwise 1 + the index in `Protocol::ALL`.
static OVERRIDE: AtomicU8 = AtomicU8::new(0);

/// Overrides the SKB's choice of protocol (`None`: the SKB picks again). For experiments
/// and tests; a replicated setting in spirit, read by initiators only.
pub fn set_protocol(protocol: Option<Protocol>) {
    let v = protocol.map_or(0, |p| 1 + Protocol::ALL.iter().position(|&q| q == p).unwrap_or(1));
    OVERRIDE.store(v as u8, Ordering::Relaxed);
}

/// The protocol set by [`set_protocol`], if any.
pub fn protocol_override() -> Option<Protocol> {
    match OVERRIDE.load(Ordering::Relaxed) {
        0 => None,
        v => Protocol::ALL.get(v as usize - 1).copied(),
    }
}

/// The protocol for a shootdown from this core to `participants`.
fn protocol_for(participants: CoreSet) -> Protocol {
    if let Some(p) = protocol_override() {
        return p;
    }
    crate::skb_replica::get()
        .map(|skb| skb.pick_protocol(this_core().index, participants.iter()))
        .unwrap_or(Protocol::Unicast)
}

// ---------------------------------------------------------------------------------------
// The broadcast line.

/// One initiating core's broadcast line: the operation it broadcasts now. The initiator
/// writes it (a sequence lock: odd while writing) only when its previous broadcast is over,
/// and every core reads it when [`BROADCASTS`] moved since it last looked.
#[repr(C, align(64))]
pub struct BroadcastLine {
    seq: AtomicU64,
    id: AtomicU64,
    start: AtomicU64,
    pages: AtomicU64,
    global: AtomicU64,
    targets: AtomicU64,
}

static LINES: [BroadcastLine; MAX_CORES] = [const {
    BroadcastLine {
        seq: AtomicU64::new(0),
        id: AtomicU64::new(0),
        start: AtomicU64::new(0),
        pages: AtomicU64::new(0),
        global: AtomicU64::new(0),
        targets: AtomicU64::new(0),
    }
}; MAX_CORES];

/// Broadcasts started, machine-wide: a poll reads this one word and looks at the lines only
/// when it moved.
static BROADCASTS: AtomicU64 = AtomicU64::new(0);

// ---------------------------------------------------------------------------------------
// Per-core state.

/// This core's shootdowns in flight and the aggregations it runs for other cores.
struct TlbState {
    next_seq: u64,
    /// Operations this core started, by id.
    ops: Vec<(u64, OnePhase)>,
    /// Multicast branches this core aggregates, by the operation's id.
    aggregations: Vec<(u64, Aggregation)>,
    /// The id of this core's broadcast still in flight (its line is busy until it ends).
    broadcasting: Option<u64>,
    /// `BROADCASTS` when this core last read the lines, and each line's `seq` then.
    broadcasts_seen: u64,
    lines_seen: [u64; MAX_CORES],
}

static STATE: percpu::PerCoreState<TlbState> = crate::per_core_state!(TlbState {
    next_seq: 1,
    ops: Vec::new(),
    aggregations: Vec::new(),
    broadcasting: None,
    broadcasts_seen: 0,
    lines_seen: [0; MAX_CORES],
});

/// Sizes this core's tables at start-up, at the bottom of its fresh heap: a table that first
/// grew during a burst would sit at the heap's top and keep the heap from ever trimming
/// below it.
pub fn init_this_core() {
    STATE.with(|s| {
        s.ops.reserve(16);
        s.aggregations.reserve(16);
    });
}

/// Makes room for one more entry in this core's tables before a `STATE.with` pushes one:
/// a push that allocated there could grow the heap, whose trim check opens `STATE` again
/// (a re-entry panic). A bigger table is allocated outside, then swapped in.
fn make_room() {
    room_in(|s| &mut s.ops);
    room_in(|s| &mut s.aggregations);
}

/// [`make_room`] for the table `table` picks out of this core's state.
fn room_in<T>(table: fn(&mut TlbState) -> &mut Vec<T>) {
    let (len, cap) = STATE.with(|s| (table(s).len(), table(s).capacity()));
    if len < cap {
        return;
    }
    let mut bigger = Vec::with_capacity(2 * len + 8);
    STATE.with(|s| {
        let t = table(s);
        if bigger.capacity() > t.len() {
            bigger.append(t);
            core::mem::swap(t, &mut bigger);
        }
    });
}

/// Counters for tests and the console.
static TIMED_OUT_SHOOTDOWNS: AtomicU64 = AtomicU64::new(0);

/// Shootdowns that timed out (machine-wide): their frames were kept, not freed.
pub fn timed_out_shootdowns() -> u64 {
    TIMED_OUT_SHOOTDOWNS.load(Ordering::Relaxed)
}

// ---------------------------------------------------------------------------------------
// The initiator.

/// A shootdown in flight (split phase: [`Shootdown::start`], then [`Shootdown::outcome`] or
/// [`Shootdown::wait`]).
#[must_use = "frames may be freed only once the shootdown is done"]
pub struct Shootdown {
    id: u64,
    /// What it invalidates (sent again, straight to the cores still waiting, when one
    /// faults: it may have been the aggregator their multicast branch went through).
    flush: Flush,
    /// Whether it was sent again so.
    resent: core::cell::Cell<bool>,
}

impl Shootdown {
    /// Flushes this core's TLB and asks every core in `cores` (a bit per core index) but
    /// this one to flush its own, by the protocol the SKB picks. Never waits.
    pub fn start(cores: u64, global: bool) -> Shootdown {
        Shootdown::start_with(CoreSet(cores), Flush::everything(global), None)
    }

    /// Flushes `flush` here and on `cores` by `protocol` (`None`: the SKB's or the
    /// override's). Cores that are not online are left out: a core that faulted never runs
    /// user code again, and one not started has no entries. Never waits.
    pub fn start_with(cores: CoreSet, flush: Flush, protocol: Option<Protocol>) -> Shootdown {
        let me = this_core().index;
        let mut participants = CoreSet::EMPTY;
        for c in cores.iter() {
            if c != me && percpu::core(c).is_some_and(|c| c.state() == CoreState::Online) {
                participants.insert(c);
            }
        }
        let protocol = protocol.unwrap_or_else(|| protocol_for(participants));
        make_room();
        let now = cpu::rdtsc();
        let timeout = timer::us_to_tsc(TLB_TIMEOUT_US);
        let (id, line_free) = STATE.with(|s| {
            let id = ((me as u64) << 48) | s.next_seq;
            s.next_seq += 1;
            s.ops.push((id, OnePhase::new(participants, now, timeout)));
            let line_free = s.broadcasting.is_none();
            if protocol == Protocol::Broadcast && line_free {
                s.broadcasting = Some(id);
            }
            (id, line_free)
        });
        let shootdown = Shootdown { id, flush, resent: core::cell::Cell::new(false) };
        if participants.is_empty() {
            flush.apply();
            return shootdown;
        }
        match protocol {
            // The line holds one operation at a time: while it is busy, unicast.
            Protocol::Broadcast if line_free => broadcast(me, id, flush, participants),
            Protocol::Broadcast | Protocol::Unicast => {
                for c in participants.iter() {
                    send_invalidate(c, id, flush, CoreSet::EMPTY);
                }
            }
            Protocol::Multicast | Protocol::NumaMulticast => {
                multicast(me, id, flush, participants, protocol)
            }
        }
        // This core's own flush after the messages are out, while the others flush theirs.
        flush.apply();
        shootdown
    }

    /// Where the operation stands now (after declaring faulted participants failed). The
    /// first time one is found faulted, the invalidation goes again straight to every core
    /// still waiting: a faulted aggregator never forwards or answers for its branch, whose
    /// cores would otherwise be waited for until the time limit. (A core that then hears
    /// it twice flushes twice; an acknowledgement for cores already counted is ignored.)
    fn status(&self) -> OnePhaseStatus {
        let now = cpu::rdtsc();
        let (status, resend) = STATE.with(|s| {
            let Some((_, op)) = s.ops.iter_mut().find(|(id, _)| *id == self.id) else {
                return (OnePhaseStatus::Complete, CoreSet::EMPTY);
            };
            let mut faulted = false;
            for c in op.waiting_for().iter() {
                if percpu::has_faulted(c) {
                    op.fail(c);
                    faulted = true;
                }
            }
            let resend =
                if faulted && !self.resent.get() { op.waiting_for() } else { CoreSet::EMPTY };
            (op.status(now), resend)
        });
        if !resend.is_empty() {
            self.resent.set(true);
            for c in resend.iter() {
                send_invalidate(c, self.id, self.flush, CoreSet::EMPTY);
            }
        }
        status
    }

    /// How it ended, or `None` while it is out (reads no messages: the caller's core must
    /// poll, as its idle loop does): `Ok` once every live participant has
    /// acknowledged, `Err` with the cores that never did (see [`Shootdown::wait`]).
    pub fn outcome(&self) -> Option<Result<(), CoreSet>> {
        match self.status() {
            OnePhaseStatus::Pending => None,
            OnePhaseStatus::Complete | OnePhaseStatus::CompleteWithFailures(_) => Some(Ok(())),
            OnePhaseStatus::TimedOut(cores) => Some(Err(cores)),
        }
    }

    /// Waits, serving this core's channels meanwhile (so two cores shooting each other
    /// down cannot deadlock), until every participant acknowledged or faulted: `Ok`; or
    /// until [`TLB_TIMEOUT_US`] passed: `Err` with the cores that never answered, and the
    /// caller must not free what they may still reach. Call it with no lock held that the
    /// other cores might be spinning on. Poll, then block (`transport::PollThenBlock`):
    /// past P the core halts until an acknowledgement's IPI. The channels are read before
    /// the status is: an acknowledgement read after it would be in hand when the core
    /// halts, and no IPI would come for it.
    pub fn wait(self) -> Result<(), CoreSet> {
        let start = cpu::rdtsc();
        let pause_after = timer::us_to_tsc(TLB_PAUSE_AFTER_US);
        let mut patience = crate::transport::PollThenBlock::new();
        let mut reported = false;
        let outcome = loop {
            poll_messages();
            match self.status() {
                OnePhaseStatus::Pending => {}
                OnePhaseStatus::Complete | OnePhaseStatus::CompleteWithFailures(_) => {
                    break Ok(());
                }
                OnePhaseStatus::TimedOut(cores) => break Err(cores),
            }
            if !reported && timer::us_since(start) > TLB_REPORT_US {
                crate::println!("tlb: still waiting for cores to flush ({:#x})", self.waiting());
                reported = true;
            }
            // No `pause` for the first microseconds, while an acknowledgement is due: under
            // TCG a `pause` leaves the translated code (QEMU ends the block to let other
            // vCPUs run), about 1k cycles added to noticing the last one (`make bench
            // ONLY=unmap CORES=2`: 14.9k -> 13.8k cycles). A longer wait pauses, for a
            // hyperthread sibling and for a hypervisor's pause-loop exits.
            if cpu::rdtsc() - start > pause_after {
                patience.pause(&broadcast_pending);
            }
        };
        if let Err(cores) = outcome {
            TIMED_OUT_SHOOTDOWNS.fetch_add(1, Ordering::Relaxed);
            crate::println!("tlb: cores {:#x} never flushed; their frames are kept", cores.0);
        }
        outcome
    }

    fn waiting(&self) -> u64 {
        STATE.with(|s| {
            s.ops.iter().find(|(id, _)| *id == self.id).map_or(0, |(_, op)| op.waiting_for().0)
        })
    }
}

impl Drop for Shootdown {
    fn drop(&mut self) {
        STATE.with(|s| {
            s.ops.retain(|(id, _)| *id != self.id);
            if s.broadcasting == Some(self.id) {
                s.broadcasting = None;
            }
        });
    }
}

/// Flushes the TLB of every core in `cores` (a bit per core index), this one included, and
/// returns once each has done so (see [`Shootdown::wait`]).
pub fn shootdown(cores: u64) -> Result<(), CoreSet> {
    Shootdown::start(cores, false).wait()
}

/// Every online core, as a shootdown's core set.
pub fn all_online() -> u64 {
    percpu::all_cores()
        .filter(|c| c.index < 64 && c.state() == CoreState::Online)
        .fold(0u64, |mask, c| mask | 1 << c.index)
}

fn send_invalidate(to: usize, id: u64, flush: Flush, members: CoreSet) {
    // A failed send (no channels yet, or the channel stayed full for seconds) leaves the
    // participant unacknowledged: the operation then times out, and the frames are kept.
    let Flush { start, pages, global } = flush;
    let message = TlbMessage::Invalidate { id, start, pages, global, members: members.0 };
    if crate::transport::send(to, message).is_ok() {
        crate::transport::notify(to);
    }
}

/// Multicast (Multikernel §5.1): one message per package to its aggregator, which gets the
/// package's other participants as `members`; this core's own package gets direct messages.
fn multicast(me: usize, id: u64, flush: Flush, participants: CoreSet, protocol: Protocol) {
    let Some((numa, plain)) = crate::skb_replica::trees() else {
        // No topology known yet (early boot): unicast.
        for c in participants.iter() {
            send_invalidate(c, id, flush, CoreSet::EMPTY);
        }
        return;
    };
    // Plain multicast: packages in ascending order, each package's lowest core aggregates
    // (`Skb::plain_multicast_tree`); NUMA-aware: the SKB's tree.
    let tree = if protocol == Protocol::Multicast { plain } else { numa };
    let mut reached = CoreSet::EMPTY;
    for branch in &tree.aggregators {
        let mut wanted = CoreSet::EMPTY;
        for c in core::iter::once(branch.core).chain(branch.members.iter().copied()) {
            if participants.contains(c) {
                wanted.insert(c);
            }
        }
        if branch.core == me {
            for c in wanted.iter() {
                send_invalidate(c, id, flush, CoreSet::EMPTY);
            }
        } else if let Some(aggregator) = wanted.iter().next() {
            // The tree's aggregator, if it takes part; else the branch's first participant.
            let aggregator = if wanted.contains(branch.core) { branch.core } else { aggregator };
            let mut members = wanted;
            members.remove(aggregator);
            send_invalidate(aggregator, id, flush, members);
        }
        reached = reached.union(wanted);
    }
    // Participants the SKB does not know (none on a machine it measured): directly.
    for c in participants.minus(reached).iter() {
        send_invalidate(c, id, flush, CoreSet::EMPTY);
    }
}

/// Broadcast: writes this core's line (a sequence lock) and notifies the participants.
fn broadcast(me: usize, id: u64, flush: Flush, participants: CoreSet) {
    let line = &LINES[me];
    let seq = line.seq.load(Ordering::Relaxed);
    line.seq.store(seq + 1, Ordering::Relaxed); // odd: being written
    core::sync::atomic::fence(Ordering::Release);
    line.id.store(id, Ordering::Relaxed);
    line.start.store(flush.start, Ordering::Relaxed);
    line.pages.store(flush.pages, Ordering::Relaxed);
    line.global.store(flush.global as u64, Ordering::Relaxed);
    line.targets.store(participants.0, Ordering::Relaxed);
    line.seq.store(seq + 2, Ordering::Release);
    BROADCASTS.fetch_add(1, Ordering::Release);
    for c in participants.iter() {
        crate::transport::notify(c);
    }
}

// ---------------------------------------------------------------------------------------
// The participants (called by the monitor).

/// Whether a broadcast may be waiting for this core (the idle loop checks before halting).
pub fn broadcast_pending() -> bool {
    let now = BROADCASTS.load(Ordering::Acquire);
    STATE.with(|s| s.broadcasts_seen != now)
}

/// Reads the broadcast lines if any moved, and carries out those that name this core; true
/// if it carried one out (work, as a message is, for the idle loop's polling). Each line's
/// sequence number is recorded as seen before its acknowledgement is sent (a send may serve
/// messages, and so come back here), so no line is carried out twice.
pub fn poll_broadcasts() -> bool {
    let now = BROADCASTS.load(Ordering::Acquire);
    let me = this_core().index;
    let moved = STATE.with(|s| core::mem::replace(&mut s.broadcasts_seen, now) != now);
    if !moved {
        return false;
    }
    let mut any = false;
    for (owner, line) in LINES.iter().enumerate().take(percpu::core_count()) {
        if owner == me {
            continue;
        }
        let Some((seq, id, flush, targets)) = read_line(line) else {
            // Being written: look again at the next poll.
            STATE.with(|s| s.broadcasts_seen = now.wrapping_sub(1));
            continue;
        };
        let fresh = STATE.with(|s| core::mem::replace(&mut s.lines_seen[owner], seq) != seq);
        if fresh && targets.contains(me) {
            flush.apply();
            ack(owner, id, CoreSet::single(me), CoreSet::EMPTY);
            any = true;
        }
    }
    any
}

/// A consistent read of a line: `None` while it is being written.
fn read_line(line: &BroadcastLine) -> Option<(u64, u64, Flush, CoreSet)> {
    let seq = line.seq.load(Ordering::Acquire);
    if seq % 2 == 1 {
        return None;
    }
    let id = line.id.load(Ordering::Relaxed);
    let flush = Flush {
        start: line.start.load(Ordering::Relaxed),
        pages: line.pages.load(Ordering::Relaxed),
        global: line.global.load(Ordering::Relaxed) != 0,
    };
    let targets = CoreSet(line.targets.load(Ordering::Relaxed));
    core::sync::atomic::fence(Ordering::Acquire);
    (line.seq.load(Ordering::Relaxed) == seq).then_some((seq, id, flush, targets))
}

/// `TLB_INVALIDATE` from `from`: invalidates here, then acknowledges, or (an aggregator,
/// when `members` is not empty) forwards to the members and acknowledges once they all have.
pub fn on_invalidate(from: usize, id: u64, flush: Flush, members: CoreSet) {
    flush.apply();
    let me = this_core().index;
    let mut members = members;
    members.remove(me);
    members.remove(from);
    if members.is_empty() {
        ack(from, id, CoreSet::single(me), CoreSet::EMPTY);
        return;
    }
    make_room();
    STATE.with(|s| s.aggregations.push((id, Aggregation::new(from, me, members))));
    for m in members.iter() {
        if percpu::core(m).is_some_and(|c| c.state() == CoreState::Online) {
            send_invalidate(m, id, flush, CoreSet::EMPTY);
        } else {
            on_member_failed(id, m);
        }
    }
}

/// A member of an aggregation will never answer: count it failed.
fn on_member_failed(id: u64, member: usize) {
    let finished = STATE.with(|s| {
        let i = s.aggregations.iter().position(|(a, _)| *a == id)?;
        s.aggregations[i].1.fail(member);
        finish_aggregation(s, i)
    });
    if let Some((source, acked, failed)) = finished {
        ack(source, id, acked, failed);
    }
}

/// Takes the aggregation at `i` out if it is finished: (source, acked, failed).
fn finish_aggregation(s: &mut TlbState, i: usize) -> Option<(usize, CoreSet, CoreSet)> {
    let (acked, failed) = s.aggregations[i].1.finished()?;
    let (_, agg) = s.aggregations.swap_remove(i);
    Some((agg.source(), acked, failed))
}

fn ack(to: usize, id: u64, acked: CoreSet, failed: CoreSet) {
    // Acknowledgements need no notification: the initiator polls while it waits.
    let _ = crate::transport::send(to, TlbMessage::Ack { id, acked: acked.0, failed: failed.0 });
}

/// `TLB_ACK` from `from`: for an aggregation this core runs, or for one of its own
/// operations. An acknowledgement for an operation already over (timed out, or dropped
/// by its initiator) is ignored; one that makes no sense is an error for the monitor to
/// count.
pub fn on_ack(from: usize, id: u64, acked: CoreSet, failed: CoreSet) -> Result<(), ()> {
    enum Then {
        Done,
        Forward(usize, CoreSet, CoreSet),
    }
    let then = STATE.with(|s| {
        if let Some(i) = s.aggregations.iter().position(|(a, _)| *a == id) {
            s.aggregations[i].1.ack(from).map_err(|_| ())?;
            return Ok(match finish_aggregation(s, i) {
                Some((source, acked, failed)) => Then::Forward(source, acked, failed),
                None => Then::Done,
            });
        }
        if let Some((_, op)) = s.ops.iter_mut().find(|(o, _)| *o == id) {
            // Cores counted already (they heard the operation twice: see `status`) are
            // not counted again.
            op.ack_many(acked.minus(op.acked())).map_err(|_| ())?;
            for f in failed.iter() {
                op.fail(f);
            }
        }
        Ok(Then::Done)
    })?;
    if let Then::Forward(source, acked, failed) = then {
        ack(source, id, acked, failed);
    }
    Ok(())
}

/// A shootdown message from core `from` (the monitor's handler table routes its tags
/// here). One that does not decode, or an acknowledgement that makes no sense, is
/// rejected, for the monitor to count.
pub fn on_message(
    from: usize,
    tag: u32,
    words: &[u64; ::protocol::PAYLOAD_WORDS],
) -> Result<(), ::protocol::Rejection> {
    use ::protocol::Protocol as _;
    // SAFETY: the monitor hands over each message it read once, as the sender's `encode`
    // wrote it (a `TlbMessage` carries no handle).
    match unsafe { TlbMessage::decode(tag, words) }? {
        TlbMessage::Invalidate { id, start, pages, global, members } => {
            on_invalidate(from, id, Flush { start, pages, global }, CoreSet(members));
            Ok(())
        }
        TlbMessage::Ack { id, acked, failed } => on_ack(from, id, CoreSet(acked), CoreSet(failed))
            .map_err(|_| ::protocol::Rejection::Malformed),
    }
}
