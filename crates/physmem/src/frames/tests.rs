//! Tests of one core's free-frame allocator.

use super::*;
use std::vec;
use std::vec::Vec;

const K: u64 = FRAME_SIZE;

fn r(a: u64, b: u64) -> PhysRange {
    PhysRange::new(a * K, b * K)
}

#[test]
fn allocates_every_frame_once_then_runs_out() {
    // 70 frames in two ranges given out of order: crosses a word and a range boundary.
    let ranges = [r(200, 210), r(100, 160)];
    let mut storage = vec![0; bitmap_words(&ranges)];
    assert_eq!(storage.len(), 2);
    let mut frames = CoreFrames::new(3, &ranges, &mut storage).unwrap();
    assert_eq!((frames.core(), frames.total(), frames.free_count()), (3, 70, 70));
    let mut got = Vec::new();
    while let Some(a) = frames.alloc() {
        assert!(frames.owns(a) && !frames.is_free(a));
        got.push(a / K);
    }
    let want: Vec<u64> = (100..160).chain(200..210).collect();
    assert_eq!(got, want);
    assert_eq!(frames.free_count(), 0);
    frames.free(150 * K).unwrap();
    assert_eq!(frames.alloc(), Some(150 * K));
}

#[test]
fn free_and_mark_errors() {
    let ranges = [r(1, 3)];
    let mut storage = [0; 1];
    let mut frames = CoreFrames::new(0, &ranges, &mut storage).unwrap();
    assert_eq!(frames.free(K), Err(FrameError::DoubleFree));
    assert_eq!(frames.free(K + 8), Err(FrameError::Unaligned));
    assert_eq!(frames.free(3 * K), Err(FrameError::NotOwned));
    assert_eq!(frames.free(0), Err(FrameError::NotOwned));
    frames.mark_used(2 * K).unwrap();
    assert_eq!(frames.mark_used(2 * K), Err(FrameError::NotFree));
    assert!(!frames.is_free(2 * K + 5) && frames.is_free(K + 5));
    assert_eq!(frames.alloc(), Some(K));
    assert_eq!(frames.alloc(), None);
    frames.free(2 * K).unwrap();
    assert_eq!(frames.free(2 * K), Err(FrameError::DoubleFree));
    assert_eq!(frames.free_count(), 1);
}

#[test]
fn next_fit_moves_on() {
    let ranges = [r(0, 256)];
    let mut storage = [0; 4];
    let mut frames = CoreFrames::new(0, &ranges, &mut storage).unwrap();
    for _ in 0..130 {
        frames.alloc().unwrap();
    }
    frames.free(0).unwrap();
    // The hint is in word 2, so frame 130 comes before the freed frame 0.
    assert_eq!(frames.alloc(), Some(130 * K));
}

#[test]
fn setup_errors() {
    let mut storage = [0; 1];
    assert_eq!(
        CoreFrames::new(0, &[r(0, 65)], &mut storage).err(),
        Some(SetupError::StorageTooSmall { needed: 2, got: 1 })
    );
    let unaligned = [PhysRange::new(1, K)];
    assert_eq!(CoreFrames::new(0, &unaligned, &mut storage).err(), Some(SetupError::Unaligned));
    assert_eq!(
        CoreFrames::new(0, &[r(0, 4), r(3, 5)], &mut storage).err(),
        Some(SetupError::Overlap)
    );
    let many: Vec<_> = (0..=MAX_RANGES_PER_CORE as u64).map(|i| r(2 * i, 2 * i + 1)).collect();
    assert_eq!(CoreFrames::new(0, &many, &mut storage).err(), Some(SetupError::TooManyRanges));
    let mut none = CoreFrames::new(0, &[r(4, 4)], &mut []).unwrap();
    assert_eq!((none.total(), none.alloc()), (0, None));
}

/// Block-sized runs, in frames.
const BF: u64 = BLOCK_FRAMES;

