//! UDP offloads without sockets: a TCP super-frame segmented and encapsulated for
//! `UDP_SEGMENT` (every outer datagram checked with etherparse), and the UDP GRO control
//! message read and cut apart, hostile values included.

use etherparse::{NetHeaders, PacketHeaders, TransportHeader};
use proptest::prelude::*;
use weft_packet::{GsoKind, OffloadInfo, Vni};

use crate::vxlan::gro::{gro_segment_size, gro_segments, read_control, GroError, RxControl};
use crate::vxlan::rx_coalesce::MergeKinds;
use crate::vxlan::tx_super::{gather_super_frame, Gathered, SuperFrameError, MAX_GSO_PAYLOAD};
use crate::vxlan::udp_offload::UDP_GRO;

const MSS: u16 = 1398;

/// An Ethernet/IP/TCP super-frame carrying `payload` (IPv6 when `v6`).
pub(crate) fn tcp_super_frame(v6: bool, payload: &[u8]) -> (Vec<u8>, OffloadInfo) {
    let eth = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
    let builder = if v6 {
        eth.ipv6([0xfd; 16], [0xfe; 16], 64)
            .tcp(40_000, 5201, 1_000_000, 512)
    } else {
        eth.ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .tcp(40_000, 5201, 1_000_000, 512)
    };
    let mut out = Vec::new();
    builder.ack(7).psh().write(&mut out, payload).unwrap();
    let info = OffloadInfo {
        gso: if v6 { GsoKind::TcpV6 } else { GsoKind::TcpV4 },
        gso_size: MSS,
        hdr_len: if v6 { 74 } else { 54 },
        ..OffloadInfo::default()
    };
    (out, info)
}

/// An Ethernet/IP/UDP super-frame carrying `payload`, to be cut into `gso_size`-byte
/// datagrams (IPv6 when `v6`).
pub(crate) fn udp_super_frame(v6: bool, payload: &[u8], gso_size: u16) -> (Vec<u8>, OffloadInfo) {
    let eth = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
    let mut out = Vec::new();
    if v6 {
        eth.ipv6([0xfd; 16], [0xfe; 16], 64)
            .udp(40_000, 443)
            .write(&mut out, payload)
            .unwrap();
    } else {
        eth.ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .udp(40_000, 443)
            .write(&mut out, payload)
            .unwrap();
    }
    let info = OffloadInfo {
        gso: GsoKind::UdpL4,
        gso_size,
        hdr_len: if v6 { 62 } else { 42 },
        ..OffloadInfo::default()
    };
    (out, info)
}

fn payload(len: usize) -> Vec<u8> {
    (0..len).map(|i| u8::try_from(i % 251).unwrap()).collect()
}

/// The datagrams of `frame`'s gathered sends, back to back: what the kernel copies from the
/// iovecs (and what a peer's GRO socket receives).
pub(crate) fn encapsulate(
    frame: &[u8],
    info: &OffloadInfo,
    mtu: usize,
    vni: Vni,
) -> Result<(Vec<u8>, Gathered), SuperFrameError> {
    let mut headers = vec![0u8; 64 << 10];
    let plan = gather_super_frame(frame, info, mtu, vni, &mut headers)?;
    let mut out = Vec::new();
    for i in 0..plan.count {
        out.extend_from_slice(plan.header_block(&headers, i));
        out.extend_from_slice(plan.payload_of(frame, i));
    }
    Ok((out, plan))
}

