//! Revocation (Multikernel §4.8; `objects::revoke` says how it works): each core's
//! replica of the committed revocations, how a program's share set catches up with it,
//! `obj_revoke` (a two-phase commit among the cores, whose waits take steps), and the
//! check that an object handed to a new holder was not revoked meanwhile (issue M14).

use super::{reference, resolve, Payload, ProgramObjects, Ptr};
use crate::param::REVOKE_ATTEMPTS;
use crate::percpu::{this_core, PerCoreState};
use abi::{Error, ObjectKind};
use alloc::sync::Arc;
use alloc::vec::Vec;
use objects::{Object, ObjectId, RevokeLog};

/// Each core's replica of the committed revocations (written by the two-phase commit's
/// decision on this core, read by this core's calls).
static REVOCATIONS: PerCoreState<RevokeLog<Payload>> = crate::per_core_state!(RevokeLog::new());

/// The objects each core revoked that may still be alive, each with a weak pointer, so
/// every core's log entry can hold one and let the entry go with the object. A core that
/// applies a revocation late (it was silent past the coordinator's deadline) still finds
/// it here while the object lives; finding none, it knows the object is gone, and its
/// entry is let go at the next prune (issue M14: such an entry was once kept for good,
/// and 1,024 of them made the core vote No on every revocation). Objects live in memory
/// every core reaches (Corey §4.1): this hands a pointer over, it is no replica. Each
/// core's list is written by that core and read by the others at their commit.
static REVOKED: [spin::Mutex<Vec<Revoked>>; crate::percpu::MAX_CORES] =
    [const { spin::Mutex::new(Vec::new()) }; crate::percpu::MAX_CORES];

/// A revoked object: its id and a weak pointer to it.
type Revoked = (ObjectId, alloc::sync::Weak<Object<Payload>>);

/// Drops this core's [`REVOKED`] records of objects that are gone.
fn prune_revoked() {
    let mut list = REVOKED[this_core().index].lock();
    list.retain(|(_, weak)| weak.strong_count() > 0);
    if list.is_empty() {
        *list = Vec::new(); // its memory too: tests count heap bytes
    }
}

/// How many revocations this core has committed.
pub fn revocations_committed() -> u64 {
    REVOCATIONS.with(|l| l.committed())
}

/// Whether this core's log has room for another revocation (its prepare's vote).
pub fn revocation_fits() -> bool {
    REVOCATIONS.with(|l| l.has_room())
}

/// Revocation-log entries this core holds (tests check they come back to a baseline).
pub fn revocation_log_len() -> usize {
    REVOCATIONS.with(|l| l.len())
}

/// A committed revocation reaches this core: the next one in its log. Its entry holds a
/// weak pointer to the object from the coordinator's list, or a dangling one when the
/// object is gone already (the entry then goes at the next prune).
pub fn apply_revocation(object: u64, share: u64, entry: u64) {
    let object = ObjectId(object);
    let weak = REVOKED
        .iter()
        .find_map(|list| list.lock().iter().find(|(id, _)| *id == object).map(|(_, w)| w.clone()))
        .unwrap_or_default();
    REVOCATIONS.with(|l| l.append(object, reference(share, entry), Some(weak)));
}

/// Whether any of `objects` was revoked by one of this core's revocations after number
/// `seen` (every core numbers them alike).
pub fn revoked_since(seen: u64, objects: &[&Ptr]) -> bool {
    REVOCATIONS.with(|l| l.since(seen).iter().any(|r| objects.iter().any(|o| o.id() == r.object)))
}

/// Lets go of the log entries whose objects are gone (the memory they kept): at each
/// vote, when the core goes idle, and when a test counts what the kernel holds.
pub fn prune_revocations() {
    REVOCATIONS.with(|l| l.prune());
    prune_revoked();
}

/// Brings `p`'s share set up to date with this core's revocations (before a call names an
/// object); the references it took out are released here. The work grows with the
/// shares the set reaches, so it takes a step (`user::step`) after each share: the core
/// answers the rest of the machine meanwhile. Revocations committed during those steps
/// are caught up with too.
pub fn catch_up(p: &mut ProgramObjects) {
    loop {
        let committed = revocations_committed();
        if p.set.is_caught_up(committed) {
            return;
        }
        // A copy: a step may append to the log.
        let revocations = REVOCATIONS.with(|l| l.since(0));
        let removed = p.set.catch_up_in_steps(&revocations, committed, &mut crate::monitor::step);
        objects::release(removed);
    }
}

