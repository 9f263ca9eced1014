//! [`FrameSummary::parse_prefix`]: it must agree with [`FrameSummary::parse`] on the whole frame
//! or give `None`, for every frame and every prefix length (a guest must not get a frame past
//! a flow rule by hiding headers past the snapshot), and decide ordinary frames from 128 bytes.

use super::*;
use crate::ipv6::next_header;
use crate::vlan::tpid;
use etherparse::PacketBuilder;
use proptest::prelude::*;
use proptest::sample::Index;

const SRC: [u8; 6] = [0x52, 0x54, 0, 0, 0, 0xaa];
const DST: [u8; 6] = [0x52, 0x54, 0, 0, 0, 0xbb];

/// The snapshot a vhost-user port takes.
const SNAPSHOT: usize = 128;

/// `parse_prefix` on the first `k` bytes of `frame`.
fn prefix(frame: &[u8], k: usize) -> Option<Result<FrameSummary>> {
    FrameSummary::parse_prefix(&frame[..k], frame.len())
}

/// Asserts that the 128-byte snapshot of `frame` decides it, and returns the summary.
fn decided_by_snapshot(frame: &[u8]) -> FrameSummary {
    let whole = FrameSummary::parse(frame);
    assert_eq!(prefix(frame, SNAPSHOT.min(frame.len())), Some(whole));
    whole.unwrap()
}

/// An IPv4/TCP frame of exactly `len` bytes (at least 54).
fn ipv4_tcp(len: usize) -> Vec<u8> {
    let mut f = Vec::new();
    PacketBuilder::ethernet2(SRC, DST)
        .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
        .tcp(40000, 443, 1, 65535)
        .write(&mut f, &vec![0x5a; len - 54])
        .unwrap();
    assert_eq!(f.len(), len);
    f
}

/// An IPv6 frame with the given extension-header chain (each header's first byte is set to
/// the next one) and an upper-layer header plus payload of `upper_bytes` bytes.
fn ipv6_frame(chain: &[(u8, Vec<u8>)], upper: u8, upper_bytes: &[u8]) -> Vec<u8> {
    let mut payload = Vec::new();
    for (i, (_, header)) in chain.iter().enumerate() {
        let mut header = header.clone();
        header[0] = chain.get(i + 1).map_or(upper, |h| h.0);
        payload.extend_from_slice(&header);
    }
    payload.extend_from_slice(upper_bytes);
    let mut f = DST.to_vec();
    f.extend_from_slice(&SRC);
    f.extend_from_slice(&ethertype::IPV6.to_be_bytes());
    f.push(0x60);
    f.extend_from_slice(&[0, 0, 0]);
    f.extend_from_slice(&u16::try_from(payload.len()).unwrap().to_be_bytes());
    f.push(chain.first().map_or(upper, |h| h.0));
    f.push(64);
    f.extend_from_slice(&[0x20; 16]);
    f.extend_from_slice(&[0xfe; 16]);
    f.extend_from_slice(&payload);
    f
}

/// A generic (Hop-by-Hop, Routing, Destination Options) header of `len` bytes.
fn ext(len: usize) -> Vec<u8> {
    let mut h = vec![0x01; len];
    h[1] = u8::try_from(len / 8 - 1).unwrap();
    h
}

