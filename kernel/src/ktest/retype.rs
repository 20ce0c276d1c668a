//! Tests of retype (Multikernel §4.8; issue M9): blocks of frames change owner by
//! two-phase commit, every core's replica of the owner table ends the same, frames
//! balance, and a frame freed anywhere afterwards goes to its new owner.

use super::{all_ok, JOB_TIMEOUT_US};
use crate::arch::{cpu, timer};
use crate::mem::frames;
use crate::percpu::this_core;
use crate::retype::{self, RetypeError};
use crate::transport;
use crate::twophase::{self, Operation};
use crate::{kernel_test, monitor, println, smp};
use agreement::{CoreSet, Decision};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};
use physmem::{BLOCK_FRAMES, BLOCK_SIZE, FRAME_SIZE, MAX_ADOPTED_BLOCKS};

kernel_test!(MOVES, "retype.blocks_change_owner_on_every_core", 2, Shared, blocks_change_owner);
kernel_test!(REFUSES, "retype.refuses_and_aborts_cleanly", 2, Shared, refuses_and_aborts);
kernel_test!(LARGE, "retype.a_large_retype_hands_over_every_frame", 2, Shared, large_retype);
kernel_test!(ROOM, "retype.prepared_retypes_do_not_share_room", 2, Shared, prepared_share_no_room);
kernel_test!(RESERVE, "retype.giver_keeps_its_reserve", 2, Shared, giver_keeps_its_reserve);
kernel_test!(
    UNAPPLICABLE,
    "retype.a_retype_that_cannot_be_applied_aborts",
    2,
    Shared,
    unapplicable_retype_aborts
);
kernel_test!(
    FAULTED_GIVER,
    "retype.frames_a_faulted_giver_never_sent_are_freed",
    2,
    Alone,
    faulted_giver
);

/// Per test core: (free, total) frames, read on that core.
fn counts(cores: &[usize]) -> Result<Vec<(u64, u64)>, String> {
    let cells: Vec<spin::Mutex<(u64, u64)>> =
        cores.iter().map(|_| spin::Mutex::new((0, 0))).collect();
    let read = |core: usize| -> Result<(), String> {
        let i = cores.iter().position(|&c| c == core).ok_or("not a test core")?;
        *cells[i].lock() = frames::counts_here();
        Ok(())
    };
    all_ok(cores, &smp::run_on(cores, JOB_TIMEOUT_US, &read))?;
    Ok(cells.iter().map(|c| *c.lock()).collect())
}

/// Serves this core's channels until `done` holds (frames travel by message), or fails
/// after 10 s.
fn wait_for(what: &str, done: impl Fn() -> bool) -> Result<(), String> {
    let start = cpu::rdtsc();
    while !done() {
        if timer::us_since(start) > 10_000_000 {
            return Err(format!("core {}: {what} never happened", this_core().index));
        }
        monitor::flush_frame_returns();
        monitor::poll();
        cpu::pause();
    }
    Ok(())
}

/// The test cores in a ring: core `i` gives blocks to the next and receives from the
/// previous. Core 0 gives two blocks, the others one.
struct Ring {
    cores: Vec<usize>,
}

impl Ring {
    fn len(&self) -> usize {
        self.cores.len()
    }
    /// The index of `core` in the ring.
    fn index(&self, core: usize) -> Result<usize, String> {
        self.cores.iter().position(|&c| c == core).ok_or_else(|| "not a test core".into())
    }
    /// The core that index `i` gives to.
    fn next(&self, i: usize) -> usize {
        self.cores[(i + 1) % self.len()]
    }
    /// The index of the core that gives to index `i`.
    fn from(&self, i: usize) -> usize {
        (i + self.len() - 1) % self.len()
    }
    fn blocks_of(i: usize) -> u64 {
        if i == 0 {
            2
        } else {
            1
        }
    }
}

/// Every core at once gives blocks to the next (core 0 two, the others one); then every
/// core's replica names the same owners, each core's total moved by what it got less what
/// it gave, every received frame is free on its receiver, and a frame of a received block,
/// taken by the receiver and freed on the giver, goes to the receiver.
fn blocks_change_owner() -> Result<(), String> {
    let ring = Ring { cores: smp::online_cores() };
    let before = counts(&ring.cores)?;
    let given = give_around(&ring)?;
    let replica = replicas_after_arrival(&ring, &given)?;
    replica_names_receivers(&ring, &given, &replica)?;
    totals_moved_by_gifts(&ring, &before, &counts(&ring.cores)?)?;
    // A frame of core 0's gift.
    let pa = given[0] + 5 * FRAME_SIZE;
    freed_on_giver_goes_to_receiver(&ring, pa)?;
    sent_to_giver_goes_on_to_receiver(&ring, pa)?;
    no_failed_steps()?;
    println!(
        "retype: {} blocks changed owner on {} cores; {} rows in every replica",
        ring.len() + 1,
        ring.len(),
        replica.len()
    );
    Ok(())
}