#[test]
fn retype_moves_a_block_from_giver_to_receiver() {
    // Giver: frames 0..3*64 plus a stray frame, blocks 0, 1, 2; receiver: 10 blocks up.
    let gr = [r(0, 3 * BF + 1)];
    let mut gs = vec![0; bitmap_words(&gr)];
    let mut giver = CoreFrames::new(0, &gr, &mut gs).unwrap();
    let rr = [r(10 * BF, 11 * BF)];
    let mut rs = vec![0; bitmap_words(&rr)];
    let mut receiver = CoreFrames::new(1, &rr, &mut rs).unwrap();
    giver.mark_used(5 * K).unwrap(); // block 0 is not wholly free
                                     // The highest run of two free blocks: blocks 1 and 2.
    assert_eq!(giver.take_free_blocks(3), None);
    let first = giver.take_free_blocks(2).unwrap();
    assert_eq!(first, BF * K);
    assert_eq!(giver.free_count(), 3 * BF + 1 - 1 - 2 * BF);
    assert!(!giver.is_free(first) && giver.owns(first));
    for b in 0..2 {
        giver.disown_block(first + b * BLOCK_SIZE).unwrap();
        receiver.adopt_block(first + b * BLOCK_SIZE).unwrap();
    }
    assert_eq!((giver.total(), receiver.total()), (BF + 1, 3 * BF));
    // Its frames arrive in use and are freed into the receiver one by one.
    assert!(receiver.owns(first) && !receiver.is_free(first));
    for f in 0..2 * BF {
        receiver.free(first + f * K).unwrap();
    }
    assert_eq!(receiver.free(first), Err(FrameError::DoubleFree));
    assert_eq!(receiver.free_count(), 3 * BF);
    assert_eq!(receiver.adopted_blocks().count(), 2);
    // Every frame comes out once: its own block first, then the adopted ones.
    let mut got = std::collections::BTreeSet::new();
    while let Some(a) = receiver.alloc() {
        assert!(got.insert(a), "frame {a:#x} handed out twice");
    }
    assert_eq!(got.len() as u64, 3 * BF);
    assert!(got.contains(&first) && got.contains(&(first + 2 * BLOCK_SIZE - K)));
}

#[test]
fn a_giver_keeps_its_reserve() {
    // Four free blocks and a stray frame; block 3 not wholly free.
    let rr = [r(0, 4 * BF + 1)];
    let mut rs = vec![0; bitmap_words(&rr)];
    let mut c = CoreFrames::new(0, &rr, &mut rs).unwrap();
    c.mark_used(3 * BF * K).unwrap();
    let free = 4 * BF;
    // Two blocks would leave 2 * BF: more than a reserve of 2 * BF refuses them, and takes
    // nothing.
    assert_eq!(c.take_free_blocks_keeping(2, 2 * BF + 1), Err(TakeError::Reserve { free }));
    assert_eq!(c.take_free_blocks_keeping(5, 0), Err(TakeError::Reserve { free }));
    assert_eq!(c.take_free_blocks_keeping(u64::MAX, 0), Err(TakeError::Reserve { free }));
    assert_eq!(c.free_count(), free);
    // Exactly the reserve left is allowed.
    assert_eq!(c.take_free_blocks_keeping(2, 2 * BF), Ok(BF * K));
    assert_eq!(c.free_count(), 2 * BF);
    // Enough frames, but no run of wholly free blocks: block 0 is the only one left.
    assert_eq!(c.take_free_blocks_keeping(2, 0), Err(TakeError::NoRun));
    assert_eq!(c.take_free_blocks_keeping(1, BF + 1), Err(TakeError::Reserve { free: 2 * BF }));
    assert_eq!(c.take_free_blocks_keeping(1, BF), Ok(0));
}

#[test]
fn adopted_blocks_are_given_on_and_back() {
    let rr = [r(0, BF)];
    let mut rs = vec![0; bitmap_words(&rr)];
    let mut c = CoreFrames::new(0, &rr, &mut rs).unwrap();
    // Its own boot block cannot be adopted while it holds it...
    assert_eq!(c.adopt_block(0), Err(FrameError::CannotAdopt));
    assert_eq!(c.adopt_block(BLOCK_SIZE + K), Err(FrameError::Unaligned));
    // ...but can once given away.
    assert_eq!(c.take_free_blocks(1), Some(0));
    c.disown_block(0).unwrap();
    assert_eq!((c.total(), c.free_count()), (0, 0));
    c.adopt_block(0).unwrap();
    assert_eq!(c.total(), BF);
    c.free(0).unwrap();
    assert_eq!(c.alloc(), Some(0));
    // A foreign block: adopted, freed, given on (it must be wholly free first).
    let far = 100 * BLOCK_SIZE;
    c.adopt_block(far).unwrap();
    assert_eq!(c.adopt_block(far), Err(FrameError::CannotAdopt));
    for f in 0..BF {
        c.free(far + f * K).unwrap();
    }
    assert_eq!(c.disown_block(far), Err(FrameError::NotFree));
    assert_eq!(c.take_free_blocks(1), Some(far));
    assert_eq!(c.return_blocks(far, 1), Ok(()));
    assert_eq!(c.take_free_blocks(1), Some(far));
    c.disown_block(far).unwrap();
    assert!(!c.owns(far) && c.adopted_blocks().next().is_none());
    assert_eq!(c.free(far), Err(FrameError::NotOwned));
}