/// UDP 5000 -> 53 with `len` bytes of data.
fn udp(len: usize) -> Vec<u8> {
    let mut u = vec![0x13, 0x88, 0x00, 0x35];
    u.extend_from_slice(&u16::try_from(8 + len).unwrap().to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.resize(8 + len, 0x77);
    u
}

#[test]
fn ipv4_tcp_1514_bytes_is_decided_by_a_128_byte_prefix() {
    let s = decided_by_snapshot(&ipv4_tcp(1514));
    assert!(matches!(s.l3, L3Summary::Ipv4 { protocol: 6, .. }));
    assert_eq!(
        s.l4,
        L4Summary::Ports {
            src: 40000,
            dst: 443
        }
    );
}

#[test]
fn vlan_tagged_frame_is_decided_by_a_128_byte_prefix() {
    let mut f = Vec::new();
    PacketBuilder::ethernet2(SRC, DST)
        .single_vlan(0x123.try_into().unwrap())
        .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
        .tcp(1, 2, 3, 4)
        .write(&mut f, &[0; 1456])
        .unwrap();
    let s = decided_by_snapshot(&f);
    assert_eq!(
        (s.l3_offset, s.l4),
        (18, L4Summary::Ports { src: 1, dst: 2 })
    );
}

#[test]
fn qinq_frame_is_decided_by_a_128_byte_prefix() {
    let mut f = Vec::new();
    PacketBuilder::ethernet2(SRC, DST)
        .double_vlan(100.try_into().unwrap(), 200.try_into().unwrap())
        .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
        .udp(7, 9)
        .write(&mut f, &[0; 1000])
        .unwrap();
    let s = decided_by_snapshot(&f);
    assert_eq!(
        (s.l3_offset, s.l4),
        (22, L4Summary::Ports { src: 7, dst: 9 })
    );
}

#[test]
fn ipv4_with_40_bytes_of_options_is_decided_by_a_128_byte_prefix() {
    let plain = ipv4_tcp(1474);
    let mut f = plain[..34].to_vec();
    f.extend_from_slice(&[1; 40]); // NOP options
    f.extend_from_slice(&plain[34..]);
    f[14] = 0x4f;
    f[16..18].copy_from_slice(&1500u16.to_be_bytes());
    let s = decided_by_snapshot(&f);
    assert_eq!(
        (s.l4_offset, s.l4),
        (
            Some(74),
            L4Summary::Ports {
                src: 40000,
                dst: 443
            }
        )
    );
}

#[test]
fn ipv6_udp_is_decided_by_a_128_byte_prefix() {
    let mut f = Vec::new();
    PacketBuilder::ethernet2(SRC, DST)
        .ipv6([1; 16], [2; 16], 64)
        .udp(546, 547)
        .write(&mut f, &[0; 1400])
        .unwrap();
    let s = decided_by_snapshot(&f);
    assert!(matches!(
        s.l3,
        L3Summary::Ipv6 {
            next_header: 17,
            ..
        }
    ));
    assert_eq!(s.l4, L4Summary::Ports { src: 546, dst: 547 });
}

#[test]
fn ipv6_with_an_8_byte_hop_by_hop_header_is_decided_by_a_128_byte_prefix() {
    let f = ipv6_frame(&[(next_header::HOP_BY_HOP, ext(8))], 17, &udp(1400));
    let s = decided_by_snapshot(&f);
    assert_eq!(
        (s.l4_offset, s.l4),
        (Some(62), L4Summary::Ports { src: 5000, dst: 53 })
    );
}

#[test]
fn arp_is_decided_by_a_128_byte_prefix() {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&SRC);
    f.extend_from_slice(&ethertype::ARP.to_be_bytes());
    let mut arp = [0u8; 28];
    crate::arp::ArpRepr::request(
        MacAddr(SRC),
        Ipv4Addr::new(10, 1, 1, 1),
        Ipv4Addr::new(10, 1, 1, 2),
    )
    .emit(&mut arp)
    .unwrap();
    f.extend_from_slice(&arp);
    f.resize(60, 0);
    let s = decided_by_snapshot(&f);
    assert!(matches!(s.l3, L3Summary::Arp { .. }));
    // The 42 bytes of Ethernet and ARP header are enough.
    assert_eq!(prefix(&f, 42), Some(Ok(s)));
    assert_eq!(prefix(&f, 41), None);
}

#[test]
fn non_ip_frame_is_decided_by_its_ethernet_header() {
    let mut f = ipv4_tcp(1514);
    f[12..14].copy_from_slice(&0x88ccu16.to_be_bytes()); // LLDP
    let whole = FrameSummary::parse(&f);
    assert_eq!(prefix(&f, 14), Some(whole));
    assert_eq!(prefix(&f, 13), None);
}