fn check_segments(v6: bool, len: usize, mtu: usize) {
    let data = payload(len);
    let (frame, info) = tcp_super_frame(v6, &data);
    let vni = Vni::new(42).unwrap();
    let (out, plan) = encapsulate(&frame, &info, mtu, vni).unwrap();
    let mss = usize::from(MSS).min(mtu - if v6 { 60 } else { 40 });
    assert_eq!(plan.count, len.div_ceil(mss));
    let mut joined = Vec::new();
    let mut expected_seq = 1_000_000u32;
    for (i, datagram) in out.chunks(plan.segment()).enumerate() {
        let last = i + 1 == plan.count;
        assert!(
            last || datagram.len() == plan.segment(),
            "equal but the last"
        );
        assert_eq!(
            &datagram[..8],
            &[0x08, 0, 0, 0, 0, 0, 42, 0],
            "VXLAN header"
        );
        let inner = &datagram[8..];
        let h = PacketHeaders::from_ethernet_slice(inner).unwrap();
        let Some(TransportHeader::Tcp(tcp)) = &h.transport else {
            panic!("segment {i} is not TCP")
        };
        let body = h.payload.slice();
        assert!(body.len() <= mss);
        assert_eq!(tcp.sequence_number, expected_seq, "segment {i}");
        assert_eq!(tcp.psh, last, "PSH on the last segment only");
        expected_seq = expected_seq.wrapping_add(u32::try_from(body.len()).unwrap());
        match &h.net {
            Some(NetHeaders::Ipv4(ip, _)) => {
                assert!(usize::from(ip.total_len) <= mtu);
                assert_eq!(
                    ip.header_checksum,
                    ip.calc_header_checksum(),
                    "IPv4 checksum"
                );
                assert_eq!(tcp.checksum, tcp.calc_checksum_ipv4(ip, body).unwrap());
            }
            Some(NetHeaders::Ipv6(ip, _)) => {
                assert!(usize::from(ip.payload_length) + 40 <= mtu);
                assert_eq!(tcp.checksum, tcp.calc_checksum_ipv6(ip, body).unwrap());
            }
            _ => panic!("segment {i} is not IP"),
        }
        joined.extend_from_slice(body);
    }
    assert_eq!(joined, data, "the payload survives whole and in order");
    let mut covered = 0;
    for range in plan.sends() {
        assert_eq!(range.start, covered, "sends follow one another");
        assert!(!range.is_empty() && range.len() <= 64);
        let bytes: usize = range
            .clone()
            .map(|i| plan.stride + plan.payload_of(&frame, i).len())
            .sum();
        assert!(bytes <= MAX_GSO_PAYLOAD);
        covered = range.end;
    }
    assert_eq!(covered, plan.count);
}

#[test]
fn an_ipv4_super_frame_becomes_equal_vxlan_datagrams_with_valid_tcp_segments() {
    check_segments(false, 60_000, 1450);
    check_segments(false, 1000, 1450);
}

#[test]
fn an_ipv6_super_frame_is_cut_to_the_overlay_mtu_even_when_the_mss_is_larger() {
    check_segments(true, 64_000, 1430);
    check_segments(true, 64_000, 1000);
}

#[test]
fn a_udp_super_frame_becomes_one_vxlan_datagram_per_sender_datagram_never_cut() {
    let vni = Vni::new(42).unwrap();
    for v6 in [false, true] {
        let data = payload(10_000);
        let (frame, info) = udp_super_frame(v6, &data, 1200);
        let (out, plan) = encapsulate(&frame, &info, 1450, vni).unwrap();
        assert_eq!(plan.count, 9);
        let mut joined = Vec::new();
        let mut ids = Vec::new();
        for (i, datagram) in out.chunks(plan.segment()).enumerate() {
            let h = PacketHeaders::from_ethernet_slice(&datagram[8..]).unwrap();
            let Some(TransportHeader::Udp(udp)) = &h.transport else {
                panic!("datagram {i} is not UDP")
            };
            let body = h.payload.slice();
            assert_eq!(body.len(), if i < 8 { 1200 } else { 400 }, "datagram {i}");
            assert_eq!(usize::from(udp.length), 8 + body.len());
            match &h.net {
                Some(NetHeaders::Ipv4(ip, _)) => {
                    assert_eq!(ip.header_checksum, ip.calc_header_checksum());
                    assert_eq!(udp.checksum, udp.calc_checksum_ipv4(ip, body).unwrap());
                    ids.push(ip.identification);
                }
                Some(NetHeaders::Ipv6(ip, _)) => {
                    assert_eq!(udp.checksum, udp.calc_checksum_ipv6(ip, body).unwrap());
                }
                _ => panic!("datagram {i} is not IP"),
            }
            joined.extend_from_slice(body);
        }
        assert_eq!(joined, data);
        assert!(
            ids.windows(2).all(|w| w[1] == w[0].wrapping_add(1)),
            "{ids:?}"
        );
        // Datagrams of 1429 bytes are 1457-byte IPv4 packets: over a 1450 MTU, refused whole.
        let (frame, info) = udp_super_frame(false, &data, 1429);
        assert!(matches!(
            encapsulate(&frame, &info, 1450, vni),
            Err(SuperFrameError::Segment(
                weft_packet::gso::GsoError::DatagramTooLarge { .. }
            ))
        ));
    }
}