/// Every core at once gives its blocks to the next; returns, per index, the first frame
/// it gave.
fn give_around(ring: &Ring) -> Result<Vec<u64>, String> {
    let given: Vec<spin::Mutex<u64>> = ring.cores.iter().map(|_| spin::Mutex::new(0)).collect();
    let give = |core: usize| -> Result<(), String> {
        let i = ring.index(core)?;
        let first = retype::give(Ring::blocks_of(i), ring.next(i))
            .map_err(|e| format!("core {core}: {e}"))?;
        *given[i].lock() = first;
        Ok(())
    };
    all_ok(&ring.cores, &smp::run_on(&ring.cores, JOB_TIMEOUT_US, &give))?;
    Ok(given.iter().map(|g| *g.lock()).collect())
}

/// Waits on every core for the frames given to it (they arrive by message), then checks
/// that every core's replica of the owner table is the same; returns it.
fn replicas_after_arrival(ring: &Ring, given: &[u64]) -> Result<Vec<(u64, usize)>, String> {
    let replicas: Vec<spin::Mutex<Vec<(u64, usize)>>> =
        ring.cores.iter().map(|_| spin::Mutex::new(Vec::new())).collect();
    let arrive = |core: usize| -> Result<(), String> {
        let i = ring.index(core)?;
        let from = ring.from(i);
        let first = given[from];
        let last = first + Ring::blocks_of(from) * BLOCK_SIZE - FRAME_SIZE;
        wait_for("the given frames' arrival", || {
            frames::is_free_here(first) && frames::is_free_here(last)
        })?;
        *replicas[i].lock() = frames::retyped_here();
        Ok(())
    };
    all_ok(&ring.cores, &smp::run_on(&ring.cores, JOB_TIMEOUT_US, &arrive))?;
    let first_replica = replicas[0].lock().clone();
    for (i, r) in replicas.iter().enumerate() {
        if *r.lock() != first_replica {
            let (core, first) = (ring.cores[i], ring.cores[0]);
            return Err(format!("core {core}'s replica differs from core {first}'s"));
        }
    }
    Ok(first_replica)
}

/// The replica names each given block's receiver as its owner.
fn replica_names_receivers(
    ring: &Ring,
    given: &[u64],
    replica: &[(u64, usize)],
) -> Result<(), String> {
    for (i, &first) in given.iter().enumerate() {
        for b in 0..Ring::blocks_of(i) {
            let block = first + b * BLOCK_SIZE;
            let row = replica.iter().find(|r| r.0 == block);
            if row.map(|r| r.1) != Some(ring.next(i)) {
                return Err(format!(
                    "block {block:#x}: replicas say {row:?}, not core {}",
                    ring.next(i)
                ));
            }
        }
    }
    Ok(())
}

/// Each core's total (free, total) moved by exactly what it received less what it gave,
/// and the sum over all cores did not change.
fn totals_moved_by_gifts(
    ring: &Ring,
    before: &[(u64, u64)],
    after: &[(u64, u64)],
) -> Result<(), String> {
    for i in 0..ring.len() {
        let received = BLOCK_FRAMES * Ring::blocks_of(ring.from(i));
        let want = before[i].1 + received - BLOCK_FRAMES * Ring::blocks_of(i);
        if after[i].1 != want {
            return Err(format!(
                "core {}: {} frames in its share, want {want}",
                ring.cores[i], after[i].1
            ));
        }
    }
    let sum = |c: &[(u64, u64)]| c.iter().map(|x| x.1).sum::<u64>();
    if sum(before) != sum(after) {
        return Err(format!("frames appeared or vanished: {} then {}", sum(before), sum(after)));
    }
    Ok(())
}

