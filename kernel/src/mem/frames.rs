//! Physical frames: a free list per core (Corey §4.1: a core allocates from its own list,
//! named by its memid, without a lock or a shared cache line).
//!
//! A frame freed by a core that does not own it goes home by message: it waits here, in
//! the freeing core's queue for its owner, until the monitor (the layer above, the only
//! one that talks to other cores) sends it in a `FRAME_RETURN`; the owner's monitor puts
//! it back on the owner's list. The queue is a chain through the frames themselves (each
//! one's first word links the next: a freed frame is the freeing core's to write until it
//! is sent), so queueing never allocates and never fails: no frame is dropped.
//!
//! Ownership is the boot partition, read-only and shared by explicit choice, overridden
//! by each core's own replica of the blocks retyped since (`physmem::BlockOwners`). A
//! retype (Multikernel §4.8) changes every replica by two-phase commit (`crate::retype`);
//! the steps it takes on a core are [`take_blocks_to_give`], [`apply_retype`] and
//! [`return_blocks`] here.

use crate::arch::paging::phys_to_virt;
use crate::param::RETYPE_RESERVE_FRAMES;
use crate::percpu::{self, this_core, PerCoreState};
use core::sync::atomic::{AtomicU64, Ordering};
use physmem::{
    BlockOwners, FrameError, FrameOwners, InTransit, BLOCK_FRAMES, BLOCK_SIZE, FRAME_SIZE,
    MAX_ADOPTED_BLOCKS,
};

/// Most (range, owner) entries in the owner table.
pub const MAX_OWNER_RANGES: usize = percpu::MAX_CORES * physmem::MAX_RANGES_PER_CORE;

/// Which core owns each frame at boot; written once, read-only afterwards.
static OWNERS: spin::Once<FrameOwners<MAX_OWNER_RANGES>> = spin::Once::new();

/// Each core's replica of the blocks retyped since boot (read and written by its core
/// alone; every replica takes the same changes in the same order, by two-phase commit).
static RETYPED: PerCoreState<BlockOwners<{ physmem::MAX_RETYPED_BLOCKS }>> =
    crate::per_core_state!(BlockOwners::new());

/// The blocks retyped to this core whose frames its giver has not all sent yet, and which
/// of them came (read and written by its core alone).
static ON_THE_WAY: PerCoreState<InTransit<MAX_ADOPTED_BLOCKS>> =
    crate::per_core_state!(InTransit::new());

/// Records the frame ownership table (boot core, once, before other cores start).
pub fn set_owners(owners: FrameOwners<MAX_OWNER_RANGES>) {
    OWNERS.call_once(|| owners);
}

/// The core that owns frame `pa`, by this core's replica.
pub fn owner_of(pa: u64) -> Option<usize> {
    RETYPED.with(|t| t.owner_of(pa)).or_else(|| OWNERS.get()?.owner_of(pa))
}

/// Retype, the giver's first step: takes `blocks` contiguous, wholly free blocks off this
/// core's list (as if allocated); the first one's address.
pub fn take_free_blocks(blocks: u64) -> Option<u64> {
    with_frames(|frames| frames.take_free_blocks(blocks))
}

/// Retype, the giver's first step: [`take_free_blocks`], unless fewer than
/// [`RETYPE_RESERVE_FRAMES`] frames would stay free (then it takes nothing).
pub fn take_blocks_to_give(blocks: u64) -> Result<u64, physmem::TakeError> {
    with_frames(|frames| frames.take_free_blocks_keeping(blocks, RETYPE_RESERVE_FRAMES))
}

/// [`take_free_blocks`] of the run at `first`, if it is this core's and wholly free.
pub fn take_blocks_at(first: u64, blocks: u64) -> bool {
    with_frames(|frames| frames.take_blocks_at(first, blocks).is_ok())
}

/// Retype aborted: the giver puts the blocks it took back on its list.
pub fn return_blocks(first: u64, blocks: u64) {
    // Cannot fail: the giver took exactly these frames and nobody else had them.
    let _ = with_frames(|frames| frames.return_blocks(first, blocks));
}

