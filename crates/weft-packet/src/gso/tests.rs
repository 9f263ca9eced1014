mod support;

use super::*;
use proptest::prelude::*;
use support::{
    insert_ipv6_dest_options, l3_offset, segment_all, tcp_superframe, udp_superframe,
    validate_segments, Ip, Tags,
};

/// 14 (Ethernet) + 20 (IPv4) + 32 (TCP with timestamps).
const TCP4_HEADERS: usize = 66;
/// 14 (Ethernet) + 40 (IPv6) + 32 (TCP with timestamps).
const TCP6_HEADERS: usize = 86;

#[test]
fn tcp4_superframe_at_mss_1448_segments_into_valid_frames() {
    let (frame, info) = tcp_superframe(Ip::V4, Tags::None, 64_000, 1448);
    let segments = segment_all(&frame, &info, 1514);
    assert_eq!(segments.len(), 64_000usize.div_ceil(1448));
    assert_eq!(segments[0].len(), TCP4_HEADERS + 1448);
    validate_segments(&frame, &segments, 1448, 1514);
}

#[test]
fn tcp4_superframe_at_jumbo_mss_segments_into_valid_frames() {
    let (frame, info) = tcp_superframe(Ip::V4, Tags::None, 64_000, 8948);
    let segments = segment_all(&frame, &info, 9014);
    assert_eq!(segments.len(), 8);
    validate_segments(&frame, &segments, 8948, 9014);
}

#[test]
fn tcp6_superframe_segments_into_valid_frames() {
    let (frame, info) = tcp_superframe(Ip::V6, Tags::None, 64_000, 1428);
    let segments = segment_all(&frame, &info, 1514);
    assert_eq!(segments[0].len(), TCP6_HEADERS + 1428);
    validate_segments(&frame, &segments, 1428, 1514);
}

#[test]
fn vlan_tagged_tcp6_superframe_keeps_its_tag_on_every_segment() {
    let (frame, info) = tcp_superframe(Ip::V6, Tags::One, 64_000, 8928);
    let segments = segment_all(&frame, &info, 9018);
    validate_segments(&frame, &segments, 8928, 9018);
}

#[test]
fn qinq_tcp4_superframe_segments_into_valid_frames() {
    let (frame, info) = tcp_superframe(Ip::V4, Tags::Two, 30_000, 1448);
    let segments = segment_all(&frame, &info, 1522);
    validate_segments(&frame, &segments, 1448, 1522);
}

#[test]
fn tcp6_with_destination_options_header_is_segmented() {
    let (mut frame, mut info) = tcp_superframe(Ip::V6, Tags::One, 20_000, 1400);
    insert_ipv6_dest_options(&mut frame, &mut info, l3_offset(Tags::One));
    let segments = segment_all(&frame, &info, 1600);
    validate_segments(&frame, &segments, 1400, 1600);
}

#[test]
fn udp4_superframe_gets_a_udp_header_per_segment() {
    let (frame, info) = udp_superframe(Ip::V4, Tags::None, 64_000, 1472);
    let segments = segment_all(&frame, &info, 1514);
    assert_eq!(segments.len(), 64_000usize.div_ceil(1472));
    validate_segments(&frame, &segments, 1472, 1514);
}

#[test]
fn udp6_superframe_gets_a_udp_header_per_segment() {
    let (frame, info) = udp_superframe(Ip::V6, Tags::One, 64_000, 1452);
    let segments = segment_all(&frame, &info, 1518);
    validate_segments(&frame, &segments, 1452, 1518);
}

#[test]
fn max_frame_len_below_gso_size_wins() {
    let (frame, info) = tcp_superframe(Ip::V4, Tags::None, 64_000, 8948);
    let segments = segment_all(&frame, &info, 1514);
    let payload = 1514 - TCP4_HEADERS;
    assert_eq!(segments.len(), 64_000usize.div_ceil(payload));
    validate_segments(&frame, &segments, payload, 1514);
}

#[test]
fn udp_datagrams_larger_than_the_limit_are_refused_not_cut() {
    // 1472-byte datagrams fit a 1514-byte frame (14 + 20 + 8 + 1472), not a 1500-byte one.
    let (frame, info) = udp_superframe(Ip::V4, Tags::None, 4000, 1472);
    assert_eq!(
        Segmenter::new(&frame, &info, 1500).unwrap_err(),
        GsoError::DatagramTooLarge {
            datagram: 1472,
            room: 1458
        }
    );
    assert_eq!(segment_all(&frame, &info, 1514).len(), 3);
    // One datagram smaller than gso_size is judged by its own size.
    let (small, info) = udp_superframe(Ip::V4, Tags::None, 1000, 1472);
    assert_eq!(segment_all(&small, &info, 1500).len(), 1);
}

