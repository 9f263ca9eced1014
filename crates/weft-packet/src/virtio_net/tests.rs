use super::*;
use proptest::prelude::*;

type E = VirtioNetHeaderError;

/// A 12-byte header with the given fields (little-endian), `num_buffers` 1.
fn header(
    flag_bits: u8,
    gso: u8,
    hdr_len: u16,
    gso_size: u16,
    csum_start: u16,
    csum_offset: u16,
) -> VirtioNetHeader<[u8; HEADER_LEN]> {
    let mut h = VirtioNetHeader::new_unchecked([0u8; HEADER_LEN]);
    h.set_flags(flag_bits);
    h.set_gso_type(gso);
    h.set_hdr_len(hdr_len);
    h.set_gso_size(gso_size);
    h.set_csum_start(csum_start);
    h.set_csum_offset(csum_offset);
    h.set_num_buffers(1).unwrap();
    h
}

/// TCP/IPv4 super-frame: 14 + 20 + 20 bytes of headers, 64000 bytes of payload.
const TCP4_FRAME_LEN: usize = 54 + 64_000;

fn tcp4_gso(gso_size: u16) -> VirtioNetHeader<[u8; HEADER_LEN]> {
    header(flags::NEEDS_CSUM, gso_type::TCPV4, 54, gso_size, 34, 16)
}

#[test]
fn fields_are_little_endian() {
    let h = header(1, 4, 0x0102, 0x0304, 0x0506, 0x0708);
    assert_eq!(
        h.into_inner(),
        [1, 4, 2, 1, 4, 3, 6, 5, 8, 7, 1, 0],
        "virtio 1.x header layout"
    );
}

#[test]
fn legacy_header_has_no_num_buffers() {
    let mut buf = [0u8; LEGACY_HEADER_LEN];
    let mut h = VirtioNetHeader::new_checked(&mut buf[..]).unwrap();
    assert_eq!(h.num_buffers(), None);
    assert_eq!(
        h.set_num_buffers(1).unwrap_err(),
        ParseError::truncated(HEADER_LEN, LEGACY_HEADER_LEN)
    );
    assert_eq!(h.to_offload_info(60), Ok(OffloadInfo::default()));
}

#[test]
fn short_buffer_is_truncated_error() {
    for len in 0..LEGACY_HEADER_LEN {
        let buf = vec![0u8; len];
        assert_eq!(
            VirtioNetHeader::new_checked(&buf[..]).unwrap_err(),
            ParseError::truncated(LEGACY_HEADER_LEN, len)
        );
    }
}

#[test]
fn valid_tcp4_gso_header_translates() {
    let info = tcp4_gso(1448).to_offload_info(TCP4_FRAME_LEN).unwrap();
    assert_eq!(
        info,
        OffloadInfo {
            needs_csum: true,
            data_valid: false,
            csum_start: 34,
            csum_offset: 16,
            gso: GsoKind::TcpV4,
            gso_size: 1448,
            hdr_len: 54,
        }
    );
}

#[test]
fn tcp_gso_accepts_ecn_bit() {
    let h = header(
        flags::NEEDS_CSUM,
        gso_type::TCPV6 | gso_type::ECN,
        74,
        1440,
        54,
        16,
    );
    assert!(h.gso_ecn());
    assert_eq!(h.to_offload_info(74 + 9000).unwrap().gso, GsoKind::TcpV6);
}

#[test]
fn udp_l4_gso_needs_udp_checksum_offset() {
    let ok = header(flags::NEEDS_CSUM, gso_type::UDP_L4, 42, 1472, 34, 6);
    assert_eq!(ok.to_offload_info(42 + 8000).unwrap().gso, GsoKind::UdpL4);
    let bad = header(flags::NEEDS_CSUM, gso_type::UDP_L4, 42, 1472, 34, 16);
    assert_eq!(
        bad.to_offload_info(42 + 8000),
        Err(E::BadGsoCsumOffset { csum_offset: 16 })
    );
}

#[test]
fn plain_checksum_offload_translates_and_ignores_gso_fields() {
    let h = header(flags::NEEDS_CSUM, gso_type::NONE, 999, 7, 34, 6);
    let info = h.to_offload_info(100).unwrap();
    assert!(info.needs_csum && !info.is_gso());
    assert_eq!((info.csum_start, info.csum_offset), (34, 6));
    assert_eq!((info.gso_size, info.hdr_len), (0, 0));
}

