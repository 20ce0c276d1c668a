//! The scheduler's messages between cores, each kind declared once here with its payload
//! and its tag. Other cores reach a core's scheduler only by message (a multikernel shares
//! no run queue): threads moving, wake-ups and joins across cores, load reports and pulls
//! (AMPS §2.2–§2.3), and stops of parked threads.
//!
//! [`protocol::messages!`] makes [`Message`] a [`protocol::Protocol`]: its encoding into one
//! URPC message and the checked decoding back. The thread an `Arrive` carries is a type
//! parameter: the kernel sends a `protocol::Carried` box (`kernel/src/sched/message.rs`
//! names that type `SchedMessage`), the host tests a plain value, and what reading an
//! inbox sends ([`Note`], `T` = `Infallible`) carries none: a note is sent as it is, and
//! decodes at the receiver as any other message of its kind.
//!
//! Where each kind goes: the kernel's transport hands every message with these tags to the
//! kernel's `sched::inbox::on_message`, which files it ([`crate::Inbox::file`]); reading the
//! inbox ([`crate::inbox::read`]) handles it.

use core::convert::Infallible;

protocol::messages! {
    /// A scheduler message, carrying a thread of type `T` when it ships one.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Message<T> {
        /// A thread for this core: the receiver owns it now.
        Arrive {
            /// The thread.
            thread: T,
        } = 16,
        /// Wake up to `n` waiters on the word at `addr` of address space `space`, then
        /// pass the rest on to the lowest core in the mask `cores` (bit i: core i) other
        /// than this one.
        Wake {
            /// The waiters' address space.
            space: u64,
            /// The word's address.
            addr: u64,
            /// Most waiters to wake.
            n: u64,
            /// The cores that may hold waiters of `space`.
            cores: u64,
        } = 17,
        /// Thread `uid` ended: wake its joiners here.
        Joined {
            /// The ended thread.
            uid: u64,
        } = 18,
        /// Core `origin`'s load report (a [`Report`]); with `forward` the receiver, its
        /// package's aggregator in the SKB's multicast tree (Multikernel §5.1), passes it
        /// on within its package.
        Load {
            /// Its run-queue length, the running thread included.
            length: u64,
            /// The report's sequence number (a later report replaces an earlier one).
            seq: u64,
            /// False while the core takes no threads (dedicated to one context).
            online: bool,
            /// The core the report is about.
            origin: usize,
            /// Whether to pass it on.
            forward: bool,
        } = 19,
        /// The sender asks for one thread (the running one too, if `may_take_running`).
        Pull {
            /// Whether the running thread may go.
            may_take_running: bool,
        } = 20,
        /// The answer to a pull that found nothing to give (the puller waits out its
        /// patience before it asks again: a source whose extra threads are pinned would
        /// otherwise be asked at every turn).
        NoneToGive {} = 21,
        /// A program was stopped (its main thread ended, its pcore was halted): end the
        /// threads of stopped programs parked or queued here (issue M14).
        Reap {} = 22,
    }
}

/// A message that carries no thread (what reading the inbox sends: threads go by
/// [`crate::Action::Ship`]).
pub type Note = Message<Infallible>;

impl<T> Message<T> {
    /// The same message with its thread (if it carries one) changed by `f`.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Message<U> {
        match self {
            Message::Arrive { thread } => Message::Arrive { thread: f(thread) },
            Message::Wake { space, addr, n, cores } => Message::Wake { space, addr, n, cores },
            Message::Joined { uid } => Message::Joined { uid },
            Message::Load { length, seq, online, origin, forward } => {
                Message::Load { length, seq, online, origin, forward }
            }
            Message::Pull { may_take_running } => Message::Pull { may_take_running },
            Message::NoneToGive {} => Message::NoneToGive {},
            Message::Reap {} => Message::Reap {},
        }
    }
}

impl Note {
    /// The same message as one of any thread type (a note carries none). On the wire the
    /// two are the same words: only `Arrive` carries the thread.
    pub fn carrying<T>(self) -> Message<T> {
        self.map(|never| match never {})
    }
}

/// A core's load report: core `origin`'s run-queue length, numbered `seq` (a later report
/// replaces an earlier one), and whether the core takes threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Report {
    /// The core the report is about.
    pub origin: usize,
    /// Its run-queue length, the running thread included.
    pub length: u64,
    /// Its sequence number.
    pub seq: u64,
    /// False while the core takes no threads (dedicated to one context).
    pub online: bool,
}

impl Report {
    /// The report as a [`Message::Load`] (`forward`: the receiver passes it on).
    pub fn message(self, forward: bool) -> Note {
        let Report { origin, length, seq, online } = self;
        Message::Load { length, seq, online, origin, forward }
    }
}
