use super::*;
use etherparse::{PacketBuilder, TcpOptionElement};
use proptest::prelude::*;

const SRC4: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const DST4: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const SRC6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
const DST6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);

/// A TCP/IPv4 segment (SYN+ACK, MSS option) built by etherparse, without its IP header.
fn etherparse_tcp4(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    PacketBuilder::ipv4(SRC4.octets(), DST4.octets(), 64)
        .tcp(40000, 443, 0x0102_0304, 29200)
        .syn()
        .ack(0xa0b0_c0d0)
        .ece()
        .urg(7)
        .options(&[TcpOptionElement::MaximumSegmentSize(1460)])
        .unwrap()
        .write(&mut out, payload)
        .unwrap();
    out.split_off(20)
}

/// A plain TCP/IPv6 segment built by etherparse, without its IP header.
fn etherparse_tcp6(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    PacketBuilder::ipv6(SRC6.octets(), DST6.octets(), 64)
        .tcp(40000, 443, 1, 512)
        .ack(2)
        .psh()
        .write(&mut out, payload)
        .unwrap();
    out.split_off(40)
}

#[test]
fn fields_of_an_etherparse_segment_read_back() {
    let bytes = etherparse_tcp4(b"payload");
    let tcp = TcpPacket::new_checked(&bytes[..]).unwrap();
    assert_eq!((tcp.src_port(), tcp.dst_port()), (40000, 443));
    assert_eq!(tcp.seq_number(), 0x0102_0304);
    assert_eq!(tcp.ack_number(), 0xa0b0_c0d0);
    assert_eq!((tcp.data_offset(), tcp.header_len()), (6, 24));
    assert!(tcp.syn() && tcp.ack() && tcp.ece() && tcp.urg());
    assert!(!(tcp.fin() || tcp.rst() || tcp.psh() || tcp.cwr()));
    assert_eq!(tcp.window(), 29200);
    assert_eq!(tcp.urgent_pointer(), 7);
    assert_eq!(tcp.options(), &[2, 4, 0x05, 0xb4]);
    assert_eq!(tcp.payload(), b"payload");
    assert!(tcp.verify_checksum_v4(SRC4, DST4));
    assert!(!tcp.verify_checksum_v4(DST4, DST4));
}

#[test]
fn short_buffer_is_truncated_error() {
    let bytes = etherparse_tcp6(b"");
    for len in 0..HEADER_LEN {
        assert_eq!(
            TcpPacket::new_checked(&bytes[..len]).unwrap_err(),
            ParseError::truncated(HEADER_LEN, len)
        );
    }
}

#[test]
fn data_offset_below_five_words_is_bad_length() {
    for words in 0..5u8 {
        let mut bytes = etherparse_tcp6(b"xyz");
        bytes[12] = words << 4;
        assert_eq!(
            TcpPacket::new_checked(&bytes[..]).unwrap_err(),
            ParseError::BadLength
        );
    }
}

#[test]
fn options_past_the_buffer_are_truncated_error() {
    let mut bytes = etherparse_tcp6(b"xyz");
    bytes[12] = 15 << 4;
    assert_eq!(
        TcpPacket::new_checked(&bytes[..]).unwrap_err(),
        ParseError::truncated(60, 23)
    );
}

