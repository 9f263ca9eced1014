use super::next_header::*;
use super::*;
use proptest::prelude::*;

const TCP: u8 = 6;
const UDP: u8 = 17;

/// A generic (Hop-by-Hop, Routing, Destination Options) header of `len` bytes (multiple of 8).
fn ext(next: u8, len: usize) -> Vec<u8> {
    let mut h = vec![0x5a; len];
    h[0] = next;
    h[1] = u8::try_from(len / 8 - 1).unwrap();
    h
}

fn frag(next: u8, offset: u16, more: bool, ident: u32) -> Vec<u8> {
    let mut h = vec![next, 0];
    h.extend_from_slice(&(offset | u16::from(more)).to_be_bytes());
    h.extend_from_slice(&ident.to_be_bytes());
    h
}

/// An Authentication Header with the given payload-length field: (field + 2) * 4 bytes.
fn auth(next: u8, field: u8) -> Vec<u8> {
    let mut h = vec![0x33; (usize::from(field) + 2) * 4];
    h[0] = next;
    h[1] = field;
    h[2..4].fill(0);
    h
}

/// Fixed header (next header `first`, payload length = `payload.len()`) + `payload` + `pad`.
fn packet(first: u8, payload: &[u8], pad: usize) -> Vec<u8> {
    let mut p = vec![0u8; HEADER_LEN];
    p[0] = 0x60;
    p[4..6].copy_from_slice(&u16::try_from(payload.len()).unwrap().to_be_bytes());
    p[6] = first;
    p[7] = 64;
    p.extend_from_slice(payload);
    p.resize(p.len() + pad, 0);
    p
}

fn walk(buf: &[u8]) -> Result<Ipv6UpperLayer> {
    Ipv6Packet::new_checked(buf)?.upper_layer()
}

#[test]
fn every_truncation_of_the_fixed_header_is_an_error() {
    let buf = packet(UDP, &[0; 8], 0);
    for len in 0..HEADER_LEN {
        assert_eq!(
            Ipv6Packet::new_checked(&buf[..len]).unwrap_err(),
            ParseError::truncated(HEADER_LEN, len)
        );
    }
    for len in HEADER_LEN..buf.len() {
        assert_eq!(
            Ipv6Packet::new_checked(&buf[..len]).unwrap_err(),
            ParseError::truncated(48, len)
        );
    }
}

#[test]
fn version_other_than_six_is_rejected() {
    for version in (0..16u8).filter(|&v| v != 6) {
        let mut buf = packet(UDP, &[0; 8], 0);
        buf[0] = version << 4;
        assert_eq!(
            Ipv6Packet::new_checked(&buf[..]).unwrap_err(),
            ParseError::BadVersion
        );
    }
}

#[test]
fn payload_stops_at_payload_length_not_at_padding() {
    let buf = packet(UDP, &[7; 8], 10);
    let p = Ipv6Packet::new_checked(&buf[..]).unwrap();
    assert_eq!(p.payload(), [7; 8]);
}

#[test]
fn setters_write_back() {
    let mut buf = [0u8; 60];
    let mut p = Ipv6Packet::new_unchecked(&mut buf[..]);
    p.set_version();
    p.set_traffic_class(0xb9);
    p.set_flow_label(0xfff12345); // upper bits dropped
    p.set_payload_len(20);
    p.set_next_header(TCP);
    p.set_hop_limit(1);
    let src: Ipv6Addr = "2001:db8::1".parse().unwrap();
    let dst: Ipv6Addr = "fe80::abcd:1".parse().unwrap();
    p.set_src_addr(src);
    p.set_dst_addr(dst);
    p.payload_mut().fill(9);
    let p = Ipv6Packet::new_checked(&buf[..]).unwrap();
    assert_eq!(
        (p.version(), p.traffic_class(), p.flow_label()),
        (6, 0xb9, 0x12345)
    );
    assert_eq!(
        (p.payload_len(), p.next_header(), p.hop_limit()),
        (20, TCP, 1)
    );
    assert_eq!((p.src_addr(), p.dst_addr()), (src, dst));
    assert_eq!(p.payload(), [9; 20]);
    let h = etherparse::Ipv6HeaderSlice::from_slice(&buf).unwrap();
    assert_eq!((h.traffic_class(), h.flow_label().value()), (0xb9, 0x12345));
}

