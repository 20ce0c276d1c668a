//! Typed cross-core messages. Every kind of message one core sends another is declared
//! once, with [`messages!`], as a variant of a layer's message enum with its payload
//! fields and its tag; the macro generates the encoding into one URPC message (a tag and
//! [`PAYLOAD_WORDS`] words, Multikernel §4.6) and the checked decoding back.
//!
//! A kernel object that travels to another core travels as a [`Carried`] handle: an owned
//! box whose ownership the message moves, typed on both ends by the field's type. A
//! [`Lent`] handle is borrowed: the receiver may use it until it answers.
//!
//! Decoding is `unsafe` for the whole message: it trusts that the words were made by
//! [`Protocol::encode`] of the same enum and are decoded once (a `Carried` word becomes an
//! owner). URPC channels live in kernel memory only the kernel writes, and a receiver
//! consumes each slot once, so the kernel's receive path upholds this.
#![no_std]

extern crate alloc;

mod carried;
mod field;

pub use carried::{Carried, Lent};
pub use field::Field;
pub use urpc::PAYLOAD_WORDS;

/// Why words do not decode as a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Malformed {
    /// The tag names no kind of this enum.
    UnknownKind,
    /// A field's word is out of its range (a bool not 0 or 1, a bad handle, ...).
    BadField,
}

/// Why a receiver refused a message: counted and reported, never acted on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rejection {
    /// The tag names no kind any layer declared.
    UnknownKind,
    /// The sender may not send this kind (a replicated setting from a core not the boot
    /// core).
    NotAllowed,
    /// The payload does not make sense (a field out of range, a bad handle, a bad count).
    Malformed,
    /// It names an operation the receiver does not know (a late two-phase vote).
    UnknownOperation,
    /// It arrived before the layer that handles it was ready.
    NotReady,
}

impl From<Malformed> for Rejection {
    fn from(m: Malformed) -> Rejection {
        match m {
            Malformed::UnknownKind => Rejection::UnknownKind,
            Malformed::BadField => Rejection::Malformed,
        }
    }
}

/// A layer's message enum (made by [`messages!`]).
pub trait Protocol: Sized {
    /// Every kind: its tag and its name, in declaration order.
    const KINDS: &'static [(u32, &'static str)];

    /// The message as its tag and payload. Ownership of any [`Carried`] field passes to
    /// the words (and to whoever decodes them).
    fn encode(self) -> (u32, [u64; PAYLOAD_WORDS]);

    /// The message `tag` and `words` encode.
    ///
    /// # Safety
    /// The words were made by [`Protocol::encode`] of this enum and are decoded at most
    /// once: a [`Carried`] field becomes the owner of what the sender gave up.
    unsafe fn decode(tag: u32, words: &[u64; PAYLOAD_WORDS]) -> Result<Self, Malformed>;

    /// Whether `tag` is one of this enum's kinds.
    fn has_kind(tag: u32) -> bool {
        Self::KINDS.iter().any(|&(t, _)| t == tag)
    }

    /// The name of kind `tag` (for messages about rejected messages).
    fn kind_name(tag: u32) -> Option<&'static str> {
        Self::KINDS.iter().find(|&&(t, _)| t == tag).map(|&(_, name)| name)
    }
}

/// Declares a message enum: each variant is one kind of message, with named payload
/// fields (each a [`Field`]: `u64`, `u32`, `usize`, `bool`, `[u64; N]`, [`Carried`],
/// [`Lent`]) and its tag. A variant with no payload is written `Kind {} = TAG`.
///
/// The enum may take type parameters (`pub enum Message<T> { Arrive { thread: T } = 16 }`):
/// it is a [`Protocol`] for every parameter that is a [`Field`]. A layer's state machine
/// declares its messages once that way, generic over what a field carries (a thread, say),
/// and the kernel picks the parameter that travels (a [`Carried`] handle); the state
/// machine's host tests pick another.
///
/// ```
/// protocol::messages! {
///     /// Echo traffic.
///     pub enum Echo {
///         /// Answer with `Pong`.
///         Ping { seq: u64 } = 1,
///         /// The answer.
///         Pong { seq: u64, late: bool } = 2,
///         /// Nothing to say.
///         Quiet {} = 3,
///     }
/// }
/// use protocol::Protocol;
/// let (tag, words) = Echo::Pong { seq: 7, late: true }.encode();
/// // SAFETY: made by `encode` just above, decoded once.
/// let back = unsafe { Echo::decode(tag, &words) };
/// assert!(matches!(back, Ok(Echo::Pong { seq: 7, late: true })));
/// ```
#[macro_export]
macro_rules! messages {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident $(< $($param:ident),+ >)? {
            $(
                $(#[$vmeta:meta])*
                $variant:ident { $( $(#[$fmeta:meta])* $field:ident : $ty:ty ),* $(,)? } = $tag:literal
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis enum $name $(< $($param),+ >)? {
            $( $(#[$vmeta])* $variant { $( $(#[$fmeta])* $field: $ty ),* } ),*
        }

        impl $(< $($param: $crate::Field),+ >)? $crate::Protocol for $name $(< $($param),+ >)? {
            const KINDS: &'static [(u32, &'static str)] = &[ $( ($tag, stringify!($variant)) ),* ];

            #[allow(unused_assignments, unused_mut, unused_variables)]
            fn encode(self) -> (u32, [u64; $crate::PAYLOAD_WORDS]) {
                let mut words = [0u64; $crate::PAYLOAD_WORDS];
                let mut at = 0usize;
                let tag = match self {
                    $( $name::$variant { $( $field ),* } => {
                        // Every variant's payload fits one message (checked when the
                        // enum, with its type parameters, is used).
                        const { assert!(
                            0 $( + <$ty as $crate::Field>::WORDS )* <= $crate::PAYLOAD_WORDS,
                            concat!(
                                stringify!($name), "::", stringify!($variant),
                                " does not fit one message"
                            )
                        ) };
                        $(
                            let n = <$ty as $crate::Field>::WORDS;
                            $crate::Field::put($field, &mut words[at..at + n]);
                            at += n;
                        )*
                        $tag
                    } )*
                };
                (tag, words)
            }

            #[allow(unused_assignments, unused_mut, unused_variables)]
            unsafe fn decode(
                tag: u32,
                words: &[u64; $crate::PAYLOAD_WORDS],
            ) -> Result<Self, $crate::Malformed> {
                let mut at = 0usize;
                match tag {
                    $( $tag => Ok($name::$variant { $( $field: {
                        let n = <$ty as $crate::Field>::WORDS;
                        // SAFETY: the caller's promise (see `Protocol::decode`) covers
                        // every field; struct fields are read in the order written.
                        let value = unsafe { <$ty as $crate::Field>::take(&words[at..at + n]) }?;
                        at += n;
                        value
                    } ),* }), )*
                    _ => Err($crate::Malformed::UnknownKind),
                }
            }
        }
    };
}