#[test]
fn every_flag_setter_touches_only_its_bit() {
    type Packet = TcpPacket<[u8; HEADER_LEN]>;
    type Getter = fn(&Packet) -> bool;
    type Setter = fn(&mut Packet, bool);
    let table: [(u8, Getter, Setter); 8] = [
        (flags::FIN, TcpPacket::fin, TcpPacket::set_fin),
        (flags::SYN, TcpPacket::syn, TcpPacket::set_syn),
        (flags::RST, TcpPacket::rst, TcpPacket::set_rst),
        (flags::PSH, TcpPacket::psh, TcpPacket::set_psh),
        (flags::ACK, TcpPacket::ack, TcpPacket::set_ack),
        (flags::URG, TcpPacket::urg, TcpPacket::set_urg),
        (flags::ECE, TcpPacket::ece, TcpPacket::set_ece),
        (flags::CWR, TcpPacket::cwr, TcpPacket::set_cwr),
    ];
    for (bit, get, set) in table {
        let mut bytes = [0u8; HEADER_LEN];
        bytes[12] = 5 << 4;
        let mut tcp = TcpPacket::new_checked(bytes).unwrap();
        set(&mut tcp, true);
        assert_eq!(tcp.flags(), bit);
        assert!(get(&tcp));
        tcp.set_flags(0xff);
        set(&mut tcp, false);
        assert_eq!(tcp.flags(), !bit);
        assert!(!get(&tcp));
    }
}

#[test]
fn setters_write_back_and_checksum_verifies() {
    let mut bytes = [0u8; 28];
    let mut tcp = TcpPacket::new_unchecked(&mut bytes[..]);
    tcp.set_data_offset(6);
    tcp.set_src_port(1);
    tcp.set_dst_port(2);
    tcp.set_seq_number(u32::MAX);
    tcp.set_ack_number(5);
    tcp.set_window(9);
    tcp.set_urgent_pointer(3);
    tcp.options_mut().copy_from_slice(&[1, 1, 1, 0]);
    tcp.payload_mut().copy_from_slice(b"four");
    tcp.fill_checksum_v6(SRC6, DST6).unwrap();
    let tcp = TcpPacket::new_checked(&bytes[..]).unwrap();
    assert_eq!(
        (tcp.src_port(), tcp.dst_port(), tcp.seq_number()),
        (1, 2, u32::MAX)
    );
    assert_eq!(
        (tcp.ack_number(), tcp.window(), tcp.urgent_pointer()),
        (5, 9, 3)
    );
    assert_eq!(tcp.options(), &[1, 1, 1, 0]);
    assert_eq!(tcp.payload(), b"four");
    assert!(tcp.verify_checksum_v6(SRC6, DST6));
}

#[test]
fn segment_too_long_for_ipv4_is_refused() {
    let mut bytes = vec![0u8; 65_536];
    bytes[12] = 5 << 4;
    let mut tcp = TcpPacket::new_checked(&mut bytes[..]).unwrap();
    assert_eq!(
        tcp.fill_checksum_v4(SRC4, DST4).unwrap_err(),
        ParseError::BadLength
    );
    assert!(!tcp.verify_checksum_v4(SRC4, DST4));
    assert!(tcp.fill_checksum_v6(SRC6, DST6).is_ok());
}

proptest! {
    #[test]
    fn fill_matches_etherparse_over_both_families(
        payload in proptest::collection::vec(any::<u8>(), 0..600),
    ) {
        let reference = etherparse_tcp4(&payload);
        let mut ours = reference.clone();
        ours[16..18].fill(0);
        TcpPacket::new_checked(&mut ours[..]).unwrap().fill_checksum_v4(SRC4, DST4).unwrap();
        prop_assert_eq!(&ours, &reference);

        let reference = etherparse_tcp6(&payload);
        let mut ours = reference.clone();
        ours[16..18].copy_from_slice(&[0xde, 0xad]);
        TcpPacket::new_checked(&mut ours[..]).unwrap().fill_checksum_v6(SRC6, DST6).unwrap();
        prop_assert_eq!(&ours, &reference);
    }

    #[test]
    fn checked_view_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
        if let Ok(tcp) = TcpPacket::new_checked(&bytes[..]) {
            let _ = (tcp.seq_number(), tcp.ack_number(), tcp.flags(), tcp.window());
            let _ = (tcp.checksum(), tcp.urgent_pointer(), tcp.options(), tcp.payload());
            let _ = (tcp.verify_checksum_v4(SRC4, DST4), tcp.verify_checksum_v6(SRC6, DST6));
        }
    }
}