#[test]
fn ipv6_extension_headers_past_the_prefix_give_none() {
    // Destination Options of 104 bytes: the UDP header starts at 14 + 40 + 104 = 158.
    let f = ipv6_frame(&[(next_header::DEST_OPTS, ext(104))], 17, &udp(1000));
    let whole = FrameSummary::parse(&f);
    assert!(matches!(
        whole,
        Ok(FrameSummary {
            l4: L4Summary::Ports { .. },
            ..
        })
    ));
    assert_eq!(prefix(&f, SNAPSHOT), None);
    assert_eq!(prefix(&f, 161), None);
    assert_eq!(prefix(&f, 162), Some(whole));
}

#[test]
fn long_extension_header_needs_only_its_start_and_the_next_header() {
    // A 2 KiB Hop-by-Hop header then a later fragment: the walk reads bytes 0 and 1 of the
    // Hop-by-Hop header and all of the Fragment header, at 14 + 40 + 2048.
    let mut frag = vec![0, 0];
    frag.extend_from_slice(&0x0008u16.to_be_bytes());
    frag.extend_from_slice(&[0, 0, 0, 9]);
    let chain = [
        (next_header::HOP_BY_HOP, ext(2048)),
        (next_header::FRAGMENT, frag),
    ];
    let f = ipv6_frame(&chain, 17, &[0; 100]);
    let whole = FrameSummary::parse(&f);
    assert!(matches!(
        whole,
        Ok(FrameSummary {
            l3: L3Summary::Ipv6 {
                fragment: FragmentKind::Later,
                ..
            },
            ..
        })
    ));
    let end_of_fragment_header = 14 + 40 + 2048 + 8;
    assert_eq!(prefix(&f, end_of_fragment_header), Some(whole));
    assert_eq!(prefix(&f, end_of_fragment_header - 1), None);
}

#[test]
fn ipv4_total_length_past_the_frame_gives_the_same_malformed_as_parse() {
    let mut f = ipv4_tcp(1514);
    f[16..18].copy_from_slice(&1501u16.to_be_bytes());
    let whole = FrameSummary::parse(&f);
    assert_eq!(
        whole.map(|s| s.l3),
        Ok(L3Summary::Malformed(ParseError::truncated(1501, 1500)))
    );
    assert_eq!(prefix(&f, SNAPSHOT), Some(whole));
    assert_eq!(prefix(&f, 34), Some(whole));
}

#[test]
fn ipv6_payload_length_past_the_frame_gives_the_same_malformed_as_parse() {
    let mut f = ipv6_frame(&[], 17, &udp(1000));
    f[18..20].copy_from_slice(&1009u16.to_be_bytes());
    let whole = FrameSummary::parse(&f);
    assert_eq!(
        whole.map(|s| s.l3),
        Ok(L3Summary::Malformed(ParseError::truncated(1049, 1048)))
    );
    assert_eq!(prefix(&f, SNAPSHOT), Some(whole));
}

#[test]
fn prefix_shorter_than_the_l2_header_of_a_longer_frame_gives_none() {
    let f = ipv4_tcp(1514);
    for k in 0..14 {
        assert_eq!(prefix(&f, k), None, "{k} bytes");
    }
    let mut tagged = f[..12].to_vec();
    tagged.extend_from_slice(&[0x88, 0xa8, 0, 1, 0x81, 0x00, 0, 2]);
    tagged.extend_from_slice(&f[12..]);
    for k in 0..22 {
        assert_eq!(prefix(&tagged, k), None, "{k} bytes");
    }
}

#[test]
fn short_frame_held_whole_gives_the_l2_error_of_parse() {
    let f = ipv4_tcp(60);
    for len in 0..22 {
        let frame = &f[..len];
        assert_eq!(
            FrameSummary::parse_prefix(frame, len),
            Some(FrameSummary::parse(frame))
        );
    }
}

#[test]
fn third_vlan_tag_is_unsupported_from_the_prefix() {
    let f = ipv4_tcp(200);
    let mut tagged = f[..12].to_vec();
    tagged.extend_from_slice(&[0x88, 0xa8, 0, 1, 0x81, 0x00, 0, 2, 0x81, 0x00, 0, 3]);
    tagged.extend_from_slice(&f[12..]);
    assert_eq!(prefix(&tagged, 22), Some(Err(ParseError::Unsupported)));
}

