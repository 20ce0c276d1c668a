//! Sockets (issue M12): the calls a BSD program expects, over one [`Stack`] and its smoltcp
//! sockets, every one non-blocking (`WouldBlock` when it would wait), and [`Sockets::wait`]
//! on several at once. TCP: [`listen`](Sockets::listen) with a real backlog (smoltcp has
//! none: a pool of listening sockets, each connection taken out by
//! [`accept`](Sockets::accept) and replaced at once, so a burst of SYNs up to the backlog
//! is answered, not reset), [`read`](Sockets::read), [`write`](Sockets::write),
//! [`shutdown`](Sockets::shutdown), [`close`](Sockets::close). UDP:
//! [`bind_udp`](Sockets::bind_udp), [`send_to`](Sockets::send_to),
//! [`recv_from`](Sockets::recv_from). A closed connection's socket is reclaimed as soon as
//! it is over, TIME_WAIT included (left at once), so a server closing thousands of
//! connections a second never runs out of sockets. Request and response traffic: no
//! Nagle, no delayed ACK.

use super::Stack;
use alloc::collections::VecDeque;
use alloc::vec;
use alloc::vec::Vec;
use smoltcp::iface::{SocketHandle, SocketSet};
use smoltcp::socket::{tcp, udp};
use smoltcp::wire::{IpAddress, IpEndpoint, Ipv4Address};

/// Bytes of each TCP socket's receive and send buffers.
const TCP_BUFFER: usize = 16 << 10;
/// Datagrams each UDP socket buffer holds, and their bytes.
const UDP_SLOTS: usize = 16;
const UDP_SLOT_BYTES: usize = 1500;
/// Most listening sockets one `listen` keeps.
pub const BACKLOG_MAX: usize = 64;

/// Why a socket call did not do what was asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// It would have to wait: nothing to read or accept, no room to write.
    WouldBlock,
    /// The id names no socket of this kind (never one, or closed).
    BadSocket,
    /// The connection is not open for this (reset, or shut down for writing).
    NotConnected,
    /// The port is 0, taken, or the backlog out of range.
    InvalidArgument,
}

/// A socket's id in its [`Sockets`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct SocketId(usize);

/// What [`Sockets::wait`] waits for on one socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interest {
    /// Something to read (bytes, the peer's close, a datagram) or, on a listening
    /// socket, a connection to accept.
    Read,
    /// Room to write.
    Write,
}

enum Entry {
    Free,
    /// A listening port: its pool of sockets, and connections established on them and
    /// not yet accepted, oldest first.
    Listen {
        port: u16,
        pool: Vec<SocketHandle>,
        ready: VecDeque<SocketHandle>,
    },
    Tcp(SocketHandle),
    Udp(SocketHandle),
}

/// A stack and its sockets.
pub struct Sockets {
    /// The stack (its device, clock and interface).
    pub stack: Stack,
    set: SocketSet<'static>,
    entries: Vec<Entry>,
    /// Sockets closed by the program, reclaimed once their connection is over.
    closing: Vec<SocketHandle>,
}

impl Sockets {
    /// The sockets of `stack` (none yet).
    pub fn new(stack: Stack) -> Sockets {
        Sockets { stack, set: SocketSet::new(Vec::new()), entries: Vec::new(), closing: Vec::new() }
    }

    /// One turn of the stack: frames in and out; established connections move to their
    /// listener's queue, and closed sockets are reclaimed.
    pub fn poll(&mut self) {
        self.stack.poll(&mut self.set);
        for entry in self.entries.iter_mut() {
            if let Entry::Listen { port, pool, ready } = entry {
                for i in (0..pool.len()).rev() {
                    let socket = self.set.get_mut::<tcp::Socket>(pool[i]);
                    if socket.is_active() && socket.state() != tcp::State::SynReceived {
                        ready.push_back(pool.swap_remove(i));
                        pool.push(self.set.add(listening(*port)));
                    } else if !socket.is_open() {
                        let _ = socket.listen(*port);
                    }
                }
            }
        }
        let set = &mut self.set;
        self.closing.retain(|&h| {
            let socket = set.get_mut::<tcp::Socket>(h);
            let over = matches!(socket.state(), tcp::State::Closed | tcp::State::TimeWait);
            if over {
                socket.abort();
                set.remove(h);
            }
            !over
        });
    }

