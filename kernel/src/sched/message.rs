//! The scheduler's messages between cores as they travel: each kind (`Arrive`, `Wake`,
//! `Joined`, `Load`, `Pull`, `NoneToGive`, `Reap`) is declared once, with its payload and
//! tag, in `crates/sched/src/message.rs` ([`sched::Message`]), and handled there by the
//! inbox's state machine (`sched::inbox`). The transport's handler table (`boot.rs`) routes
//! their tags to [`super::inbox::on_message`], which files them.

use super::running::Running;
use protocol::Carried;

/// A scheduler message on the wire: an `Arrive`'s thread travels as an owned box. What
/// reading an inbox sends ([`sched::Note`]) carries no thread and is sent as it is.
pub type SchedMessage = sched::Message<Carried<Running>>;