#[test]
fn superframe_smaller_than_one_segment_yields_one_valid_segment() {
    let (frame, info) = tcp_superframe(Ip::V6, Tags::None, 100, 1428);
    let segments = segment_all(&frame, &info, 1514);
    assert_eq!(segments.len(), 1);
    validate_segments(&frame, &segments, 1428, 1514);
}

#[test]
fn frame_without_gso_passes_through_with_checksum_completed() {
    let (frame, mut info) = udp_superframe(Ip::V4, Tags::None, 500, 0);
    info.gso = GsoKind::None;
    let segments = segment_all(&frame, &info, 1514);
    assert_eq!(segments.len(), 1);
    validate_segments(&frame, &segments, 500, 1514);
}

#[test]
fn frame_without_offload_passes_through_unchanged() {
    let frame: Vec<u8> = (0..60u8).collect();
    let segments = segment_all(&frame, &OffloadInfo::default(), 1514);
    assert_eq!(segments, vec![frame]);
}

#[test]
fn oversized_frame_without_gso_is_refused() {
    let frame = vec![0u8; 1515];
    assert_eq!(
        Segmenter::new(&frame, &OffloadInfo::default(), 1514).unwrap_err(),
        GsoError::FrameTooLarge {
            len: 1515,
            max_frame_len: 1514
        }
    );
}

#[test]
fn complete_checksum_matches_etherparse() {
    for ip in [Ip::V4, Ip::V6] {
        let (mut frame, mut info) = tcp_superframe(ip, Tags::One, 1000, 0);
        info.gso = GsoKind::None;
        complete_checksum(&mut frame, &info).unwrap();
        validate_segments(&frame, &[frame.clone()], 1000, 2000);
    }
}

#[test]
fn complete_checksum_refuses_field_outside_frame() {
    let mut frame = vec![0u8; 60];
    let info = OffloadInfo {
        needs_csum: true,
        csum_start: 50,
        csum_offset: 9,
        ..OffloadInfo::default()
    };
    assert_eq!(
        complete_checksum(&mut frame, &info).unwrap_err(),
        GsoError::CsumOutOfFrame {
            csum_start: 50,
            csum_offset: 9,
            frame_len: 60
        }
    );
    assert_eq!(
        Segmenter::new(&frame, &info, 1514).unwrap_err(),
        complete_checksum(&mut frame, &info).unwrap_err()
    );
    assert_eq!(frame, vec![0u8; 60]);
}

#[test]
fn complete_checksum_without_needs_csum_leaves_frame_alone() {
    let mut frame = vec![7u8; 60];
    complete_checksum(&mut frame, &OffloadInfo::default()).unwrap();
    assert_eq!(frame, vec![7u8; 60]);
}

#[test]
fn complete_checksum_stores_zero_as_ffff() {
    // Everything sums to 0xffff, so the checksum would be 0.
    let mut frame = vec![0u8; 60];
    frame[40..42].copy_from_slice(&[0xff, 0xff]);
    let info = OffloadInfo {
        needs_csum: true,
        csum_start: 34,
        csum_offset: 6,
        ..OffloadInfo::default()
    };
    complete_checksum(&mut frame, &info).unwrap();
    assert_eq!(&frame[40..42], &[0xff, 0xff]);
}

#[test]
fn gso_kind_must_match_the_headers() {
    let (frame, mut info) = tcp_superframe(Ip::V6, Tags::None, 5000, 1428);
    info.gso = GsoKind::TcpV4;
    assert_eq!(
        Segmenter::new(&frame, &info, 1514).unwrap_err(),
        GsoError::KindMismatch {
            gso: GsoKind::TcpV4
        }
    );
    info.gso = GsoKind::UdpL4;
    assert_eq!(
        Segmenter::new(&frame, &info, 1514).unwrap_err(),
        GsoError::KindMismatch {
            gso: GsoKind::UdpL4
        }
    );
}

