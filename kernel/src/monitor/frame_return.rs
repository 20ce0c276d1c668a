//! Frames freed here that belong to another core go home by message, in batches.

use super::protocol::{MonitorMessage, FRAMES_PER_RETURN};
use super::with;
use crate::mem::frames;
use crate::percpu::{self, CoreState};
use crate::transport::try_send;

/// Sends the frames this core freed for `owner` home (Multikernel: memory is given back
/// by message), in batches of [`FRAMES_PER_RETURN`]: the full batches, or (`all`) every
/// frame. A send never waits: if the owner's channel is full (the owner is behind), the
/// frames go back into the queue for the next try (the next poll, tick or idle pass), so
/// none is ever dropped and the freeing core never blocks on a busy owner. Only a faulted
/// owner's frames stay away, counted as stranded.
pub(super) fn send_frames_home(owner: usize, all: bool) {
    let at_least = if all { 1 } else { FRAMES_PER_RETURN };
    let mut frames = [0u64; FRAMES_PER_RETURN];
    loop {
        let count = frames::take_for_home(owner, &mut frames, at_least);
        if count == 0 {
            break;
        }
        if percpu::core(owner).is_some_and(|c| c.state() == CoreState::Faulted) {
            with(|m| m.stats.frames_stranded += count as u64);
            continue;
        }
        if try_send(owner, MonitorMessage::FrameReturn { count, frames }).is_err() {
            frames::queue_for_home(owner, &frames[..count]);
            break;
        }
    }
}

/// Sends every frame this core freed for another core home now (those whose send fails
/// stay queued).
pub fn flush_frame_returns() {
    for owner in 0..percpu::core_count() {
        send_frames_home(owner, true);
    }
}

/// Sends the full batches of freed frames home (from every poll: an owner gets its frames
/// back while the freeing core is busy, not only when it goes idle).
pub(super) fn send_full_frame_batches() {
    if frames::queued_for_home() < FRAMES_PER_RETURN {
        return;
    }
    for owner in 0..percpu::core_count() {
        send_frames_home(owner, false);
    }
}