/// The retypes this core has voted Yes on and not yet heard the decision of: the room
/// they will take if they commit.
#[derive(Clone, Copy, Debug, Default)]
pub struct RetypesPending {
    /// Their blocks, all together (each may need a row in the replica).
    pub blocks: u64,
    /// Those of them going to the same receiver as the retype being voted on.
    pub to_same_receiver: u64,
}

/// Whether this core can take part in retyping `blocks` blocks from `first` from core
/// `from` to `to`: its replica has room for them; if it is `from`, it can disown every
/// block (it took them all); if it is `to`, it can adopt every block and keep count of
/// their frames' arrival, with the room of the retypes it already voted Yes on kept for
/// them. A prepare votes by this, so a retype that commits can be applied everywhere.
pub fn can_retype(
    first: u64,
    blocks: u64,
    from: usize,
    to: usize,
    pending: RetypesPending,
) -> bool {
    let me = this_core().index;
    let room = RETYPED.with(|t| t.has_room_beside(first, blocks, pending.blocks));
    let each = |check: fn(&physmem::CoreFrames<'static>, u64) -> Result<(), FrameError>| {
        this_core().frames.with(|f| (0..blocks).all(|b| check(f, first + b * BLOCK_SIZE).is_ok()))
    };
    let giver_can = || each(physmem::CoreFrames::check_disown);
    let receiver_can = || {
        let total = blocks + pending.to_same_receiver;
        this_core().frames.with(|f| f.can_adopt(total))
            && ON_THE_WAY.with(|t| t.has_room(total))
            && each(physmem::CoreFrames::check_adopt)
    };
    from != to && room && (me != from || giver_can()) && (me != to || receiver_can())
}

/// Per core: retype steps (recording the new owner in its replica, adopting or disowning
/// a block) that failed on it, which the votes should make impossible (`mem` shows them; the tests check they stay 0).
static RETYPE_FAILURES: [AtomicU64; percpu::MAX_CORES] =
    [const { AtomicU64::new(0) }; percpu::MAX_CORES];

/// How many retype steps failed on core `core` since boot (see [`apply_retype`]).
pub fn retype_failures(core: usize) -> u64 {
    RETYPE_FAILURES.get(core).map_or(0, |c| c.load(Ordering::Relaxed))
}

/// Retype committed: this core's replica says `to` owns the blocks from now on; the giver
/// forgets them, the receiver adopts them with every frame in use (they arrive later by
/// `FRAME_RETURN`, once every core has the change, and are freed into it then; until all
/// have, the receiver keeps count of them in case the giver faults: [`give_up_on`]).
pub fn apply_retype(first: u64, blocks: u64, from: usize, to: usize) {
    let me = this_core();
    // Should not fail either: the vote checked the replica's room.
    if !RETYPED.with(|t| t.set(first, blocks, to)) {
        RETYPE_FAILURES[me.index].fetch_add(1, Ordering::Relaxed);
        crate::println!(
            "retype: core {}'s replica has no room for blocks from {first:#x}",
            me.index
        );
    }
    if me.index != from && me.index != to {
        return;
    }
    if me.index == to && !ON_THE_WAY.with(|t| t.expect(first, blocks, from)) {
        // Not expected (the prepare kept room for it): should the giver fault before
        // sending them all, the rest would not be recovered.
        crate::println!("retype: no room to count the arrival of blocks from {first:#x}");
    }
    let mut failed = 0;
    with_frames(|frames| {
        for b in 0..blocks {
            let block = first + b * BLOCK_SIZE;
            // Should not fail: this core's vote checked the step ([`can_retype`]).
            let step =
                if me.index == to { frames.adopt_block(block) } else { frames.disown_block(block) };
            if let Err(e) = step {
                failed += 1;
                crate::println!(
                    "retype: core {} could not {} block {block:#x} (from core {from} to core \
                     {to}): {e}",
                    me.index,
                    if me.index == to { "adopt" } else { "disown" }
                );
            }
        }
    });
    RETYPE_FAILURES[me.index].fetch_add(failed, Ordering::Relaxed);
}