#[test]
fn checksum_fields_without_needs_csum_are_ignored() {
    let h = header(flags::DATA_VALID, gso_type::NONE, 0, 0, 60_000, 60_000);
    let info = h.to_offload_info(60).unwrap();
    assert!(info.data_valid && !info.needs_csum);
    assert_eq!((info.csum_start, info.csum_offset), (0, 0));
}

#[test]
fn each_hostile_field_has_its_own_error() {
    let cases: [(VirtioNetHeader<[u8; HEADER_LEN]>, usize, E); 14] = [
        (header(0x08, 0, 0, 0, 0, 0), 60, E::UnknownFlags(0x08)),
        (header(0x81, 0, 0, 0, 34, 6), 60, E::UnknownFlags(0x81)),
        (header(flags::RSC_INFO, 0, 0, 0, 0, 0), 60, E::RscInfo),
        (header(1, 2, 54, 1448, 34, 16), 1000, E::UnknownGsoType(2)),
        (
            header(1, 0x86, 54, 1448, 34, 16),
            1000,
            E::UnknownGsoType(0x86),
        ),
        (
            header(1, gso_type::UDP, 42, 1472, 34, 6),
            1000,
            E::UfoUnsupported,
        ),
        (
            header(0, gso_type::ECN, 0, 0, 0, 0),
            60,
            E::EcnWithoutTcpGso,
        ),
        (header(1, 0x85, 42, 1472, 34, 6), 1000, E::EcnWithoutTcpGso),
        (
            header(0, gso_type::TCPV4, 54, 1448, 34, 16),
            1000,
            E::GsoWithoutNeedsCsum,
        ),
        (tcp4_gso(0), TCP4_FRAME_LEN, E::GsoSizeZero),
        (tcp4_gso(65_508), TCP4_FRAME_LEN, E::GsoSizeTooLarge(65_508)),
        (
            tcp4_gso(64),
            TCP4_FRAME_LEN,
            E::TooManySegments { segments: 1000 },
        ),
        (
            header(1, 0, 0, 0, 50, 9),
            60,
            E::CsumOutOfFrame {
                csum_start: 50,
                csum_offset: 9,
                frame_len: 60,
            },
        ),
        (
            header(1, 0, 0, 0, 2, 20),
            60,
            E::CsumStartInEthernetHeader { csum_start: 2 },
        ),
    ];
    for (h, frame_len, expected) in cases {
        assert_eq!(h.to_offload_info(frame_len), Err(expected), "{h:?}");
    }
}

#[test]
fn tcp_gso_with_udp_checksum_offset_is_rejected() {
    let h = header(1, gso_type::TCPV4, 54, 1448, 34, 6);
    assert_eq!(
        h.to_offload_info(TCP4_FRAME_LEN),
        Err(E::BadGsoCsumOffset { csum_offset: 6 })
    );
}

#[test]
fn hdr_len_past_the_frame_is_rejected() {
    let h = header(1, gso_type::TCPV4, 2000, 1448, 34, 16);
    assert_eq!(
        h.to_offload_info(1500),
        Err(E::HdrLenTooLarge {
            hdr_len: 2000,
            frame_len: 1500
        })
    );
}

#[test]
fn checksum_field_ending_exactly_at_frame_end_is_accepted() {
    let h = header(1, 0, 0, 0, 34, 6);
    assert!(h.to_offload_info(42).is_ok());
    assert!(matches!(
        h.to_offload_info(41),
        Err(E::CsumOutOfFrame { .. })
    ));
}

#[test]
fn segment_count_bound_uses_csum_start_when_hdr_len_is_zero() {
    // 512 segments of 125 bytes after 54 bytes of headers: exactly the limit.
    let frame_len = 54 + 512 * 125;
    let h = header(1, gso_type::TCPV4, 0, 125, 34, 16);
    assert!(h.to_offload_info(frame_len).is_ok());
    assert_eq!(
        h.to_offload_info(frame_len + 1),
        Err(E::TooManySegments { segments: 513 })
    );
}