#[test]
fn bytes_past_frame_len_are_ignored() {
    let f = ipv4_tcp(1514);
    for len in [0, 13, 14, 33, 34, 57, 58, 100, 1514] {
        assert_eq!(
            FrameSummary::parse_prefix(&f, len),
            Some(FrameSummary::parse(&f[..len])),
            "frame_len {len}"
        );
    }
}

#[test]
fn upper_layer_prefix_equals_upper_layer_when_the_payload_is_held() {
    let f = ipv6_frame(&[(next_header::HOP_BY_HOP, ext(16))], 6, &[0; 20]);
    let packet = Ipv6Packet::new_checked(&f[14..]).unwrap();
    assert_eq!(packet.upper_layer_prefix(), Some(packet.upper_layer()));
    let head = Ipv6Packet::new_unchecked(&f[14..14 + 40 + 1]);
    assert_eq!(head.check_len_of(f.len() - 14), Ok(()));
    assert_eq!(head.upper_layer_prefix(), None);
}

#[test]
fn check_len_of_a_short_buffer_is_an_error_not_a_panic() {
    let f = ipv4_tcp(100);
    assert_eq!(
        Ipv4Packet::new_unchecked(&f[14..20]).check_len_of(86),
        Err(ParseError::truncated(20, 6))
    );
    assert_eq!(
        Ipv6Packet::new_unchecked(&f[14..20]).check_len_of(86),
        Err(ParseError::truncated(40, 6))
    );
    assert_eq!(
        ArpPacket::new_unchecked(&f[14..20]).check_len_of(86),
        Err(ParseError::truncated(28, 6))
    );
}

// ---------------------------------------------------------------------------------------
// Structured random frames.

/// An IPv6 extension header (or what the chain claims is one).
#[derive(Debug, Clone)]
struct Ext {
    kind: u8,
    /// The header's length byte (Hop-by-Hop, Routing, Destination Options, AH).
    len_field: u8,
    /// Offset and M flag of a Fragment header.
    frag_field: u16,
}

#[derive(Debug, Clone)]
enum L3Plan {
    Ipv4 {
        version: u8,
        /// The IHL nibble; `None` for the one the options give.
        ihl: Option<u8>,
        options_words: usize,
        total_len: LenField,
        flags_frag: u16,
        proto: u8,
        ttl_and_addrs: [u8; 9],
    },
    Ipv6 {
        version: u8,
        payload_len: LenField,
        chain: Vec<Ext>,
        upper: u8,
        addrs: [u8; 32],
    },
    Arp {
        header: [u8; 6],
        rest: [u8; 22],
    },
    /// Random bytes under an IPv4, IPv6 or ARP EtherType.
    Raw {
        ethertype: u16,
        bytes: Vec<u8>,
    },
    Other {
        ethertype: u16,
    },
}

/// What an IP length field says.
#[derive(Debug, Clone, Copy)]
enum LenField {
    /// The real length.
    Real,
    /// The real length minus this (a header or field then ends exactly at the payload's end).
    Short(u8),
    /// The real length plus this: past the frame.
    Long(u8),
    Any(u16),
}

impl LenField {
    fn value(self, real: usize) -> [u8; 2] {
        let real = u16::try_from(real).unwrap_or(u16::MAX);
        match self {
            LenField::Real => real,
            LenField::Short(n) => real.saturating_sub(u16::from(n)),
            LenField::Long(n) => real.saturating_add(u16::from(n)),
            LenField::Any(v) => v,
        }
        .to_be_bytes()
    }
}

fn arb_len_field() -> impl Strategy<Value = LenField> {
    prop_oneof![
        6 => Just(LenField::Real),
        2 => (1u8..24).prop_map(LenField::Short),
        1 => (1u8..8).prop_map(LenField::Long),
        1 => any::<u16>().prop_map(LenField::Any),
    ]
}

#[derive(Debug, Clone)]
enum Tail {
    Keep,
    /// Cut the frame short.
    Cut(Index),
    /// Ethernet padding.
    Pad(usize),
}