/// A frame `pa` of core 0's gift: taken on its receiver, freed on core 0, goes back to
/// the receiver.
fn freed_on_giver_goes_to_receiver(ring: &Ring, pa: u64) -> Result<(), String> {
    let receiver = ring.next(0);
    let claim = |_| if frames::claim_here(pa) { Ok(()) } else { Err(format!("{pa:#x} not free")) };
    all_ok(&[receiver], &smp::run_on(&[receiver], JOB_TIMEOUT_US, &claim))?;
    let free_on_giver = |_| {
        frames::free(pa).map_err(|e| format!("free on the giver: {e}"))?;
        monitor::flush_frame_returns(); // (frames go home in batches otherwise)
        Ok(())
    };
    let giver = ring.cores[0];
    all_ok(&[giver], &smp::run_on(&[giver], JOB_TIMEOUT_US, &free_on_giver))?;
    let back = |_| wait_for("the freed frame's return", || frames::is_free_here(pa));
    all_ok(&[receiver], &smp::run_on(&[receiver], JOB_TIMEOUT_US, &back))
}

/// A frame `pa` of core 0's gift sent to the giver, as a core whose replica was behind
/// would: the giver sends it on to the receiver rather than taking it.
fn sent_to_giver_goes_on_to_receiver(ring: &Ring, pa: u64) -> Result<(), String> {
    let (giver, receiver) = (ring.cores[0], ring.next(0));
    let send_to_giver = |_| {
        if !frames::claim_here(pa) {
            return Err(format!("{pa:#x} not free on the receiver"));
        }
        let mut list = [0u64; monitor::protocol::FRAMES_PER_RETURN];
        list[0] = pa;
        let message = monitor::protocol::MonitorMessage::FrameReturn { count: 1, frames: list };
        transport::send(giver, message).map_err(|e| format!("send: {:?}", e.error))?;
        wait_for("the frame's return through the giver", || frames::is_free_here(pa))
    };
    all_ok(&[receiver], &smp::run_on(&[receiver], JOB_TIMEOUT_US, &send_to_giver))
}

/// Bad requests are refused with nothing changed. A retype of a block another operation
/// holds locked aborts (a participant votes No), and the giver gets its block back.
fn refuses_and_aborts() -> Result<(), String> {
    let cores = smp::online_cores();
    let me = this_core().index;
    let other = cores.iter().copied().find(|&c| c != me).ok_or("needs another core")?;
    let (free_before, total_before) = frames::counts_here();
    for (blocks, to) in [(0, other), (MAX_ADOPTED_BLOCKS as u64 + 1, other), (1, me), (1, 999)] {
        if retype::give(blocks, to) != Err(RetypeError::BadArgument) {
            return Err(format!("give({blocks}, {to}) was not refused"));
        }
    }
    // Blocks already taken, with arguments `give` refuses: refused too, and given back.
    for to in [me, 999] {
        let first = frames::take_free_blocks(1).ok_or("no free block")?;
        if retype::give_taken(first, 1, to) != Err(RetypeError::BadArgument) {
            return Err(format!("give_taken(.., 1, {to}) was not refused"));
        }
        if !frames::is_free_here(first) {
            return Err(format!("give_taken(.., 1, {to}) kept the block it refused"));
        }
    }
    if frames::counts_here() != (free_before, total_before) {
        return Err("a refused retype changed this core's frames".into());
    }
    // Another operation holds the block: one whose participants include a core that does
    // not exist, so it aborts when the votes are in, but holds its locks until then.
    let first = frames::take_free_blocks(1).ok_or("no free block")?;
    let mut holders: CoreSet = cores.iter().copied().collect();
    holders.insert(crate::percpu::MAX_CORES - 1);
    let holder = Operation::Retype { first, blocks: 1, from: me, to: other };
    let op = twophase::start(holders, holder);
    let conflicting = retype::give_taken(first, 1, other);
    let held = twophase::finish(op);
    if conflicting != Err(RetypeError::Aborted) || held != Decision::Abort {
        return Err(format!("conflicting retypes ended {conflicting:?} and {held:?}"));
    }
    if frames::counts_here() != (free_before, total_before) || !frames::is_free_here(first) {
        return Err("the aborted retype did not give the giver its block back".into());
    }
    let locks = AtomicU64::new(0);
    let rows = AtomicU64::new(0);
    let count = |_| -> Result<(), String> {
        locks.fetch_add(twophase::prepared_here() as u64, Ordering::Relaxed);
        // (A row naming this core may be left by a retype there and back before.)
        let row = frames::retyped_here().contains(&(first, other));
        rows.fetch_add(row as u64, Ordering::Relaxed);
        Ok(())
    };
    all_ok(&cores, &smp::run_on(&cores, JOB_TIMEOUT_US, &count))?;
    if locks.load(Ordering::Relaxed) != 0 || rows.load(Ordering::Relaxed) != 0 {
        return Err("an aborted retype left a lock or a replica row".into());
    }
    println!("retype: refused bad requests; a conflicting retype aborted, nothing changed");
    Ok(())
}

