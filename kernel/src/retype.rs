//! Retype (Multikernel §4.8, as Barrelfish retypes capabilities to move memory): blocks of
//! physical frames move from one core's ownership to another's after boot. Every core
//! keeps its own replica of who owns which retyped block (`mem::frames`); a retype changes
//! them all by two-phase commit, so concurrent retypes of the same block end in one order
//! on every core, and a retype either happens everywhere or nowhere.
//!
//! The steps, on the giving core (the coordinator):
//! 1. take a run of wholly free blocks off its own list (no other core can hold them),
//!    keeping a reserve of free frames for itself;
//! 2. prepare on every online core: each locks the blocks and votes Yes if its replica has
//!    room (the receiver also checks it can adopt them);
//! 3. commit: each core's replica names the receiver; the giver forgets the blocks, the
//!    receiver adopts them with every frame in use;
//! 4. once every core has acknowledged, the giver sends the frames to the receiver the way
//!    every frame goes home (`FRAME_RETURN`), and the receiver frees them into its list.
//!
//! Step 4 waits for every acknowledgement so that no core can still route a freed frame of
//! the blocks to the giver: a frame freed anywhere after the receiver could allocate it
//! goes to the receiver by that core's replica. (One that does reach the giver is sent on.)
//! An abort puts the blocks back on the giver's list.
//!
//! A giver that faults after the commit may have sent some of the frames, or none: the
//! receiver counts which came, and once the giver is dead and every message it sent has
//! been read, frees the rest itself ([`recover_lost_frames`], from the idle loop and the
//! tick).

use crate::arch::{cpu, timer};
use crate::mem::frames;
use crate::param::{RETYPE_KICK_EVERY_US, RETYPE_SEND_LIMIT_US};
use crate::percpu::{self, this_core, CoreState};
use crate::twophase::{self, Operation};
use agreement::{CoreSet, Decision};
use physmem::MAX_ADOPTED_BLOCKS;

/// Why a retype did not happen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetypeError {
    /// Block count outside 1..=`MAX_ADOPTED_BLOCKS`, or the receiver is this core, not a
    /// core, or not online.
    BadArgument,
    /// This core has no run of that many wholly free blocks.
    NoFreeBlocks,
    /// Giving that many would leave this core fewer than `param::RETYPE_RESERVE_FRAMES`
    /// free frames (its kernel heap and its programs need them): nothing changed.
    BelowReserve {
        /// This core's free frames.
        free: u64,
    },
    /// A participant voted No (another retype holds a block, or a replica or the receiver
    /// has no room) or did not answer: nothing changed.
    Aborted,
}

impl core::fmt::Display for RetypeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            RetypeError::BadArgument => f.write_str("bad block count or receiving core"),
            RetypeError::NoFreeBlocks => f.write_str("no run of that many wholly free blocks here"),
            RetypeError::BelowReserve { free } => write!(
                f,
                "this core has {free} free frames and keeps {} for its kernel heap and \
                 programs: too few to give that many blocks, nothing changed",
                crate::param::RETYPE_RESERVE_FRAMES
            ),
            RetypeError::Aborted => f.write_str(
                "a core refused (a block is being retyped, or a replica or the receiver has no \
                 room: a core adopts at most 64 blocks) or did not answer: nothing changed",
            ),
        }
    }
}

/// Gives `blocks` blocks (each `physmem::BLOCK_FRAMES` frames) of this core's free memory
/// to core `to`, by two-phase commit among every online core; the first block's address.
/// This core keeps at least `param::RETYPE_RESERVE_FRAMES` free.
pub fn give(blocks: u64, to: usize) -> Result<u64, RetypeError> {
    check_arguments(blocks, to)?;
    let first = frames::take_blocks_to_give(blocks).map_err(|e| match e {
        physmem::TakeError::Reserve { free } => RetypeError::BelowReserve { free },
        physmem::TakeError::NoRun => RetypeError::NoFreeBlocks,
    })?;
    give_taken(first, blocks, to)
}

/// `BadArgument` unless `blocks` is 1 ..= `MAX_ADOPTED_BLOCKS` and `to` is another core,
/// online.
fn check_arguments(blocks: u64, to: usize) -> Result<(), RetypeError> {
    let online = percpu::core(to).is_some_and(|c| c.state() == CoreState::Online);
    if !(1..=MAX_ADOPTED_BLOCKS as u64).contains(&blocks) || to == this_core().index || !online {
        return Err(RetypeError::BadArgument);
    }
    Ok(())
}

/// [`give`] of blocks this core has taken off its list already (steps 2–4); on an abort,
/// or arguments [`give`] would refuse, they go back on it.
pub fn give_taken(first: u64, blocks: u64, to: usize) -> Result<u64, RetypeError> {
    if let Err(e) = check_arguments(blocks, to) {
        frames::return_blocks(first, blocks);
        return Err(e);
    }
    let me = this_core().index;
    let participants: CoreSet = crate::smp::online_cores().into_iter().collect();
    let operation = Operation::Retype { first, blocks, from: me, to };
    match twophase::commit(participants, operation) {
        Decision::Commit => {
            send_committed(first, blocks, to);
            Ok(first)
        }
        Decision::Abort => {
            frames::return_blocks(first, blocks);
            Err(RetypeError::Aborted)
        }
    }
}

/// Step 4 of a committed retype: sends the blocks' frames to `to`, each into its channel
/// before this returns (see [`send_queued_now`]).
pub fn send_committed(first: u64, blocks: u64, to: usize) {
    frames::send_blocks(first, blocks, to);
    send_queued_now(to);
}

/// Step 4, to the end: sends the frames queued for `to` until every one is in its channel,
/// serving this core's channels meanwhile (the receiver may be sending here too). A
/// channel holds 32 messages of 6 frames, so a retype of many blocks waits for the receiver
/// to read: it is kicked if it runs user code. Past [`RETYPE_SEND_LIMIT_US`] the rest stays
/// queued, for later polls to send (a receiver that faulted gets nothing more).
fn send_queued_now(to: usize) {
    let start = cpu::rdtsc();
    let mut kicked = start;
    loop {
        crate::monitor::flush_frame_returns();
        let dead = percpu::has_faulted(to);
        if frames::queued_for(to) == 0 || dead {
            return;
        }
        if timer::us_since(start) > RETYPE_SEND_LIMIT_US {
            crate::println!(
                "retype: core {to} read too slowly; {} frames go at later polls",
                frames::queued_for(to)
            );
            return;
        }
        if timer::us_since(kicked) > RETYPE_KICK_EVERY_US {
            crate::transport::notify(to);
            kicked = cpu::rdtsc();
        }
        crate::monitor::poll();
        cpu::pause();
    }
}

/// Frees here the frames of blocks given to this core whose giver faulted before sending
/// them all, once every message it sent has been read (the idle loop and the tick in user
/// mode call this; tests too). Returns how many frames that was.
pub fn recover_lost_frames() -> u64 {
    if !frames::anything_on_the_way() {
        return 0;
    }
    let mut recovered = 0;
    for giver in frames::givers_on_the_way() {
        let dead = percpu::has_faulted(giver);
        if dead && !crate::transport::has_messages_from(giver) {
            recovered += frames::give_up_on(giver);
        }
    }
    if recovered > 0 {
        crate::println!("retype: freed {recovered} frames a faulted core gave here but never sent");
    }
    recovered
}