#[test]
fn no_extension_headers_gives_the_upper_layer_at_40() {
    let up = walk(&packet(TCP, &[0; 20], 0)).unwrap();
    assert_eq!(
        up,
        Ipv6UpperLayer {
            protocol: TCP,
            offset: 40,
            fragment: None
        }
    );
}

#[test]
fn is_walked_extension_names_exactly_the_next_headers_the_walk_steps_over() {
    // Behind each value, a Destination Options header leading to UDP: the walk stops at
    // the value itself (offset 40) exactly when it is not a walked extension.
    let mut chain = ext(UDP, 8);
    chain.extend_from_slice(&[0; 8]);
    for next in 0..=u8::MAX {
        let stops_at_it = matches!(
            walk(&packet(next, &chain, 0)),
            Ok(Ipv6UpperLayer { protocol, offset: 40, .. }) if protocol == next
        );
        assert_eq!(
            next_header::is_walked_extension(next),
            !stops_at_it,
            "next header {next}"
        );
    }
}

#[test]
fn full_chain_is_walked_to_the_upper_layer() {
    let mut chain = ext(DEST_OPTS, 8);
    chain.extend(ext(ROUTING, 16));
    chain.extend(ext(FRAGMENT, 24));
    chain.extend(frag(AUTH, 0, true, 0xdead_beef));
    chain.extend(auth(DEST_OPTS, 4));
    chain.extend(ext(UDP, 8));
    let offset = HEADER_LEN + chain.len();
    chain.extend([0; 8]);
    let up = walk(&packet(HOP_BY_HOP, &chain, 0)).unwrap();
    assert_eq!((up.protocol, up.offset), (UDP, offset));
    let f = up.fragment.unwrap();
    assert_eq!(
        (f.offset, f.more_fragments, f.ident),
        (0, true, 0xdead_beef)
    );
    assert!(up.is_fragment() && up.is_first_fragment());
}

#[test]
fn later_fragment_stops_after_the_fragment_header() {
    let mut chain = frag(DEST_OPTS, 1448, false, 7);
    chain.extend([0xff; 40]); // fragment data, not headers
    let up = walk(&packet(FRAGMENT, &chain, 0)).unwrap();
    assert_eq!((up.protocol, up.offset), (DEST_OPTS, 48));
    assert!(up.is_fragment() && !up.is_first_fragment());
    assert_eq!(up.fragment.map(|f| f.offset), Some(1448));
}

#[test]
fn atomic_fragment_is_not_a_fragment() {
    let mut chain = frag(TCP, 0, false, 1);
    chain.extend([0; 20]);
    let up = walk(&packet(FRAGMENT, &chain, 0)).unwrap();
    assert_eq!((up.protocol, up.offset), (TCP, 48));
    assert!(up.fragment.is_some() && !up.is_fragment() && !up.is_first_fragment());
}

#[test]
fn esp_and_no_next_header_end_the_walk() {
    let mut chain = ext(ESP, 8);
    chain.extend([0xee; 4]); // opaque ESP, too short to be anything else
    assert_eq!(walk(&packet(DEST_OPTS, &chain, 0)).unwrap().protocol, ESP);
    let up = walk(&packet(NO_NEXT_HEADER, &[], 0)).unwrap();
    assert_eq!((up.protocol, up.offset), (NO_NEXT_HEADER, 40));
}

#[test]
fn hop_by_hop_after_another_header_is_rejected() {
    let mut chain = ext(HOP_BY_HOP, 8);
    chain.extend(ext(TCP, 8));
    assert_eq!(
        walk(&packet(DEST_OPTS, &chain, 0)),
        Err(ParseError::BadExtensionHeader)
    );
}