#[test]
fn a_super_frame_whose_headers_do_not_fit_the_buffer_is_refused() {
    let (frame, info) = tcp_super_frame(false, &payload(30_000));
    // 22 segments need 22 × (8 + 54) header bytes.
    let mut headers = vec![0u8; 22 * 62 - 1];
    let got = gather_super_frame(&frame, &info, 1450, Vni::new(1).unwrap(), &mut headers);
    assert_eq!(got, Err(SuperFrameError::NoRoom));
    let mut headers = vec![0u8; 22 * 62];
    assert!(gather_super_frame(&frame, &info, 1450, Vni::new(1).unwrap(), &mut headers).is_ok());
}

#[test]
fn a_syn_super_frame_is_refused_not_segmented() {
    let (mut frame, info) = tcp_super_frame(false, &payload(5000));
    frame[14 + 20 + 13] |= 0x02; // SYN
    let got = encapsulate(&frame, &info, 1450, Vni::new(1).unwrap());
    assert!(matches!(got, Err(SuperFrameError::Segment(_))));
}

/// A control buffer holding one message `(len, level, type)` and its data.
fn cmsg(len: u64, level: i32, kind: i32, data: &[u8]) -> Vec<u8> {
    let mut out = len.to_ne_bytes().to_vec();
    out.extend_from_slice(&level.to_ne_bytes());
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(data);
    while !out.len().is_multiple_of(8) {
        out.push(0);
    }
    out
}

#[test]
fn the_gro_control_message_gives_the_segment_size() {
    let c = cmsg(20, libc::SOL_UDP, UDP_GRO, &1472i32.to_ne_bytes());
    assert_eq!(gro_segment_size(&c), Ok(Some(1472)));
    // After another message.
    let mut two = cmsg(20, libc::SOL_IP, 8, &[0; 4]);
    two.extend(c);
    assert_eq!(gro_segment_size(&two), Ok(Some(1472)));
    assert_eq!(gro_segment_size(&[]), Ok(None));
    assert_eq!(
        gro_segment_size(&cmsg(20, libc::SOL_IP, 8, &[0; 4])),
        Ok(None)
    );
}

#[test]
fn the_socket_drop_count_is_read_beside_the_gro_size() {
    let mut both = cmsg(20, libc::SOL_SOCKET, libc::SO_RXQ_OVFL, &7u32.to_ne_bytes());
    both.extend(cmsg(20, libc::SOL_UDP, UDP_GRO, &1472i32.to_ne_bytes()));
    assert_eq!(
        read_control(&both),
        Ok(RxControl {
            gro_segment: Some(1472),
            socket_drops: Some(7)
        })
    );
    // The count is unsigned and wraps: the top values are counts, not errors.
    let wrapped = cmsg(
        20,
        libc::SOL_SOCKET,
        libc::SO_RXQ_OVFL,
        &u32::MAX.to_ne_bytes(),
    );
    assert_eq!(
        read_control(&wrapped).map(|c| c.socket_drops),
        Ok(Some(u32::MAX))
    );
    let short = cmsg(16, libc::SOL_SOCKET, libc::SO_RXQ_OVFL, &[]);
    assert_eq!(read_control(&short), Err(GroError::BadControl));
}

