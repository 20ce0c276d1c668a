//! Received frames to the syscall devices of a kernel core (each a program's TCP/IP
//! stack): an IPv4 frame goes to the device whose address it is for, an ARP frame to
//! every device (each stack answers for its own address), anything else, and frames for
//! no device's address, to the devices that take every frame (address 0).

use super::ring::{Ring, QUEUE_FRAMES};
use crate::drivers::virtio_net::{self, MAX_FRAME};
use alloc::vec::Vec;

/// Ethernet types.
const IPV4: u16 = 0x0800;
const ARP: u16 = 0x0806;

/// Frames taken off the device each round at most (the rings are served between).
const FRAMES_PER_ROUND: usize = 32;

/// Takes the frames the network device received and queues each for its devices.
pub fn receive_all(rings: &mut [Ring]) {
    let mut buf = [0u8; MAX_FRAME];
    let mut addresses = [0u32; abi::sysdev::PCORE_DEVICES_MAX];
    for (a, r) in addresses.iter_mut().zip(rings.iter()) {
        *a = r.net_address();
    }
    let addresses = &addresses[..rings.len().min(abi::sysdev::PCORE_DEVICES_MAX)];
    for _ in 0..FRAMES_PER_ROUND {
        let Some(len) = virtio_net::receive(&mut buf) else { return };
        let frame = &buf[..len.min(MAX_FRAME)];
        for (r, &address) in rings.iter_mut().zip(addresses) {
            if wanted(frame, address, addresses) {
                queue(r, frame);
            }
        }
    }
}

/// Whether a device with IPv4 address `address` (0: every frame) takes `frame`, when the
/// kernel core's devices have `all` addresses.
fn wanted(frame: &[u8], address: u32, all: &[u32]) -> bool {
    let Some(ethertype) = frame.get(12..14).map(|b| u16::from_be_bytes([b[0], b[1]])) else {
        return false;
    };
    match ethertype {
        ARP => true,
        IPV4 => match frame.get(30..34) {
            Some(d) => {
                let dst = u32::from_be_bytes([d[0], d[1], d[2], d[3]]);
                dst == address || (address == 0 && !all.contains(&dst))
            }
            None => false,
        },
        _ => address == 0,
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
