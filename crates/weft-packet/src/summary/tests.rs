use super::*;
use crate::vlan::{tpid, VlanTag};
use etherparse::{IpHeaders, IpNumber, Ipv4Header, Ipv6Header, PacketBuilder};
use proptest::prelude::*;

const SRC: [u8; 6] = [0x52, 0x54, 0, 0, 0, 0xaa];
const DST: [u8; 6] = [0x52, 0x54, 0, 0, 0, 0xbb];

/// Inserts `tags` after the MAC addresses of an untagged frame.
fn with_tags(frame: Vec<u8>, tags: &[VlanTag]) -> Vec<u8> {
    let mut out = frame[..12].to_vec();
    for t in tags {
        out.extend_from_slice(&t.to_bytes());
    }
    out.extend_from_slice(&frame[12..]);
    out
}

/// Pads a frame to the Ethernet minimum of 60 bytes (without FCS).
fn padded(mut frame: Vec<u8>) -> Vec<u8> {
    if frame.len() < 60 {
        frame.resize(60, 0);
    }
    frame
}

fn ipv4_udp(src_port: u16, dst_port: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    PacketBuilder::ethernet2(SRC, DST)
        .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
        .udp(src_port, dst_port)
        .write(&mut f, payload)
        .unwrap();
    f
}

fn tci(pcp: u8, vid: u16) -> VlanTci {
    VlanTci::new(pcp, false, vid).unwrap()
}

#[test]
fn vlan_tagged_ipv4_tcp_is_summarised() {
    let mut f = Vec::new();
    PacketBuilder::ethernet2(SRC, DST)
        .single_vlan(0x123.try_into().unwrap())
        .ipv4([192, 168, 0, 1], [192, 168, 0, 2], 33)
        .tcp(40000, 443, 1, 65535)
        .write(&mut f, b"GET")
        .unwrap();
    let s = FrameSummary::parse(&f).unwrap();
    assert_eq!((s.dst, s.src), (MacAddr(DST), MacAddr(SRC)));
    assert_eq!(
        (s.outer_tpid, s.outer_vlan, s.inner_vlan),
        (Some(0x8100), Some(tci(0, 0x123)), None)
    );
    assert_eq!(
        (s.ethertype, s.l3_offset, s.l4_offset),
        (0x0800, 18, Some(38))
    );
    assert_eq!(
        s.l3,
        L3Summary::Ipv4 {
            src: Ipv4Addr::new(192, 168, 0, 1),
            dst: Ipv4Addr::new(192, 168, 0, 2),
            protocol: 6,
            ttl: 33,
            fragment: FragmentKind::None,
        }
    );
    assert_eq!(
        s.l4,
        L4Summary::Ports {
            src: 40000,
            dst: 443
        }
    );
}

#[test]
fn qinq_ipv6_udp_is_summarised() {
    let mut f = Vec::new();
    PacketBuilder::ethernet2(SRC, DST)
        .double_vlan(100.try_into().unwrap(), 200.try_into().unwrap())
        .ipv6([0x20; 16], [0xfe; 16], 7)
        .udp(546, 547)
        .write(&mut f, &[0; 12])
        .unwrap();
    let s = FrameSummary::parse(&f).unwrap();
    assert_eq!(
        (s.outer_tpid, s.outer_vlan, s.inner_vlan),
        (Some(0x88a8), Some(tci(0, 100)), Some(tci(0, 200)))
    );
    assert_eq!(
        (s.ethertype, s.l3_offset, s.l4_offset),
        (0x86dd, 22, Some(62))
    );
    assert_eq!(
        s.l3,
        L3Summary::Ipv6 {
            src: Ipv6Addr::from([0x20; 16]),
            dst: Ipv6Addr::from([0xfe; 16]),
            next_header: 17,
            hop_limit: 7,
            fragment: FragmentKind::None,
        }
    );
    assert_eq!(s.l4, L4Summary::Ports { src: 546, dst: 547 });
}

