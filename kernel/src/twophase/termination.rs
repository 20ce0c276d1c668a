//! A faulted coordinator (`agreement::Termination`): its participants that voted Yes ask
//! each other what they know instead of holding their locks forever.

use super::{deliver_decisions, on_decide, send, TwoPhaseMessage, STATE};
use crate::arch::{cpu, timer};
use crate::param::TWO_PHASE_ASK_AGAIN_US;
use crate::percpu::{self, this_core};
use crate::transport;
use agreement::{CoreSet, Decision, Knowledge, OpId, Termination};
use alloc::vec::Vec;

/// A participant asks what this core knows of `op`. It answers only once it has read
/// everything the operation's (faulted) coordinator sent it, so no decision on its way
/// can arrive after its answer; until then the asker asks again.
pub(super) fn on_query(from: usize, op: OpId) {
    let coordinator = agreement::op_initiator(op);
    if transport::has_messages_from(coordinator) {
        return;
    }
    let knows = STATE.with(|s| {
        if s.prepared.iter().any(|p| p.0 == op) {
            Knowledge::Uncertain
        } else {
            match s.decided.iter().rev().find(|d| d.0 == op) {
                Some((_, Decision::Commit)) => Knowledge::Committed,
                Some((_, Decision::Abort)) => Knowledge::Aborted,
                None => Knowledge::NeverPrepared,
            }
        }
    });
    send(from, TwoPhaseMessage::Know { op, knows: knows.code() });
}

/// Core `from` answered a query of this core's.
pub(super) fn on_know(op: OpId, from: usize, knows: Knowledge) {
    let decision = STATE.with(|s| {
        let (t, _) = s.terminating.iter_mut().find(|(t, _)| t.op() == op)?;
        t.answer(from, knows)
    });
    if let Some(d) = decision {
        on_decide(op, d);
    }
}

/// Sends again the decisions this core coordinated that found no room
/// ([`deliver_decisions`]); then terminates the operations this core holds prepared whose
/// coordinator faulted: asks the other participants (again, every [`TWO_PHASE_ASK_AGAIN_US`], those
/// that have not answered), and applies the outcome once there is one. The idle loop and
/// calls waiting for a revocation's decision run it.
pub fn resolve_orphans() {
    deliver_decisions();
    let me = this_core().index;
    let now = cpu::rdtsc();
    let again = timer::us_to_tsc(TWO_PHASE_ASK_AGAIN_US);
    let mut ask: Vec<(OpId, CoreSet)> = Vec::new();
    let mut decided: Vec<(OpId, Decision)> = Vec::new();
    let orphans: Vec<(OpId, CoreSet)> = STATE.with(|s| {
        s.prepared
            .iter()
            .filter(|p| percpu::has_faulted(agreement::op_initiator(p.0)))
            .map(|p| (p.0, p.2))
            .collect()
    });
    for (op, participants) in orphans {
        let coordinator = agreement::op_initiator(op);
        // Whatever the coordinator sent is read first: its decision may be among it.
        if transport::has_messages_from(coordinator) {
            continue;
        }
        STATE.with(|s| {
            if !s.prepared.iter().any(|p| p.0 == op) {
                return; // decided meanwhile
            }
            if !s.terminating.iter().any(|(t, _)| t.op() == op) {
                s.terminating.push((Termination::new(op, participants, me, coordinator), 0));
            }
            let Some((t, asked)) = s.terminating.iter_mut().find(|(t, _)| t.op() == op) else {
                return;
            };
            for c in t.waiting().iter() {
                if percpu::has_faulted(c) {
                    t.fail(c);
                }
            }
            match t.decision() {
                Some(d) => decided.push((op, d)),
                None if now.saturating_sub(*asked) >= again => {
                    *asked = now;
                    ask.push((op, t.waiting()));
                }
                None => {}
            }
        });
    }
    for (op, d) in decided {
        on_decide(op, d);
    }
    for (op, cores) in ask {
        for c in cores.iter() {
            send(c, TwoPhaseMessage::Query { op });
        }
    }
}