/// Core `holder`, given `blocks` blocks from `first` by this core, waits until every frame
/// of them has arrived free there and gives them back; then they all arrive free here.
fn give_back(first: u64, blocks: u64, holder: usize) -> Result<(), String> {
    let me = this_core().index;
    let all_free_here =
        || (0..blocks * BLOCK_FRAMES).all(|f| frames::is_free_here(first + f * FRAME_SIZE));
    let back = |_| -> Result<(), String> {
        wait_for("the given blocks' arrival", all_free_here)?;
        if !frames::take_blocks_at(first, blocks) {
            return Err(format!("the {blocks} blocks did not arrive whole"));
        }
        retype::give_taken(first, blocks, me).map(|_| ()).map_err(|e| format!("giving back: {e}"))
    };
    all_ok(&[holder], &smp::run_on(&[holder], JOB_TIMEOUT_US, &back))?;
    wait_for("the blocks' return", all_free_here)
}

/// A retype of more frames than the receiver's channel holds (32 blocks: 2,048 frames in
/// 342 messages, against 32 slots; fewer where memory is short, as in `mem64m-smp16`): when
/// `give` returns, none of them is still queued on the giver, and all arrive free on the
/// receiver, which gives them back. (The giver used to send one channel's worth and leave
/// the rest to its later polls, one channel's worth a tick while it ran user code.)
fn large_retype() -> Result<(), String> {
    let me = this_core().index;
    let other = *smp::online_cores().iter().find(|&&c| c != me).ok_or("needs 2 cores")?;
    let mut blocks = 32;
    let first = loop {
        match retype::give(blocks, other) {
            Ok(first) => break first,
            Err(RetypeError::NoFreeBlocks | RetypeError::BelowReserve { .. }) if blocks > 1 => {
                blocks /= 2
            }
            Err(e) => return Err(format!("a retype of {blocks} blocks: {e}")),
        }
    };
    let queued = frames::queued_for(other);
    let frames_given = blocks * BLOCK_FRAMES;
    give_back(first, blocks, other)?;
    if queued != 0 {
        return Err(format!(
            "{queued} of {frames_given} frames were still queued when give returned"
        ));
    }
    println!("retype: {blocks} blocks ({frames_given} frames) handed over before give returned, and back");
    Ok(())
}

/// Two retypes to one receiver, the first prepared (holding its Yes) while the second is
/// voted on, that together need more room than the receiver has left to adopt blocks: the
/// second aborts, the first commits, and the receiver adopts all of the first's blocks.
/// (Each vote used to check the room alone, so both committed and the second's blocks were
/// never adopted: their frames were refused when they came.) Skipped where this core has no
/// run of that many free blocks (`mem64m-smp16`).
fn prepared_share_no_room() -> Result<(), String> {
    let cores = smp::online_cores();
    let me = this_core().index;
    let other = cores.iter().copied().find(|&c| c != me).ok_or("needs another core")?;
    let room = core::sync::atomic::AtomicU64::new(0);
    let read_room = |_| -> Result<(), String> {
        room.store(frames::adoption_room_here(), Ordering::Relaxed);
        Ok(())
    };
    all_ok(&[other], &smp::run_on(&[other], JOB_TIMEOUT_US, &read_room))?;
    let room = room.load(Ordering::Relaxed);
    if room == 0 {
        return Err(format!("core {other} can adopt no more blocks before the test"));
    }
    let Some(first) = frames::take_free_blocks(room) else {
        return super::skip(format!("core {me} has no run of {room} free blocks to prepare"));
    };
    let all: CoreSet = cores.iter().copied().collect();
    let op = twophase::start(all, Operation::Retype { first, blocks: room, from: me, to: other });
    let second = retype::give(1, other);
    let decision = twophase::finish(op);
    if decision == Decision::Commit {
        retype::send_committed(first, room, other);
    } else {
        frames::return_blocks(first, room);
    }
    if let Ok(b) = second {
        return Err(format!(
            "the second retype (block {b:#x}) committed too, with room for {room} blocks on \
             core {other} and {room} of them prepared"
        ));
    }
    if decision != Decision::Commit || second != Err(RetypeError::Aborted) {
        return Err(format!("the retypes ended {decision:?} and {second:?}"));
    }
    // The receiver adopted every block: they all arrive, and go back.
    give_back(first, room, other)?;
    println!("retype: {room} blocks prepared for core {other} left no room for one more");
    Ok(())
}