#[test]
fn icmp_echo_over_ipv4_and_ipv6_gives_type_and_code() {
    let mut f = Vec::new();
    PacketBuilder::ethernet2(SRC, DST)
        .ipv4([1, 1, 1, 1], [2, 2, 2, 2], 64)
        .icmpv4_echo_request(1, 2)
        .write(&mut f, &[])
        .unwrap();
    assert_eq!(
        FrameSummary::parse(&padded(f)).unwrap().l4,
        L4Summary::Icmp { ty: 8, code: 0 }
    );
    let mut f = Vec::new();
    PacketBuilder::ethernet2(SRC, DST)
        .ipv6([1; 16], [2; 16], 255)
        .icmpv6_echo_reply(1, 2)
        .write(&mut f, &[])
        .unwrap();
    assert_eq!(
        FrameSummary::parse(&f).unwrap().l4,
        L4Summary::Icmp { ty: 129, code: 0 }
    );
}

#[test]
fn icmp_number_in_the_wrong_ip_version_has_no_l4_info() {
    let mut f = ipv4_udp(1, 2, &[]);
    f[14 + 9] = 58; // ICMPv6 over IPv4
    assert_eq!(FrameSummary::parse(&f).unwrap().l4, L4Summary::None);
}

#[test]
fn arp_request_is_summarised() {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&SRC);
    f.extend_from_slice(&[0x08, 0x06]);
    let mut arp = [0u8; 28];
    let req = crate::arp::ArpRepr::request(
        MacAddr(SRC),
        Ipv4Addr::new(10, 1, 1, 1),
        Ipv4Addr::new(10, 1, 1, 2),
    );
    req.emit(&mut arp).unwrap();
    f.extend_from_slice(&arp);
    let s = FrameSummary::parse(&padded(f)).unwrap();
    assert_eq!(
        s.l3,
        L3Summary::Arp {
            op: ArpOperation::Request,
            sender_ip: Ipv4Addr::new(10, 1, 1, 1),
            target_ip: Ipv4Addr::new(10, 1, 1, 2),
        }
    );
    assert_eq!(
        (s.l4_offset, s.l4, s.dst),
        (None, L4Summary::None, MacAddr::BROADCAST)
    );
}

#[test]
fn non_ip_frame_has_no_l3_info() {
    let mut f = ipv4_udp(1, 2, &[]);
    f[12..14].copy_from_slice(&0x88ccu16.to_be_bytes()); // LLDP
    let s = FrameSummary::parse(&f).unwrap();
    assert_eq!(
        (s.ethertype, s.l3, s.l4_offset, s.l4),
        (0x88cc, L3Summary::None, None, L4Summary::None)
    );
}

#[test]
fn truncated_l2_is_the_only_error() {
    let tags = [
        VlanTag {
            tpid: tpid::STAG,
            tci: tci(1, 10),
        },
        VlanTag {
            tpid: tpid::CTAG,
            tci: tci(2, 20),
        },
    ];
    let f = with_tags(ipv4_udp(1, 2, b"data"), &tags);
    for len in 0..f.len() {
        let result = FrameSummary::parse(&f[..len]);
        if len < 22 {
            assert!(
                matches!(result, Err(ParseError::Truncated { .. })),
                "len {len}"
            );
        } else {
            let s = result.unwrap();
            let n = len - 22;
            let needed = if n < 20 { 20 } else { 32 };
            assert_eq!(
                s.l3,
                L3Summary::Malformed(ParseError::truncated(needed, n)),
                "len {len}"
            );
            assert_eq!(
                (s.outer_vlan, s.inner_vlan),
                (Some(tci(1, 10)), Some(tci(2, 20)))
            );
            assert_eq!((s.l4_offset, s.l4), (None, L4Summary::None));
        }
    }
    assert!(FrameSummary::parse(&f).is_ok());
}

#[test]
fn third_vlan_tag_is_unsupported() {
    let t = VlanTag {
        tpid: tpid::CTAG,
        tci: tci(0, 1),
    };
    let outer = VlanTag {
        tpid: tpid::STAG,
        tci: tci(0, 1),
    };
    let f = with_tags(ipv4_udp(1, 2, &[]), &[outer, t, t]);
    assert_eq!(FrameSummary::parse(&f), Err(ParseError::Unsupported));
}