    /// Listens for TCP connections on `port` with `backlog` (1 to [`BACKLOG_MAX`])
    /// listening sockets.
    pub fn listen(&mut self, port: u16, backlog: usize) -> Result<SocketId, Error> {
        let taken =
            self.entries.iter().any(|e| matches!(e, Entry::Listen { port: p, .. } if *p == port));
        if port == 0 || taken || !(1..=BACKLOG_MAX).contains(&backlog) {
            return Err(Error::InvalidArgument);
        }
        let pool = (0..backlog).map(|_| self.set.add(listening(port))).collect();
        Ok(self.insert(Entry::Listen { port, pool, ready: VecDeque::new() }))
    }

    /// The oldest connection established on listening socket `id`, as a socket of its
    /// own, and its peer's address.
    pub fn accept(&mut self, id: SocketId) -> Result<(SocketId, IpEndpoint), Error> {
        let Some(Entry::Listen { ready, .. }) = self.entries.get_mut(id.0) else {
            return Err(Error::BadSocket);
        };
        let handle = ready.pop_front().ok_or(Error::WouldBlock)?;
        let peer = self.set.get::<tcp::Socket>(handle).remote_endpoint();
        let peer = peer.unwrap_or(IpEndpoint::new(IpAddress::Ipv4(Ipv4Address::UNSPECIFIED), 0));
        Ok((self.insert(Entry::Tcp(handle)), peer))
    }

    /// Reads what has come on connection `id` into `buf`: the bytes read, 0 once the peer
    /// has closed and everything is read.
    pub fn read(&mut self, id: SocketId, buf: &mut [u8]) -> Result<usize, Error> {
        let socket = self.tcp(id)?;
        if socket.can_recv() {
            return socket.recv_slice(buf).map_err(|_| Error::NotConnected);
        }
        if socket.may_recv() {
            Err(Error::WouldBlock)
        } else if matches!(socket.state(), tcp::State::Closed | tcp::State::Listen) {
            Err(Error::NotConnected)
        } else {
            Ok(0)
        }
    }

    /// Writes as much of `buf` as connection `id` has room for: the bytes taken.
    pub fn write(&mut self, id: SocketId, buf: &[u8]) -> Result<usize, Error> {
        let socket = self.tcp(id)?;
        if !socket.may_send() {
            return Err(Error::NotConnected);
        }
        match socket.send_slice(buf) {
            Ok(0) if !buf.is_empty() => Err(Error::WouldBlock),
            Ok(n) => Ok(n),
            Err(_) => Err(Error::NotConnected),
        }
    }

    /// Ends connection `id`'s sending side (a FIN once what was written has gone); it can
    /// still read.
    pub fn shutdown(&mut self, id: SocketId) -> Result<(), Error> {
        self.tcp(id)?.close();
        Ok(())
    }

    /// Closes socket `id`: a connection ends as [`shutdown`](Self::shutdown) does and its
    /// socket is reclaimed once over; a listening port stops listening (connections not
    /// yet accepted are reset); a UDP socket is unbound. The id is free again.
    pub fn close(&mut self, id: SocketId) -> Result<(), Error> {
        let entry = self.entries.get_mut(id.0).ok_or(Error::BadSocket)?;
        match core::mem::replace(entry, Entry::Free) {
            Entry::Free => return Err(Error::BadSocket),
            Entry::Tcp(h) => {
                self.set.get_mut::<tcp::Socket>(h).close();
                self.closing.push(h);
            }
            Entry::Listen { pool, ready, .. } => {
                for h in pool.into_iter().chain(ready) {
                    self.set.get_mut::<tcp::Socket>(h).abort();
                    self.closing.push(h);
                }
            }
            Entry::Udp(h) => {
                self.set.remove(h);
            }
        }
        Ok(())
    }

    /// A UDP socket bound to `port`.
    pub fn bind_udp(&mut self, port: u16) -> Result<SocketId, Error> {
        let buffer = || {
            udp::PacketBuffer::new(
                vec![udp::PacketMetadata::EMPTY; UDP_SLOTS],
                vec![0u8; UDP_SLOTS * UDP_SLOT_BYTES],
            )
        };
        let mut socket = udp::Socket::new(buffer(), buffer());
        socket.bind(port).map_err(|_| Error::InvalidArgument)?;
        let handle = self.set.add(socket);
        Ok(self.insert(Entry::Udp(handle)))
    }