#[test]
fn checks_say_what_adopt_and_disown_would_do() {
    // A core with two boot blocks, one of which (block 1) it took to give.
    let rr = [r(0, 2 * BF)];
    let mut rs = vec![0; bitmap_words(&rr)];
    let mut c = CoreFrames::new(0, &rr, &mut rs).unwrap();
    assert_eq!(c.take_free_blocks(1), Some(BLOCK_SIZE));
    let far = 100 * BLOCK_SIZE;
    // Disown: only what it owns and took whole; a check changes nothing.
    assert_eq!(c.check_disown(0), Err(FrameError::NotFree), "not taken: free frames");
    assert_eq!(c.check_disown(far), Err(FrameError::NotOwned));
    assert_eq!(c.check_disown(BLOCK_SIZE + K), Err(FrameError::Unaligned));
    assert_eq!(c.check_disown(BLOCK_SIZE), Ok(()));
    assert_eq!((c.total(), c.free_count()), (2 * BF, BF));
    // Adopt: not its own boot block while it holds it, not one it adopted already.
    assert_eq!(c.check_adopt(0), Err(FrameError::CannotAdopt));
    assert_eq!(c.check_adopt(far + K), Err(FrameError::Unaligned));
    assert_eq!(c.check_adopt(far), Ok(()));
    // The checks agree with the steps.
    for block in [0, far, BLOCK_SIZE + K] {
        assert_eq!(c.check_disown(block), c.disown_block(block));
    }
    assert_eq!(c.check_disown(BLOCK_SIZE), c.disown_block(BLOCK_SIZE));
    assert_eq!(c.check_adopt(BLOCK_SIZE), Ok(()), "given away: can come back");
    assert_eq!(c.check_adopt(far), c.adopt_block(far));
    assert_eq!(c.check_adopt(far), Err(FrameError::CannotAdopt), "adopted already");
    assert_eq!(c.check_adopt(0), c.adopt_block(0));
    assert_eq!(c.check_adopt(BLOCK_SIZE), c.adopt_block(BLOCK_SIZE));
    assert_eq!(c.check_disown(far), Ok(()), "adopted, every frame in use");
    assert_eq!(c.total(), 3 * BF);
}

#[test]
fn a_given_block_is_taken_back_by_address() {
    let rr = [r(0, 2 * BF)];
    let mut rs = vec![0; bitmap_words(&rr)];
    let mut c = CoreFrames::new(0, &rr, &mut rs).unwrap();
    c.mark_used(3 * K).unwrap();
    assert_eq!(c.take_blocks_at(0, 1), Err(FrameError::NotFree));
    assert_eq!(c.take_blocks_at(K, 1), Err(FrameError::Unaligned));
    assert_eq!(c.take_blocks_at(BLOCK_SIZE, 2), Err(FrameError::NotOwned));
    assert_eq!(c.free_count(), 2 * BF - 1, "a refused take takes nothing");
    assert_eq!(c.take_blocks_at(BLOCK_SIZE, 1), Ok(()));
    assert_eq!(c.free_count(), BF - 1);
    assert_eq!(c.return_blocks(BLOCK_SIZE, 1), Ok(()));
}

#[test]
fn adoption_is_bounded() {
    let mut none = CoreFrames::new(0, &[], &mut []).unwrap();
    for b in 0..MAX_ADOPTED_BLOCKS as u64 {
        assert!(none.can_adopt(1));
        none.adopt_block((b + 1) * 2 * BLOCK_SIZE).unwrap();
    }
    assert!(!none.can_adopt(1));
    assert_eq!(none.adopt_block(BLOCK_SIZE), Err(FrameError::CannotAdopt));
    assert_eq!(none.total(), MAX_ADOPTED_BLOCKS as u64 * BF);
}
