//! `loopback [N] [--cores A,B]`: Multikernel Table 4, IP loopback, as Barrelfish did it:
//! two user-space IP stacks (smoltcp) on two cores joined by URPC channels, a channel each
//! way, each IP packet one byte string of cache-line fragments. A UDP source on core A
//! (default: this core) sends N packets of 1000-byte payload (default 20,000; 100 to
//! 1,000,000) to a sink on core B (default: the next core), which reads and discards them;
//! the sink's throughput between its first and last packet is the result
//! (`workloads::loopback`; Linux's peer is `atoll-bench-linux loopback`). A full channel
//! holds the source's stack back, so no packet is lost on the link. Exit 0 when the sink
//! got every packet, 1 otherwise, 2 for bad arguments; 77 on one core.
#![no_std]
#![no_main]

extern crate alloc;

use alloc::boxed::Box;
use core::sync::atomic::{AtomicU64, Ordering};
use libatoll::abi::EXIT_SKIPPED;
use libatoll::net::smoltcp::iface::{Config, Interface, SocketSet};
use libatoll::net::smoltcp::phy::{self, DeviceCapabilities, Medium};
use libatoll::net::smoltcp::socket::udp;
use libatoll::net::smoltcp::time::Instant;
use libatoll::net::smoltcp::wire::{HardwareAddress, IpAddress, IpCidr, IpEndpoint};
use libatoll::net::Clock;
use libatoll::thread::Builder;
use libatoll::{args, cores_online, pcore_current, println, Status};
use urpc::{ChannelMemory, Reassembler, Receiver, Sender};
use workloads::loopback::{mbit_per_s, result_line, DEFAULT_PACKETS, PAYLOAD};

const HELP: &str = "usage: loopback [N] [--cores A,B]   (N packets of 1000 bytes, 100-1000000, default 20000; A the source's core, B the sink's)";
/// Slots of each channel.
const SLOTS: usize = 64;
/// Largest IP packet on the link.
const MTU: usize = 1500;
/// The sink's port and the two stacks' addresses.
const PORT: u16 = 9;
const SOURCE: [u8; 4] = [10, 0, 0, 1];
const SINK: [u8; 4] = [10, 0, 0, 2];
/// A sink that hears nothing for this long stops (the source is done or gone).
const QUIET_US: u64 = 2_000_000;

/// What the sink saw: packets, bytes, first and last packet (µs of its clock); and what the
/// source sent.
static RECEIVED: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);
static FIRST_US: AtomicU64 = AtomicU64::new(0);
static LAST_US: AtomicU64 = AtomicU64::new(0);
static SENT: AtomicU64 = AtomicU64::new(0);

fn main() -> i32 {
    let line = args::arg_string();
    let mut words = line.split_whitespace();
    let mut packets = DEFAULT_PACKETS;
    let me = pcore_current();
    let mut cores = [me, (me + 1) % cores_online().max(1)];
    while let Some(word) = words.next() {
        let ok = match word {
            "--cores" => match args::cores_value(words.next()).as_deref() {
                Some(&[a, b]) if a != b => {
                    cores = [a, b];
                    true
                }
                _ => false,
            },
            _ => args::number(Some(word), 100..=1_000_000).map(|n| packets = n).is_some(),
        };
        if !ok {
            println!("{HELP}");
            return if word == "--help" { 0 } else { 2 };
        }
    }
    if cores_online() < 2 {
        println!("loopback: skipped (one core)");
        return EXIT_SKIPPED;
    }
    // One channel each way, in memory both threads see (they share the address space).
    let to_sink: &'static ChannelMemory<SLOTS> = Box::leak(Box::new(ChannelMemory::new()));
    let to_source: &'static ChannelMemory<SLOTS> = Box::leak(Box::new(ChannelMemory::new()));
    let sink = Builder::new().core(cores[1]).spawn(move || {
        let link = Link { tx: Sender::new(to_source), rx: Receiver::new(to_sink) };
        run_sink(link, packets)
    });
    let source = Builder::new().core(cores[0]).spawn(move || {
        let link = Link { tx: Sender::new(to_sink), rx: Receiver::new(to_source) };
        run_source(link, packets)
    });
    let (Ok(sink), Ok(source)) = (sink, source) else {
        println!("loopback: cannot start the source and sink threads");
        return 1;
    };
    let ended = (source.join(), sink.join());
    let received = RECEIVED.load(Ordering::Relaxed);
    let sent = SENT.load(Ordering::Relaxed);
    let bytes = BYTES.load(Ordering::Relaxed);
    let (first, last) = (FIRST_US.load(Ordering::Relaxed), LAST_US.load(Ordering::Relaxed));
    println!("loopback: cores {} -> {}: sent {sent}, received {received}", cores[0], cores[1]);
    match mbit_per_s(bytes, first, last) {
        Some(mbit) => println!("{}", result_line("atoll", "urpc", mbit, received, sent)),
        None => println!("loopback: too few packets received to time"),
    }
    if ended == (Status::Exited(0), Status::Exited(0)) && received == packets {
        0
    } else {
        1
    }
}

