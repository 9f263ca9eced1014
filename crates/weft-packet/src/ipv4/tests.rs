use super::*;
use etherparse::{IpFragOffset, IpNumber, Ipv4Dscp, Ipv4Ecn, Ipv4Header};
use proptest::prelude::*;

/// A 24-byte header (4 bytes of options), 8 bytes of payload, then 6 bytes of padding.
fn packet_with_options() -> Vec<u8> {
    let mut h = Ipv4Header::new(8, 64, IpNumber::UDP, [10, 0, 0, 1], [10, 0, 0, 2]).unwrap();
    h.options = [1, 1, 1, 0].into();
    h.set_payload_len(8).unwrap();
    let mut buf = Vec::new();
    h.write(&mut buf).unwrap();
    buf.extend_from_slice(&[0xaa; 8]);
    buf.extend_from_slice(&[0; 6]);
    buf
}

fn check(buf: &[u8]) -> Result<()> {
    Ipv4Packet::new_checked(buf).map(|_| ())
}

#[test]
fn every_truncation_is_an_error() {
    let buf = packet_with_options();
    for len in 0..32 {
        let expected = match len {
            0..20 => ParseError::truncated(20, len),
            20..24 => ParseError::BadIhl,
            _ => ParseError::truncated(32, len),
        };
        assert_eq!(check(&buf[..len]), Err(expected), "len {len}");
    }
    for len in 32..=buf.len() {
        assert_eq!(check(&buf[..len]), Ok(()), "len {len}");
    }
}

#[test]
fn ihl_below_five_is_rejected() {
    for ihl in 0..5 {
        let mut buf = packet_with_options();
        buf[0] = 0x40 | ihl;
        assert_eq!(check(&buf), Err(ParseError::BadIhl), "ihl {ihl}");
    }
}

#[test]
fn ihl_past_total_length_or_buffer_is_rejected() {
    let mut buf = packet_with_options();
    buf[0] = 0x4f; // 60-byte header, total length 32
    assert_eq!(check(&buf), Err(ParseError::BadIhl));
    buf[2..4].copy_from_slice(&60u16.to_be_bytes()); // total length fits the header, buffer doesn't
    assert_eq!(check(&buf), Err(ParseError::BadIhl));
    buf[0] = 0x46; // 24-byte header, total length 60 > 38-byte buffer
    assert_eq!(check(&buf), Err(ParseError::truncated(60, 38)));
}

#[test]
fn version_other_than_four_is_rejected() {
    for version in (0..16).filter(|&v| v != 4) {
        let mut buf = packet_with_options();
        buf[0] = (version << 4) | 6;
        assert_eq!(
            check(&buf),
            Err(ParseError::BadVersion),
            "version {version}"
        );
    }
}

#[test]
fn total_length_below_twenty_is_bad_length() {
    for total in 0..20u16 {
        let mut buf = packet_with_options();
        buf[0] = 0x45;
        buf[2..4].copy_from_slice(&total.to_be_bytes());
        assert_eq!(check(&buf), Err(ParseError::BadLength), "total {total}");
    }
}

#[test]
fn payload_stops_at_total_length_not_at_padding() {
    let buf = packet_with_options();
    let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
    assert_eq!(p.header_len(), 24);
    assert_eq!(p.options(), [1, 1, 1, 0]);
    assert_eq!(p.payload(), [0xaa; 8]);
    assert!(p.verify_checksum());
}

#[test]
fn fragment_flags_classify_first_middle_last_and_whole() {
    let mut buf = packet_with_options();
    let mut p = Ipv4Packet::new_unchecked(&mut buf[..]);
    let cases = [
        (false, 0, false, false),
        (true, 0, true, true),
        (true, 8, true, false),
        (false, 16, true, false),
    ];
    for (mf, offset, fragment, first) in cases {
        p.set_more_frags(mf);
        p.set_frag_offset(offset);
        assert_eq!(
            (p.is_fragment(), p.is_first_fragment()),
            (fragment, first),
            "{mf} {offset}"
        );
        assert_eq!((p.more_frags(), p.frag_offset()), (mf, offset));
        assert!(p.dont_frag(), "setting MF and offset keeps DF");
    }
}

#[test]
fn setters_write_back_and_fill_checksum_verifies() {
    let mut buf = [0u8; 40];
    let mut p = Ipv4Packet::new_unchecked(&mut buf[..]);
    p.set_version_and_ihl(5);
    p.set_dscp(46);
    p.set_ecn(3);
    p.set_total_len(40);
    p.set_ident(0xbeef);
    p.set_dont_frag(true);
    p.set_more_frags(true);
    p.set_frag_offset(0x1234); // rounded down to a multiple of 8
    p.set_ttl(1);
    p.set_protocol(protocol::TCP);
    p.set_src_addr(Ipv4Addr::new(192, 0, 2, 1));
    p.set_dst_addr(Ipv4Addr::new(198, 51, 100, 7));
    p.fill_checksum();
    p.payload_mut().fill(0x11);
    let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
    assert_eq!((p.version(), p.ihl(), p.dscp(), p.ecn()), (4, 5, 46, 3));
    assert_eq!(
        (p.total_len(), p.ident(), p.dont_frag(), p.more_frags()),
        (40, 0xbeef, true, true)
    );
    assert_eq!((p.frag_offset(), p.ttl(), p.protocol()), (0x1230, 1, 6));
    assert_eq!(p.src_addr(), Ipv4Addr::new(192, 0, 2, 1));
    assert_eq!(p.dst_addr(), Ipv4Addr::new(198, 51, 100, 7));
    assert!(p.verify_checksum());
    assert_eq!(p.payload(), [0x11; 20]);
    let (_, rest) = Ipv4Header::from_slice(&buf).unwrap();
    assert_eq!(rest.len(), 20, "etherparse reads the same header");
}