#[test]
fn second_fragment_header_is_rejected() {
    let mut chain = frag(FRAGMENT, 0, true, 1);
    chain.extend(frag(TCP, 0, true, 1));
    assert_eq!(
        walk(&packet(FRAGMENT, &chain, 0)),
        Err(ParseError::BadExtensionHeader)
    );
}

#[test]
fn at_most_eight_extension_headers_are_accepted() {
    for (count, expected_ok) in [(8, true), (9, false), (40, false)] {
        let mut chain = Vec::new();
        for i in 0..count {
            chain.extend(ext(if i + 1 == count { UDP } else { DEST_OPTS }, 8));
        }
        chain.extend([0; 8]);
        let result = walk(&packet(DEST_OPTS, &chain, 0));
        if expected_ok {
            assert_eq!(result.unwrap().offset, HEADER_LEN + 64);
        } else {
            assert_eq!(
                result,
                Err(ParseError::BadExtensionHeader),
                "{count} headers"
            );
        }
    }
}

#[test]
fn every_truncation_of_the_chain_is_an_error() {
    let mut chain = ext(ROUTING, 8);
    chain.extend(ext(FRAGMENT, 16));
    chain.extend(frag(AUTH, 0, true, 1));
    chain.extend(auth(TCP, 1));
    for cut in 0..chain.len() {
        // The payload length says `cut`; the buffer holds the whole chain as padding.
        let mut buf = packet(HOP_BY_HOP, &chain, 0);
        buf[4..6].copy_from_slice(&u16::try_from(cut).unwrap().to_be_bytes());
        match walk(&buf) {
            Err(ParseError::Truncated { needed, available }) => {
                assert!(needed > available && available == 40 + cut, "cut {cut}");
            }
            other => panic!("cut {cut}: {other:?}"),
        }
    }
    let up = walk(&packet(HOP_BY_HOP, &chain, 0)).unwrap();
    assert_eq!((up.protocol, up.offset), (TCP, 40 + chain.len()));
}