#[derive(Debug, Clone)]
struct Plan {
    macs: [u8; 12],
    tags: Vec<(u16, u16)>,
    l3: L3Plan,
    l4: Vec<u8>,
    payload_len: usize,
    flips: Vec<(Index, u8)>,
    tail: Tail,
}

fn arb_tpid() -> impl Strategy<Value = u16> {
    prop_oneof![
        4 => Just(tpid::CTAG),
        2 => Just(tpid::STAG),
        1 => Just(tpid::QINQ_LEGACY),
        1 => any::<u16>(),
    ]
}

fn arb_proto() -> impl Strategy<Value = u8> {
    prop_oneof![
        Just(protocol::TCP),
        Just(protocol::UDP),
        Just(protocol::ICMP),
        Just(protocol::ICMPV6),
        Just(protocol::SCTP),
        Just(protocol::UDPLITE),
        Just(next_header::NO_NEXT_HEADER),
        any::<u8>(),
    ]
}

fn arb_ext() -> impl Strategy<Value = Ext> {
    let kind = prop_oneof![
        Just(next_header::HOP_BY_HOP),
        Just(next_header::ROUTING),
        Just(next_header::FRAGMENT),
        Just(next_header::DEST_OPTS),
        Just(next_header::AUTH),
        Just(next_header::ESP),
        any::<u8>(),
    ];
    let len_field = prop_oneof![4 => 0u8..4, 1 => any::<u8>()];
    let frag_field = prop_oneof![
        Just(0u16),
        Just(1),
        (1u16..0x2000).prop_map(|o| o << 3),
        any::<u16>(),
    ];
    (kind, len_field, frag_field).prop_map(|(kind, len_field, frag_field)| Ext {
        kind,
        len_field,
        frag_field,
    })
}

fn arb_l3() -> impl Strategy<Value = L3Plan> {
    let ipv4 = (
        prop_oneof![9 => Just(4u8), 1 => 0u8..16],
        prop_oneof![9 => Just(None), 1 => (0u8..16).prop_map(Some)],
        0usize..=10,
        arb_len_field(),
        prop_oneof![
            Just(0u16),
            Just(0x4000),
            Just(0x2000),
            Just(0x00b9),
            any::<u16>()
        ],
        arb_proto(),
        any::<[u8; 9]>(),
    )
        .prop_map(
            |(version, ihl, options_words, total_len, flags_frag, proto, ttl_and_addrs)| {
                L3Plan::Ipv4 {
                    version,
                    ihl,
                    options_words,
                    total_len,
                    flags_frag,
                    proto,
                    ttl_and_addrs,
                }
            },
        );
    let ipv6 = (
        prop_oneof![9 => Just(6u8), 1 => 0u8..16],
        arb_len_field(),
        prop_oneof![
            3 => proptest::collection::vec(arb_ext(), 0..3),
            1 => proptest::collection::vec(arb_ext(), 0..11),
        ],
        arb_proto(),
        any::<[u8; 32]>(),
    )
        .prop_map(|(version, payload_len, chain, upper, addrs)| L3Plan::Ipv6 {
            version,
            payload_len,
            chain,
            upper,
            addrs,
        });
    let arp = (
        prop_oneof![
            4 => Just([0, 1, 8, 0, 6, 4]),
            1 => any::<[u8; 6]>()
        ],
        any::<[u8; 22]>(),
    )
        .prop_map(|(header, rest)| L3Plan::Arp { header, rest });
    let raw = (
        prop_oneof![
            Just(ethertype::IPV4),
            Just(ethertype::IPV6),
            Just(ethertype::ARP)
        ],
        proptest::collection::vec(any::<u8>(), 0..80),
    )
        .prop_map(|(ethertype, bytes)| L3Plan::Raw { ethertype, bytes });
    let other = any::<u16>().prop_map(|ethertype| L3Plan::Other { ethertype });
    prop_oneof![
        4 => ipv4,
        5 => ipv6,
        1 => arp,
        1 => raw,
        1 => other,
    ]
}