/// With only a few blocks above its reserve left free, this core gives blocks away one at a
/// time until a retype is refused: it is refused for the reserve, and leaves at least the
/// reserve free; the core still runs `hello`; every block given comes back, and every core
/// balances. (A giver used to give its last free block: `retype` then `run hello` failed
/// with `NoResources`.)
fn giver_keeps_its_reserve() -> Result<(), String> {
    let me = this_core().index;
    let other = *smp::online_cores().iter().find(|&&c| c != me).ok_or("needs 2 cores")?;
    super::balance::balanced(|| {
        let borrowed = Borrowed::leaving(
            crate::param::RETYPE_RESERVE_FRAMES + 4 * BLOCK_FRAMES + BLOCK_FRAMES / 2,
        );
        let mut given: Vec<u64> = Vec::new();
        // (A bound, so a giver that never stops cannot loop: it would fail below.)
        let refused = loop {
            match retype::give(1, other) {
                Ok(first) => given.push(first),
                Err(e) => break Some(e),
            }
            if given.len() >= MAX_ADOPTED_BLOCKS {
                break None;
            }
        };
        let free = frames::counts_here().0;
        let ran = crate::user::run("hello", "with its reserve");
        let back = given.iter().try_for_each(|&first| give_back(first, 1, other));
        drop(borrowed);
        back?;
        if given.is_empty() {
            return Err(format!("no block given ({refused:?}) with {free} frames free"));
        }
        if free < crate::param::RETYPE_RESERVE_FRAMES {
            return Err(format!(
                "gave {} blocks, leaving {free} free frames, below the reserve of {} \
                 (then refused: {refused:?})",
                given.len(),
                crate::param::RETYPE_RESERVE_FRAMES
            ));
        }
        if !matches!(refused, Some(RetypeError::BelowReserve { .. })) {
            return Err(format!("after {} blocks the retype ended {refused:?}", given.len()));
        }
        if ran != Ok(crate::thread::ExitStatus::Exited(0)) {
            return Err(format!("with {free} frames left, hello ended {ran:?}"));
        }
        println!("retype: gave {} blocks, kept {free} free frames, ran hello", given.len());
        Ok(())
    })
}

/// A retype this core coordinates of a block it never took, one of the receiver's own
/// boot share, free there: the giver cannot disown it and the receiver cannot adopt it,
/// so their votes refuse it and it aborts, with no replica row left and every core's
/// frames as they were. (Every core voted Yes: it committed, and both steps failed
/// unseen, `let _ =` in `frames::apply_retype`.)
fn unapplicable_retype_aborts() -> Result<(), String> {
    let me = this_core().index;
    let cores = smp::online_cores();
    let other = *cores.iter().find(|&&c| c != me).ok_or("needs 2 cores")?;
    let block = AtomicU64::new(0);
    // A free block of the receiver's: taken to learn its address, and put back.
    let find = |_| -> Result<(), String> {
        let first = frames::take_free_blocks(1).ok_or("no free block")?;
        frames::return_blocks(first, 1);
        block.store(first, Ordering::Relaxed);
        Ok(())
    };
    all_ok(&[other], &smp::run_on(&[other], JOB_TIMEOUT_US, &find))?;
    let first = block.load(Ordering::Relaxed);
    let before = counts(&cores)?;
    let all: CoreSet = cores.iter().copied().collect();
    let decision =
        twophase::commit(all, Operation::Retype { first, blocks: 1, from: me, to: other });
    let after = counts(&cores)?;
    if decision != Decision::Abort {
        return Err(format!(
            "a retype of block {first:#x} (core {other}'s, free there, never taken by core \
             {me}) from core {me} to core {other} committed"
        ));
    }
    if after != before {
        return Err(format!("the aborted retype changed (free, total): {before:?} -> {after:?}"));
    }
    no_failed_steps()?;
    println!("retype: a retype of a block its giver never took aborted");
    Ok(())
}