/// The source: sends `packets` packets as fast as its stack takes them, then lets the
/// last ones leave (at most a second).
fn run_source(link: Link, packets: u64) -> i32 {
    let Some((mut stack, clock)) = Stack::new(link, SOURCE) else { return 1 };
    let mut sockets = SocketSet::new(alloc::vec::Vec::new());
    let socket = udp_socket(64);
    let handle = sockets.add(socket);
    if sockets.get_mut::<udp::Socket>(handle).bind(PORT + 1).is_err() {
        return 1;
    }
    let to = IpEndpoint::new(IpAddress::v4(SINK[0], SINK[1], SINK[2], SINK[3]), PORT);
    let payload = [0x5au8; PAYLOAD];
    let (mut sent, mut moved) = (0, clock.micros());
    // Until all are sent, or the link took nothing for a while (the sink is gone).
    while sent < packets && clock.micros() - moved < QUIET_US {
        let socket = sockets.get_mut::<udp::Socket>(handle);
        while sent < packets && socket.send_slice(&payload, to).is_ok() {
            sent += 1;
            moved = clock.micros();
        }
        stack.poll(&clock, &mut sockets);
    }
    SENT.store(sent, Ordering::Relaxed);
    let until = clock.micros() + 1_000_000;
    while clock.micros() < until && sockets.get::<udp::Socket>(handle).send_queue() > 0 {
        stack.poll(&clock, &mut sockets);
    }
    0
}

/// The sink: reads and discards packets until all `packets` came or none for
/// [`QUIET_US`].
fn run_sink(link: Link, packets: u64) -> i32 {
    let Some((mut stack, clock)) = Stack::new(link, SINK) else { return 1 };
    let mut sockets = SocketSet::new(alloc::vec::Vec::new());
    let handle = sockets.add(udp_socket(64));
    if sockets.get_mut::<udp::Socket>(handle).bind(PORT).is_err() {
        return 1;
    }
    let mut buf = [0u8; MTU];
    let (mut received, mut bytes, mut heard) = (0u64, 0u64, clock.micros());
    while received < packets && clock.micros() - heard < QUIET_US {
        stack.poll(&clock, &mut sockets);
        let socket = sockets.get_mut::<udp::Socket>(handle);
        while let Ok((n, _)) = socket.recv_slice(&mut buf) {
            heard = clock.micros();
            if received == 0 {
                FIRST_US.store(heard, Ordering::Relaxed);
            }
            received += 1;
            bytes += n as u64;
        }
    }
    LAST_US.store(heard, Ordering::Relaxed);
    RECEIVED.store(received, Ordering::Relaxed);
    BYTES.store(bytes, Ordering::Relaxed);
    0
}

/// A UDP socket with room for `packets` packets each way.
fn udp_socket(packets: usize) -> udp::Socket<'static> {
    let buffer = || {
        udp::PacketBuffer::new(
            alloc::vec![udp::PacketMetadata::EMPTY; packets],
            alloc::vec![0u8; packets * (PAYLOAD + 64)],
        )
    };
    udp::Socket::new(buffer(), buffer())
}

/// One side's stack: a smoltcp interface on the link.
struct Stack {
    link: Link,
    iface: Interface,
}

impl Stack {
    /// A stack of address `ip` on `link`, and its clock.
    fn new(mut link: Link, ip: [u8; 4]) -> Option<(Stack, Clock)> {
        let clock = Clock::new().ok()?;
        let mut iface = Interface::new(Config::new(HardwareAddress::Ip), &mut link, clock.now());
        iface.update_ip_addrs(|addrs| {
            let _ = addrs.push(IpCidr::new(IpAddress::v4(ip[0], ip[1], ip[2], ip[3]), 24));
        });
        Some((Stack { link, iface }, clock))
    }

    fn poll(&mut self, clock: &Clock, sockets: &mut SocketSet) {
        self.iface.poll(clock.now(), &mut self.link, sockets);
    }
}

/// A point-to-point IP link over two URPC channels (Multikernel §5.4): each packet is one
/// byte string, sent as cache-line fragments.
struct Link {
    tx: Sender<'static, SLOTS>,
    rx: Receiver<'static, SLOTS>,
}

/// Fragments a packet of the link's MTU takes.
const MTU_FRAGMENTS: usize = MTU.div_ceil(urpc::PAYLOAD_BYTES);

impl phy::Device for Link {
    type RxToken<'a> = RxToken;
    type TxToken<'a> = TxToken<'a>;

    fn receive(&mut self, _: Instant) -> Option<(RxToken, TxToken<'_>)> {
        if !self.rx.has_message() {
            // Nothing waits: the credits held go back, so the sender sees the room.
            self.rx.flush_credits();
            return None;
        }
        let mut packet = RxToken { bytes: [0u8; MTU], len: 0 };
        let mut reassembler = Reassembler::new(&mut packet.bytes);
        // The sender writes every fragment of a packet at once: the rest follow the first
        // within a few lines' time.
        for _ in 0..1_000_000 {
            let Some(m) = self.rx.try_recv() else {
                core::hint::spin_loop();
                continue;
            };
            match reassembler.push(&m) {
                Ok(Some((_, whole))) => {
                    packet.len = whole.len();
                    return Some((packet, TxToken { link: self }));
                }
                Ok(None) => {}
                Err(_) => return None, // a malformed packet is dropped
            }
        }
        None
    }

    fn transmit(&mut self, _: Instant) -> Option<TxToken<'_>> {
        // Only with room for a whole packet: a full link holds the stack back.
        self.tx.has_room(MTU_FRAGMENTS).then_some(TxToken { link: self })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ip;
        caps.max_transmission_unit = MTU;
        caps
    }
}

/// A packet received.
struct RxToken {
    bytes: [u8; MTU],
    len: usize,
}

impl phy::RxToken for RxToken {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(&self.bytes[..self.len])
    }
}

/// Room for a packet to send.
struct TxToken<'a> {
    link: &'a mut Link,
}

impl phy::TxToken for TxToken<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut packet = [0u8; MTU];
        let len = len.min(MTU);
        let r = f(&mut packet[..len]);
        // `transmit` checked the room; only this thread sends on the channel.
        let _ = self.link.tx.try_send_bytes(0, &packet[..len]);
        r
    }
}

libatoll::main!(main);
