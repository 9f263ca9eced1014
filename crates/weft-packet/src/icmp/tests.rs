use super::*;
use etherparse::icmpv4::DestUnreachableHeader;
use etherparse::{Icmpv4Slice, Icmpv4Type, Icmpv6Slice, Icmpv6Type, PacketBuilder};
use proptest::prelude::*;

const ROUTER6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 0xfe);
const HOST6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);

/// A UDP/IPv4 packet (IP header onwards) with `payload_len` bytes of payload.
fn offending_v4(payload_len: usize) -> Vec<u8> {
    let payload: Vec<u8> = (0..payload_len)
        .map(|i| u8::try_from(i % 251).unwrap())
        .collect();
    let mut out = Vec::new();
    PacketBuilder::ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
        .udp(5000, 6000)
        .write(&mut out, &payload)
        .unwrap();
    out
}

/// A UDP/IPv6 packet (IPv6 header onwards) with `payload_len` bytes of payload.
fn offending_v6(payload_len: usize) -> Vec<u8> {
    let payload: Vec<u8> = (0..payload_len)
        .map(|i| u8::try_from(i % 251).unwrap())
        .collect();
    let mut out = Vec::new();
    PacketBuilder::ipv6(
        HOST6.octets(),
        [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
        64,
    )
    .udp(5000, 6000)
    .write(&mut out, &payload)
    .unwrap();
    out
}

#[test]
fn frag_needed_quotes_up_to_576_byte_datagram() {
    let offending = offending_v4(1472);
    let mut buf = [0u8; 2048];
    let len = emit_frag_needed_v4(1450, &offending, &mut buf).unwrap();
    assert_eq!(len, HEADER_LEN + V4_MAX_QUOTE);
    assert_eq!(20 + len, 576);

    let parsed = Icmpv4Slice::from_slice(&buf[..len]).unwrap();
    assert_eq!(
        parsed.icmp_type(),
        Icmpv4Type::DestinationUnreachable(DestUnreachableHeader::FragmentationNeeded {
            next_hop_mtu: 1450
        })
    );
    assert_eq!(parsed.payload(), &offending[..V4_MAX_QUOTE]);
    assert_eq!(
        parsed.checksum(),
        parsed.icmp_type().calc_checksum(parsed.payload())
    );

    let ours = Icmpv4Packet::new_checked(&buf[..len]).unwrap();
    assert!(ours.verify_checksum());
    assert_eq!((ours.msg_type(), ours.code()), (3, 4));
    assert_eq!(ours.next_hop_mtu(), 1450);
    assert_eq!(ours.rest_of_header(), 1450);
}

#[test]
fn small_offending_packet_is_quoted_whole() {
    let offending = offending_v4(10);
    let mut buf = [0u8; 600];
    let len = emit_frag_needed_v4(1400, &offending, &mut buf).unwrap();
    assert_eq!(&buf[HEADER_LEN..len], &offending[..]);
}

#[test]
fn short_output_buffer_quotes_less_but_never_below_the_minimum() {
    let offending = offending_v4(1000);
    let mut buf = [0u8; 100];
    let len = emit_frag_needed_v4(1400, &offending, &mut buf).unwrap();
    assert_eq!(len, 100);
    assert!(Icmpv4Packet::new_checked(&buf[..])
        .unwrap()
        .verify_checksum());

    let mut tiny = [0u8; HEADER_LEN + 27];
    assert_eq!(
        emit_frag_needed_v4(1400, &offending, &mut tiny).unwrap_err(),
        ParseError::truncated(36, 35)
    );
    let mut tiny6 = [0u8; HEADER_LEN + 47];
    assert_eq!(
        emit_packet_too_big_v6(ROUTER6, HOST6, 1280, &offending_v6(100), &mut tiny6).unwrap_err(),
        ParseError::truncated(56, 55)
    );
}

#[test]
fn packet_too_big_quotes_up_to_1280_byte_datagram() {
    let offending = offending_v6(8000);
    let mut buf = vec![0u8; 9000];
    let len = emit_packet_too_big_v6(ROUTER6, HOST6, 1400, &offending, &mut buf).unwrap();
    assert_eq!(len, HEADER_LEN + V6_MAX_QUOTE);
    assert_eq!(40 + len, 1280);

    let parsed = Icmpv6Slice::from_slice(&buf[..len]).unwrap();
    assert_eq!(parsed.icmp_type(), Icmpv6Type::PacketTooBig { mtu: 1400 });
    assert!(parsed.is_checksum_valid(ROUTER6.octets(), HOST6.octets()));
    assert_eq!(parsed.payload(), &offending[..V6_MAX_QUOTE]);

    let ours = Icmpv6Packet::new_checked(&buf[..len]).unwrap();
    assert!(ours.verify_checksum(ROUTER6, HOST6));
    assert!(!ours.verify_checksum(HOST6, ROUTER6.to_bits().wrapping_add(1).into()));
    assert_eq!((ours.msg_type(), ours.code(), ours.mtu()), (2, 0, 1400));
}

#[test]
fn short_buffer_is_truncated_error() {
    for len in 0..HEADER_LEN {
        let buf = vec![0u8; len];
        assert_eq!(
            Icmpv4Packet::new_checked(&buf[..]).unwrap_err(),
            ParseError::truncated(HEADER_LEN, len)
        );
        assert_eq!(
            Icmpv6Packet::new_checked(&buf[..]).unwrap_err(),
            ParseError::truncated(HEADER_LEN, len)
        );
    }
}

#[test]
fn echo_request_from_etherparse_reads_back() {
    let mut out = Vec::new();
    PacketBuilder::ipv4([1, 1, 1, 1], [2, 2, 2, 2], 64)
        .icmpv4_echo_request(0x1234, 7)
        .write(&mut out, b"ping")
        .unwrap();
    let icmp = Icmpv4Packet::new_checked(&out[20..]).unwrap();
    assert_eq!((icmp.msg_type(), icmp.code()), (8, 0));
    assert_eq!(icmp.rest_of_header(), 0x1234_0007);
    assert_eq!(icmp.body(), b"ping");
    assert!(icmp.verify_checksum());
}

#[test]
fn setters_write_back() {
    let mut buf = [0u8; 12];
    let mut icmp = Icmpv6Packet::new_checked(&mut buf[..]).unwrap();
    icmp.set_msg_type(128);
    icmp.set_code(0);
    icmp.set_rest_of_header(0xabcd_0001);
    icmp.body_mut().copy_from_slice(b"echo");
    icmp.fill_checksum(HOST6, ROUTER6).unwrap();
    assert!(icmp.verify_checksum(HOST6, ROUTER6));
    icmp.set_checksum(icmp.checksum() ^ 1);
    assert!(!icmp.verify_checksum(HOST6, ROUTER6));
}

proptest! {
    #[test]
    fn builders_never_panic_and_always_checksum(
        offending in proptest::collection::vec(any::<u8>(), 0..1600),
        buf_len in 0usize..1400,
        mtu in any::<u16>(),
    ) {
        let mut buf = vec![0u8; buf_len];
        if let Ok(len) = emit_frag_needed_v4(mtu, &offending, &mut buf) {
            prop_assert!(len <= buf_len && len <= HEADER_LEN + V4_MAX_QUOTE);
            prop_assert!(Icmpv4Packet::new_checked(&buf[..len]).unwrap().verify_checksum());
        }
        if let Ok(len) = emit_packet_too_big_v6(ROUTER6, HOST6, mtu.into(), &offending, &mut buf) {
            prop_assert!(len <= buf_len && len <= HEADER_LEN + V6_MAX_QUOTE);
            let icmp = Icmpv6Packet::new_checked(&buf[..len]).unwrap();
            prop_assert!(icmp.verify_checksum(ROUTER6, HOST6));
        }
    }
}