    /// Sends `buf` as one datagram from UDP socket `id` to `to`.
    pub fn send_to(&mut self, id: SocketId, buf: &[u8], to: IpEndpoint) -> Result<(), Error> {
        let socket = self.udp(id)?;
        match socket.send_slice(buf, to) {
            Ok(()) => Ok(()),
            Err(udp::SendError::BufferFull) => Err(Error::WouldBlock),
            Err(udp::SendError::Unaddressable) => Err(Error::InvalidArgument),
        }
    }

    /// The next datagram on UDP socket `id`, copied into `buf`: its length and sender. A
    /// datagram longer than `buf` is `InvalidArgument`.
    pub fn recv_from(
        &mut self,
        id: SocketId,
        buf: &mut [u8],
    ) -> Result<(usize, IpEndpoint), Error> {
        let socket = self.udp(id)?;
        match socket.recv_slice(buf) {
            Ok((n, meta)) => Ok((n, meta.endpoint)),
            Err(udp::RecvError::Exhausted) => Err(Error::WouldBlock),
            Err(udp::RecvError::Truncated) => Err(Error::InvalidArgument),
        }
    }

    /// Polls the stack until one of `interests` is ready or `timeout_us` microseconds
    /// pass (the core yields between turns); fills `ready` with those that are (cleared
    /// first) and returns how many.
    pub fn wait(
        &mut self,
        interests: &[(SocketId, Interest)],
        ready: &mut Vec<(SocketId, Interest)>,
        timeout_us: u64,
    ) -> usize {
        let until = self.stack.clock.micros().saturating_add(timeout_us);
        loop {
            self.poll();
            ready.clear();
            ready.extend(interests.iter().copied().filter(|&(id, what)| self.is_ready(id, what)));
            if !ready.is_empty() || self.stack.clock.micros() >= until {
                return ready.len();
            }
            crate::thread::yield_now();
        }
    }

    /// Whether `what` on `id` would not block (a bad id is ready: the call says why).
    fn is_ready(&self, id: SocketId, what: Interest) -> bool {
        match (self.entries.get(id.0), what) {
            (Some(Entry::Listen { ready, .. }), Interest::Read) => !ready.is_empty(),
            (Some(Entry::Listen { .. }), Interest::Write) => false,
            (Some(Entry::Tcp(h)), Interest::Read) => {
                let s = self.set.get::<tcp::Socket>(*h);
                s.can_recv() || !s.may_recv()
            }
            (Some(Entry::Tcp(h)), Interest::Write) => {
                let s = self.set.get::<tcp::Socket>(*h);
                s.can_send() || !s.may_send()
            }
            (Some(Entry::Udp(h)), Interest::Read) => self.set.get::<udp::Socket>(*h).can_recv(),
            (Some(Entry::Udp(h)), Interest::Write) => self.set.get::<udp::Socket>(*h).can_send(),
            (Some(Entry::Free) | None, _) => true,
        }
    }

    fn tcp(&mut self, id: SocketId) -> Result<&mut tcp::Socket<'static>, Error> {
        match self.entries.get(id.0) {
            Some(Entry::Tcp(h)) => Ok(self.set.get_mut::<tcp::Socket>(*h)),
            _ => Err(Error::BadSocket),
        }
    }

    fn udp(&mut self, id: SocketId) -> Result<&mut udp::Socket<'static>, Error> {
        match self.entries.get(id.0) {
            Some(Entry::Udp(h)) => Ok(self.set.get_mut::<udp::Socket>(*h)),
            _ => Err(Error::BadSocket),
        }
    }

    /// Puts `entry` in the first free place: its id.
    fn insert(&mut self, entry: Entry) -> SocketId {
        match self.entries.iter().position(|e| matches!(e, Entry::Free)) {
            Some(i) => {
                self.entries[i] = entry;
                SocketId(i)
            }
            None => {
                self.entries.push(entry);
                SocketId(self.entries.len() - 1)
            }
        }
    }
}

/// A TCP socket listening on `port`: request and response traffic (no Nagle, no delayed
/// ACK), a peer silent for 10 s reset.
fn listening(port: u16) -> tcp::Socket<'static> {
    let mut socket = tcp::Socket::new(
        tcp::SocketBuffer::new(vec![0; TCP_BUFFER]),
        tcp::SocketBuffer::new(vec![0; TCP_BUFFER]),
    );
    socket.set_nagle_enabled(false);
    socket.set_ack_delay(None);
    socket.set_timeout(Some(smoltcp::time::Duration::from_secs(10)));
    let _ = socket.listen(port);
    socket
}