#[test]
fn non_ip_and_non_transport_frames_are_refused() {
    let (mut frame, info) = tcp_superframe(Ip::V4, Tags::None, 5000, 1448);
    frame[23] = 1; // ICMP
    assert_eq!(
        Segmenter::new(&frame, &info, 1514).unwrap_err(),
        GsoError::NotTcpOrUdp { protocol: 1 }
    );
    frame[12..14].copy_from_slice(&[0x08, 0x06]);
    assert_eq!(
        Segmenter::new(&frame, &info, 1514).unwrap_err(),
        GsoError::NotIp { ethertype: 0x0806 }
    );
}

#[test]
fn ip_fragments_are_refused() {
    let (mut frame, info) = tcp_superframe(Ip::V4, Tags::None, 5000, 1448);
    frame[20] |= 0x20; // More Fragments
    assert_eq!(
        Segmenter::new(&frame, &info, 1514).unwrap_err(),
        GsoError::IpFragment
    );
}

#[test]
fn ipv6_routing_header_is_unsupported() {
    let (mut frame, mut info) = tcp_superframe(Ip::V6, Tags::None, 5000, 1428);
    insert_ipv6_dest_options(&mut frame, &mut info, 14);
    frame[20] = 43; // the inserted header now claims to be a Routing header
    assert_eq!(
        Segmenter::new(&frame, &info, 1514).unwrap_err(),
        GsoError::UnsupportedExtensionHeader { next_header: 43 }
    );
}

#[test]
fn inconsistent_ip_length_is_refused() {
    let (mut frame, info) = tcp_superframe(Ip::V4, Tags::None, 5000, 1448);
    frame.extend_from_slice(&[0; 4]);
    assert_eq!(
        Segmenter::new(&frame, &info, 1514).unwrap_err(),
        GsoError::LengthMismatch
    );
    let (mut frame, info) = udp_superframe(Ip::V6, Tags::None, 5000, 1448);
    frame[58..60].copy_from_slice(&100u16.to_be_bytes()); // UDP length
    assert_eq!(
        Segmenter::new(&frame, &info, 1514).unwrap_err(),
        GsoError::LengthMismatch
    );
}

#[test]
fn syn_superframe_is_refused() {
    let (mut frame, info) = tcp_superframe(Ip::V4, Tags::None, 5000, 1448);
    frame[34 + 13] |= crate::tcp::flags::SYN;
    assert!(matches!(
        Segmenter::new(&frame, &info, 1514).unwrap_err(),
        GsoError::TcpFlagsForbidSegmentation { .. }
    ));
}

#[test]
fn size_limits_are_enforced() {
    let (frame, mut info) = tcp_superframe(Ip::V4, Tags::None, 64_000, 1448);
    assert_eq!(
        Segmenter::new(&frame, &info, TCP4_HEADERS).unwrap_err(),
        GsoError::MaxFrameTooSmall {
            max_frame_len: TCP4_HEADERS,
            header_len: TCP4_HEADERS
        }
    );
    info.gso_size = 100;
    assert_eq!(
        Segmenter::new(&frame, &info, 1514).unwrap_err(),
        GsoError::TooManySegments { segments: 640 }
    );
    info.gso_size = 0;
    assert_eq!(
        Segmenter::new(&frame, &info, 1514).unwrap_err(),
        GsoError::GsoSizeZero
    );
}

#[test]
fn short_output_buffer_is_an_error_and_finishes_the_segmenter() {
    let (frame, info) = tcp_superframe(Ip::V4, Tags::None, 64_000, 1448);
    let mut segmenter = Segmenter::new(&frame, &info, 1514).unwrap();
    assert_eq!(segmenter.max_segment_len(), 1514);
    let mut out = [0u8; 1000];
    assert_eq!(
        segmenter.next_segment(&mut out),
        Some(Err(GsoError::SegmentTooLarge {
            needed: 1514,
            available: 1000
        }))
    );
    assert_eq!(segmenter.next_segment(&mut out), None);
}

#[test]
fn every_truncation_of_a_superframe_is_an_error() {
    for (frame, info) in [
        tcp_superframe(Ip::V4, Tags::One, 3000, 1448),
        tcp_superframe(Ip::V6, Tags::Two, 3000, 1428),
        udp_superframe(Ip::V6, Tags::None, 3000, 1452),
    ] {
        for len in 0..frame.len() {
            assert!(
                Segmenter::new(&frame[..len], &info, 1522).is_err(),
                "truncated to {len}"
            );
        }
    }
}