#[test]
fn bad_ipv4_headers_are_malformed_but_forwardable() {
    let cases: [(usize, u8, ParseError); 3] = [
        (14, 0x65, ParseError::BadVersion),
        (14, 0x44, ParseError::BadIhl),
        (14, 0x4f, ParseError::BadIhl),
    ];
    for (at, value, err) in cases {
        let mut f = ipv4_udp(1, 2, &[]);
        f[at] = value;
        let s = FrameSummary::parse(&f).unwrap();
        assert_eq!(
            (s.l3, s.l4_offset, s.l4),
            (L3Summary::Malformed(err), None, L4Summary::None)
        );
        assert_eq!(s.src, MacAddr(SRC));
    }
}

#[test]
fn l4_ports_are_never_read_from_ethernet_padding() {
    let mut f = padded(ipv4_udp(1, 2, &[]));
    // Claim a 2-byte UDP "header": the ports would have to come from padding.
    f[16..18].copy_from_slice(&22u16.to_be_bytes());
    let s = FrameSummary::parse(&f).unwrap();
    assert!(matches!(s.l3, L3Summary::Ipv4 { .. }));
    assert_eq!((s.l4_offset, s.l4), (Some(34), L4Summary::Malformed));
}

#[test]
fn ipv6_l4_truncated_by_payload_length_is_malformed() {
    let mut f = Vec::new();
    PacketBuilder::ethernet2(SRC, DST)
        .ipv6([1; 16], [2; 16], 1)
        .tcp(1, 2, 3, 4)
        .write(&mut f, &[])
        .unwrap();
    f[18..20].copy_from_slice(&3u16.to_be_bytes());
    let s = FrameSummary::parse(&f).unwrap();
    assert!(matches!(s.l3, L3Summary::Ipv6 { next_header: 6, .. }));
    assert_eq!((s.l4_offset, s.l4), (Some(54), L4Summary::Malformed));
}

#[test]
fn ipv4_fragments_get_l4_info_only_when_first() {
    for (mf, offset, kind, l4) in [
        (
            true,
            0,
            FragmentKind::First,
            L4Summary::Ports { src: 7, dst: 9 },
        ),
        (true, 1480, FragmentKind::Later, L4Summary::None),
        (false, 1480, FragmentKind::Later, L4Summary::None),
    ] {
        let mut f = ipv4_udp(7, 9, &[0; 16]);
        let mut ip = Ipv4Packet::new_unchecked(&mut f[14..]);
        ip.set_more_frags(mf);
        ip.set_frag_offset(offset);
        ip.fill_checksum();
        let s = FrameSummary::parse(&f).unwrap();
        assert!(matches!(s.l3, L3Summary::Ipv4 { fragment, .. } if fragment == kind));
        assert_eq!(s.l4, l4);
        assert_eq!(s.l4_offset.is_some(), kind == FragmentKind::First);
    }
}

/// An IPv6/UDP frame whose chain is Hop-by-Hop, Fragment (offset, M), then UDP.
fn ipv6_fragment_frame(offset: u16, more: bool) -> Vec<u8> {
    let mut chain = vec![44, 0, 1, 4, 0, 0, 0, 0]; // Hop-by-Hop, PadN
    chain.extend_from_slice(&[17, 0]);
    chain.extend_from_slice(&(offset | u16::from(more)).to_be_bytes());
    chain.extend_from_slice(&[0, 0, 0, 5]);
    chain.extend_from_slice(&[0x13, 0x88, 0x00, 0x35, 0, 8, 0, 0]); // UDP 5000 -> 53
    let mut h = Ipv6Header {
        next_header: IpNumber(0),
        hop_limit: 9,
        ..Default::default()
    };
    h.payload_length = u16::try_from(chain.len()).unwrap();
    let mut f = DST.to_vec();
    f.extend_from_slice(&SRC);
    f.extend_from_slice(&[0x86, 0xdd]);
    f.extend_from_slice(&h.to_bytes());
    f.extend_from_slice(&chain);
    f
}