#[test]
fn hostile_gro_control_messages_are_errors_not_panics() {
    let gro = |v: i32| cmsg(20, libc::SOL_UDP, UDP_GRO, &v.to_ne_bytes());
    assert_eq!(gro_segment_size(&gro(0)), Err(GroError::BadSegmentSize));
    assert_eq!(gro_segment_size(&gro(-1)), Err(GroError::BadSegmentSize));
    assert_eq!(
        gro_segment_size(&gro(70_000)),
        Err(GroError::BadSegmentSize)
    );
    // Lengths shorter than a header, past the buffer, or without room for the value.
    for len in [0u64, 8, 15, 64, u64::MAX] {
        let c = cmsg(len, libc::SOL_UDP, UDP_GRO, &1472i32.to_ne_bytes());
        assert_eq!(gro_segment_size(&c), Err(GroError::BadControl), "len {len}");
    }
    let short = cmsg(16, libc::SOL_UDP, UDP_GRO, &[]);
    assert_eq!(gro_segment_size(&short), Err(GroError::BadControl));
}

#[test]
fn a_coalesced_buffer_is_cut_at_every_segment() {
    let r: Vec<_> = gro_segments(3000, 1472).collect();
    assert_eq!(r, vec![0..1472, 1472..2944, 2944..3000]);
    assert_eq!(gro_segments(1472, 1472).collect::<Vec<_>>(), vec![0..1472]);
    assert_eq!(gro_segments(0, 1472).count(), 0);
}

proptest! {
    #[test]
    fn any_control_bytes_are_read_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
        let _ = gro_segment_size(&bytes);
    }

    #[test]
    fn gro_segments_tile_the_buffer(len in 0usize..70_000, seg in 1u16..=u16::MAX) {
        let mut at = 0;
        for r in gro_segments(len, seg) {
            prop_assert_eq!(r.start, at);
            prop_assert!(r.len() <= usize::from(seg) && !r.is_empty());
            at = r.end;
        }
        prop_assert_eq!(at, len);
    }
}

fn rules() -> crate::vxlan::decap::DecapRules {
    crate::vxlan::decap::DecapRules {
        vni: Vni::new(42).unwrap(),
        strict_reserved: false,
        max_frame_len: 1472,
    }
}

/// What a GRO socket receives from a peer's `UDP_SEGMENT` send of this super-frame.
fn gro_buffer(v6: bool, len: usize) -> (Vec<u8>, usize, Vec<u8>) {
    let (frame, info) = tcp_super_frame(v6, &payload(len));
    let (out, plan) = encapsulate(&frame, &info, 1450, Vni::new(42).unwrap()).unwrap();
    (out, plan.segment(), frame)
}

#[test]
fn consecutive_segments_merge_back_into_the_super_frame_with_a_partial_checksum() {
    for v6 in [false, true] {
        let (mut buf, segment, original) = gro_buffer(v6, 50_000);
        let m = crate::vxlan::rx_coalesce::coalesce(&mut buf, segment, &rules(), MergeKinds::ALL)
            .unwrap();
        let merged = &buf[m.start..m.start + m.len];
        assert_eq!(merged.len(), original.len());
        let h = PacketHeaders::from_ethernet_slice(merged).unwrap();
        assert_eq!(h.payload.slice(), &original[original.len() - 50_000..]);
        let Some(TransportHeader::Tcp(tcp)) = &h.transport else {
            panic!("not TCP")
        };
        assert!(tcp.psh && tcp.ack && tcp.sequence_number == 1_000_000);
        let o = m.offload;
        let mss = if v6 { 1390 } else { MSS };
        assert!(o.needs_csum && o.gso_size == mss && usize::from(o.csum_offset) == 16);
        assert_eq!(o.gso, if v6 { GsoKind::TcpV6 } else { GsoKind::TcpV4 });
        // Completing the partial checksum gives the right one.
        let mut done = merged.to_vec();
        weft_packet::gso::complete_checksum(&mut done, &o).unwrap();
        let h = PacketHeaders::from_ethernet_slice(&done).unwrap();
        let Some(TransportHeader::Tcp(tcp)) = &h.transport else {
            panic!("not TCP")
        };
        let want = match &h.net {
            Some(NetHeaders::Ipv4(ip, _)) => {
                assert_eq!(ip.header_checksum, ip.calc_header_checksum());
                tcp.calc_checksum_ipv4(ip, h.payload.slice()).unwrap()
            }
            Some(NetHeaders::Ipv6(ip, _)) => tcp.calc_checksum_ipv6(ip, h.payload.slice()).unwrap(),
            _ => panic!("not IP"),
        };
        assert_eq!(tcp.checksum, want);
    }
}

