//! The handler table: which layer handles each kind of message (installed once at boot,
//! `boot::MESSAGE_HANDLERS`), and when its messages may run.

use alloc::string::String;
use alloc::vec::Vec;
use protocol::Rejection;
use urpc::PAYLOAD_WORDS;

/// When a layer's messages may be handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    /// As soon as they are read, even in a tick while a thread runs (they need no core of
    /// their own: a wake-up, a vote, a shootdown).
    AtOnce,
    /// Only between threads or when idle: they take the core (a remote call, a program's
    /// start).
    BetweenThreads,
}

/// How a layer handles one of its messages: it decodes them with its own enum
/// (`protocol::Protocol::decode`) and acts, or says why not.
#[derive(Clone, Copy)]
pub enum Handle {
    /// One-slot messages: a tag and its words.
    Words(fn(from: usize, tag: u32, words: &[u64; PAYLOAD_WORDS]) -> Result<(), Rejection>),
    /// Messages sent as fragments (`send_bytes`): a tag and its bytes. They are handled as
    /// soon as they are read.
    Bytes(fn(from: usize, tag: u32, bytes: &[u8]) -> Result<(), Rejection>),
}

/// One layer's messages in the handler table: its kinds (its enum's `KINDS`), the function
/// that handles them, and when.
pub struct Handler {
    /// The layer (for messages about the table).
    pub layer: &'static str,
    /// Its kinds: tags and names.
    pub kinds: &'static [(u32, &'static str)],
    /// Its handler.
    pub handle: Handle,
    /// When its messages may run.
    pub when: When,
}

/// Tags are below this (a message's tag indexes [`HANDLERS`] directly).
pub const TAGS: usize = 64;

/// The handler table by tag: each tag's handler, found in one load for every message (a
/// search of the table's kinds on every message added a fifth to a message's latency,
/// `bench polling`). Written once, at boot, before any other core runs
/// (`install_handlers`).
static HANDLERS: spin::Once<[Option<&'static Handler>; TAGS]> = spin::Once::new();

/// Installs the handler table (the boot core, once). Refused if two layers claim one tag
/// (each kind of message has one handler), if a tag is not below [`TAGS`], or if messages
/// sent as bytes are to wait for the core (they are handled as read).
pub fn install_handlers(table: &'static [Handler]) -> Result<(), String> {
    check_table(table)?;
    HANDLERS.call_once(|| {
        let mut by_tag = [None; TAGS];
        for handler in table {
            for &(tag, _) in handler.kinds {
                by_tag[tag as usize] = Some(handler);
            }
        }
        by_tag
    });
    Ok(())
}

/// Whether `table` may be installed: no tag claimed twice, and no bytes handler that
/// waits for the core (`install_handlers` says why not).
pub fn check_table(table: &[Handler]) -> Result<(), String> {
    let mut claimed: Vec<(u32, &str)> = Vec::new();
    for handler in table {
        if matches!(handler.handle, Handle::Bytes(_)) && handler.when != When::AtOnce {
            return Err(alloc::format!("{}: messages sent as bytes run at once", handler.layer));
        }
        for &(tag, name) in handler.kinds {
            if tag as usize >= TAGS {
                return Err(alloc::format!("{}::{name} has tag {tag}, past {TAGS}", handler.layer));
            }
            if let Some((_, owner)) = claimed.iter().find(|(t, _)| *t == tag) {
                return Err(alloc::format!(
                    "{}::{name} takes tag {tag}, which {owner} has",
                    handler.layer
                ));
            }
            claimed.push((tag, handler.layer));
        }
    }
    Ok(())
}

/// The layer that handles `tag`, if any.
pub(super) fn handler_for(tag: u32) -> Option<&'static Handler> {
    *HANDLERS.get()?.get(tag as usize)?
}