#[test]
fn ipv6_fragments_get_l4_info_only_when_first() {
    let s = FrameSummary::parse(&ipv6_fragment_frame(0, true)).unwrap();
    assert!(matches!(
        s.l3,
        L3Summary::Ipv6 {
            next_header: 17,
            fragment: FragmentKind::First,
            ..
        }
    ));
    assert_eq!(
        (s.l4_offset, s.l4),
        (Some(70), L4Summary::Ports { src: 5000, dst: 53 })
    );
    let s = FrameSummary::parse(&ipv6_fragment_frame(8, false)).unwrap();
    assert!(matches!(
        s.l3,
        L3Summary::Ipv6 {
            next_header: 17,
            fragment: FragmentKind::Later,
            ..
        }
    ));
    assert_eq!((s.l4_offset, s.l4), (None, L4Summary::None));
    let s = FrameSummary::parse(&ipv6_fragment_frame(0, false)).unwrap();
    assert!(
        matches!(
            s.l3,
            L3Summary::Ipv6 {
                fragment: FragmentKind::None,
                ..
            }
        ),
        "atomic"
    );
    assert_eq!(s.l4, L4Summary::Ports { src: 5000, dst: 53 });
}

#[test]
fn bad_ipv6_extension_chain_is_malformed() {
    let mut f = ipv6_fragment_frame(0, true);
    f[14 + 40 + 8] = 0; // the Fragment header's next header: Hop-by-Hop, not allowed there
    let s = FrameSummary::parse(&f).unwrap();
    assert_eq!(s.l3, L3Summary::Malformed(ParseError::BadExtensionHeader));
}

/// Parameters of a random frame: tags (TPID index, PCP, DEI, VID), IPv6?, L4 kind, ports.
type FrameParams = (
    Vec<(usize, u8, bool, u16)>,
    bool,
    u8,
    (u16, u16),
    u8,
    Vec<u8>,
);

fn arb_params() -> impl Strategy<Value = FrameParams> {
    (
        proptest::collection::vec((0usize..3, 0u8..8, any::<bool>(), 0u16..4096), 0..=2),
        any::<bool>(),
        0u8..3,
        (any::<u16>(), any::<u16>()),
        any::<u8>(),
        proptest::collection::vec(any::<u8>(), 0..40),
    )
}

fn build((tags, v6, l4, (sp, dp), ttl, payload): &FrameParams) -> Vec<u8> {
    let ip = if *v6 {
        let h = Ipv6Header {
            hop_limit: *ttl,
            source: [3; 16],
            destination: [4; 16],
            ..Default::default()
        };
        IpHeaders::Ipv6(h, Default::default())
    } else {
        let h = Ipv4Header::new(0, *ttl, IpNumber::UDP, [3; 4], [4; 4]).unwrap();
        IpHeaders::Ipv4(h, Default::default())
    };
    let step = PacketBuilder::ethernet2(SRC, DST).ip(ip);
    let mut f = Vec::new();
    match (l4, v6) {
        (0, _) => step.tcp(*sp, *dp, 1, 100).write(&mut f, payload),
        (1, _) => step.udp(*sp, *dp).write(&mut f, payload),
        (_, false) => step.icmpv4_echo_request(*sp, *dp).write(&mut f, payload),
        (_, true) => step.icmpv6_echo_request(*sp, *dp).write(&mut f, payload),
    }
    .unwrap();
    let tpids = [tpid::CTAG, tpid::STAG, tpid::QINQ_LEGACY];
    let tags: Vec<VlanTag> = tags
        .iter()
        .enumerate()
        .map(|(i, &(t, pcp, dei, vid))| VlanTag {
            // Only the outer tag may be an S-tag.
            tpid: if i == 0 { tpids[t] } else { tpid::CTAG },
            tci: VlanTci::new(pcp, dei, vid).unwrap(),
        })
        .collect();
    padded(with_tags(f, &tags))
}

