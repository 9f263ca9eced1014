use proptest::prelude::*;
use weft_packet::virtio_net::{flags, gso_type};
use weft_packet::GsoKind;

use super::*;

/// A TCP/IPv4 frame with `payload` bytes after the headers (14 + 20 + 20), optionally
/// behind one 802.1Q tag. Checksums are not filled in: the parser does not read them.
fn tcp4_frame(payload: usize, tagged: bool) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1];
    if tagged {
        f.extend_from_slice(&[0x81, 0x00, 0x00, 0x05]);
    }
    f.extend_from_slice(&[0x08, 0x00]);
    let total = u16::try_from(40 + payload).unwrap();
    let [hi, lo] = total.to_be_bytes();
    f.extend_from_slice(&[
        0x45, 0, hi, lo, 0, 0, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ]);
    f.extend_from_slice(&[
        0x30, 0x39, 0x00, 0x50, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x10, 0xff, 0xff,
    ]);
    f.extend_from_slice(&[0, 0, 0, 0]);
    f.resize(f.len() + payload, 0xab);
    f
}

fn with_header(header: [u8; TAP_HDR_LEN], hdr_len: usize, frame: &[u8]) -> Vec<u8> {
    let mut buf = header[..hdr_len].to_vec();
    buf.extend_from_slice(frame);
    buf
}

fn tso4() -> OffloadInfo {
    OffloadInfo {
        needs_csum: true,
        csum_start: 34,
        csum_offset: 16,
        gso: GsoKind::TcpV4,
        gso_size: 1448,
        hdr_len: 54,
        ..OffloadInfo::default()
    }
}

#[test]
fn a_frame_without_offloads_parses_to_the_default() {
    let buf = with_header([0; 12], TAP_HDR_LEN, &tcp4_frame(100, false));
    assert_eq!(
        parse_rx(&buf, TAP_HDR_LEN, 1500),
        Ok(OffloadInfo::default())
    );
}

#[test]
fn shorter_than_header_and_ethernet_is_truncated() {
    assert_eq!(
        parse_rx(&[0; 8], TAP_HDR_LEN, 1500),
        Err(RxReject::Truncated)
    );
    assert_eq!(
        parse_rx(&[0; 25], TAP_HDR_LEN, 1500),
        Err(RxReject::Truncated)
    );
    assert_eq!(
        parse_rx(&[0; 23], PACKET_HDR_LEN, 1500),
        Err(RxReject::Truncated)
    );
    assert_eq!(RxReject::Truncated.reason(), PortDrop::Truncated);
}

#[test]
fn an_ordinary_frame_above_the_mtu_is_oversize() {
    let at_mtu = with_header([0; 12], TAP_HDR_LEN, &tcp4_frame(1460, false));
    assert!(parse_rx(&at_mtu, TAP_HDR_LEN, 1500).is_ok());
    let above = with_header([0; 12], TAP_HDR_LEN, &tcp4_frame(1461, false));
    assert_eq!(parse_rx(&above, TAP_HDR_LEN, 1500), Err(RxReject::Oversize));
    assert_eq!(RxReject::Oversize.reason(), PortDrop::Oversize);
}

#[test]
fn a_vlan_tag_does_not_count_against_the_mtu() {
    let tagged = with_header([0; 12], TAP_HDR_LEN, &tcp4_frame(1460, true));
    assert!(parse_rx(&tagged, TAP_HDR_LEN, 1500).is_ok());
}

#[test]
fn a_super_frame_above_the_mtu_is_accepted() {
    let frame = tcp4_frame(60_000, false);
    let info = tso4();
    let buf = with_header(tx_header(&info), TAP_HDR_LEN, &frame);
    let got = parse_rx(&buf, TAP_HDR_LEN, 1500).unwrap();
    assert_eq!(got.gso, GsoKind::TcpV4);
    assert_eq!(got.gso_size, 1448);
    assert!(got.needs_csum);
}