/// Retype finished: the giver sends the blocks' frames to their new owner, the way every
/// frame goes home (the monitor's `FRAME_RETURN`).
pub fn send_blocks(first: u64, blocks: u64, to: usize) {
    let frames: alloc::vec::Vec<u64> =
        (0..blocks * BLOCK_FRAMES).map(|f| first + f * FRAME_SIZE).collect();
    queue_for_home(to, &frames);
}

/// This core's frames: (free, total). Total is its boot share less what it gave away,
/// plus what it adopted.
pub fn counts_here() -> (u64, u64) {
    this_core().frames.with(|f| (f.free_count(), f.total()))
}

/// How many more blocks from outside its boot share this core can adopt (tests).
pub fn adoption_room_here() -> u64 {
    this_core().frames.with(|f| f.adoption_room())
}

/// Whether frame `pa` is on this core's free list (tests).
pub fn is_free_here(pa: u64) -> bool {
    this_core().frames.with(|f| f.is_free(pa))
}

/// Takes free frame `pa` of this core off its list, as if allocated (tests); whether it
/// was there.
pub fn claim_here(pa: u64) -> bool {
    with_frames(|frames| frames.mark_used(pa).is_ok())
}

/// The blocks this core's replica records as retyped, as (block, owner).
pub fn retyped_here() -> alloc::vec::Vec<(u64, usize)> {
    RETYPED.with(|t| t.iter().collect())
}

/// Allocates a frame from the calling core's own list. Returns its physical address.
pub fn alloc() -> Option<u64> {
    with_frames(|frames| frames.alloc())
}

/// Frees frame `pa`: into the local list if this core owns it, otherwise into this core's
/// queue for its owner (see the module doc). A double free of a local frame is an error
/// here; one of a foreign frame is caught and rejected by the owner's monitor.
pub fn free(pa: u64) -> Result<(), FrameError> {
    let owner = owner_of(pa).ok_or(FrameError::NotOwned)?;
    if !pa.is_multiple_of(physmem::FRAME_SIZE) {
        return Err(FrameError::Unaligned);
    }
    if owner == this_core().index {
        return free_here(pa);
    }
    OUTGOING.with(|q| {
        q.chains[owner].push(pa);
        q.total += 1;
    });
    Ok(())
}

/// Frames nobody else uses, chained through their own first words (each holds the next
/// one's address): a list of frames that needs no memory of its own, so building it never
/// allocates and never fails. Used for freed frames waiting to go home, a heap trim's
/// frames waiting for TLB flushes, and frames a test holds back.
pub struct FrameChain {
    head: u64,
    len: usize,
}

impl FrameChain {
    /// An empty chain.
    pub const fn new() -> Self {
        FrameChain { head: 0, len: 0 }
    }

    /// How many frames it holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds frame `pa`, which must be the caller's alone: no mapping, no other holder.
    pub fn push(&mut self, pa: u64) {
        // SAFETY: the caller gives us a frame nobody else uses; the direct map reaches it.
        unsafe { *(phys_to_virt(pa) as *mut u64) = self.head };
        self.head = pa;
        self.len += 1;
    }

    /// Takes a frame out.
    pub fn pop(&mut self) -> Option<u64> {
        if self.head == 0 {
            return None;
        }
        let pa = self.head;
        // SAFETY: a frame of the chain (see `push`): its first word links the next.
        self.head = unsafe { *(phys_to_virt(pa) as *const u64) };
        self.len -= 1;
        Some(pa)
    }

    /// Frees every frame of the chain (to this core's list, or queued for its owner).
    pub fn free_all(&mut self) {
        while let Some(pa) = self.pop() {
            let _ = free(pa);
        }
    }
}

/// Frames freed on this core that belong to others, one chain per owner.
struct Outgoing {
    chains: [FrameChain; percpu::MAX_CORES],
    /// All chains together.
    total: usize,
}

static OUTGOING: PerCoreState<Outgoing> = crate::per_core_state!(Outgoing {
    chains: [const { FrameChain::new() }; percpu::MAX_CORES],
    total: 0,
});