proptest! {
    #[test]
    fn every_field_matches_etherparse(params in arb_params()) {
        use etherparse::{LinkSlice, NetSlice, SlicedPacket, TransportSlice, VlanHeader};
        let frame = build(&params);
        let s = FrameSummary::parse(&frame).unwrap();
        let e = SlicedPacket::from_ethernet(&frame).unwrap();
        let Some(LinkSlice::Ethernet2(eth)) = &e.link else { panic!("no ethernet") };
        prop_assert_eq!((s.dst.0, s.src.0), (eth.destination(), eth.source()));
        let tag_count = params.0.len();
        let to_tci = |h: &etherparse::SingleVlanHeader| {
            VlanTci::new(h.pcp.value(), h.drop_eligible_indicator, h.vlan_id.value())
        };
        match e.vlan.as_ref().map(|v| v.to_header()) {
            None => prop_assert_eq!((s.outer_vlan, s.inner_vlan, tag_count), (None, None, 0)),
            Some(VlanHeader::Single(h)) => {
                prop_assert_eq!((s.outer_vlan, s.inner_vlan), (to_tci(&h), None));
            }
            Some(VlanHeader::Double(h)) => {
                prop_assert_eq!((s.outer_vlan, s.inner_vlan), (to_tci(&h.outer), to_tci(&h.inner)));
            }
        }
        let l3_offset = 14 + 4 * u16::try_from(tag_count).unwrap();
        prop_assert_eq!(s.l3_offset, l3_offset);
        match e.net.as_ref().unwrap() {
            NetSlice::Ipv4(ip) => {
                let h = ip.header();
                prop_assert_eq!(s.ethertype, 0x0800);
                prop_assert_eq!(s.l3, L3Summary::Ipv4 {
                    src: h.source().into(),
                    dst: h.destination().into(),
                    protocol: h.protocol().0,
                    ttl: h.ttl(),
                    fragment: FragmentKind::None,
                });
                prop_assert_eq!(s.l4_offset, Some(l3_offset + 20));
            }
            NetSlice::Ipv6(ip) => {
                let h = ip.header();
                prop_assert_eq!(s.ethertype, 0x86dd);
                prop_assert_eq!(s.l3, L3Summary::Ipv6 {
                    src: h.source().into(),
                    dst: h.destination().into(),
                    next_header: ip.payload().ip_number.0,
                    hop_limit: h.hop_limit(),
                    fragment: FragmentKind::None,
                });
                prop_assert_eq!(s.l4_offset, Some(l3_offset + 40));
            }
        }
        let expected_l4 = match e.transport.as_ref().unwrap() {
            TransportSlice::Tcp(t) => L4Summary::Ports { src: t.source_port(), dst: t.destination_port() },
            TransportSlice::Udp(u) => L4Summary::Ports { src: u.source_port(), dst: u.destination_port() },
            TransportSlice::Icmpv4(i) => L4Summary::Icmp { ty: i.type_u8(), code: i.code_u8() },
            TransportSlice::Icmpv6(i) => L4Summary::Icmp { ty: i.type_u8(), code: i.code_u8() },
        };
        prop_assert_eq!(s.l4, expected_l4);
    }

    #[test]
    fn arbitrary_frames_never_panic_and_offsets_stay_in_bounds(
        data in proptest::collection::vec(
            prop_oneof![Just(0x81u8), Just(0x00), Just(0x08), Just(0x86), Just(0xdd), Just(0x45),
                        Just(0x60), Just(0x06), Just(0x11), Just(0x2c), any::<u8>()],
            0..120),
    ) {
        if let Ok(s) = FrameSummary::parse(&data) {
            prop_assert!(usize::from(s.l3_offset) <= data.len());
            if let Some(off) = s.l4_offset {
                prop_assert!(usize::from(off) <= data.len());
                let is_ip = matches!(s.l3, L3Summary::Ipv4 { .. } | L3Summary::Ipv6 { .. });
                prop_assert!(is_ip);
            } else {
                prop_assert!(matches!(s.l4, L4Summary::None | L4Summary::Malformed));
            }
            prop_assert!(s.inner_vlan.is_none() || s.outer_vlan.is_some());
        }
    }

    #[test]
    fn truncated_real_frames_fail_only_below_l2(params in arb_params(), cut in any::<proptest::sample::Index>()) {
        let frame = build(&params);
        let len = cut.index(frame.len() + 1);
        let l2 = 14 + 4 * params.0.len();
        prop_assert_eq!(FrameSummary::parse(&frame[..len]).is_ok(), len >= l2);
    }
}