/// `obj_revoke(⟨ref_share, ref_obj⟩)`: takes the object back from every share on every
/// core except that entry, by two-phase commit among the online cores. Returns the cores
/// that were declared failed before they acknowledged it (bit i: core i; 0 when every
/// core applied it): such a core applies it when it hears the decision, or never if it
/// faulted. The wait takes steps, so the caller's core answers the machine throughout.
pub fn obj_revoke(p: &mut ProgramObjects, rs: u64, ro: u64) -> Result<u64, Error> {
    obj_revoke_with(p, rs, ro, &|participants, operation| {
        commit_in_steps(participants, operation, REVOKE_ATTEMPTS)
    })
}

/// How `obj_revoke` runs its agreement: the cores declared failed before they
/// acknowledged the commit, or `None` if it never committed.
pub type Agree<'a> =
    &'a dyn Fn(agreement::CoreSet, crate::twophase::Operation) -> Option<agreement::CoreSet>;

/// [`obj_revoke`] with the agreement run by `agree` (a test makes a participant late).
pub fn obj_revoke_with(
    p: &mut ProgramObjects,
    rs: u64,
    ro: u64,
    agree: Agree<'_>,
) -> Result<u64, Error> {
    let ptr = resolve(p, rs, ro)?;
    if ptr.kind() == ObjectKind::Share {
        return Err(Error::InvalidArgument);
    }
    let me = this_core().index;
    prune_revoked();
    REVOKED[me].lock().push((ptr.id(), Arc::downgrade(&ptr)));
    let operation = crate::twophase::Operation::Revoke { object: ptr.id().0, share: rs, entry: ro };
    let participants = crate::smp::online_cores().into_iter().collect();
    let outcome = agree(participants, operation);
    if outcome.is_none() {
        // Aborted everywhere: no core applies it, so no core looks for the object here.
        let mut list = REVOKED[me].lock();
        if let Some(at) = list.iter().rposition(|(id, _)| *id == ptr.id()) {
            list.swap_remove(at);
        }
    }
    drop(ptr);
    let unreached = outcome.ok_or(Error::Busy)?;
    catch_up(p);
    Ok(unreached.0)
}

/// Runs `operation` until it commits (up to `attempts`, backing off between aborts as
/// `twophase::commit_retrying` does), taking a step at every turn of every wait: a system
/// call runs with interrupts off, and the waits may last seconds. The cores declared
/// failed before they acknowledged the commit, or `None` if every attempt aborted.
fn commit_in_steps(
    participants: agreement::CoreSet,
    operation: crate::twophase::Operation,
    attempts: u32,
) -> Option<agreement::CoreSet> {
    let me = this_core().index;
    for attempt in 0..attempts {
        let start = crate::arch::cpu::rdtsc();
        let op = crate::twophase::start(participants, operation);
        let (decision, failed) = loop {
            if let Some(outcome) = crate::twophase::poll_outcome(op) {
                break outcome;
            }
            crate::twophase::deliver_decisions();
            crate::monitor::poll();
            crate::monitor::step();
        };
        if decision == agreement::Decision::Commit {
            return Some(failed);
        }
        let took = crate::arch::cpu::rdtsc() - start;
        let wait = took.saturating_mul(agreement::retry_backoff(me, attempt) / 4096);
        let limit = crate::arch::timer::us_to_tsc(crate::param::TWO_PHASE_TIMEOUT_US);
        let until = crate::arch::cpu::rdtsc() + wait.min(limit);
        while crate::arch::cpu::rdtsc() < until {
            crate::monitor::poll();
            crate::monitor::step();
        }
    }
    None
}

/// The revocations the running call's share set was caught up with at its barrier. An
/// object the call resolves may have been revoked after that (a step in the call serves
/// two-phase messages): a call that hands objects to a new holder (`program_run`'s
/// `give`, `pcore_run`'s range and shares) checks them against the log from there.
pub static CAUGHT_UP: PerCoreState<u64> = crate::per_core_state!(0);
