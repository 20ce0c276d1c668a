//! A syscall device as its kernel core serves it (Corey §4.4): the request channel read,
//! each call served, its result sent back on the reply channel, both URPC channels in
//! the ring page the program fed the device (`abi::sysdev`). Packet buffers are named by
//! offset in the device's packet area, never by a pointer of the program's.

use crate::arch::paging::phys_to_virt;
use crate::corey::{self, Frame, Ptr};
use crate::drivers::virtio_net::{self, MAX_FRAME};
use abi::sysdev::{call, REPLY_OFFSET, REQUEST_OFFSET, RING_SLOTS};
use abi::Error;
use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::Ordering;
use urpc::{ChannelMemory, Receiver, Sender, PAYLOAD_WORDS};

/// Bytes of a page.
const PAGE: usize = 4096;
/// Received frames a syscall device may have waiting; more are dropped (counted).
pub const QUEUE_FRAMES: usize = 64;
/// Receive buffers a syscall device may have posted; more are refused (`Busy`).
const POSTED_MAX: usize = 32;

/// One syscall device on its kernel core.
pub struct Ring {
    /// Requests from the program (this core is their only reader).
    requests: Receiver<'static, RING_SLOTS>,
    /// Replies to the program (this core is their only writer).
    replies: Sender<'static, RING_SLOTS>,
    /// Frames steered to this device, oldest first.
    pub received: VecDeque<Box<[u8]>>,
    /// Frames dropped because [`QUEUE_FRAMES`] were waiting.
    pub dropped: u64,
    /// Receive buffers the program posted (`NET_RECEIVE_BUFFER`) that wait for a frame,
    /// oldest first: (cookie, offset, length).
    posted: VecDeque<(u64, u64, u64)>,
    /// The packet area's pages.
    packets: Vec<Arc<Frame>>,
    /// The ring page: it outlives `requests` and `replies`, which point into it.
    _ring: Arc<Frame>,
    /// The device object (its `polled` flag is ours until this is dropped).
    pub device: Ptr,
}

impl Ring {
    /// Takes syscall device `device` for this kernel core: it must have a ring and no
    /// other kernel core.
    pub fn take(device: Ptr) -> Result<Ring, Error> {
        let sys = corey::syscall_device(&device).ok_or(Error::InvalidArgument)?;
        if sys.polled.swap(true, Ordering::AcqRel) {
            return Err(Error::InvalidArgument);
        }
        let (ring, packets) = sys.buffers.with(|b| (b.ring.clone(), b.packets.clone()));
        let Some(ring) = ring else {
            sys.polled.store(false, Ordering::Release);
            return Err(Error::InvalidArgument);
        };
        let base = phys_to_virt(ring.phys());
        // SAFETY: the ring page is a frame we hold (`_ring`, dropped after the channel ends
        // that borrow it), reached through the direct map and aligned to its page; a
        // `ChannelMemory` is atomics only, so any bytes the program writes there are a
        // valid value, and both channels fit in the page (`abi::sysdev`).
        let (requests, replies) = unsafe {
            (
                &*((base as usize + REQUEST_OFFSET) as *const ChannelMemory<RING_SLOTS>),
                &*((base as usize + REPLY_OFFSET) as *const ChannelMemory<RING_SLOTS>),
            )
        };
        Ok(Ring {
            requests: Receiver::new(requests),
            replies: Sender::new(replies),
            received: VecDeque::new(),
            dropped: 0,
            posted: VecDeque::new(),
            packets,
            _ring: ring,
            device,
        })
    }

    /// The IPv4 address whose frames this device takes (0: every frame).
    pub fn net_address(&self) -> u32 {
        corey::syscall_device(&self.device)
            .map_or(0, |s| s.net_address.load(Ordering::Acquire) as u32)
    }

    /// Serves the requests waiting, as many as the reply channel has room for (at most a
    /// ring's worth a round, so one device cannot starve the others). `nic`: whether the
    /// network device is this kernel core's.
    pub fn serve(&mut self, nic: bool) {
        let mut served = self.fill_posted();
        while served < RING_SLOTS && self.replies.free_slots() > 0 {
            let Some(m) = self.requests.try_recv() else { break };
            served += 1;
            if m.tag == call::NET_RECEIVE_BUFFER && nic && m.is_well_formed() {
                // Answered when a frame comes (at once if one waits).
                if self.posted.len() < POSTED_MAX {
                    self.posted.push_back((m.payload[0], m.payload[1], m.payload[2]));
                    served += self.fill_posted();
                    continue;
                }
                self.reply(m.tag, m.payload[0], Err(Error::Busy));
                continue;
            }
            let result = if m.is_well_formed() {
                self.call(m.tag, &m.payload, nic)
            } else {
                Err(Error::InvalidArgument)
            };
            self.reply(m.tag, m.payload[0], result);
        }
        if served > 0 {
            corey::sysdev::CALLS_SERVED.fetch_add(served as u64, Ordering::Relaxed);
        }
    }