fn arb_plan() -> impl Strategy<Value = Plan> {
    (
        any::<[u8; 12]>(),
        prop_oneof![
            8 => proptest::collection::vec((arb_tpid(), any::<u16>(), 0u8..4), 0..=2),
            1 => proptest::collection::vec((arb_tpid(), any::<u16>(), 0u8..4), 3..=3),
        ]
        .prop_map(|tags| {
            // Inner tags are mostly the C-tags the parser accepts there.
            let inner =
                |i: usize, tpid: u16, odd: u8| if i == 0 || odd == 0 { tpid } else { tpid::CTAG };
            tags.iter()
                .enumerate()
                .map(|(i, &(tpid, tci, odd))| (inner(i, tpid, odd), tci))
                .collect::<Vec<_>>()
        }),
        arb_l3(),
        prop_oneof![
            1 => Just(Vec::new()),
            3 => proptest::collection::vec(any::<u8>(), 0..40),
        ],
        prop_oneof![
            1 => Just(0usize),
            4 => 0usize..64,
            2 => 0usize..2000,
            1 => 0usize..65_536,
        ],
        prop_oneof![
            4 => Just(Vec::new()),
            1 => proptest::collection::vec((any::<Index>(), any::<u8>()), 1..4),
        ],
        prop_oneof![
            3 => Just(Tail::Keep),
            1 => any::<Index>().prop_map(Tail::Cut),
            1 => (1usize..64).prop_map(Tail::Pad),
        ],
    )
        .prop_map(|(macs, tags, l3, l4, payload_len, flips, tail)| Plan {
            macs,
            tags,
            l3,
            l4,
            payload_len,
            flips,
            tail,
        })
}

/// Appends an extension-header chain whose headers name each other, ending in `upper`.
fn push_chain(out: &mut Vec<u8>, chain: &[Ext], upper: u8) {
    for (i, e) in chain.iter().enumerate() {
        let next = chain.get(i + 1).map_or(upper, |n| n.kind);
        let start = out.len();
        match e.kind {
            next_header::FRAGMENT => {
                out.extend_from_slice(&[next, 0]);
                out.extend_from_slice(&e.frag_field.to_be_bytes());
                out.extend_from_slice(&[0, 0, 0, 7]);
            }
            next_header::AUTH => {
                out.resize(start + (usize::from(e.len_field) + 2) * 4, 0x33);
                out[start] = next;
                out[start + 1] = e.len_field;
            }
            _ => {
                out.resize(start + (usize::from(e.len_field) + 1) * 8, 0x01);
                out[start] = next;
                out[start + 1] = e.len_field;
            }
        }
    }
}

fn render(plan: &Plan) -> Vec<u8> {
    let mut f = plan.macs.to_vec();
    for &(tpid, tci) in &plan.tags {
        f.extend_from_slice(&tpid.to_be_bytes());
        f.extend_from_slice(&tci.to_be_bytes());
    }
    let l3_start = f.len() + 2;
    // Where the length field goes (from the L3 start), and how much it counts.
    let mut length_field: Option<(usize, usize, LenField)> = None;
    match &plan.l3 {
        L3Plan::Ipv4 {
            version,
            ihl,
            options_words,
            total_len,
            flags_frag,
            proto,
            ttl_and_addrs,
        } => {
            f.extend_from_slice(&ethertype::IPV4.to_be_bytes());
            let ihl = ihl.unwrap_or(u8::try_from(5 + options_words).unwrap());
            f.extend_from_slice(&[(version << 4) | ihl, 0, 0, 0, 0, 0]);
            f.extend_from_slice(&flags_frag.to_be_bytes());
            f.push(ttl_and_addrs[0]);
            f.push(*proto);
            f.extend_from_slice(&[0, 0]);
            f.extend_from_slice(&ttl_and_addrs[1..]);
            f.resize(f.len() + 4 * options_words, 1);
            length_field = Some((2, 0, *total_len));
        }
        L3Plan::Ipv6 {
            version,
            payload_len,
            chain,
            upper,
            addrs,
        } => {
            f.extend_from_slice(&ethertype::IPV6.to_be_bytes());
            let first = chain.first().map_or(*upper, |e| e.kind);
            f.extend_from_slice(&[version << 4, 0, 0, 0, 0, 0, first, 64]);
            f.extend_from_slice(addrs);
            push_chain(&mut f, chain, *upper);
            length_field = Some((4, 40, *payload_len));
        }
        L3Plan::Arp { header, rest } => {
            f.extend_from_slice(&ethertype::ARP.to_be_bytes());
            f.extend_from_slice(header);
            f.extend_from_slice(rest);
        }
        L3Plan::Raw { ethertype, bytes } => {
            f.extend_from_slice(&ethertype.to_be_bytes());
            f.extend_from_slice(bytes);
        }
        L3Plan::Other { ethertype } => f.extend_from_slice(&ethertype.to_be_bytes()),
    }
    f.extend_from_slice(&plan.l4);
    f.resize(f.len() + plan.payload_len, 0x5a);
    if let Some((at, skip, value)) = length_field {
        let bytes = value.value(f.len() - l3_start - skip);
        f[l3_start + at..l3_start + at + 2].copy_from_slice(&bytes);
    }
    for (at, value) in &plan.flips {
        let at = at.index(f.len().min(2 * SNAPSHOT));
        f[at] = *value;
    }
    match plan.tail {
        Tail::Keep => {}
        Tail::Cut(at) => f.truncate(at.index(f.len() + 1)),
        Tail::Pad(n) => f.resize(f.len() + n, 0),
    }
    f
}

