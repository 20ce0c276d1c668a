//! Atoll's agreement protocols: how the per-core monitors keep replicated global state
//! consistent by message (Multikernel §3.3, "view state as replicated"). Each protocol is a
//! pure state machine: the monitor feeds it the messages it receives and the time (`now`, in
//! cycles, from the caller's clock), reads back what to do, and does all sending itself. No
//! I/O, no clock, no allocation in the one-phase side.
//!
//! | protocol | type | Atoll uses it for |
//! | --- | --- | --- |
//! | one-phase commit | [`OnePhase`] (initiator), [`Aggregation`] (multicast node) | unmap and rights reduction: TLB shootdown (§4.7, §5.1) |
//! | two-phase commit | [`TwoPhase`] (coordinator), [`Participant`] (every core) | capability retype and revoke, which need one global order (§4.7) |
//!
//! **One-phase commit** (§4.7: "page mapping and remapping ... is implemented by a one-phase
//! commit operation between all the monitors"). The initiator sends the operation to every
//! core that may cache the mapping; each applies it (invalidates its TLB) and acknowledges.
//! The operation is done when every participant has acknowledged. On a machine with
//! packages, the initiator sends to one aggregation node per package, which forwards to the
//! cores of its package and acknowledges once for all of them (§5.1, the *Multicast*
//! protocol); [`Aggregation`] is that node's side and [`OnePhase::ack_many`] takes its answer.
//!
//! **Two-phase commit** (§4.7: "all cores must agree on a single ordering of the operations
//! ... the monitors initiate a two-phase commit protocol"). The coordinator sends *prepare*;
//! each [`Participant`] checks the operation locally and locks the objects it touches, then
//! votes. All Yes: the coordinator decides Commit, otherwise Abort; it sends the decision and
//! collects acknowledgements. Because a participant holds an object's lock from its Yes vote
//! until the decision arrives, and votes No (never waits) when another operation holds it,
//! two conflicting operations can never both commit in different orders at different cores,
//! and no core ever waits for another: one of them aborts and retries after
//! [`retry_backoff`]. Messages between two cores must arrive in the order they were sent, as
//! they do on URPC channels (§4.6): a participant must see an operation's *prepare* before its
//! decision.
//!
//! **Failure.** A core is *failed* when the caller says so ([`OnePhase::fail`],
//! [`TwoPhase::fail`], ...): its kernel faulted or it stopped answering. No protocol here ever
//! waits forever: each has a deadline after which the cores that did not answer are reported
//! ([`OnePhaseStatus::TimedOut`], [`TwoPhase::stragglers`]). An acknowledgement that does
//! arrive from a core declared failed still counts: it proves the core did the work.
//! Messages come from other cores, so bad ones (a duplicate, one from a core that is not a
//! participant, one in the wrong phase) are refused with a [`ProtocolError`], never a panic.
//!
//! Tests: `cargo test -p agreement` (unit tests and property tests that deliver the
//! messages of several concurrent operations in random orders); the loom model runs with
//! `RUSTFLAGS="--cfg loom" cargo test -p agreement --release --test loom`.
#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

extern crate alloc;

mod aggregation;
mod backoff;
mod coreset;
mod one_phase;
mod participant;
mod termination;
mod two_phase;

pub use aggregation::Aggregation;
pub use backoff::{retry_backoff, BACKOFF_BASE, BACKOFF_MAX_SHIFT};
pub use coreset::{CoreIter, CoreSet};
pub use one_phase::{OnePhase, OnePhaseStatus};
pub use participant::Participant;
pub use termination::{Knowledge, Termination};
pub use two_phase::{
    op_id, op_initiator, op_sequence, op_started_by, Decision, OpId, TwoPhase, TwoPhaseStatus, Vote,
};

/// Why an acknowledgement or vote was refused. Messages come from other cores, so a bad one
/// is answered with one of these, never a panic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProtocolError {
    /// The sender is not one of the operation's participants.
    NotAParticipant,
    /// The sender already acknowledged (or voted in) this phase.
    Duplicate,
    /// The message belongs to another phase: a vote after the decision, or an
    /// acknowledgement of a decision not yet made.
    WrongPhase,
    /// The message names an operation the receiver is not running (see
    /// [`TwoPhase::check_op`]).
    UnknownOperation,
}