    /// Sends the reply to call `tag` of `cookie` (the caller checked for room; only this
    /// core writes the channel).
    fn reply(&mut self, tag: u32, cookie: u64, result: Result<u64, Error>) {
        let mut reply = [0u64; PAYLOAD_WORDS];
        reply[0] = cookie;
        reply[1] = abi::encode(result);
        let _ = self.replies.try_send(tag, &reply);
    }

    /// Fills the posted receive buffers with the frames waiting, oldest to oldest, and
    /// answers each with its frame's length, while the reply channel has room; how many.
    fn fill_posted(&mut self) -> usize {
        let mut answered = 0;
        while !self.posted.is_empty() && !self.received.is_empty() && self.replies.free_slots() > 0
        {
            let (Some((cookie, offset, len)), Some(frame)) =
                (self.posted.pop_front(), self.received.pop_front())
            else {
                break;
            };
            let n = frame.len().min(len as usize);
            // A bad buffer loses this frame: the caller's fault.
            let result = self.copy_to_area(offset, &frame[..n]).map(|_| frame.len() as u64);
            self.reply(call::NET_RECEIVE_BUFFER, cookie, result);
            answered += 1;
        }
        answered
    }

    /// One call: `tag` is the call number, `args` the payload (`args[0]` the cookie).
    fn call(&mut self, tag: u32, args: &[u64; PAYLOAD_WORDS], nic: bool) -> Result<u64, Error> {
        match tag {
            call::NULL => Ok(0),
            call::NET_SEND if nic => {
                let (offset, len) = (args[1], args[2]);
                if !(14..=MAX_FRAME as u64).contains(&len) {
                    return Err(Error::InvalidArgument);
                }
                let mut frame = [0u8; MAX_FRAME];
                let frame = &mut frame[..len as usize];
                self.copy_from_area(offset, frame)?;
                virtio_net::send(frame).map(|_| 0).map_err(|e| e.to_abi())
            }
            call::NET_RECEIVE if nic => {
                let (offset, len) = (args[1], args[2]);
                let Some(frame) = self.received.pop_front() else { return Ok(0) };
                let n = frame.len().min(len as usize);
                // A bad offset loses this frame (it left the queue): the caller's fault.
                self.copy_to_area(offset, &frame[..n])?;
                Ok(frame.len() as u64)
            }
            call::NET_SEND | call::NET_RECEIVE | call::NET_RECEIVE_BUFFER => {
                Err(Error::NotPermitted)
            }
            _ => Err(Error::NoSuchCall),
        }
    }

    /// The direct-map address of each page-bounded piece of `[offset, offset + len)` of the
    /// packet area, or `BadAddress` if it does not lie inside the area.
    fn pieces(&self, offset: u64, len: usize) -> Result<Vec<(u64, usize)>, Error> {
        let area = (self.packets.len() * PAGE) as u64;
        let end = offset.checked_add(len as u64).ok_or(Error::BadAddress)?;
        if end > area {
            return Err(Error::BadAddress);
        }
        let mut out = Vec::new();
        let mut at = offset as usize;
        while at < end as usize {
            let n = (PAGE - at % PAGE).min(end as usize - at);
            out.push((phys_to_virt(self.packets[at / PAGE].phys()) + (at % PAGE) as u64, n));
            at += n;
        }
        Ok(out)
    }

    /// Copies packet-area bytes at `offset` into `out`.
    fn copy_from_area(&self, offset: u64, out: &mut [u8]) -> Result<(), Error> {
        let mut done = 0;
        for (va, n) in self.pieces(offset, out.len())? {
            // SAFETY: `va` lies in a packet-area frame we hold, `n` bytes inside its page
            // (`pieces`); the program may write them meanwhile, which only changes the
            // bytes it sends.
            unsafe { core::ptr::copy_nonoverlapping(va as *const u8, out[done..].as_mut_ptr(), n) };
            done += n;
        }
        Ok(())
    }

    /// Copies `data` into the packet area at `offset`.
    fn copy_to_area(&self, offset: u64, data: &[u8]) -> Result<(), Error> {
        let mut done = 0;
        for (va, n) in self.pieces(offset, data.len())? {
            // SAFETY: as in `copy_from_area`, written instead of read.
            unsafe { core::ptr::copy_nonoverlapping(data[done..].as_ptr(), va as *mut u8, n) };
            done += n;
        }
        Ok(())
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        if let Some(sys) = corey::syscall_device(&self.device) {
            // The channels are mid-stream now: a kernel core that takes the device again
            // needs a fresh ring (`device_buf` clears one).
            sys.buffers.with(|b| b.ring = None);
            sys.polled.store(false, Ordering::Release);
        }
    }
}