/// Every prefix length up to `sweep`, the 128-byte snapshot, `extra` and the whole frame.
fn prefix_lengths(len: usize, sweep: usize, extra: Index) -> impl Iterator<Item = usize> {
    (0..=len.min(sweep)).chain([SNAPSHOT.min(len), extra.index(len + 1), len])
}

/// The invariant: `None`, or exactly `parse` on the whole frame.
fn check_invariant(
    frame: &[u8],
    sweep: usize,
    extra: Index,
) -> core::result::Result<(), TestCaseError> {
    let whole = FrameSummary::parse(frame);
    for k in prefix_lengths(frame.len(), sweep, extra) {
        if let Some(got) = prefix(frame, k) {
            prop_assert_eq!(
                got,
                whole,
                "prefix of {} bytes of a {}-byte frame",
                k,
                frame.len()
            );
        }
    }
    prop_assert_eq!(prefix(frame, frame.len()), Some(whole));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn parse_prefix_is_none_or_equals_parse_of_the_whole_frame(
        plan in arb_plan(),
        extra in any::<Index>(),
    ) {
        let frame = render(&plan);
        check_invariant(&frame, 3 * SNAPSHOT, extra)?;
    }

    #[test]
    fn parse_prefix_is_none_or_equals_parse_on_arbitrary_bytes(
        raw in proptest::collection::vec(any::<u8>(), 0..300),
        extra in any::<Index>(),
    ) {
        // Half the bytes are ones the parsers branch on (TPIDs, EtherTypes, versions, protocol
        // and extension-header numbers), the rest anything.
        const LIKELY: [u8; 12] = [0x81, 0x00, 0x08, 0x06, 0x86, 0xdd, 0x45, 0x60, 0x11, 0x2c, 0x3c, 0x88];
        let frame: Vec<u8> = raw
            .iter()
            .enumerate()
            .map(|(i, &b)| if b < 128 { LIKELY[(usize::from(b) + i) % LIKELY.len()] } else { b })
            .collect();
        check_invariant(&frame, 300, extra)?;
    }

    #[test]
    fn headers_fit_exactly_when_parse_prefix_decides(
        plan in arb_plan(),
        cut in any::<Index>(),
        extra in any::<Index>(),
    ) {
        let frame = render(&plan);
        let len = cut.index(frame.len() + 1);
        for k in [0, 14, 22, 64, 85, 86, 87, 128, extra.index(len + 1)] {
            let prefix = &frame[..k.min(len)];
            prop_assert_eq!(
                FrameSummary::headers_fit(prefix, len),
                FrameSummary::parse_prefix(prefix, len).is_some(),
                "prefix {} of {}", prefix.len(), len
            );
        }
    }

    #[test]
    fn bytes_past_frame_len_are_ignored_for_any_frame(plan in arb_plan(), cut in any::<Index>()) {
        let frame = render(&plan);
        let len = cut.index(frame.len() + 1);
        prop_assert_eq!(
            FrameSummary::parse_prefix(&frame, len),
            Some(FrameSummary::parse(&frame[..len]))
        );
    }
}