#[test]
fn a_super_frame_above_64k_is_oversize() {
    let mut frame = tcp4_frame(60_000, false);
    frame.resize(MAX_GSO_FRAME_LEN + 1, 0);
    let buf = with_header(tx_header(&tso4()), TAP_HDR_LEN, &frame);
    assert_eq!(parse_rx(&buf, TAP_HDR_LEN, 1500), Err(RxReject::Oversize));
}

#[test]
fn gso_without_a_partial_checksum_is_a_bad_header() {
    let frame = tcp4_frame(3000, false);
    let mut header = [0u8; 12];
    header[1] = gso_type::TCPV4;
    header[4..6].copy_from_slice(&1448u16.to_le_bytes());
    let buf = with_header(header, TAP_HDR_LEN, &frame);
    let r = parse_rx(&buf, TAP_HDR_LEN, 1500);
    assert_eq!(
        r,
        Err(RxReject::BadVnetHeader(
            VirtioNetHeaderError::GsoWithoutNeedsCsum
        ))
    );
    assert_eq!(r.unwrap_err().reason(), PortDrop::BadVnetHeader);
}

#[test]
fn gso_with_the_udp_checksum_offset_on_tcp_is_a_bad_header() {
    let frame = tcp4_frame(3000, false);
    let info = OffloadInfo {
        csum_offset: 6,
        ..tso4()
    };
    let buf = with_header(tx_header(&info), TAP_HDR_LEN, &frame);
    assert!(matches!(
        parse_rx(&buf, TAP_HDR_LEN, 1500),
        Err(RxReject::BadVnetHeader(
            VirtioNetHeaderError::BadGsoCsumOffset { .. }
        ))
    ));
}

#[test]
fn a_checksum_field_past_the_frame_is_a_bad_header() {
    let frame = tcp4_frame(0, false);
    let mut header = [0u8; 12];
    header[0] = flags::NEEDS_CSUM;
    header[6..8].copy_from_slice(&34u16.to_le_bytes());
    header[8..10].copy_from_slice(&200u16.to_le_bytes());
    let buf = with_header(header, TAP_HDR_LEN, &frame);
    assert!(matches!(
        parse_rx(&buf, TAP_HDR_LEN, 1500),
        Err(RxReject::BadVnetHeader(
            VirtioNetHeaderError::CsumOutOfFrame { .. }
        ))
    ));
}

#[test]
fn the_legacy_header_of_packet_sockets_parses() {
    let frame = tcp4_frame(100, false);
    let info = OffloadInfo {
        needs_csum: true,
        csum_start: 34,
        csum_offset: 16,
        ..OffloadInfo::default()
    };
    let buf = with_header(tx_header(&info), PACKET_HDR_LEN, &frame);
    assert_eq!(parse_rx(&buf, PACKET_HDR_LEN, 1500), Ok(info));
}

#[test]
fn a_frame_without_offloads_gets_an_all_zero_header() {
    assert_eq!(tx_header(&OffloadInfo::default()), [0; 12]);
}

proptest! {
    #[test]
    fn what_tx_header_writes_parse_rx_reads_back(
        payload in 1usize..3000,
        csum in any::<bool>(),
        gso in any::<bool>(),
        gso_size in 8u16..1460,
    ) {
        let frame = tcp4_frame(payload, false);
        let info = if gso {
            OffloadInfo { gso_size, ..tso4() }
        } else if csum {
            OffloadInfo { needs_csum: true, csum_start: 34, csum_offset: 16, ..OffloadInfo::default() }
        } else {
            OffloadInfo::default()
        };
        let buf = with_header(tx_header(&info), TAP_HDR_LEN, &frame);
        let mtu = 9000;
        prop_assert_eq!(parse_rx(&buf, TAP_HDR_LEN, mtu), Ok(info));
    }

    #[test]
    fn parse_rx_never_panics(
        buf in proptest::collection::vec(any::<u8>(), 0..200),
        legacy in any::<bool>(),
        mtu in 0usize..2000,
    ) {
        let hdr_len = if legacy { PACKET_HDR_LEN } else { TAP_HDR_LEN };
        let _ = parse_rx(&buf, hdr_len, mtu);
    }
}
