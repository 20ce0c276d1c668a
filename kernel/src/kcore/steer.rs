//! Received frames to the syscall devices of a kernel core, each a program's TCP/IP stack:
//! by the device's IPv4 address (`device_conf`), and among devices of one address by a
//! hash of the flow (software RSS); the choice is `crates/steer`'s.

use super::ring::{Ring, QUEUE_FRAMES};
use crate::drivers::virtio_net::{self, MAX_FRAME};
use abi::sysdev::PCORE_DEVICES_MAX;
use alloc::vec::Vec;

/// Frames taken off the device each round at most (the rings are served between).
const FRAMES_PER_ROUND: usize = 32;

/// Takes the frames the network device received and queues each for its devices.
pub fn receive_all(rings: &mut [Ring]) {
    let mut buf = [0u8; MAX_FRAME];
    let mut addresses = [0u32; PCORE_DEVICES_MAX];
    let n = rings.len().min(PCORE_DEVICES_MAX);
    for (a, r) in addresses.iter_mut().zip(rings.iter()) {
        *a = r.net_address();
    }
    for _ in 0..FRAMES_PER_ROUND {
        let Some(len) = virtio_net::receive(&mut buf) else { return };
        let frame = &buf[..len.min(MAX_FRAME)];
        let targets = steer::targets(frame, &addresses[..n]);
        for (i, r) in rings.iter_mut().enumerate().take(n) {
            if targets & (1 << i) != 0 {
                queue(r, frame);
            }
        }
    }
}

/// Queues a copy of `frame` for `r`, or drops it (counted) if [`QUEUE_FRAMES`] wait or
/// this core's heap has no room.
fn queue(r: &mut Ring, frame: &[u8]) {
    let mut copy = Vec::new();
    if r.received.len() >= QUEUE_FRAMES
        || copy.try_reserve_exact(frame.len()).is_err()
        || r.received.try_reserve(1).is_err()
    {
        r.dropped += 1;
        return;
    }
    copy.extend_from_slice(frame);
    r.received.push_back(copy.into_boxed_slice());
}