#[test]
fn corrupting_lengths_after_the_check_does_not_panic() {
    let mut buf = packet_with_options();
    let mut p = Ipv4Packet::new_checked(&mut buf[..]).unwrap();
    for (ihl, total) in [(15, 0), (0, 65535), (15, 65535), (6, 1)] {
        p.set_version_and_ihl(ihl);
        p.set_total_len(total);
        let _ = (p.options(), p.payload(), p.header(), p.verify_checksum());
        let _ = p.payload_mut();
        p.fill_checksum();
    }
}

#[test]
fn udp_packet_from_etherparse_builder_reads_alike() {
    let builder =
        etherparse::PacketBuilder::ipv4([172, 16, 0, 1], [172, 16, 0, 9], 17).udp(5353, 53);
    let mut buf = Vec::new();
    builder.write(&mut buf, b"hello").unwrap();
    let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
    assert_eq!(
        (p.protocol(), p.ttl(), p.total_len()),
        (protocol::UDP, 17, 33)
    );
    assert_eq!(p.src_addr(), Ipv4Addr::new(172, 16, 0, 1));
    assert_eq!(p.dst_addr(), Ipv4Addr::new(172, 16, 0, 9));
    assert!(p.verify_checksum());
    assert_eq!(&p.payload()[..4], [0x14, 0xe9, 0x00, 0x35]);
    assert_eq!(&p.payload()[8..], b"hello");
}

fn arb_etherparse_header() -> impl Strategy<Value = (Ipv4Header, Vec<u8>, usize)> {
    (
        (
            0u8..64,
            0u8..4,
            any::<u16>(),
            any::<bool>(),
            any::<bool>(),
            0u16..8192,
        ),
        (any::<u8>(), any::<u8>(), any::<[u8; 4]>(), any::<[u8; 4]>()),
        (0usize..11).prop_flat_map(|words| proptest::collection::vec(any::<u8>(), words * 4)),
        proptest::collection::vec(any::<u8>(), 0..64),
        0usize..20,
    )
        .prop_map(
            |((dscp, ecn, id, df, mf, off), (ttl, proto, src, dst), opts, payload, pad)| {
                let mut h = Ipv4Header::new(0, ttl, IpNumber(proto), src, dst).unwrap();
                h.dscp = Ipv4Dscp::try_new(dscp).unwrap();
                h.ecn = Ipv4Ecn::try_new(ecn).unwrap();
                h.identification = id;
                h.dont_fragment = df;
                h.more_fragments = mf;
                h.fragment_offset = IpFragOffset::try_new(off).unwrap();
                h.options = opts[..].try_into().unwrap();
                h.set_payload_len(payload.len()).unwrap();
                (h, payload, pad)
            },
        )
}

proptest! {
    #[test]
    fn every_field_matches_etherparse((h, payload, pad) in arb_etherparse_header()) {
        let mut buf = Vec::new();
        h.write(&mut buf).unwrap();
        buf.extend_from_slice(&payload);
        buf.extend(core::iter::repeat_n(0u8, pad));
        let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(p.header_len(), h.header_len());
        prop_assert_eq!((p.dscp(), p.ecn()), (h.dscp.value(), h.ecn.value()));
        prop_assert_eq!((p.total_len(), p.ident()), (h.total_len, h.identification));
        prop_assert_eq!((p.dont_frag(), p.more_frags()), (h.dont_fragment, h.more_fragments));
        prop_assert_eq!(p.frag_offset(), h.fragment_offset.value() * 8);
        prop_assert_eq!(p.is_fragment(), h.is_fragmenting_payload());
        prop_assert_eq!((p.ttl(), p.protocol()), (h.time_to_live, h.protocol.0));
        prop_assert_eq!(p.checksum(), h.calc_header_checksum());
        prop_assert!(p.verify_checksum());
        prop_assert_eq!(p.src_addr().octets(), h.source);
        prop_assert_eq!(p.dst_addr().octets(), h.destination);
        prop_assert_eq!(p.options(), h.options.as_slice());
        prop_assert_eq!(p.payload(), &payload[..]);
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        data in proptest::collection::vec(any::<u8>(), 0..80),
        plausible in any::<bool>(),
    ) {
        let mut data = data;
        if plausible && data.len() >= 4 {
            // Mostly-valid version and length so the accessors get exercised.
            data[0] = 0x40 | (data[0] & 0x0f);
            let total = u16::try_from(data.len()).unwrap();
            data[2..4].copy_from_slice(&total.to_be_bytes());
        }
        if let Ok(p) = Ipv4Packet::new_checked(&data[..]) {
            prop_assert!(p.header_len() >= 20 && p.header_len() <= usize::from(p.total_len()));
            let _ = (p.version(), p.ihl(), p.dscp(), p.ecn(), p.ident(), p.dont_frag());
            let _ = (p.more_frags(), p.frag_offset(), p.is_fragment(), p.is_first_fragment());
            let _ = (p.ttl(), p.protocol(), p.checksum(), p.src_addr(), p.dst_addr());
            let _ = (p.options(), p.header(), p.verify_checksum());
            prop_assert_eq!(p.payload().len(), usize::from(p.total_len()) - p.header_len());
        }
    }
}