#[test]
fn tcp_segments_are_merged_only_when_every_destination_takes_that_kind_whole() {
    for v6 in [false, true] {
        let (buf, segment, _) = gro_buffer(v6, 20_000);
        let no_tso = MergeKinds {
            tcp4: v6,
            tcp6: !v6,
            udp: true,
        };
        let mut kept = buf.clone();
        assert_eq!(
            crate::vxlan::rx_coalesce::coalesce(&mut kept, segment, &rules(), no_tso),
            None
        );
        assert_eq!(kept, buf);
    }
}

#[test]
fn segments_that_do_not_belong_together_are_left_alone() {
    let (buf, segment, _) = gro_buffer(false, 20_000);
    let tcp_at = 8 + 14 + 20;
    let corruptions: [(usize, u8); 4] = [
        (segment + tcp_at + 30, 0x55), // a payload byte: the checksum fails
        (segment + tcp_at + 7, 0x01),  // a sequence number
        (segment + tcp_at + 13, 0x01), // FIN on a middle segment
        (segment + 8 + 14 + 16, 0x01), // another destination address
    ];
    for (at, bits) in corruptions {
        let mut bad = buf.clone();
        bad[at] ^= bits;
        let copy = bad.clone();
        assert_eq!(
            crate::vxlan::rx_coalesce::coalesce(&mut bad, segment, &rules(), MergeKinds::ALL),
            None,
            "byte {at}"
        );
        assert_eq!(bad, copy, "untouched when not merged");
    }
    // One datagram alone is not merged.
    let mut one = buf[..segment].to_vec();
    assert_eq!(
        crate::vxlan::rx_coalesce::coalesce(&mut one, segment, &rules(), MergeKinds::ALL),
        None
    );
}

proptest! {
    #[test]
    fn coalescing_any_bytes_never_panics(mut bytes in proptest::collection::vec(any::<u8>(), 0..4000), seg in 1usize..2000) {
        let _ = crate::vxlan::rx_coalesce::coalesce(&mut bytes, seg, &rules(), MergeKinds::ALL);
    }
}

/// An ICMP echo request of `payload_len` bytes from 02::01 / 10.0.0.1 (fd..) to 02::02.
pub(super) fn oversize(v6: bool, dont_fragment: bool, payload_len: usize) -> Vec<u8> {
    let eth = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
    let mut out = Vec::new();
    if v6 {
        eth.ipv6([0xfd; 16], [0xfe; 16], 64)
            .icmpv6_echo_request(1, 1)
            .write(&mut out, &payload(payload_len))
            .unwrap();
    } else {
        let mut ip = etherparse::Ipv4Header::new(
            0,
            64,
            etherparse::IpNumber::ICMP,
            [10, 0, 0, 1],
            [10, 0, 0, 2],
        )
        .unwrap();
        ip.dont_fragment = dont_fragment;
        eth.ip(etherparse::IpHeaders::Ipv4(ip, Default::default()))
            .icmpv4_echo_request(1, 1)
            .write(&mut out, &payload(payload_len))
            .unwrap();
    }
    out
}

