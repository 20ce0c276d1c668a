//! One call about to be made: its number, its arguments, and the block or text the kernel
//! reads through one of them; and what the objects a call made are.

use crate::text::Text;
use libatoll::abi::nr;

/// What an object the fuzzer made is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Share,
    Segment,
    /// A root address range.
    Root,
    /// A slot address range.
    Slot,
    Pcore,
    Device,
    /// A thread it created (it runs the exit entry, or faults at once).
    Thread,
}

/// An object the fuzzer made in its root share.
#[derive(Clone, Copy, Debug)]
pub struct Made {
    pub id: u64,
    pub kind: Kind,
    /// The step it was made at.
    pub born: u64,
}

/// Where a call's pointer to a block (`ar_set_seg`, `ar_set_ar`, `pcore_run`) or a text
/// (`write`, `file_open`, `program_run`, `kernel_command`) points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Block {
    /// At the call's own `words` or `text`, filled in by the fuzzer.
    Composed,
    /// At this address.
    Raw(u64),
}

/// One call about to be made.
#[derive(Clone, Copy)]
pub struct Call {
    pub number: u64,
    pub a: [u64; 5],
    /// The argument block the kernel reads (when `block` is `Composed`).
    pub words: [u64; 17],
    /// The text the kernel reads (when `block` is `Composed`).
    pub text: Text,
    pub block: Block,
    /// A console line a scenario composed with accepted values (and will undo): not
    /// vetted or rationed by `guard`.
    pub trusted: bool,
}

impl Call {
    pub fn new(number: u64, a: [u64; 5]) -> Call {
        Call {
            number,
            a,
            words: [0; 17],
            text: Text::new(),
            block: Block::Composed,
            trusted: false,
        }
    }
}

/// Which argument of `number` points at a block or text the fuzzer may compose.
pub fn composed_arg(number: u64) -> Option<usize> {
    match number {
        nr::AR_SET_SEG | nr::AR_SET_AR | nr::PCORE_RUN | nr::THREAD_CREATE | nr::WRITE => Some(0),
        nr::FS_MKDIR | nr::FS_REMOVE | nr::FS_RENAME => Some(0),
        nr::FILE_OPEN | nr::FS_OPEN => Some(1),
        nr::PROGRAM_RUN | nr::KERNEL_COMMAND => Some(2),
        _ => None,
    }
}

/// Words in the argument block of `number`.
pub fn block_words(number: u64) -> usize {
    match number {
        nr::AR_SET_SEG => 8,
        nr::AR_SET_AR => 6,
        nr::PCORE_RUN => 17,
        nr::THREAD_CREATE => 17,
        _ => 0,
    }
}