#[test]
fn header_lengths_pointing_past_the_end_are_errors() {
    // Each header claims more bytes than the payload length gives it; the buffer itself has
    // 32 more bytes of padding, which the walk must not use.
    for (first, header) in [
        (DEST_OPTS, vec![TCP, 1, 0, 0, 0, 0, 0, 0, 0]),
        (ROUTING, vec![TCP, 255, 0, 0, 0, 0, 0, 0]),
        (HOP_BY_HOP, vec![TCP, 1, 0, 0, 0, 0, 0, 0, 0, 0]),
        (AUTH, vec![TCP, 255, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
        (FRAGMENT, vec![TCP, 0, 0, 0, 0, 0, 0]),
        (DEST_OPTS, vec![TCP]),
    ] {
        let result = walk(&packet(first, &header, 32));
        assert!(
            matches!(result, Err(ParseError::Truncated { .. })),
            "{first}: {result:?}"
        );
    }
}

/// A chain in RFC 8200 order, each header optional, ending in `upper`; returns the chain, the
/// upper-layer offset (from the IPv6 header) and whether a first-fragment header is present.
fn arb_chain() -> impl Strategy<Value = (u8, Vec<u8>, usize)> {
    (
        proptest::option::of(0usize..3),
        proptest::option::of(0usize..3),
        proptest::option::of(0usize..3),
        proptest::option::of(any::<bool>()),
        proptest::option::of(1u8..5),
        proptest::option::of(0usize..3),
        prop_oneof![
            Just(TCP),
            Just(UDP),
            Just(58u8),
            Just(NO_NEXT_HEADER),
            Just(ESP)
        ],
        proptest::collection::vec(any::<u8>(), 0..32),
    )
        .prop_map(|(hbh, dst1, rt, fr, ah, dst2, upper, data)| {
            // Built back to front so each header knows its next header.
            let mut headers: Vec<(u8, Vec<u8>)> = Vec::new();
            if let Some(words) = hbh {
                headers.push((HOP_BY_HOP, ext(0, 8 * (words + 1))));
            }
            if let Some(words) = dst1 {
                headers.push((DEST_OPTS, ext(0, 8 * (words + 1))));
            }
            if let Some(words) = rt {
                headers.push((ROUTING, ext(0, 8 * (words + 1))));
            }
            if let Some(more) = fr {
                headers.push((FRAGMENT, frag(0, 0, more, 99)));
            }
            if let Some(field) = ah {
                headers.push((AUTH, auth(0, field)));
            }
            if let Some(words) = dst2 {
                headers.push((DEST_OPTS, ext(0, 8 * (words + 1))));
            }
            let first = headers.first().map_or(upper, |h| h.0);
            let mut chain = Vec::new();
            for i in 0..headers.len() {
                let next = headers.get(i + 1).map_or(upper, |h| h.0);
                let mut h = headers[i].1.clone();
                h[0] = next;
                chain.extend(h);
            }
            let offset = HEADER_LEN + chain.len();
            chain.extend(data);
            (first, chain, offset)
        })
}

proptest! {
    #[test]
    fn fixed_header_fields_match_etherparse(
        tc: u8,
        flow in 0u32..(1 << 20),
        hop: u8,
        next: u8,
        src: [u8; 16],
        dst: [u8; 16],
        payload in proptest::collection::vec(any::<u8>(), 0..64),
        pad in 0usize..16,
    ) {
        let h = etherparse::Ipv6Header {
            traffic_class: tc,
            flow_label: etherparse::Ipv6FlowLabel::try_new(flow).unwrap(),
            payload_length: u16::try_from(payload.len()).unwrap(),
            next_header: etherparse::IpNumber(next),
            hop_limit: hop,
            source: src,
            destination: dst,
        };
        let mut buf = h.to_bytes().to_vec();
        buf.extend_from_slice(&payload);
        buf.resize(buf.len() + pad, 0);
        let p = Ipv6Packet::new_checked(&buf[..]).unwrap();
        prop_assert_eq!((p.version(), p.traffic_class(), p.flow_label()), (6, tc, flow));
        prop_assert_eq!((p.payload_len(), p.next_header(), p.hop_limit()), (h.payload_length, next, hop));
        prop_assert_eq!((p.src_addr().octets(), p.dst_addr().octets()), (src, dst));
        prop_assert_eq!(p.payload(), &payload[..]);
    }

    #[test]
    fn upper_layer_matches_etherparse((first, chain, offset) in arb_chain(), pad in 0usize..12) {
        let buf = packet(first, &chain, pad);
        let ours = walk(&buf).unwrap();
        let theirs = etherparse::Ipv6Slice::from_slice(&buf).unwrap();
        prop_assert_eq!(ours.protocol, theirs.payload().ip_number.0);
        prop_assert_eq!(ours.offset, offset);
        // etherparse reads a zero payload length as "the rest of the slice" (jumbogram style),
        // so it counts the padding then; only compare lengths when there is a payload.
        if chain.is_empty() {
            prop_assert_eq!(ours.offset, HEADER_LEN);
        } else {
            prop_assert_eq!(buf.len() - pad - ours.offset, theirs.payload().payload.len());
        }
        prop_assert_eq!(ours.is_fragment(), theirs.is_payload_fragmented());
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        data in proptest::collection::vec(
            prop_oneof![Just(0u8), Just(43), Just(44), Just(51), Just(60), Just(1), any::<u8>()],
            0..160),
        plausible: bool,
    ) {
        let mut data = data;
        if plausible && data.len() >= HEADER_LEN {
            data[0] = 0x60 | (data[0] & 0x0f);
            let payload_len = u16::try_from(data.len() - HEADER_LEN).unwrap();
            data[4..6].copy_from_slice(&payload_len.to_be_bytes());
        }
        if let Ok(p) = Ipv6Packet::new_checked(&data[..]) {
            let _ = (p.version(), p.traffic_class(), p.flow_label(), p.next_header());
            let _ = (p.hop_limit(), p.src_addr(), p.dst_addr(), p.payload());
            if let Ok(up) = p.upper_layer() {
                prop_assert!(up.offset <= HEADER_LEN + usize::from(p.payload_len()));
                let _ = (up.is_fragment(), up.is_first_fragment());
            }
        }
    }
}