/// An ordinary frame: up to two valid tags, then IPv4 (any options, not a later fragment),
/// IPv6 (up to two short extension headers), ARP or another EtherType; TCP, UDP or ICMP.
fn arb_ordinary_plan() -> impl Strategy<Value = Plan> {
    let tags = proptest::collection::vec(any::<u16>(), 0..=2).prop_map(|tcis| {
        let outer = if tcis.len() == 2 {
            tpid::STAG
        } else {
            tpid::CTAG
        };
        tcis.iter()
            .enumerate()
            .map(|(i, &tci)| (if i == 0 { outer } else { tpid::CTAG }, tci))
            .collect::<Vec<_>>()
    });
    let l4_proto = prop_oneof![
        Just(protocol::TCP),
        Just(protocol::UDP),
        Just(protocol::ICMP)
    ];
    let ipv4 = (
        0usize..=10,
        prop_oneof![Just(0u16), Just(0x4000), Just(0x2000)],
        l4_proto.clone(),
        any::<[u8; 9]>(),
    )
        .prop_map(
            |(options_words, flags_frag, proto, ttl_and_addrs)| L3Plan::Ipv4 {
                version: 4,
                ihl: None,
                options_words,
                total_len: LenField::Real,
                flags_frag,
                proto,
                ttl_and_addrs,
            },
        );
    let short_ext = prop_oneof![
        (0u8..2).prop_map(|len_field| Ext {
            kind: next_header::DEST_OPTS,
            len_field,
            frag_field: 0
        }),
        (0u8..2).prop_map(|len_field| Ext {
            kind: next_header::ROUTING,
            len_field,
            frag_field: 0
        }),
        (0u16..2).prop_map(|more| Ext {
            kind: next_header::FRAGMENT,
            len_field: 0,
            frag_field: more
        }),
    ];
    let ipv6 = (
        proptest::option::of(0u8..2),
        proptest::option::of(short_ext),
        prop_oneof![
            Just(protocol::TCP),
            Just(protocol::UDP),
            Just(protocol::ICMPV6)
        ],
        any::<[u8; 32]>(),
    )
        .prop_map(|(hop_by_hop, ext, upper, addrs)| {
            let hop_by_hop = hop_by_hop.map(|len_field| Ext {
                kind: next_header::HOP_BY_HOP,
                len_field,
                frag_field: 0,
            });
            L3Plan::Ipv6 {
                version: 6,
                payload_len: LenField::Real,
                chain: hop_by_hop.into_iter().chain(ext).collect(),
                upper,
                addrs,
            }
        });
    let arp = any::<[u8; 22]>().prop_map(|rest| L3Plan::Arp {
        header: [0, 1, 8, 0, 6, 4],
        rest,
    });
    let other = any::<u16>()
        .prop_filter("not a tag or a parsed EtherType", |&t| {
            !crate::vlan::is_outer_tpid(t)
                && ![ethertype::IPV4, ethertype::IPV6, ethertype::ARP].contains(&t)
        })
        .prop_map(|ethertype| L3Plan::Other { ethertype });
    (
        any::<[u8; 12]>(),
        tags,
        prop_oneof![3 => ipv4, 3 => ipv6, 1 => arp, 1 => other],
        proptest::collection::vec(any::<u8>(), 8..=20),
        prop_oneof![0usize..1500, 0usize..65_000],
    )
        .prop_map(|(macs, tags, l3, l4, payload_len)| Plan {
            macs,
            tags,
            l3,
            l4,
            payload_len,
            flips: Vec::new(),
            tail: Tail::Keep,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn ordinary_frames_are_decided_by_a_128_byte_prefix(plan in arb_ordinary_plan()) {
        let frame = render(&plan);
        let whole = FrameSummary::parse(&frame);
        prop_assert!(whole.is_ok());
        prop_assert_eq!(prefix(&frame, SNAPSHOT.min(frame.len())), Some(whole));
    }
}