/// Takes up to `out.len()` of the frames queued for `owner` into `out` — only if there are
/// at least `at_least` — and returns how many it took. The monitor sends them home, or
/// queues them again with [`queue_for_home`] if the send fails.
pub fn take_for_home(owner: usize, out: &mut [u64], at_least: usize) -> usize {
    OUTGOING.with(|q| {
        let Some(chain) = q.chains.get_mut(owner).filter(|c| !c.is_empty() && c.len() >= at_least)
        else {
            return 0;
        };
        let mut n = 0;
        while n < out.len() {
            let Some(pa) = chain.pop() else { break };
            out[n] = pa;
            n += 1;
        }
        q.total -= n;
        n
    })
}

/// Queues frames for `owner` again (a send that failed).
pub fn queue_for_home(owner: usize, frames: &[u64]) {
    OUTGOING.with(|q| {
        for &pa in frames {
            q.chains[owner].push(pa);
        }
        q.total += frames.len();
    })
}

/// Frames queued on this core for their owners.
pub fn queued_for_home() -> usize {
    OUTGOING.with(|q| q.total)
}

/// Frames queued on this core for `owner`.
pub fn queued_for(owner: usize) -> usize {
    OUTGOING.with(|q| q.chains.get(owner).map_or(0, FrameChain::len))
}

/// Puts a frame this core owns back on its list (the monitor calls this for frames that
/// came home). A frame of a block retyped away from this core meanwhile (sent by a core
/// whose replica was behind) goes on to its new owner; any other frame this core does not
/// own is refused. `Ok(true)`: sent on (the caller flushes the queue).
pub fn take_back(pa: u64) -> Result<bool, FrameError> {
    let me = this_core().index;
    match RETYPED.with(|t| t.owner_of(pa)) {
        Some(owner) if owner != me && pa.is_multiple_of(FRAME_SIZE) => {
            queue_for_home(owner, &[pa]);
            Ok(true)
        }
        Some(owner) if owner != me => Err(FrameError::Unaligned),
        _ if owner_of(pa) != Some(me) => Err(FrameError::NotOwned),
        _ => {
            free_here(pa)?;
            // Counted as arrived only once it is on the list. A frame of a block still on
            // its way may come a second time: it arrived, was allocated and was freed
            // since (the giver sends each frame once; a true double free was refused above).
            ON_THE_WAY.with(|t| t.arrive(pa));
            Ok(false)
        }
    }
}

/// Whether any block retyped to this core still has frames on their way (no allocation:
/// checked at every tick).
pub fn anything_on_the_way() -> bool {
    !ON_THE_WAY.with(|t| t.is_empty())
}

/// The cores whose retyped blocks have frames still on their way here.
pub fn givers_on_the_way() -> alloc::vec::Vec<usize> {
    ON_THE_WAY.with(|t| {
        let mut givers: alloc::vec::Vec<usize> = t.senders().collect();
        givers.sort_unstable();
        givers.dedup();
        givers
    })
}

/// Core `from` will never send the rest of the blocks it gave this core (it faulted, and
/// every message it sent here has been read): frees here every frame of them that never
/// came; how many that was. The blocks were wholly free when the giver took them, so no
/// one else holds those frames.
pub fn give_up_on(from: usize) -> u64 {
    let mut lost = alloc::vec::Vec::new();
    let n = ON_THE_WAY.with(|t| t.give_up_on(from, |pa| lost.push(pa)));
    for pa in lost {
        // Cannot fail: the frames are this core's, adopted and never freed here.
        let _ = free_here(pa);
    }
    n
}

/// Puts frame `pa`, which this core owns, back on its list.
fn free_here(pa: u64) -> Result<(), FrameError> {
    with_frames(|frames| frames.free(pa))
}

/// Runs `f` on this core's frame list, then publishes its free count (what other cores
/// and the object layer's reserve checks read).
fn with_frames<R>(f: impl FnOnce(&mut physmem::CoreFrames<'static>) -> R) -> R {
    let core = this_core();
    core.frames.with(|frames| {
        let r = f(frames);
        core.set_free_frames(frames.free_count());
        r
    })
}

/// Total free frames over all cores (each core's last published count).
pub fn total_free() -> u64 {
    percpu::all_cores().map(|c| c.free_frames()).sum()
}
