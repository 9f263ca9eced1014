use super::*;
use etherparse::PacketBuilder;
use proptest::prelude::*;

const SRC4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const DST4: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 7);
const SRC6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
const DST6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);

/// A UDP/IPv4 datagram built by etherparse, without its IP header.
fn etherparse_udp4(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    PacketBuilder::ipv4(SRC4.octets(), DST4.octets(), 64)
        .udp(1234, 4789)
        .write(&mut out, payload)
        .unwrap();
    out.split_off(20)
}

/// A UDP/IPv6 datagram built by etherparse, without its IP header.
fn etherparse_udp6(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    PacketBuilder::ipv6(SRC6.octets(), DST6.octets(), 64)
        .udp(1234, 4789)
        .write(&mut out, payload)
        .unwrap();
    out.split_off(40)
}

#[test]
fn fields_of_an_etherparse_datagram_read_back() {
    let bytes = etherparse_udp4(b"hello");
    let udp = UdpPacket::new_checked(&bytes[..]).unwrap();
    assert_eq!(
        (udp.src_port(), udp.dst_port(), udp.len()),
        (1234, 4789, 13)
    );
    assert_eq!(udp.payload(), b"hello");
    assert!(!udp.is_empty());
    assert!(udp.verify_checksum_v4(SRC4, DST4));
    assert!(!udp.verify_checksum_v4(SRC4, Ipv4Addr::new(198, 51, 100, 8)));
}

#[test]
fn short_buffer_is_truncated_error() {
    for len in 0..HEADER_LEN {
        assert_eq!(
            UdpPacket::new_checked(&[0u8; 8][..len]).unwrap_err(),
            ParseError::truncated(HEADER_LEN, len)
        );
    }
}

#[test]
fn length_below_header_is_bad_length() {
    let bytes = [0, 1, 0, 2, 0, 7, 0, 0];
    assert_eq!(
        UdpPacket::new_checked(&bytes[..]).unwrap_err(),
        ParseError::BadLength
    );
}

#[test]
fn length_past_buffer_is_truncated_error() {
    let mut bytes = etherparse_udp4(b"abc");
    bytes.pop();
    assert_eq!(
        UdpPacket::new_checked(&bytes[..]).unwrap_err(),
        ParseError::truncated(11, 10)
    );
}

#[test]
fn trailing_padding_is_not_payload_nor_checksummed() {
    let mut bytes = etherparse_udp4(b"abc");
    bytes.extend_from_slice(&[0xee; 7]);
    let udp = UdpPacket::new_checked(&bytes[..]).unwrap();
    assert_eq!(udp.payload(), b"abc");
    assert!(udp.verify_checksum_v4(SRC4, DST4));
}

#[test]
fn zero_checksum_means_none_over_ipv4_only() {
    let mut bytes = etherparse_udp4(b"abc");
    bytes[6..8].fill(0);
    let udp = UdpPacket::new_checked(&bytes[..]).unwrap();
    assert!(udp.verify_checksum_v4(SRC4, DST4));
    assert!(!udp.verify_checksum_v6(SRC6, DST6));
}

#[test]
fn computed_zero_checksum_is_sent_as_ffff() {
    // Choose the payload so that the checksum works out to zero: the sum of everything but
    // the payload word must be 0xffff - payload word, i.e. the datagram sums to 0xffff.
    let mut bytes = etherparse_udp4(&[0, 0]);
    bytes[6..8].fill(0);
    let partial = checksum::combine(
        checksum::pseudo_header_v4(SRC4, DST4, PROTOCOL, 10),
        checksum::sum(&bytes),
    );
    bytes[8..10].copy_from_slice(&(0xffff - partial).to_be_bytes());
    let mut udp = UdpPacket::new_checked(&mut bytes[..]).unwrap();
    udp.fill_checksum_v4(SRC4, DST4);
    assert_eq!(udp.checksum(), 0xffff);
    assert!(udp.verify_checksum_v4(SRC4, DST4));
}

#[test]
fn setters_write_back() {
    let mut bytes = [0u8; 12];
    let mut udp = UdpPacket::new_unchecked(&mut bytes[..]);
    udp.set_src_port(53);
    udp.set_dst_port(5353);
    udp.set_len(12);
    udp.payload_mut().copy_from_slice(b"dns!");
    udp.fill_checksum_v6(SRC6, DST6);
    let udp = UdpPacket::new_checked(&bytes[..]).unwrap();
    assert_eq!((udp.src_port(), udp.dst_port()), (53, 5353));
    assert!(udp.verify_checksum_v6(SRC6, DST6));
}

proptest! {
    #[test]
    fn fill_matches_etherparse_over_both_families(
        payload in proptest::collection::vec(any::<u8>(), 0..600),
    ) {
        let reference4 = etherparse_udp4(&payload);
        let mut ours = reference4.clone();
        ours[6..8].fill(0);
        UdpPacket::new_checked(&mut ours[..]).unwrap().fill_checksum_v4(SRC4, DST4);
        prop_assert_eq!(&ours, &reference4);

        let reference6 = etherparse_udp6(&payload);
        let mut ours = reference6.clone();
        ours[6..8].fill(0);
        let mut udp = UdpPacket::new_checked(&mut ours[..]).unwrap();
        udp.fill_checksum_v6(SRC6, DST6);
        prop_assert!(udp.verify_checksum_v6(SRC6, DST6));
        prop_assert_eq!(&ours, &reference6);
    }

    #[test]
    fn checked_view_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        if let Ok(udp) = UdpPacket::new_checked(&bytes[..]) {
            let _ = (udp.src_port(), udp.dst_port(), udp.checksum(), udp.payload());
            let _ = (udp.verify_checksum_v4(SRC4, DST4), udp.verify_checksum_v6(SRC6, DST6));
        }
    }
}
