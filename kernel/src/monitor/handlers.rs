//! The handler table: which layer handles each kind of message that is not the
//! monitor's own (installed once at boot), and when its messages may run.

use super::protocol::REPLY;
use super::protocol::{MonitorMessage, Protocol, Rejection};
use alloc::string::String;
use alloc::vec::Vec;
use urpc::PAYLOAD_WORDS;

/// When a layer's messages may be handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    /// As soon as they are read, even in a tick while a thread runs (they need no core of
    /// their own: a wake-up, a vote, a shootdown).
    AtOnce,
    /// Only between threads or when idle: they take the core (a program's start).
    BetweenThreads,
}

/// How a layer handles one of its messages: it decodes the words with its own enum
/// (`protocol::Protocol::decode`) and acts, or says why not.
pub type HandleFn =
    fn(from: usize, tag: u32, words: &[u64; PAYLOAD_WORDS]) -> Result<(), Rejection>;

/// One layer's messages in the handler table: its kinds (its enum's `KINDS`), the function
/// that handles them, and when.
pub struct Handler {
    /// The layer (for messages about the table).
    pub layer: &'static str,
    /// Its kinds: tags and names.
    pub kinds: &'static [(u32, &'static str)],
    /// Its handler.
    pub handle: HandleFn,
    /// When its messages may run.
    pub when: When,
}

/// The handler table: which layer handles each tag that is not the monitor's own. Written
/// once, at boot, before any other core runs (`install_handlers`).
pub(super) static HANDLERS: spin::Once<&'static [Handler]> = spin::Once::new();

/// Installs the handler table (the boot core, once). Refused if two layers, or a layer and
/// the monitor, claim one tag: each kind of message has one handler.
pub fn install_handlers(table: &'static [Handler]) -> Result<(), String> {
    let mut claimed: Vec<(u32, &str)> =
        MonitorMessage::KINDS.iter().map(|&(t, _)| (t, "monitor")).collect();
    claimed.push((REPLY, "monitor"));
    for handler in table {
        for &(tag, name) in handler.kinds {
            if let Some((_, owner)) = claimed.iter().find(|(t, _)| *t == tag) {
                return Err(alloc::format!(
                    "{}::{name} takes tag {tag}, which {owner} has",
                    handler.layer
                ));
            }
            claimed.push((tag, handler.layer));
        }
    }
    HANDLERS.call_once(|| table);
    Ok(())
}

/// The layer that handles `tag`, if any.
pub(super) fn handler_for(tag: u32) -> Option<&'static Handler> {
    HANDLERS.get()?.iter().find(|h| h.kinds.iter().any(|&(t, _)| t == tag))
}
