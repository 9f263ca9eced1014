use super::*;
use proptest::prelude::*;

/// Who has 192.168.1.2? Tell 192.168.1.1 (at 00:11:22:33:44:55), padded to 46 bytes.
const REQUEST: [u8; 46] = [
    0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 192, 168,
    1, 1, 0, 0, 0, 0, 0, 0, 192, 168, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
];

#[test]
fn real_padded_request_parses() {
    let p = ArpPacket::new_checked(&REQUEST[..]).unwrap();
    assert_eq!(p.operation(), ArpOperation::Request);
    assert_eq!(
        p.sender_hardware_addr(),
        MacAddr([0, 0x11, 0x22, 0x33, 0x44, 0x55])
    );
    assert_eq!(p.sender_protocol_addr(), Ipv4Addr::new(192, 168, 1, 1));
    assert_eq!(p.target_hardware_addr(), MacAddr::ZERO);
    assert_eq!(p.target_protocol_addr(), Ipv4Addr::new(192, 168, 1, 2));
    assert_eq!((p.hardware_type(), p.protocol_type()), (1, 0x0800));
    assert_eq!((p.hardware_len(), p.protocol_len()), (6, 4));
}

#[test]
fn every_truncation_is_a_truncated_error() {
    for len in 0..PACKET_LEN {
        assert_eq!(
            ArpPacket::new_checked(&REQUEST[..len]).unwrap_err(),
            ParseError::truncated(PACKET_LEN, len),
            "len {len}"
        );
    }
    assert!(ArpPacket::new_checked(&REQUEST[..PACKET_LEN]).is_ok());
}

#[test]
fn other_hardware_or_protocol_formats_are_unsupported() {
    // (byte index, value): IEEE 802 htype, IPv6 ptype, 8-byte hlen, 16-byte plen.
    for (at, value) in [
        (1, 6),
        (2, 0x86),
        (3, 0xdd),
        (4, 8),
        (5, 16),
        (4, 0),
        (5, 0),
    ] {
        let mut buf = REQUEST;
        buf[at] = value;
        assert_eq!(
            ArpPacket::new_checked(&buf[..]).unwrap_err(),
            ParseError::Unsupported,
            "byte {at} = {value}"
        );
    }
}

#[test]
fn request_and_reply_emit_and_parse_back() {
    let mac_a = MacAddr([2, 0, 0, 0, 0, 0xa]);
    let mac_b = MacAddr([2, 0, 0, 0, 0, 0xb]);
    let request = ArpRepr::request(
        mac_a,
        Ipv4Addr::new(10, 0, 0, 1),
        Ipv4Addr::new(10, 0, 0, 2),
    );
    let mut buf = [0xeeu8; 46];
    assert_eq!(request.emit(&mut buf).unwrap(), PACKET_LEN);
    assert_eq!(
        buf[..28],
        {
            let mut expected = REQUEST;
            expected[8..14].copy_from_slice(&mac_a.0);
            expected[14..18].copy_from_slice(&[10, 0, 0, 1]);
            expected[24..28].copy_from_slice(&[10, 0, 0, 2]);
            expected
        }[..28]
    );
    assert_eq!(buf[28..], [0xee; 18], "emit writes only the packet");
    let parsed = ArpRepr::parse(&ArpPacket::new_checked(&buf[..]).unwrap());
    assert_eq!(parsed, request);

    let reply = ArpRepr::reply_to(&parsed, mac_b);
    reply.emit(&mut buf).unwrap();
    let p = ArpPacket::new_checked(&buf[..]).unwrap();
    assert_eq!(p.operation(), ArpOperation::Reply);
    assert_eq!(
        (p.sender_hardware_addr(), p.sender_protocol_addr()),
        (mac_b, request.target_ip)
    );
    assert_eq!(
        (p.target_hardware_addr(), p.target_protocol_addr()),
        (mac_a, request.sender_ip)
    );
    assert_eq!(reply.buffer_len(), 28);
}

#[test]
fn emit_into_a_short_buffer_is_an_error() {
    let r = ArpRepr::request(MacAddr::ZERO, Ipv4Addr::UNSPECIFIED, Ipv4Addr::BROADCAST);
    let mut buf = [0u8; 27];
    assert_eq!(r.emit(&mut buf), Err(ParseError::truncated(28, 27)));
}

#[test]
fn unknown_operations_are_kept() {
    let mut buf = REQUEST;
    buf[6..8].copy_from_slice(&4u16.to_be_bytes()); // RARP reply
    let p = ArpPacket::new_checked(&buf[..]).unwrap();
    assert_eq!(p.operation(), ArpOperation::Other(4));
}

proptest! {
    #[test]
    fn operation_code_round_trips(code: u16) {
        prop_assert_eq!(u16::from(ArpOperation::from(code)), code);
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        data in proptest::collection::vec(any::<u8>(), 0..40),
        make_format_valid: bool,
    ) {
        let mut data = data;
        if make_format_valid && data.len() >= 6 {
            data[..6].copy_from_slice(&REQUEST[..6]);
        }
        if let Ok(p) = ArpPacket::new_checked(&data[..]) {
            let r = ArpRepr::parse(&p);
            let _ = (p.hardware_type(), p.protocol_type(), p.hardware_len(), p.protocol_len());
            let mut out = [0u8; PACKET_LEN];
            r.emit(&mut out).unwrap();
            prop_assert_eq!(&out[..], &data[..PACKET_LEN]);
        }
    }
}

#[test]
fn a_rarp_announcement_is_the_frame_qemu_sends() {
    let mac = MacAddr([0x52, 0x54, 0, 0x12, 0x34, 0x56]);
    let f = rarp_announcement(mac);
    let mut expected = vec![0xff; 6];
    expected.extend_from_slice(&mac.0);
    expected.extend_from_slice(&[0x80, 0x35, 0, 1, 8, 0, 6, 4, 0, 3]);
    expected.extend_from_slice(&mac.0);
    expected.extend_from_slice(&[0; 4]);
    expected.extend_from_slice(&mac.0);
    expected.extend_from_slice(&[0; 4]);
    expected.resize(60, 0);
    assert_eq!(f.as_slice(), expected.as_slice());
}
