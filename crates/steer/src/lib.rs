//! Which of a kernel core's TCP/IP stacks takes a received Ethernet frame (issue M12).
//!
//! Each stack (a program's syscall device, `abi::sysdev`) has an IPv4 address, or 0 for
//! "whatever no other stack takes". Two addressing modes follow from the addresses alone:
//! - **An address per stack** (Corey §5.2): a frame goes to the stack whose address it is
//!   for.
//! - **One address for several stacks** (software RSS; none of the anchor papers has it):
//!   the stacks sharing the address each take the flows whose hash of ⟨source address,
//!   source port, destination port⟩ falls to them, so a connection stays on one stack
//!   (one core) for its whole life. ARP is answered once per address: only the first
//!   stack with an address gets the ARP requests (they are all one host to a peer); an
//!   ARP reply goes to every stack, so each learns the peer it answers.
//!
//! An ARP request also goes to every stack of address 0, and a frame for an address no
//! stack has (or of another type) to the stacks of address 0, by the same hash. The kernel core
//! (`kernel/src/kcore/`) asks [`targets`] for each frame.
#![no_std]

/// Most stacks one kernel core steers among.
pub const STACKS_MAX: usize = 64;

/// Ethernet types.
const IPV4: u16 = 0x0800;
const ARP: u16 = 0x0806;
/// IPv4 protocols whose ports the hash reads.
const TCP: u8 = 6;
const UDP: u8 = 17;

/// The stacks a frame goes to: bit i is stack i (of the `addresses` given to [`targets`]).
pub type Targets = u64;

/// The stacks that take `frame`, given each stack's address (`addresses[i]`, 0 for none),
/// at most [`STACKS_MAX`] (more are never chosen). A frame too short for its own headers
/// goes nowhere.
pub fn targets(frame: &[u8], addresses: &[u32]) -> Targets {
    let addresses = &addresses[..addresses.len().min(STACKS_MAX)];
    let Some(ethertype) = frame.get(12..14).map(|b| u16::from_be_bytes([b[0], b[1]])) else {
        return 0;
    };
    match ethertype {
        // A request is answered once per address: the first stack of each address (and
        // every stack of address 0) sees it. A reply, whichever stack asked, teaches every
        // stack the peer's hardware address (they share the NIC's).
        ARP if frame.get(20..22) == Some(&[0, 1]) => {
            let mut t = 0;
            for (i, &a) in addresses.iter().enumerate() {
                if a == 0 || !addresses[..i].contains(&a) {
                    t |= 1 << i;
                }
            }
            t
        }
        ARP => all(addresses.len()),
        IPV4 => match ipv4_flow(frame) {
            Some((dst, hash)) => {
                let owners = with_address(addresses, dst);
                let owners = if owners != 0 { owners } else { with_address(addresses, 0) };
                pick(owners, hash)
            }
            None => 0,
        },
        _ => pick(with_address(addresses, 0), 0),
    }
}

/// Every one of `n` stacks.
fn all(n: usize) -> Targets {
    if n >= 64 {
        u64::MAX
    } else {
        (1 << n) - 1
    }
}

/// The stacks of address `a`.
fn with_address(addresses: &[u32], a: u32) -> Targets {
    let mut t = 0;
    for (i, &x) in addresses.iter().enumerate() {
        if x == a {
            t |= 1 << i;
        }
    }
    t
}

/// One of the stacks of `owners` by `hash` (none if `owners` is empty).
fn pick(owners: Targets, hash: u32) -> Targets {
    let n = owners.count_ones();
    if n == 0 {
        return 0;
    }
    let mut k = hash % n;
    let mut rest = owners;
    loop {
        let low = rest & rest.wrapping_neg();
        if k == 0 {
            return low;
        }
        k -= 1;
        rest &= !low;
    }
}

/// An IPv4 frame's destination address and its flow's hash (of the source address and,
/// for TCP and UDP, both ports: what stays the same for one connection), or `None` if the
/// frame is too short for its headers.
pub fn ipv4_flow(frame: &[u8]) -> Option<(u32, u32)> {
    let ip = frame.get(14..)?;
    let header = usize::from(*ip.first()? & 0x0f) * 4;
    if header < 20 || ip.len() < header {
        return None;
    }
    let word = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    let (src, dst) = (word(&ip[12..16]), word(&ip[16..20]));
    let ports = match ip[9] {
        TCP | UDP => ip.get(header..header + 4).map_or(0, word),
        _ => 0,
    };
    Some((dst, mix(src, ports)))
}

/// A hash of the flow's source and ports, spread over the low bits (a multiplicative mix,
/// as hash tables use; the kernel needs spread, not secrecy).
fn mix(src: u32, ports: u32) -> u32 {
    let x = (u64::from(src) << 32 | u64::from(ports)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (x >> 32) as u32
}

#[cfg(test)]
mod tests;