#[test]
fn from_offload_info_writes_header_back() {
    let info = tcp4_gso(8948).to_offload_info(TCP4_FRAME_LEN).unwrap();
    let h = VirtioNetHeader::from_offload_info(&info);
    assert_eq!(h.num_buffers(), Some(0));
    assert_eq!(
        h.into_inner(),
        [1, 1, 54, 0, 0xf4, 0x22, 34, 0, 16, 0, 0, 0]
    );
}

proptest! {
    #[test]
    fn arbitrary_header_never_panics_and_accepted_ones_are_consistent(
        bytes in proptest::array::uniform12(any::<u8>()),
        frame_len in 0usize..70_000,
    ) {
        let h = VirtioNetHeader::new_checked(bytes).unwrap();
        if let Ok(info) = h.to_offload_info(frame_len) {
            if info.needs_csum {
                let end = usize::from(info.csum_start) + usize::from(info.csum_offset) + 2;
                prop_assert!(end <= frame_len);
                prop_assert!(usize::from(info.csum_start) >= ethernet::HEADER_LEN);
            }
            if info.is_gso() {
                prop_assert!(info.needs_csum);
                prop_assert!(info.gso_size > 0 && info.gso_size <= MAX_GSO_SIZE);
                prop_assert!(usize::from(info.hdr_len) <= frame_len);
            }
            // Writing the translation back and reading it again gives the same meaning.
            let back = VirtioNetHeader::from_offload_info(&info);
            prop_assert_eq!(back.to_offload_info(frame_len), Ok(info));
        }
    }
}

proptest! {
    #[test]
    fn header_words_are_the_bytes_from_offload_info_writes(
        needs_csum in any::<bool>(),
        data_valid in any::<bool>(),
        gso in proptest::sample::select(vec![GsoKind::None, GsoKind::TcpV4, GsoKind::TcpV6, GsoKind::UdpL4]),
        fields in any::<(u16, u16, u16, u16)>(),
        num_buffers in any::<u16>(),
    ) {
        let (csum_start, csum_offset, gso_size, hdr_len) = fields;
        let info = OffloadInfo { needs_csum, data_valid, csum_start, csum_offset, gso, gso_size, hdr_len };
        let mut h = VirtioNetHeader::from_offload_info(&info);
        h.set_num_buffers(num_buffers).unwrap();
        let bytes = h.into_inner();
        let (low, high) = header_words(&info, num_buffers);
        prop_assert_eq!(&low.to_le_bytes()[..], &bytes[..8]);
        prop_assert_eq!(&high.to_le_bytes()[..], &bytes[8..]);
    }
}

proptest! {
    #[test]
    fn plain_header_words_are_those_of_an_offload_asking_nothing(
        data_valid in any::<bool>(),
        num_buffers in any::<u16>(),
    ) {
        let info = OffloadInfo { data_valid, ..OffloadInfo::default() };
        prop_assert_eq!(plain_header_words(data_valid, num_buffers), header_words(&info, num_buffers));
    }
}

proptest! {
    #[test]
    fn a_driver_that_may_ask_no_offload_may_send_only_plain_frames(
        features in any::<u64>(),
        needs_csum in any::<bool>(),
        data_valid in any::<bool>(),
        gso in proptest::sample::select(vec![GsoKind::None, GsoKind::TcpV4, GsoKind::TcpV6, GsoKind::UdpL4]),
    ) {
        let info = OffloadInfo { needs_csum, data_valid, gso, ..OffloadInfo::default() };
        if !driver_may_ask_offloads(features) {
            prop_assert_eq!(driver_may_send(features, &info), !needs_csum && !info.is_gso());
        }
    }
}

#[test]
fn each_transmit_offload_feature_lets_a_driver_ask() {
    assert!(!driver_may_ask_offloads(0));
    for bit in [feature::CSUM, feature::HOST_TSO4, feature::HOST_TSO6] {
        assert!(driver_may_ask_offloads(1 << bit), "bit {bit}");
    }
    // GUEST_CSUM (1) and MRG_RXBUF (15) concern the other direction.
    assert!(!driver_may_ask_offloads((1 << 1) | (1 << 15)));
}