#[test]
fn an_oversize_ipv4_frame_with_df_gets_a_well_formed_frag_needed_from_its_destination() {
    let frame = oversize(false, true, 2000);
    let mut out = [0u8; crate::vxlan::too_big::MAX_ANSWER];
    let n = crate::vxlan::too_big::answer(&frame, 1450, &mut out).unwrap();
    let reply = &out[..n];
    assert_eq!(&reply[0..6], &frame[6..12], "to the sender's MAC");
    assert_eq!(&reply[6..12], &frame[0..6], "from the destination's MAC");
    let h = PacketHeaders::from_ethernet_slice(reply).unwrap();
    let Some(NetHeaders::Ipv4(ip, _)) = &h.net else {
        panic!("not IPv4")
    };
    assert_eq!((ip.source, ip.destination), ([10, 0, 0, 2], [10, 0, 0, 1]));
    assert_eq!(ip.header_checksum, ip.calc_header_checksum());
    let icmp = weft_packet::Icmpv4Packet::new_checked(&reply[34..]).unwrap();
    assert_eq!(
        (icmp.msg_type(), icmp.code(), icmp.next_hop_mtu()),
        (3, 4, 1450)
    );
    assert!(icmp.verify_checksum());
    assert_eq!(
        &icmp.body()[..20],
        &frame[14..34],
        "quotes the offending header"
    );
    assert!(n <= 14 + 576);
}

#[test]
fn an_oversize_ipv6_frame_gets_a_packet_too_big_with_a_right_checksum() {
    let frame = oversize(true, false, 3000);
    let mut out = [0u8; crate::vxlan::too_big::MAX_ANSWER];
    let n = crate::vxlan::too_big::answer(&frame, 1430, &mut out).unwrap();
    let reply = &out[..n];
    let h = PacketHeaders::from_ethernet_slice(reply).unwrap();
    let Some(NetHeaders::Ipv6(ip, _)) = &h.net else {
        panic!("not IPv6")
    };
    assert_eq!((ip.source, ip.destination), ([0xfe; 16], [0xfd; 16]));
    assert_eq!(usize::from(ip.payload_length), n - 54);
    let icmp = weft_packet::Icmpv6Packet::new_checked(&reply[54..]).unwrap();
    assert_eq!((icmp.msg_type(), icmp.mtu()), (2, 1430));
    assert!(icmp.verify_checksum(ip.source.into(), ip.destination.into()));
    assert!(n <= 14 + 1280, "an answer fits the IPv6 minimum MTU");
}

#[test]
fn no_answer_without_df_about_icmp_errors_or_from_multicast_senders() {
    let mut out = [0u8; crate::vxlan::too_big::MAX_ANSWER];
    assert_eq!(
        crate::vxlan::too_big::answer(&oversize(false, false, 2000), 1450, &mut out),
        None
    );
    let mut error = oversize(false, true, 2000);
    error[34] = 3; // an ICMP error itself
    assert_eq!(crate::vxlan::too_big::answer(&error, 1450, &mut out), None);
    let mut multicast = oversize(true, false, 2000);
    multicast[6] |= 1; // group source MAC
    assert_eq!(
        crate::vxlan::too_big::answer(&multicast, 1430, &mut out),
        None
    );
    assert_eq!(
        crate::vxlan::too_big::answer(&[0u8; 10], 1430, &mut out),
        None
    );
}

#[test]
fn answers_are_rate_limited_to_a_burst_then_the_rate() {
    let mut limit = crate::vxlan::too_big::RateLimit::new(100, 10);
    let t0 = std::time::Instant::now();
    assert_eq!((0..50).filter(|_| limit.allow(t0)).count(), 10);
    let later = t0 + std::time::Duration::from_millis(50);
    assert_eq!((0..50).filter(|_| limit.allow(later)).count(), 5);
}

proptest! {
    #[test]
    fn answering_any_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..1600), mtu in 0usize..70_000) {
        let mut out = [0u8; crate::vxlan::too_big::MAX_ANSWER];
        let _ = crate::vxlan::too_big::answer(&bytes, mtu, &mut out);
    }
}