/// Any OffloadInfo, including nonsense.
fn any_info() -> impl Strategy<Value = OffloadInfo> {
    let gso = prop_oneof![
        Just(GsoKind::None),
        Just(GsoKind::TcpV4),
        Just(GsoKind::TcpV6),
        Just(GsoKind::UdpL4)
    ];
    (any::<(bool, bool, u16, u16, u16, u16)>(), gso).prop_map(
        |((needs_csum, data_valid, csum_start, csum_offset, gso_size, hdr_len), gso)| OffloadInfo {
            needs_csum,
            data_valid,
            csum_start,
            csum_offset,
            gso,
            gso_size,
            hdr_len,
        },
    )
}

/// Runs the segmenter over `frame` and checks that whatever comes out respects the limits,
/// and that the headers-only walk gives every segment the copying walk gives.
fn run_hostile(frame: &[u8], info: &OffloadInfo, max_frame_len: usize, out_len: usize) {
    let mut out = vec![0u8; out_len];
    let mut headers = vec![0u8; out_len];
    let mut copy = frame.to_vec();
    let _ = complete_checksum(&mut copy, info);
    if let Ok(mut segmenter) = Segmenter::new(frame, info, max_frame_len) {
        assert!(segmenter.segment_count() <= MAX_SEGMENTS);
        let mut gathered = segmenter.clone();
        let mut produced = 0;
        while let Some(result) = segmenter.next_segment(&mut out) {
            let headers_only = gathered.next_segment_headers(&mut headers);
            if let Ok(len) = result {
                assert!(len <= max_frame_len && len <= out_len);
                let Some(Ok(h)) = headers_only else {
                    panic!("segment {produced}: copied, but its headers alone failed")
                };
                assert_eq!(h.len, segmenter.header_len());
                assert_eq!(&out[..h.len], &headers[..h.len]);
                assert_eq!(&out[h.len..len], h.payload);
            }
            produced += 1;
        }
        assert!(produced <= segmenter.segment_count());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn arbitrary_bytes_and_offload_info_never_panic(
        frame in proptest::collection::vec(any::<u8>(), 0..300),
        info in any_info(),
        max_frame_len in 0usize..2000,
        out_len in 0usize..2000,
    ) {
        run_hostile(&frame, &info, max_frame_len, out_len);
    }

    #[test]
    fn corrupted_superframes_never_panic(
        ip in prop_oneof![Just(Ip::V4), Just(Ip::V6)],
        tcp in any::<bool>(),
        len in 0usize..4000,
        mss in 1u16..2000,
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4),
        info_noise in any_info(),
        keep_info in any::<bool>(),
    ) {
        let (mut frame, info) = if tcp {
            tcp_superframe(ip, Tags::One, len, mss)
        } else {
            udp_superframe(ip, Tags::One, len, mss)
        };
        // Corrupt a few header bytes.
        for (at, value) in flips {
            let at = at % frame.len().min(80);
            frame[at] = value;
        }
        let info = if keep_info { info } else { info_noise };
        run_hostile(&frame, &info, 1518, 1518);
    }

    #[test]
    fn valid_superframes_of_any_size_segment_correctly(
        ip in prop_oneof![Just(Ip::V4), Just(Ip::V6)],
        tcp in any::<bool>(),
        tags in prop_oneof![Just(Tags::None), Just(Tags::One), Just(Tags::Two)],
        len in 1usize..20_000,
        mss in 1u16..9000,
        max_frame_len in 200usize..9100,
    ) {
        let (frame, info) = if tcp {
            tcp_superframe(ip, tags, len, mss)
        } else {
            udp_superframe(ip, tags, len, mss)
        };
        let header_len = frame.len() - len;
        let room = max_frame_len - header_len;
        if !tcp && usize::from(mss).min(len) > room {
            // A datagram is never cut: the frame is refused instead.
            prop_assert_eq!(
                Segmenter::new(&frame, &info, max_frame_len).unwrap_err(),
                GsoError::DatagramTooLarge { datagram: usize::from(mss).min(len), room }
            );
            return Ok(());
        }
        let segment_payload = usize::from(mss).min(room);
        prop_assume!(len.div_ceil(segment_payload) <= MAX_SEGMENTS);
        let segments = segment_all(&frame, &info, max_frame_len);
        validate_segments(&frame, &segments, segment_payload, max_frame_len);
        run_hostile(&frame, &info, max_frame_len, max_frame_len);
    }
}
