use super::*;
use proptest::prelude::*;

const A: u32 = 0x0a00_020f; // 10.0.2.15
const B: u32 = 0x0a00_0210; // 10.0.2.16

/// An Ethernet frame of an IPv4 packet from `src:sport` to `dst:dport` over `proto`.
fn ipv4(src: u32, dst: u32, proto: u8, sport: u16, dport: u16) -> [u8; 54] {
    let mut f = [0u8; 54];
    f[12..14].copy_from_slice(&IPV4.to_be_bytes());
    f[14] = 0x45; // version 4, 20-byte header
    f[23] = proto;
    f[26..30].copy_from_slice(&src.to_be_bytes());
    f[30..34].copy_from_slice(&dst.to_be_bytes());
    f[34..36].copy_from_slice(&sport.to_be_bytes());
    f[36..38].copy_from_slice(&dport.to_be_bytes());
    f
}

/// An ARP request (`reply` false) or reply.
fn arp_op(reply: bool) -> [u8; 42] {
    let mut f = [0u8; 42];
    f[12..14].copy_from_slice(&ARP.to_be_bytes());
    f[20..22].copy_from_slice(&[0, if reply { 2 } else { 1 }]);
    f
}

fn arp() -> [u8; 42] {
    arp_op(false)
}

#[test]
fn an_address_per_stack_goes_to_its_stack() {
    let addresses = [A, B];
    assert_eq!(targets(&ipv4(1, A, TCP, 1000, 80), &addresses), 0b01);
    assert_eq!(targets(&ipv4(1, B, TCP, 1000, 80), &addresses), 0b10);
    assert_eq!(targets(&arp(), &addresses), 0b11, "each stack answers ARP for its own");
    assert_eq!(targets(&ipv4(1, 7, TCP, 1000, 80), &addresses), 0, "nobody's address");
}

#[test]
fn address_zero_takes_what_no_other_stack_takes() {
    let addresses = [0, B];
    assert_eq!(targets(&ipv4(1, B, UDP, 1, 7), &addresses), 0b10);
    assert_eq!(targets(&ipv4(1, 9, UDP, 1, 7), &addresses), 0b01);
    assert_eq!(targets(&arp(), &addresses), 0b11);
    let mut other = [0u8; 60];
    other[12..14].copy_from_slice(&0x86ddu16.to_be_bytes()); // IPv6
    assert_eq!(targets(&other, &addresses), 0b01);
    assert_eq!(targets(&other, &[B]), 0, "no stack takes what is not its");
}

#[test]
fn one_address_is_answered_once_for_arp_and_spread_by_flow() {
    let addresses = [A, A, A, A];
    assert_eq!(targets(&arp(), &addresses), 0b0001, "a request is answered once");
    assert_eq!(targets(&arp_op(true), &addresses), 0b1111, "a reply teaches every stack");
    let mut seen = 0;
    for port in 0..200u16 {
        let t = targets(&ipv4(0x7f00_0001, A, TCP, 40000 + port, 80), &addresses);
        assert_eq!(t.count_ones(), 1);
        seen |= t;
    }
    assert_eq!(seen, 0b1111, "200 flows reach every stack");
}

#[test]
fn short_and_odd_frames_go_nowhere_or_by_what_they_show() {
    assert_eq!(targets(&[], &[0]), 0);
    assert_eq!(targets(&[0u8; 13], &[0]), 0);
    let mut f = ipv4(1, A, TCP, 1, 2);
    f[14] = 0x44; // a 16-byte header: impossible
    assert_eq!(targets(&f, &[A]), 0);
    f[14] = 0x4f; // 60 bytes of header, more than the frame holds
    assert_eq!(targets(&f, &[A]), 0);
    // ICMP: no ports, still steered by the source.
    assert_eq!(targets(&ipv4(1, A, 1, 0, 0), &[A, A]).count_ones(), 1);
}

#[test]
fn more_stacks_than_the_limit_are_never_chosen() {
    let addresses = [A; STACKS_MAX + 8];
    for port in 0..100 {
        let t = targets(&ipv4(5, A, UDP, port, 7), &addresses);
        assert_eq!(t.count_ones(), 1);
    }
}

proptest! {
    /// Every packet of a flow goes to one stack, the same one, and it is a stack of the
    /// packet's address.
    #[test]
    fn a_flow_stays_on_one_stack(
        src in any::<u32>(), sport in any::<u16>(), dport in any::<u16>(),
        n in 1usize..8, tcp in any::<bool>(), payload in 0usize..3,
    ) {
        let addresses = alloc_addresses(n);
        let proto = if tcp { TCP } else { UDP };
        let first = targets(&ipv4(src, A, proto, sport, dport), &addresses);
        prop_assert_eq!(first.count_ones(), 1);
        prop_assert!(first < (1 << n));
        let mut again = [0u8; 64];
        again[..54].copy_from_slice(&ipv4(src, A, proto, sport, dport));
        prop_assert_eq!(targets(&again[..54 + payload], &addresses), first);
    }

    /// Any bytes: at most the stacks there are, never a panic.
    #[test]
    fn any_frame_is_steered_within_the_stacks(
        frame in proptest::collection::vec(any::<u8>(), 0..80),
        addresses in proptest::collection::vec(prop_oneof![Just(0u32), Just(A), Just(B)], 0..6),
    ) {
        let t = targets(&frame, &addresses);
        prop_assert!(addresses.len() == 64 || t < (1u64 << addresses.len()));
    }
}

fn alloc_addresses(n: usize) -> [u32; 8] {
    let mut a = [B; 8];
    a[..n].fill(A);
    a
}