/// No core has had a retype step (adopting or disowning a block) fail since boot.
fn no_failed_steps() -> Result<(), String> {
    for c in smp::online_cores() {
        let failed = frames::retype_failures(c);
        if failed != 0 {
            return Err(format!("core {c}: {failed} retype steps failed (see `mem`)"));
        }
    }
    Ok(())
}

/// Frames taken from this core's list (a frame chain: no heap), freed when dropped.
struct Borrowed(frames::FrameChain);

impl Borrowed {
    /// Takes frames until only `left` are free (the next-fit allocator takes them in
    /// address order, so the frames left are mostly one run, with whole blocks in it).
    fn leaving(left: u64) -> Borrowed {
        let mut chain = frames::FrameChain::new();
        while frames::counts_here().0 > left {
            let Some(pa) = frames::alloc() else { break };
            chain.push(pa);
        }
        Borrowed(chain)
    }
}

impl Drop for Borrowed {
    fn drop(&mut self) {
        self.0.free_all();
    }
}

/// (Destructive: run `tlbfault4`, last.) A giver commits a retype of one block to this core,
/// sends half of its frames, and faults before sending the rest; meanwhile this core takes
/// one frame that arrived into use, and the giver frees it, so it comes back while its block
/// is still on its way (it must be taken back, not refused as sent twice). This core frees
/// the other half itself once the giver is dead and its messages read, and none twice:
/// afterwards every frame of the block is free here, and its counts grew by one block.
fn faulted_giver() -> Result<(), String> {
    let me = this_core().index;
    let live = smp::online_cores();
    let giver = *live.iter().rev().find(|&&c| c != me).ok_or("needs 2 live cores")?;
    let all: CoreSet = live.iter().copied().collect();
    let (free_before, total_before) = frames::counts_here();
    let given = AtomicU64::new(0);
    let claimed = core::sync::atomic::AtomicBool::new(false);
    let crash = |_| -> Result<(), String> {
        let first = frames::take_free_blocks(1).ok_or("no free block")?;
        let retype = Operation::Retype { first, blocks: 1, from: giver, to: me };
        if twophase::commit(all, retype) != Decision::Commit {
            frames::return_blocks(first, 1);
            return Err("the retype aborted".into());
        }
        // Step 4, half done: the even frames go.
        let half: Vec<u64> = (0..BLOCK_FRAMES).step_by(2).map(|f| first + f * FRAME_SIZE).collect();
        frames::queue_for_home(me, &half);
        monitor::flush_frame_returns();
        given.store(first, Ordering::Release);
        // The receiver takes the first frame into use; it is freed here, so it comes back
        // while its block is still on its way. Then the giver dies.
        let start = cpu::rdtsc();
        while !claimed.load(Ordering::Acquire) {
            if timer::us_since(start) > 5_000_000 {
                return Err("the receiver never took the first frame".into());
            }
            monitor::poll();
            cpu::pause();
        }
        frames::free(first).map_err(|e| format!("freeing a frame of the receiver's: {e:?}"))?;
        monitor::flush_frame_returns();
        super::fault_this_core()
    };
    let call = monitor::call_async(giver, &crash).map_err(|e| format!("{e:?}"))?;
    let faulted =
        || crate::percpu::core(giver).map(|c| c.state()) == Some(crate::percpu::CoreState::Faulted);
    let recovered = core::cell::Cell::new(0);
    wait_for("the faulted giver's frames' recovery", || {
        let first = given.load(Ordering::Acquire);
        if first != 0 && !claimed.load(Ordering::Relaxed) && frames::claim_here(first) {
            claimed.store(true, Ordering::Release);
        }
        recovered.set(recovered.get() + retype::recover_lost_frames());
        faulted()
            && first != 0
            && (0..BLOCK_FRAMES).all(|f| frames::is_free_here(first + f * FRAME_SIZE))
    })?;
    let _ = monitor::wait(call, JOB_TIMEOUT_US);
    let counts = frames::counts_here();
    if counts != (free_before + BLOCK_FRAMES, total_before + BLOCK_FRAMES) {
        return Err(format!(
            "after the block came, (free, total) = {counts:?}, not ({}, {})",
            free_before + BLOCK_FRAMES,
            total_before + BLOCK_FRAMES
        ));
    }
    if recovered.get() != BLOCK_FRAMES / 2 {
        return Err(format!("freed {} frames the giver never sent, not 32", recovered.get()));
    }
    println!("retype: giver {giver} faulted after sending half a block; the rest was freed here");
    Ok(())
}
